"""The JSON summary: slow_cooker's six percentile keys first, then what a log reader needs."""

from __future__ import annotations

import dataclasses
import io
import json
from datetime import datetime
from typing import Any

import pytest
from hdrh.histogram import HdrHistogram

from runner.config.settings import merge, settings_from
from runner.core.percentiles import PERCENTILES
from runner.core.units import in_unit
from runner.load.result import Result
from runner.report.summary import JsonSummaryReporter, bench_dict, interval_dict, percentile_keys, summary_dict
from runner.stats.figures import SUMMARY_PERCENTILES, Latency
from runner.stats.histogram import LatencyHistogram
from runner.stats.recorder import BenchTally, Interval, Tally
from runner.stats.runinfo import RunInfo, RunSummary, Warmup

START = 7_000_000_000_000
WALL = 1_767_225_600.0  # 2026-01-01T00:00:00Z
MS = 1_000_000
SIX = ["p50", "p75", "p90", "p95", "p99", "p999"]


def tally_of(latencies_ns: list[int], statuses: list[int] | None = None, failures: int = 0, skips: int = 0,
             hash_value: int = 0, hashes: list[int | None] | None = None) -> Tally:
    tally = Tally()
    statuses = statuses or [200] * len(latencies_ns)
    hashes = hashes or [None] * len(latencies_ns)
    for latency, status, body_hash in zip(latencies_ns, statuses, hashes):
        result = Result(start_ns=START, headers_ns=START + latency, end_ns=START + latency + 1000, status=status,
                        bytes_in=612, bytes_out=3, body_hash=body_hash)
        tally.add(result, latency, hash_value)
    for i in range(failures):
        tally.add(Result(error="timeout" if i % 2 else "refused", error_text="x", bytes_out=3), 0, hash_value)
    for _ in range(skips):
        tally.skipped += 1
    return tally


def make_summary(tally: Tally, layer: dict[str, Any] | None = None, *, elapsed_ns: int = 10_000_000_000,
                 uncorrected: LatencyHistogram | None = None, intervals: int = 1,
                 stop_reason: str = "iterations") -> RunSummary:
    settings = settings_from(merge(layer or {}))
    info = RunInfo(settings, ["http://a/"], None, START, WALL)
    due = info.qps * elapsed_ns / 1e9 if info.model.paced else None  # what the schedule makes due at a constant rate
    return RunSummary(info, intervals, START + elapsed_ns, START + elapsed_ns, tally, uncorrected, None, None, stop_reason,
                      1.23456, 45_000_000, due=due)


def latencies_1_to_1000_us() -> list[int]:
    return [v * 1000 + 400 for v in range(1, 1001)]


# --- the six keys ------------------------------------------------------------------------------


@pytest.mark.parametrize("unit", ["ms", "us", "ns"])
def test_first_six_keys_are_slow_cookers_in_order_in_the_unit(unit: str) -> None:
    data = summary_dict(make_summary(tally_of(latencies_1_to_1000_us()), {"latencyUnit": unit}))
    assert list(data)[:6] == SIX
    for key in SIX:
        assert type(data[key]) is float, key
    assert data["latencyUnit"] == unit


def test_percentiles_in_microseconds() -> None:
    data = summary_dict(make_summary(tally_of(latencies_1_to_1000_us()), {"latencyUnit": "us"}))
    assert [data[k] for k in SIX] == [500.479, 750.591, 900.607, 950.783, 990.719, 999.423]
    assert (data["min"], data["max"]) == (1.4, 1000.4)


def test_percentiles_in_milliseconds_keep_their_microseconds() -> None:
    """slow_cooker truncates its keys to the unit (2, 2, 250, ..., min 1); the summary's latencies are
    exact, to three decimals, as its intervalStats, mean and stdev always were."""
    tally = tally_of([1_999_000, 2_500_000, 2_900_000, 250_700_000])
    data = summary_dict(make_summary(tally, {"latencyUnit": "ms"}))
    assert [data[k] for k in SIX] == [2.501, 2.902, 250.7, 250.7, 250.7, 250.7]
    assert (data["min"], data["max"]) == (1.999, 250.7)


def test_a_fast_services_headline_percentiles_are_not_all_zero() -> None:
    """Issue 32: a service answering in 80 to 500 us had p50 ... p999, min and max all 0 at the top
    of its summary (ms, truncated), beside exact latencies everywhere else in the same JSON. Every
    latency of the summary is now the figure to three decimals of the unit, the headline's, the
    intervals' and the warm-up's alike."""
    latencies = [80_000 + 420 * n for n in range(1000)]  # 80 us to 499.6 us
    tally = tally_of(latencies)
    summary = dataclasses.replace(make_summary(tally, {"latencyUnit": "ms"}), warmup=Warmup(tally, 1000.0, 10**10, 1))
    data = summary_dict(summary, [interval_dict(summary.info, Interval(0, START, START + 10**10, tally))])
    figures = Latency.of(tally.latency)
    assert [data[k] for k in SIX] == [round(figures.percentiles[k] / MS, 3) for k in SIX]
    assert 0 < data["p50"] < data["p99"] < 0.5 and (data["min"], data["max"]) == (0.08, 0.5)
    line = ("min", "p50", "p95", "p99", "p999", "max")
    assert [data["intervalStats"][0][k] for k in line] == [data[k] for k in line]
    assert {k: data["warmup"][k] for k in (*SIX, "min", "max")} == {k: data[k] for k in (*SIX, "min", "max")}


def test_percentiles_in_nanoseconds_are_the_histogram_values() -> None:
    tally = tally_of(latencies_1_to_1000_us())
    data = summary_dict(make_summary(tally, {"latencyUnit": "ns"}))
    ranks = [PERCENTILES[key].rank for key in SUMMARY_PERCENTILES]
    found = tally.latency.percentiles(ranks)
    assert [data[k] for k in SIX] == [found[p] for p in ranks]
    assert data["p999"] <= data["max"] == 1_000_400


def test_empty_run_gives_zero_percentiles() -> None:
    data = summary_dict(make_summary(Tally()))
    assert [data[k] for k in SIX] == [0] * 6
    assert (data["min"], data["max"], data["mean"], data["stdev"]) == (0, 0, 0.0, 0.0)
    assert data["requests"] == 0
    assert data["goalPercent"] == 0
    json.dumps(data)


def test_percentile_keys_helper() -> None:
    histogram = LatencyHistogram()
    for v in range(1, 101):
        histogram.record(v * MS)
    assert percentile_keys(Latency.of(histogram), "ms") == {"p50": 50.004, "p75": 75.039, "p90": 90.046, "p95": 95.027,
                                                          "p99": 99.025, "p999": 100.0}


# --- the rest of the summary -------------------------------------------------------------------


def test_counts_add_up() -> None:
    tally = tally_of([MS] * 7, statuses=[200, 200, 301, 404, 500, 503, 199], failures=3, skips=2)
    data = summary_dict(make_summary(tally))
    assert (data["good"], data["bad"], data["failed"], data["skipped"]) == (4, 3, 3, 2)
    assert data["requests"] == data["good"] + data["bad"] + data["failed"] == 10
    assert data["statusCodes"] == {"199": 1, "200": 2, "301": 1, "404": 1, "500": 1, "503": 1}
    assert list(data["statusCodes"]) == sorted(data["statusCodes"], key=int)
    assert sum(data["statusCodes"].values()) == data["good"] + data["bad"]
    assert data["errors"] == {"refused": 2, "timeout": 1}
    assert sum(data["errors"].values()) == data["failed"]
    assert (data["bytesIn"], data["bytesOut"]) == (7 * 612, 10 * 3)


def test_latency_statistics_in_the_unit() -> None:
    tally = tally_of([1 * MS, 2 * MS, 6 * MS])
    data = summary_dict(make_summary(tally, {"latencyUnit": "ms"}))
    assert (data["min"], data["max"]) == (1, 6)
    assert data["mean"] == 3.0
    assert data["stdev"] == pytest.approx(2.160, abs=0.001)
    micro = summary_dict(make_summary(tally, {"latencyUnit": "us"}))
    assert (micro["min"], micro["mean"], micro["max"]) == (1000, 3000.0, 6000)


def test_goal_percent_and_rate() -> None:
    # 100 req/s for 10 s is 1000 sends; 995 responses is 99% (truncated), failures excluded.
    tally = tally_of([MS] * 995, failures=5)
    data = summary_dict(make_summary(tally, {"qps": 100}, elapsed_ns=10_000_000_000))
    assert data["goalPercent"] == 99
    assert data["rate"] == {"target": 100, "achieved": 100.0}
    assert type(data["rate"]["target"]) is int
    assert data["durationSeconds"] == 10.0


def test_goal_percent_is_capped_at_100() -> None:
    data = summary_dict(make_summary(tally_of([MS] * 50), {"qps": 1}, elapsed_ns=10_000_000_000))
    assert data["goalPercent"] == 100


def test_fractional_target_rate_stays_fractional() -> None:
    data = summary_dict(make_summary(tally_of([MS] * 3), {"qps": 2.5}, elapsed_ns=4_000_000_000))
    assert data["rate"] == {"target": 2.5, "achieved": 0.75}
    assert data["goalPercent"] == 30


def test_hash_counts() -> None:
    tally = tally_of([MS] * 4, hash_value=9, hashes=[None, 9, 8, 7])
    data = summary_dict(make_summary(tally, {"hashValue": 9}))
    assert (data["hashChecked"], data["hashMismatches"]) == (3, 2)


def test_times_and_run_facts() -> None:
    summary = make_summary(tally_of([MS]), elapsed_ns=61_500_000_000, intervals=2, stop_reason="signal SIGTERM")
    data = summary_dict(summary)
    start = datetime.fromisoformat(data["start"].replace("Z", "+00:00"))
    end = datetime.fromisoformat(data["end"].replace("Z", "+00:00"))
    assert start.timestamp() == WALL
    assert end.timestamp() == WALL + 61.5
    assert data["start"].count(".") == 1  # milliseconds shown
    assert data["durationSeconds"] == 61.5
    assert data["intervals"] == 2
    assert data["stopReason"] == "signal SIGTERM"
    assert data["process"] == {"cpuSeconds": 1.235, "maxRssBytes": 45_000_000}


def test_config_is_the_effective_config_with_secrets_hidden() -> None:
    layer = {"qps": 50, "headers": {"Authorization": "Bearer s3cr3t", "X-Token": {"fromEnv": "TOKEN"}}}
    data = summary_dict(make_summary(tally_of([MS]), layer))
    assert data["config"]["qps"] == 50
    assert data["config"]["headers"] == {"Authorization": "<hidden>", "X-Token": {"fromEnv": "TOKEN"}}
    assert "s3cr3t" not in json.dumps(data)


def test_uncorrected_percentiles_only_for_the_open_model() -> None:
    closed = summary_dict(make_summary(tally_of([MS])))
    assert "uncorrected" not in closed
    uncorrected = LatencyHistogram()
    for v in range(1, 101):
        uncorrected.record(v * 1000)
    opened = summary_dict(make_summary(tally_of([5 * MS]), {"loadModel": "open", "latencyUnit": "us"},
                                       uncorrected=uncorrected))
    assert opened["uncorrected"] == {"p50": 50.015, "p75": 75.007, "p90": 90.047, "p95": 95.039, "p99": 99.007,
                                     "p999": 100.0}
    assert list(opened)[:6] == SIX


def test_summary_is_json_serialisable_and_round_trips() -> None:
    tally = tally_of(latencies_1_to_1000_us(), failures=2, skips=1)
    data = summary_dict(make_summary(tally, {"headers": {"X": "1"}, "body": {"file": "b.json"}}))
    text = json.dumps(data, indent=2)
    assert json.loads(text) == data


def test_histogram_export_decodes_to_the_same_counts() -> None:
    tally = tally_of(latencies_1_to_1000_us(), failures=4)
    data = summary_dict(make_summary(tally))
    assert data["histogram"]["unit"] == "ns"
    decoded = HdrHistogram.decode(data["histogram"]["hdr"])
    assert decoded.get_total_count() == 1000 == tally.latency.count
    assert decoded.get_value_at_percentile(50) == tally.latency.percentiles([50])[50]
    assert decoded.get_min_value() == tally.latency._synced().get_min_value()  # noqa: SLF001


def test_in_unit_truncates_toward_zero() -> None:
    assert in_unit(1_999_999, "ms") == 1
    assert in_unit(2_000_000, "ms") == 2
    assert in_unit(1_999, "us") == 1
    assert in_unit(7, "ns") == 7
    assert in_unit(2_500_000.7, "ms") == 2
    assert type(in_unit(2_500_000.7, "ms")) is int


# --- the reporter ------------------------------------------------------------------------------


def test_reporter_prints_two_space_indented_json_at_the_end() -> None:
    out = io.StringIO()
    reporter = JsonSummaryReporter(out)
    summary = make_summary(tally_of(latencies_1_to_1000_us()), {"latencyUnit": "us"})
    reporter.start(summary.info)
    reporter.interval(summary.info, Interval(0, START, START + 10_000_000_000, summary.tally))
    assert out.getvalue() == ""
    reporter.finish(summary)
    text = out.getvalue()
    lines = text.splitlines()
    assert lines[0] == "{"
    assert lines[1:7] == ['  "p50": 500.479,', '  "p75": 750.591,', '  "p90": 900.607,', '  "p95": 950.783,',
                          '  "p99": 990.719,', '  "p999": 999.423,']
    assert text.endswith("}\n")
    assert json.loads(text)["requests"] == 1000


def test_a_bench_ended_by_its_time_limit_lasts_at_least_the_limit() -> None:
    """-t 2: the last responses came back a moment before 2 s and the clients looked at the clock
    just after it, so no send went out later; the bench still took its 2 s, as ab's does (it
    read 1.999988 s)."""
    bench = BenchTally()
    bench.add(Result(start_ns=START, headers_ns=START + 1_999_000_000, end_ns=START + 1_999_988_000, status=200))
    settings = settings_from(merge({"mode": "bench", "duration": "2s"}))
    limit = START + 2_000_000_000
    summary = RunSummary(RunInfo(settings, ["http://a/"], None, START, WALL), 2, limit, limit, Tally(), None, None,
                         None, "duration", 0.1, 1, bench=bench)
    assert bench_dict(summary, bench)["timeTakenSeconds"] == 2.0
    bench.add(Result(start_ns=START, headers_ns=limit, end_ns=limit + 3_000_000, status=200))  # one came back later
    assert bench_dict(summary, bench)["timeTakenSeconds"] == 2.003
