"""Figures computed once: the line, the JSON summary, the verdict and the gauges agree on every interval.

Each output formats the same record (runner.stats.figures); none works goal%, errors%, the
goal or the percentiles out again from the tally. So over many intervals of every shape
(short last ones, intervals where sending stopped, none answered, some failed), the value
each output shows is the one figure rounded its own way, and the record itself is checked
against the definitions written out here.
"""

from __future__ import annotations

import math
import random

import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from runner.config.settings import merge, settings_from
from runner.core.columns import LINE_PERCENTILES
from runner.core.percentiles import PERCENTILES
from runner.core.units import in_unit
from runner.load.model import Closed
from runner.load.result import ErrorKind, Result
from runner.load.schedule import Grid, Schedule
from runner.metrics.collector import Gauges, MetricsReporter, SoakCollector
from runner.metrics.tally import MetricsTally, url_slots
from runner.report.slowcooker import ChangeWindow, line_of
from runner.report.summary import interval_dict
from runner.report.verdict import interval_span
from runner.stats.figures import Figures, Latency, goal, goal_percent
from runner.stats.recorder import Recorder, Tally
from runner.stats.runinfo import RunInfo
from runner.stats.thresholds import measure

START, WALL, SECOND, MS = 5 * 10**12, 1_767_225_600.0, 10**9, 10**6
QPS = 37.0


def random_run(rng: random.Random, intervals: int) -> list:
    """A run's intervals as the recorder closes them, from random results on a 37 req/s schedule."""
    grid = Grid(START, SECOND)
    schedule = Schedule(START, QPS, 3)
    recorder = Recorder(grid, Closed(), due=schedule.sends_due)
    closed = []
    for k in range(intervals):
        for _ in range(rng.choice([0, 1, 5, 36, 37, 40])):
            end = START + k * SECOND + rng.randrange(SECOND)
            latency = rng.choice([0, 1, 999, MS, 7 * MS, 300 * MS])
            if rng.random() < 0.15:
                result = Result(start_ns=end - latency, end_ns=end, error=ErrorKind.TIMEOUT, error_text="timeout")
            else:
                result = Result(start_ns=end - latency, headers_ns=end, end_ns=end,
                                status=rng.choice([200, 200, 200, 404, 503]))
            recorder.record(result)
        last = k == intervals - 1
        stop = START + k * SECOND + rng.randrange(SECOND) if last and rng.random() < 0.5 else None
        closed.append(recorder.close(stop, final=last, sending_end_ns=stop))
    return closed


def gauges_of(info: RunInfo, interval) -> dict[str, float]:  # type: ignore[no-untyped-def]
    gauges = Gauges()
    MetricsReporter(gauges).interval(info, interval)
    registry = CollectorRegistry(auto_describe=False)
    registry.register(SoakCollector(MetricsTally(url_slots(["http://a/"]), Closed()), gauges,
                                    url_slots(["http://a/"])))
    values = {}
    for family in text_string_to_metric_families(generate_latest(registry).decode()):
        for sample in family.samples:
            values[sample.name + "".join(f"{v}" for v in sample.labels.values())] = sample.value
    return values


@pytest.mark.parametrize("seed", range(12))
def test_the_line_the_summary_the_verdict_and_the_gauges_agree(seed: int) -> None:
    rng = random.Random(seed)
    info = RunInfo(settings_from(merge({"qps": QPS, "concurrency": 3, "interval": "1s", "latencyUnit": "us"})),
                   ["http://a/"], None, START, WALL)
    window = ChangeWindow()
    for interval in random_run(rng, 8):
        f = interval.figures
        line, data, gauge = line_of(info, interval, window), interval_dict(info, interval), gauges_of(info, interval)
        span = interval_span(info, interval)
        # the goal t: one number, rounded to a send on the line, to 1/1000 in the JSON
        assert data["t"] == f.due and line.target == math.floor(f.due + 0.5)
        # goal%: truncated on the line and in the JSON, whole in the verdict and the gauge
        assert f.goal_percent is not None
        assert line.goal_percent == data["goalPercent"] == int(f.goal_percent)
        assert gauge["soak_interval_goal_ratio"] == pytest.approx(f.goal_percent / 100, rel=1e-12)
        whole = interval.due_span_ns >= SECOND
        assert measure("goal%", span) == (f.goal_percent if whole and f.due > 0 else None)
        # errors%: the verdict's and the gauge's are the record's
        assert measure("errors%", span) == f.errors_percent
        if f.errors_percent is not None:
            assert gauge["soak_interval_errors_ratio"] == pytest.approx(f.errors_percent / 100, rel=1e-12)
        # counts and latencies, each output in its unit
        assert (line.good, line.bad, line.failed) == (data["good"], data["bad"], data["failed"]) == (f.good, f.bad,
                                                                                                    f.failed)
        for key in LINE_PERCENTILES:
            assert line.latency(key) == in_unit(f.latency.percentiles[key], "us") == math.floor(data[key])
            assert gauge["soak_interval_latency_seconds" + key] == f.latency.percentiles[key] / 1e9
            assert measure(key, span) == (f.latency.percentiles[key] if f.responses else None)


def test_the_record_is_its_definitions() -> None:
    tally = Tally()
    for latency in (MS, 2 * MS, 3 * MS):
        tally.add(Result(status=200), latency, 0)
    tally.add(Result(status=503), 4 * MS, 0)
    tally.add(Result(error=ErrorKind.REFUSED, error_text="connection refused"), 0, 0)
    tally.skipped = 2
    f = Figures.of(tally, 6.0000000004, SECOND // 2)
    assert f.due == 6.0 == goal(6.0000000004)  # to 1/1000 of a send
    assert (f.requests, f.responses) == (5, 4)
    assert f.goal_percent == pytest.approx(4 / 6 * 100)
    assert f.errors_percent == 40 and f.failed_percent == 20 and f.bad_percent == 20
    assert f.skipped_percent == pytest.approx(2 / 7 * 100)
    assert f.rate_achieved == 10 and f.rate_target == 12
    assert f.latency == Latency.of(tally.latency) and f.latency.ns("max") == 4 * MS and f.latency.ns("min") == MS
    assert f.errors == {"refused": 1}
    assert goal_percent(10, None) is None and goal_percent(3, 0) == 100 and goal_percent(9, 3) == 100
    bench = Figures.of(tally, None, SECOND)
    assert bench.goal_percent is None and bench.rate_target is None and bench.rate_achieved == 5


def test_a_new_percentile_is_data() -> None:
    """Every output's percentiles are names in PERCENTILES, and the record holds each one asked for."""
    histogram = Tally().latency
    for v in range(1, 1001):
        histogram.record(v * MS)
    latency = Latency.of(histogram)
    assert set(latency.percentiles) == set(PERCENTILES)
    for key, p in PERCENTILES.items():
        assert latency.percentiles[key] == histogram.percentiles([p.rank])[p.rank]
    assert Latency.of(histogram, ["p90"]).percentiles == {"p90": histogram.percentiles([90])[90]}


def test_a_verdict_reads_the_same_figures_the_line_printed() -> None:
    info = RunInfo(settings_from(merge({"qps": QPS, "interval": "1s"})), ["http://a/"], None, START, WALL)
    intervals = random_run(random.Random(99), 4)
    for interval in intervals:
        span = interval_span(info, interval)
        assert span.figures is interval.figures  # not a copy: nothing is worked out twice
