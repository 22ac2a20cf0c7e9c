"""The verdict reporter: judging intervals and the run, its lines, its JSON section, stopping early."""

from __future__ import annotations

import dataclasses
import io
import json
import math
from typing import Any

import pytest

from runner.config.settings import merge, settings_from
from runner.config.targets import Targets
from runner.core.errors import EXIT_OK, EXIT_THRESHOLDS
from runner.load.result import Result
from runner.load.shards import Shard
from runner.report.summary import JsonSummaryReporter
from runner.report.verdict import Outcome, Verdict, plan_of
from runner.stats.recorder import Interval, Tally
from runner.stats.runinfo import RunInfo, RunSummary
from runner.stats.thresholds import Plan

START = 7_000_000_000_000
WALL = 1_767_225_600.0
SECOND = 1_000_000_000
MS = 1_000_000


def info_for(layer: dict[str, Any]) -> RunInfo:
    return RunInfo(settings_from(merge({"qps": 100, "interval": "1s", "iterations": 10, **layer})), ["http://a/"],
                   None, START, WALL)


def tally_of(good: int, latency_ns: int = MS, *, bad: int = 0, failed: int = 0) -> Tally:
    tally = Tally()
    for _ in range(good):
        tally.add(Result(status=200), latency_ns, 0)
    for _ in range(bad):
        tally.add(Result(status=503), latency_ns, 0)
    for _ in range(failed):
        tally.add(Result(error="refused", error_text="connection refused"), 0, 0)
    return tally


def interval(index: int, tally: Tally, span_ns: int = SECOND) -> Interval:
    """Interval `index` of a run at 100 req/s, `span_ns` long: its goal is 100 a second."""
    start = START + index * SECOND
    return Interval(index, start, start + span_ns, tally, due=100 * span_ns / SECOND)


def summary_of(info: RunInfo, tallies: list[Tally], reason: str = "iterations") -> RunSummary:
    run = Tally()
    for tally in tallies:
        run.merge(tally)
    end = START + len(tallies) * SECOND
    return RunSummary(info, len(tallies), end, end, run, None, None, None, reason, 0.1, 1, due=100.0 * len(tallies))


class Stops:
    """A stand-in for the run's stop: records what asked for it."""

    def __init__(self) -> None:
        self.reasons: list[str] = []

    def __call__(self, reason: str) -> None:
        self.reasons.append(reason)


def run_through(layer: dict[str, Any], tallies: list[Tally], stops: Stops | None = None) -> tuple[Verdict, str]:
    """Tell a verdict about a run of these intervals; its printed lines."""
    info = info_for(layer)
    out = io.StringIO()
    verdict = Verdict.for_settings(info.settings, out)
    assert verdict is not None
    if stops is not None:
        verdict.bind_stop(stops)
    verdict.start(info)
    for index, tally in enumerate(tallies):
        verdict.interval(info, interval(index, tally))
    verdict.finish(summary_of(info, tallies))
    return verdict, out.getvalue()


def test_no_thresholds_no_verdict() -> None:
    assert Verdict.for_settings(settings_from(merge({})), io.StringIO()) is None


def test_a_healthy_run_passes_with_one_line_per_rule() -> None:
    verdict, text = run_through(
        {"thresholds": ["p99 < 50ms", "goal% >= 99", "errors% <= 0.1", "rate >= 99"],
         "intervalThresholds": ["p99 < 50ms"]},
        [tally_of(100, 12 * MS) for _ in range(3)],
    )
    assert text.splitlines() == [
        "# threshold run p99 < 50ms: 12ms ok",
        "# threshold run goal% >= 99: 100% ok",
        "# threshold run errors% <= 0.1: 0% ok",
        "# threshold run rate >= 99: 100 req/s ok",
        "# threshold interval p99 < 50ms: worst 12ms (interval 0) ok",
        "# thresholds: all 5 ok",
    ]
    assert verdict.passed and verdict.exit_code == EXIT_OK


def test_a_latency_is_shown_in_the_unit_that_keeps_its_precision() -> None:
    """A rule in seconds does not round a 2.913 ms p99 to `0.003s`; one in ns does not print 2913279ns."""
    _, text = run_through({"thresholds": ["p99 < 1s", "p50 < 1ns", "max < 2s"], "intervalThresholds": ["p99 < 1s"]},
                          [tally_of(100, 2_913_279), tally_of(100, 1_500_000_000)])
    assert text.splitlines()[:4] == [
        "# threshold run p99 < 1s: 1.5s BROKEN",
        "# threshold run p50 < 1ns: 2.914ms BROKEN",  # the histogram's value, to 0.1%
        "# threshold run max < 2s: 1.5s ok",
        "# threshold interval p99 < 1s: worst 1.5s (interval 1), broken in 1 of 2 intervals (1) BROKEN",
    ]
    _, text = run_through({"thresholds": ["p99 < 1s", "mean < 1ms"]}, [tally_of(100, 2_913_279), tally_of(100, 812)])
    assert text.splitlines()[:2] == ["# threshold run p99 < 1s: 2.913ms ok",
                                   "# threshold run mean < 1ms: 1.457ms BROKEN"]


def test_a_shards_rate_says_it_is_extrapolated_to_the_whole_run() -> None:
    """A shard sending 50 of 100 req/s is judged on the run's rate, 100 req/s, and its line says how that came."""
    info = dataclasses.replace(info_for({"thresholds": ["rate >= 90", "p50 < 50ms"],
                                         "intervalThresholds": ["rate >= 90"]}), shard=Shard(1, 2))
    out = io.StringIO()
    verdict = Verdict.for_settings(info.settings, out)
    assert verdict is not None
    verdict.start(info)
    tallies = [tally_of(50) for _ in range(3)]
    for index, tally in enumerate(tallies):
        verdict.interval(info, interval(index, tally))
    verdict.finish(summary_of(info, tallies))
    assert out.getvalue().splitlines()[:3] == [
        "# threshold run rate >= 90: 100 req/s (whole run, extrapolated: this shard's 50 req/s x 2 shards) ok",
        "# threshold run p50 < 50ms: 1ms ok",
        "# threshold interval rate >= 90: worst 100 req/s (whole run, extrapolated: this shard's 50 req/s x 2 shards)"
        " (interval 0) ok",
    ]


def test_broken_rules_say_so_and_exit_3() -> None:
    tallies = [tally_of(100), tally_of(98, 70 * MS, failed=2), tally_of(100), tally_of(90, 80 * MS, bad=10)]
    verdict, text = run_through(
        {"thresholds": ["errors% <= 1", "p50 < 50ms"], "intervalThresholds": ["p99 < 50ms", "goal% >= 99"]},
        tallies,
    )
    assert text.splitlines() == [
        "# threshold run errors% <= 1: 3% BROKEN",
        "# threshold run p50 < 50ms: 1ms ok",
        "# threshold interval p99 < 50ms: worst 80ms (interval 3), broken in 2 of 4 intervals (1, 3) BROKEN",
        "# threshold interval goal% >= 99: worst 98% (interval 1), broken in 1 of 4 intervals (1) BROKEN",
        "# thresholds: 3 of 4 broken",
    ]
    assert not verdict.passed and verdict.exit_code == EXIT_THRESHOLDS


def test_the_summary_section() -> None:
    info = info_for({"thresholds": ["p99 < 1ms"], "intervalThresholds": ["errors% <= 0"]})
    verdict = Verdict.for_settings(info.settings, io.StringIO())
    assert verdict is not None
    tallies = [tally_of(10), tally_of(9, failed=1)]
    verdict.start(info)
    for index, tally in enumerate(tallies):
        verdict.interval(info, interval(index, tally))
    out = io.StringIO()
    reporter = JsonSummaryReporter(out, sections=[verdict.section])
    summary = summary_of(info, tallies)
    verdict.finish(summary)
    reporter.finish(summary)
    data = json.loads(out.getvalue())
    assert data["thresholds"] == {
        "passed": False,
        "inconclusive": False,
        "stoppedEarly": None,
        "rules": [
            {"rule": "p99 < 1ms", "scope": "run", "measured": 1.0, "unit": "ms", "ok": False, "inconclusive": False},
            {"rule": "errors% <= 0", "scope": "interval", "measured": 10.0, "unit": "%", "ok": False,
             "inconclusive": False, "worstInterval": 1, "judgedIntervals": 2, "brokenIntervals": [1]},
        ],
    }
    assert list(data)[:6] == ["p50", "p75", "p90", "p95", "p99", "p999"]  # slow_cooker's keys stay first


def test_partial_intervals_are_not_judged_on_goal_or_rate() -> None:
    info = info_for({"intervalThresholds": ["goal% >= 99", "rate >= 99", "errors% <= 0"]})
    verdict = Verdict.for_settings(info.settings, io.StringIO())
    assert verdict is not None
    verdict.start(info)
    verdict.interval(info, interval(0, tally_of(100)))
    verdict.interval(info, interval(1, tally_of(1), span_ns=30 * MS))  # stopped 30 ms into interval 1
    outcomes = verdict.judge(summary_of(info, [tally_of(100), tally_of(1)]))
    assert [(o.rule.metric, o.ok, o.judged) for o in outcomes] == [("goal%", True, 1), ("rate", True, 1),
                                                                    ("errors%", True, 2)]


def test_nothing_to_measure() -> None:
    verdict, text = run_through({"thresholds": ["p99 < 50ms"], "intervalThresholds": ["p99 < 50ms"]},
                                [tally_of(0, failed=100)])
    assert text.splitlines()[:2] == ["# threshold run p99 < 50ms: nothing to measure BROKEN",
                                     "# threshold interval p99 < 50ms: no interval to measure ok"]
    assert not verdict.passed


def test_stops_early_when_an_interval_rule_breaks() -> None:
    stops = Stops()
    tallies = [tally_of(100), tally_of(100, 90 * MS), tally_of(100, 90 * MS)]
    verdict, text = run_through({"intervalThresholds": ["p99 < 50ms"], "abortOnThreshold": True}, tallies, stops)
    assert stops.reasons == ["threshold interval p99 < 50ms"]  # once, though interval 2 broke it too
    assert verdict.aborted == "interval p99 < 50ms broken in interval 1"
    assert text.splitlines()[-1] == "# thresholds: 1 of 1 broken; stopped early: interval p99 < 50ms broken in interval 1"


def test_stops_early_when_a_run_rule_is_out_of_reach() -> None:
    stops = Stops()
    tallies = [tally_of(100), tally_of(95, failed=5)]  # 5 errors of at most 1000 requests: 0.5% at best
    verdict, _ = run_through({"thresholds": ["errors% <= 1"], "abortOnThreshold": True}, tallies, stops)
    assert stops.reasons == []  # 0.5% can still hold
    _, _ = run_through({"thresholds": ["errors% <= 0.4"], "abortOnThreshold": True}, tallies, stops)
    assert stops.reasons == ["threshold run errors% <= 0.4"]


def test_does_not_stop_without_the_option() -> None:
    stops = Stops()
    verdict, _ = run_through({"thresholds": ["errors% <= 0"], "intervalThresholds": ["errors% <= 0"]},
                             [tally_of(9, failed=1), tally_of(10)], stops)
    assert stops.reasons == [] and verdict.aborted is None and not verdict.passed


@pytest.mark.parametrize(
    ("layer", "plan"),
    [
        ({}, Plan(1000, 1000.0, 10.0)),
        ({"qps": 33.3}, Plan(333, 333.0, 10.0)),
        ({"totalRequests": 50}, Plan(50, None, None, counted=True)),
        ({"totalRequests": 5000}, Plan(1000, 1000.0, 10.0)),
        ({"iterations": 0}, Plan(None, None, None)),
        ({"iterations": 0, "totalRequests": 70}, Plan(70, None, None, counted=True)),
        ({"duration": "2.5s"}, Plan(250, 250.0, 2.5)),
        ({"mode": "bench", "totalRequests": 70}, Plan(70, None, None, counted=True)),
    ],
)
def test_the_plan_of_a_run(layer: dict[str, Any], plan: Plan) -> None:
    found = plan_of(info_for(layer))
    assert found.sends == plan.sends and found.seconds == plan.seconds and found.counted == plan.counted
    assert found.target == pytest.approx(plan.target) if plan.target is not None else found.target is None


def test_a_scoped_rule_is_judged_on_its_urls_alone() -> None:
    """A slow URL breaks its own rule, not the fast one's; the run's (unscoped) rule sees both."""
    from runner.report.verdict import Outcome

    ms = 1_000_000
    per_url = (Tally(), Tally())
    total = Tally()
    for n in range(100):
        result = Result(start_ns=1, headers_ns=2, end_ns=3, status=200, url_index=n % 2)
        latency = (300 if n % 2 else 1) * ms
        for tally in (per_url[n % 2], total):
            tally.add(result, latency, 0)
    settings = settings_from(merge({"thresholds": ["p99{url=/slow} < 200ms", "p99{url=/fast} < 200ms",
                                                   "p99 < 200ms"]}))
    info = RunInfo(settings, ["http://h/fast", "http://h/slow"], None, 0, 1e9)
    summary = RunSummary(info, 1, 10**9, 10**9, total, None, None, None, "iterations", 0.0, 0, per_url=per_url)
    verdict = Verdict.for_settings(settings, io.StringIO())
    assert verdict is not None
    outcomes = verdict.judge(summary)
    assert [(o.rule.text, o.ok) for o in outcomes] == [("p99{url=/slow} < 200ms", False),
                                                        ("p99{url=/fast} < 200ms", True), ("p99 < 200ms", False)]
    assert outcomes[0].line().startswith("# threshold run p99{url=/slow} < 200ms: 300")
    assert outcomes[0].record()["url"] == "/slow" and "url" not in Outcome(outcomes[2].rule, False, None).record()


def test_a_scoped_rule_never_stops_a_run_early_on_the_runs_figures() -> None:
    """The closed intervals' tallies are the run's: a slow other URL's max is no bound on this URL's."""
    stops = Stops()
    run_through({"thresholds": ["max{url=/} < 50ms"], "abortOnThreshold": True},
                [tally_of(100, 90 * MS), tally_of(100, 90 * MS)], stops)
    assert stops.reasons == []
    run_through({"thresholds": ["max < 50ms"], "abortOnThreshold": True}, [tally_of(100, 90 * MS)] * 2, stops)
    assert stops.reasons == ["threshold run max < 50ms"]


def test_a_shard_that_never_sends_to_a_scoped_rules_url_leaves_it_to_the_others() -> None:
    """Shard 1 of 2 over two URLs sends to the second only (send n to URL n mod 2): /a's rule is not
    its to judge, and must not fail its pod; /b's is. With weights 3:1 (a a b a) it sends to /a only."""
    settings = settings_from(merge({"thresholds": ["p99{url=/a} < 200ms", "p99{url=/b} < 200ms"]}))
    per_url = (Tally(), Tally())
    per_url[1].add(Result(status=200, url_index=1), 300 * MS, 0)
    for weights, judged in (((), "/b"), ((3, 1), "/a")):
        info = RunInfo(settings, ["http://h/a", "http://h/b"], None, 0, 1e9, Shard(1, 2), weights)
        summary = RunSummary(info, 1, 10**9, 10**9, per_url[1], None, None, None, "iterations", 0.0, 0,
                             per_url=per_url)
        verdict = Verdict.for_settings(settings, io.StringIO())
        assert verdict is not None
        outcomes = {o.rule.url: o for o in verdict.judge(summary)}
        other = "/a" if judged == "/b" else "/b"
        assert outcomes[other].ok and outcomes[other].elsewhere
        assert outcomes[other].line() == (f"# threshold run p99{{url={other}}} < 200ms: not sent to by this shard "
                                          "(other shards send to it) ok\n")
        assert not outcomes[judged].elsewhere


@pytest.mark.parametrize("weights", [(), (3, 1, 2)], ids=str)
@pytest.mark.parametrize("shards", [2, 3, 4, 6])
def test_a_shards_scoped_rate_is_the_merges(shards: int, weights: tuple[int, ...]) -> None:
    """Each shard's verdict on `rate{url=...}` is the merge's: its rate to the URL is scaled by its
    part of that URL's sends, not by the shard count. 3 shards of 3 URLs send to one URL each: x 3
    read 90 req/s where the run sent 30, BROKEN on a shard and ok in the merge, or the other way."""
    urls = ["http://h/u0", "http://h/u1", "http://h/u2"]
    wheel = Targets(tuple(urls), weights).wheel
    sends = math.lcm(len(wheel), shards) * 4  # over 1 s: the run's rate to each URL is its sends in it
    rules = [f"rate{{url=/u{u}}} >= 10" for u in range(3)]
    settings = settings_from(merge({"thresholds": rules}))

    def judged(shard: Shard, numbers: range) -> list[Outcome]:
        per_url = (Tally(), Tally(), Tally())
        total = Tally()
        for n in numbers:
            result = Result(start_ns=1, headers_ns=2, end_ns=3, status=200, url_index=wheel[n % len(wheel)])
            for tally in (per_url[result.url_index], total):
                tally.add(result, MS, 0)
        info = RunInfo(settings, urls, None, 0, 1e9, shard, weights)
        summary = RunSummary(info, 1, SECOND, SECOND, total, None, None, None, "iterations", 0.0, 0, per_url=per_url)
        verdict = Verdict.for_settings(settings, io.StringIO())
        assert verdict is not None
        return verdict.judge(summary)

    merged = judged(Shard(), range(sends))
    for index in range(shards):
        for mine, whole in zip(judged(Shard(index, shards), range(index, sends, shards)), merged, strict=True):
            if not mine.elsewhere:
                assert mine.measured == pytest.approx(whole.measured), (index, mine.line())
                assert mine.ok == whole.ok


def test_a_shards_scoped_rate_line_says_its_part() -> None:
    """3 shards of 3 URLs: each makes all of one URL's sends; 2 shards of 3 URLs: half of each."""
    settings = settings_from(merge({"thresholds": ["rate{url=/a} >= 10"]}))
    per_url = (Tally(), Tally(), Tally())
    for _ in range(20):
        per_url[0].add(Result(start_ns=1, headers_ns=2, end_ns=3, status=200, url_index=0), MS, 0)
    lines = []
    for shard in (Shard(0, 3), Shard(0, 2)):
        info = RunInfo(settings, ["http://h/a", "http://h/b", "http://h/c"], None, 0, 1e9, shard)
        summary = RunSummary(info, 1, SECOND, SECOND, per_url[0], None, None, None, "iterations", 0.0, 0,
                             per_url=per_url)
        verdict = Verdict.for_settings(settings, io.StringIO())
        assert verdict is not None
        lines.append(verdict.judge(summary)[0].line())
    assert lines == [
        "# threshold run rate{url=/a} >= 10: 20 req/s (whole run: no other shard sends to its URLs) ok\n",
        "# threshold run rate{url=/a} >= 10: 40 req/s (whole run, extrapolated: this shard's 20 req/s x 2, as it "
        "makes 1/2 of the run's sends to its URLs) ok\n"]


def test_the_capacity_search_stops_at_the_first_broken_interval_and_names_the_last_rate_that_held() -> None:
    stops = Stops()
    layer = {"intervalThresholds": ["p99 < 50ms"], "thresholds": ["errors% <= 0"], "stopAtBrokenRule": True}
    tallies = [tally_of(100), tally_of(100), tally_of(100, 90 * MS), tally_of(100, 90 * MS)]
    verdict, text = run_through(layer, tallies, stops)
    assert stops.reasons == ["threshold interval p99 < 50ms"]  # once, at interval 2
    assert verdict.last_good_rate == 100  # interval 1's target: 100 sends due over its second
    assert text.splitlines()[-1] == ("# capacity: the last rate that held: 100 req/s (interval 1); interval 2 at "
                                     "100 req/s broke one")
    section = verdict.section(summary_of(info_for(layer), tallies))
    assert section["lastGoodRate"] == 100
    assert section["thresholds"]["stoppedEarly"] == "interval p99 < 50ms broken in interval 2"
    # Run rules never stop a capacity search, however lost.
    stops = Stops()
    run_through({**layer, "intervalThresholds": ["p99 < 1s"]}, [tally_of(9, failed=1), tally_of(10)], stops)
    assert stops.reasons == []


def test_a_capacity_search_with_no_interval_that_held_says_so() -> None:
    verdict, text = run_through({"intervalThresholds": ["p99 < 50ms"], "stopAtBrokenRule": True},
                                [tally_of(100, 90 * MS)], Stops())
    assert verdict.last_good_rate is None
    assert verdict.section(summary_of(info_for({}), [tally_of(1)]))["lastGoodRate"] is None
    assert text.splitlines()[-1] == ("# capacity: no whole interval kept every interval rule; interval 0 at 100 "
                                     "req/s broke one")


def test_without_the_option_there_is_no_capacity_line_or_key() -> None:
    verdict, text = run_through({"intervalThresholds": ["p99 < 50ms"]}, [tally_of(100, 90 * MS)], Stops())
    assert "# capacity" not in text
    assert "lastGoodRate" not in verdict.section(summary_of(info_for({}), [tally_of(1)]))


# --- status rules ----------------------------------------------------------------------------------


def with_statuses(good: int, **statuses: int) -> Tally:
    """`good` 200s, then each `s401=n` status n times (1 ms each)."""
    tally = tally_of(good)
    for name, count in statuses.items():
        for _ in range(count):
            tally.add(Result(status=int(name[1:])), MS, 0)
    return tally


def test_a_token_that_expires_keeps_errors_but_breaks_the_status_rules() -> None:
    """401s are good responses (slow_cooker's 200-499): errors% stays 0 while every send after the
    expiry is refused by the service; 4xx%, 401% and the interval rule see it, and exit 3."""
    tallies = [tally_of(100), with_statuses(40, s401=60), with_statuses(0, s401=100)]
    verdict, text = run_through(
        {"thresholds": ["errors% <= 1", "4xx% <= 1", "401% == 0", "5xx% == 0", "2xx% >= 99"],
         "intervalThresholds": ["4xx% <= 1"]},
        tallies,
    )
    assert text.splitlines() == [
        "# threshold run errors% <= 1: 0% ok",
        "# threshold run 4xx% <= 1: 53.333% BROKEN",
        "# threshold run 401% == 0: 53.333% BROKEN",
        "# threshold run 5xx% == 0: 0% ok",
        "# threshold run 2xx% >= 99: 46.667% BROKEN",
        "# threshold interval 4xx% <= 1: worst 100% (interval 2), broken in 2 of 3 intervals (1, 2) BROKEN",
        "# thresholds: 4 of 6 broken",
    ]
    assert verdict.exit_code == EXIT_THRESHOLDS
    records = verdict.section(summary_of(info_for({}), tallies))["thresholds"]["rules"]
    assert records[2] == {"rule": "401% == 0", "scope": "run", "measured": 53.333333, "unit": "%", "ok": False,
                          "inconclusive": False}
    assert records[5]["brokenIntervals"] == [1, 2] and records[5]["worstInterval"] == 2


def test_a_status_rule_over_failed_sends_alone_has_nothing_to_measure() -> None:
    """No response, no status: the run rule breaks (nothing to measure, as a latency rule), an interval
    without a response is not judged, and the interval that has responses is."""
    verdict, text = run_through({"thresholds": ["4xx% <= 1"], "intervalThresholds": ["4xx% <= 1", "5xx% == 0"]},
                                [tally_of(0, failed=100), tally_of(0, failed=100)])
    assert text.splitlines()[:3] == ["# threshold run 4xx% <= 1: nothing to measure BROKEN",
                                     "# threshold interval 4xx% <= 1: no interval to measure ok",
                                     "# threshold interval 5xx% == 0: no interval to measure ok"]
    _, text = run_through({"intervalThresholds": ["5xx% == 0"]}, [tally_of(0, failed=100), tally_of(99, bad=1)])
    assert text.splitlines()[0] == "# threshold interval 5xx% == 0: worst 1% (interval 1), broken in 1 of 1 intervals (1) BROKEN"


def test_a_status_rule_stops_a_run_once_out_of_reach() -> None:
    """10 intervals of 100 sends: 11 401s make `4xx% <= 1` impossible (11 of at most 1000 responses)."""
    stops = Stops()
    verdict, _ = run_through({"thresholds": ["4xx% <= 1"], "abortOnThreshold": True},
                             [tally_of(100), with_statuses(90, s401=10)], stops)
    assert stops.reasons == []  # 10 of 1000: can still hold
    verdict, _ = run_through({"thresholds": ["4xx% <= 1", "401% == 0"], "abortOnThreshold": True},
                             [tally_of(100), with_statuses(89, s401=11)], stops)
    assert stops.reasons == ["threshold run 4xx% <= 1"]
    assert verdict.aborted == "run 4xx% <= 1 can no longer hold after interval 1"


def test_a_scoped_status_rule_is_judged_on_its_urls_answers_alone() -> None:
    """/login answers 401 to every other send; /ok never: each URL's rule sees its own, the run's both."""
    per_url = (Tally(), Tally())
    total = Tally()
    for n in range(100):
        status = 401 if n % 4 == 1 else 200  # half of /login's sends (url 1: odd n)
        for tally in (per_url[n % 2], total):
            tally.add(Result(start_ns=1, headers_ns=2, end_ns=3, status=status, url_index=n % 2), MS, 0)
    settings = settings_from(merge({"thresholds": ["4xx%{url=/login} <= 1", "401%{url=/ok} == 0", "4xx% <= 30",
                                                   "errors%{url=/login} <= 0"]}))
    info = RunInfo(settings, ["http://h/ok", "http://h/login"], None, 0, 1e9)
    summary = RunSummary(info, 1, 10**9, 10**9, total, None, None, None, "iterations", 0.0, 0, per_url=per_url)
    verdict = Verdict.for_settings(settings, io.StringIO())
    assert verdict is not None
    outcomes = verdict.judge(summary)
    assert [(o.rule.text, o.ok, o.measured) for o in outcomes] == [
        ("4xx%{url=/login} <= 1", False, 50.0), ("401%{url=/ok} == 0", True, 0.0), ("4xx% <= 30", True, 25.0),
        ("errors%{url=/login} <= 0", True, 0.0)]
    assert outcomes[0].line() == "# threshold run 4xx%{url=/login} <= 1: 50% BROKEN\n"
    assert outcomes[1].record()["url"] == "/ok"
