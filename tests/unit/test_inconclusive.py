"""An inconclusive verdict: a rule broken only where the client could not keep pace blames nobody.

The rule (runner.report.verdict): a run rule broken on the run is inconclusive when the run
without its client-saturated intervals keeps it, or has nothing left to measure; an interval
rule, when every interval that broke it was saturated. What the client's pace cannot make
worse stays the server's: bad responses, alone or as the bad part of errors%, and a rule no
client could have kept. Judged here for every combination, against an oracle written from that
sentence, and through the reporter.
"""

from __future__ import annotations

import io
import itertools
import math
from typing import Any

import pytest

from runner.commands.termination import verdict_lines
from runner.config.rules import LATENCIES, METRICS, parse_rule
from runner.core.errors import EXIT_INCONCLUSIVE, EXIT_OK, EXIT_THRESHOLDS
from runner.load.result import Result
from runner.report.outcome import ExitCode
from runner.report.verdict import Verdict, at_best, blames_the_service, could_hold, run_rule_verdict
from runner.stats.client import ClientFigures
from runner.stats.figures import Figures
from runner.stats.recorder import Interval, Tally
from runner.stats.thresholds import Span, measure
from tests.unit.test_verdict import MS, SECOND, START, info_for, summary_of, tally_of

# One rule per metric, each broken by the "bad" spans below and kept by the "good" ones.
RULES = {
    "p50": "p50 < 5ms", "p75": "p75 < 5ms", "p90": "p90 < 5ms", "p95": "p95 < 5ms", "p99": "p99 < 5ms",
    "p999": "p999 < 5ms", "max": "max < 5ms", "mean": "mean < 5ms", "goal%": "goal% >= 95",
    "errors%": "errors% <= 1", "failed%": "failed% <= 1", "bad%": "bad% <= 1", "skipped%": "skipped% <= 1",
    "rate": "rate >= 95",
}


def timed_out(n: int) -> Tally:
    """`n` sends that timed out: by the client's clock, which a stalled client can make run out."""
    tally = Tally()
    for _ in range(n):
        tally.add(Result(error="timeout", error_text="timeout: no response within 10s"), 0, 0)
    return tally


def counts(good: int, *, latency_ms: int = 1, bad: int = 0, timeouts: int = 0, refused: int = 0, skipped: int = 0,
           fast: int = 0) -> Tally:
    """`good` responses in `latency_ms` (`fast` of them in 1 ms), `bad` 5xx, and so on."""
    tally = tally_of(fast, MS)
    tally.merge(tally_of(good - fast, latency_ms * MS, bad=bad, failed=refused))
    tally.merge(timed_out(timeouts))
    tally.skipped = skipped
    return tally


def span(good: int, *, seconds: float = 1.0, **how: int) -> Span:
    """counts() over `seconds` at 100 req/s, as the rules see them."""
    return Span(Figures.of(counts(good, **how), 100 * seconds, int(seconds * SECOND)))


# Spans of 1 s at 100 req/s that keep every rule of RULES, that break every one of them but bad% as
# a slow client would (late, few, failing sends: no 5xx), and that break all with the server's 5xx.
KEEPS = span(100)
CLIENT_BREAKS = span(40, latency_ms=50, timeouts=30, skipped=30, fast=15)  # some answers read at once, most late
SERVER_BREAKS = span(40, latency_ms=50, bad=10, timeouts=20, skipped=30)  # every answer slow, and 5xx
REFUSING = span(90, refused=10)  # a tenth of the connections refused: the server's answer, however late read
EMPTY = Span(Figures.of(Tally(), 0.0, 0))  # nothing to measure: no sends, no goal


def test_every_metric_has_a_rule_here() -> None:
    assert set(RULES) == set(METRICS) - {"backends"}  # below: the spans here name no backend
    for metric, text in RULES.items():
        rule = parse_rule(text, "run")
        assert rule.metric == metric
        assert rule.holds(measure(metric, KEEPS))  # type: ignore[arg-type]
        assert rule.holds(measure(metric, CLIENT_BREAKS)) is (metric == "bad%")  # type: ignore[arg-type]
        assert not rule.holds(measure(metric, SERVER_BREAKS))  # type: ignore[arg-type]


# Rules no client could keep, however fast: goal% is at most 100, the rate at most the one asked for.
# Rules no client could keep on KEEPS (a goal% above 100 is refused as it is read: runner.config.rules).
IMPOSSIBLE = {"rate": "rate >= 1000", "p99": "p99 < 1ns"}


@pytest.mark.parametrize("metric", RULES)
def test_at_best_is_what_the_server_alone_decided(metric: str) -> None:
    bad = 10 / 70 * 100  # 10 of its 70 requests were answered 5xx
    expected = {"bad%": bad, "errors%": bad, "goal%": 100.0, "rate": 100.0}.get(metric, 0.0)  # its timeouts aside
    latency = metric in LATENCIES
    assert at_best(metric, SERVER_BREAKS) == pytest.approx(50 * MS if latency else expected)  # the fastest: 50 ms
    refusals = {"errors%": 10.0, "failed%": 10.0, "goal%": 90.0}  # 10 of the 100 due refused: never answered
    assert at_best(metric, REFUSING) == refusals.get(metric, at_best(metric, KEEPS))
    assert at_best(metric, CLIENT_BREAKS) == (MS if latency else 100.0 if metric in ("goal%", "rate") else 0.0)
    nothing = None if metric in ("bad%", "errors%", "failed%", "rate", *LATENCIES) else at_best(metric, KEEPS)
    assert at_best(metric, EMPTY) == nothing  # nothing sent, no time: nothing to measure
    assert at_best("rate", Span(Figures.of(Tally(), None, SECOND))) == math.inf  # a bench: the rate is the client's own pace


@pytest.mark.parametrize("metric", RULES)
def test_what_the_clients_pace_cannot_change_is_the_servers_alone(metric: str) -> None:
    rule = parse_rule(RULES[metric], "run")
    server_metric = metric in ("bad%", "errors%")
    # No 5xx at all: had it kept pace, every rule could hold; but bad%, which is the server's answers alone.
    assert could_hold(rule, CLIENT_BREAKS) is (metric != "bad%")
    # 14% 5xx break bad% and errors%; every answer slower than 5 ms, the latency rules
    assert could_hold(rule, SERVER_BREAKS) is not (server_metric or metric in LATENCIES)
    assert could_hold(rule, KEEPS) is (metric != "bad%")
    assert could_hold(rule, REFUSING) is (metric not in ("bad%", "errors%", "failed%", "goal%"))
    if metric in IMPOSSIBLE:
        assert not could_hold(parse_rule(IMPOSSIBLE[metric], "run"), KEEPS)


@pytest.mark.parametrize("metric", RULES)
def test_an_interval_blames_the_service_unless_the_client_could_not_keep_pace_there(metric: str) -> None:
    rule = parse_rule(RULES[metric], "interval")
    for broken, saturated in itertools.product((CLIENT_BREAKS, SERVER_BREAKS, REFUSING), (False, True)):
        expected = not saturated or metric == "bad%" or (metric in ("errors%", *LATENCIES) and broken is SERVER_BREAKS) \
            or (metric in ("errors%", "failed%", "goal%") and broken is REFUSING)
        assert blames_the_service(rule, broken, saturated) is expected, (broken is SERVER_BREAKS, saturated)
    if metric in IMPOSSIBLE:  # broken in a saturated interval, but no client could have kept it
        assert blames_the_service(parse_rule(IMPOSSIBLE[metric], "interval"), CLIENT_BREAKS, True)


def oracle(text: str, run: Span, unsaturated: Span | None) -> tuple[bool, bool]:
    """(ok, inconclusive), from the rule's sentence."""
    rule = parse_rule(text, "run")
    value = measure(rule.metric, run)
    if value is not None and rule.holds(value):
        return True, False
    if unsaturated is None:  # no interval was saturated: the service broke it
        return False, False
    if rule.metric == "bad%":  # 5xx answers: the server's
        return False, False
    if rule.metric in ("errors%", "failed%"):
        t = run.figures
        answers = (t.bad if rule.metric == "errors%" else 0) + t.failed - t.errors.get("timeout", 0)
        if t.requests and not rule.holds(answers * 100 / t.requests):  # its 5xx and refusals alone break it
            return False, False
    if rule.metric == "goal%" and run.figures.due:
        refused = run.figures.failed - run.figures.errors.get("timeout", 0)
        if not rule.holds(min(100.0, 100.0 - refused * 100 / run.figures.due)):  # the sends it refused alone break it
            return False, False
    if rule.metric in LATENCIES and run.figures.responses and not rule.holds(run.figures.latency.min_ns):
        return False, False  # even the fastest response broke it
    if text in IMPOSSIBLE.values():  # no client could have kept it
        return False, False
    kept = measure(rule.metric, unsaturated)
    return False, kept is None or rule.holds(kept)


@pytest.mark.parametrize("text", [*RULES.values(), *IMPOSSIBLE.values()])
def test_a_run_rule_is_inconclusive_exactly_when_the_oracle_says(text: str) -> None:
    rule = parse_rule(text, "run")
    runs = (KEEPS, CLIENT_BREAKS, SERVER_BREAKS, REFUSING)  # and without the saturated intervals, nothing at all
    for run, unsaturated in itertools.product(runs, (None, *runs, EMPTY)):
        ok, inconclusive, kept = run_rule_verdict(rule, run, unsaturated)
        assert (ok, inconclusive) == oracle(text, run, unsaturated), (run, unsaturated)
        assert not (ok and inconclusive)
        if inconclusive:
            assert unsaturated is not None and kept == measure(rule.metric, unsaturated)


# --- through the reporter: a run of four 1 s intervals at 100 req/s ------------------------------


def saturated(cpu: float = 0.05) -> ClientFigures:
    return ClientFigures(cpu, saturated=True)


def judged(layer: dict[str, Any], intervals: list[tuple[Tally, bool]]) -> tuple[Verdict, str, list[str]]:
    """A verdict told of these intervals (tally, client saturated); its lines and the exit line said."""
    info = info_for({"iterations": len(intervals), **layer})
    out = io.StringIO()
    verdict = Verdict.for_settings(info.settings, out)
    assert verdict is not None
    verdict.start(info)
    for index, (tally, starved) in enumerate(intervals):
        start = START + index * SECOND
        verdict.interval(info, Interval(index, start, start + SECOND, tally, due=100.0,
                                        client=saturated() if starved else ClientFigures()))
    summary = summary_of(info, [tally for tally, _ in intervals])
    verdict.finish(summary)
    said: list[str] = []
    outcome = ExitCode(said.append, verdict)
    outcome.finish(summary)
    assert outcome.code == verdict.exit_code
    return verdict, out.getvalue(), said


# 40 answers of 100 due, most read late: the client's doing (those it read at once were fast).
HEALTHY, STARVED = tally_of(100), counts(40, latency_ms=50, fast=15)


def test_goal_broken_only_in_saturated_intervals_is_inconclusive() -> None:
    verdict, text, said = judged({"thresholds": ["goal% >= 95"], "intervalThresholds": ["goal% >= 95"]},
                                 [(HEALTHY, False), (STARVED, True), (HEALTHY, False), (HEALTHY, False)])
    assert verdict.exit_code == EXIT_INCONCLUSIVE and verdict.inconclusive and not verdict.passed
    assert text.splitlines() == [
        "# threshold run goal% >= 95: 85% (100% where the client kept pace) INCONCLUSIVE",
        "# threshold interval goal% >= 95: worst 40% (interval 1), broken in 1 of 4 intervals (1), each one where "
        "the client could not keep pace INCONCLUSIVE",
        "# thresholds: 2 of 2 inconclusive (broken only where the client could not keep pace)",
    ]
    assert said == ["inconclusive: run goal% >= 95, interval goal% >= 95 broke only where the client could not keep "
                    "pace (client-saturated in 1 of 4 intervals): this says nothing of the service; give the runner "
                    "more CPU or a quieter node (exit code 9)"]
    # The termination message says it as the log does: the exit line first, then the verdict's.
    assert verdict_lines(verdict) == ["2 of 2 thresholds inconclusive",
                                      *(line.removeprefix("# ") for line in text.splitlines()[:2])]
    section = verdict.section(summary_of(info_for({}), [HEALTHY]))["thresholds"]
    assert section["passed"] is False and section["inconclusive"] is True
    assert [rule["inconclusive"] for rule in section["rules"]] == [True, True]


def test_broken_where_the_client_kept_pace_too_is_broken() -> None:
    verdict, text, said = judged({"thresholds": ["goal% >= 95"], "intervalThresholds": ["goal% >= 95"]},
                                 [(HEALTHY, False), (STARVED, True), (tally_of(60), False), (HEALTHY, False)])
    assert verdict.exit_code == EXIT_THRESHOLDS and not verdict.inconclusive
    assert text.splitlines()[-1] == "# thresholds: 2 of 2 broken"
    assert said == []  # the verdict lines say it


def test_a_broken_rule_beside_an_inconclusive_one_is_a_failure() -> None:
    verdict, text, _ = judged({"thresholds": ["goal% >= 95", "bad% <= 1"]},
                              [(HEALTHY, False), (tally_of(40, 50 * MS, bad=5), True), (HEALTHY, False)])
    assert [o.verdict for o in verdict.outcomes or []] == ["INCONCLUSIVE", "BROKEN"]
    assert verdict.exit_code == EXIT_THRESHOLDS
    assert text.splitlines()[-1] == ("# thresholds: 1 of 2 broken, 1 of 2 inconclusive (broken only where the "
                                     "client could not keep pace)")
    assert verdict_lines(verdict)[0] == "1 of 2 thresholds broken, 1 of 2 inconclusive"


def test_every_interval_saturated_is_inconclusive_and_none_is_broken() -> None:
    rules = {"thresholds": ["p99 < 5ms", "goal% >= 95"]}
    starved, _, _ = judged(rules, [(STARVED, True)] * 3)
    assert [o.verdict for o in starved.outcomes or []] == ["INCONCLUSIVE", "INCONCLUSIVE"]
    assert "nothing to measure where the client kept pace" in (starved.outcomes or [])[0].line()
    kept_pace, _, _ = judged(rules, [(STARVED, False)] * 3)
    assert kept_pace.exit_code == EXIT_THRESHOLDS
    healthy, _, _ = judged(rules, [(HEALTHY, True)] * 3)  # saturated, and yet every rule kept
    assert healthy.exit_code == EXIT_OK and not healthy.inconclusive


def test_a_bench_is_judged_as_measured_as_its_client_runs_flat_out() -> None:
    verdict, _, said = judged({"mode": "bench", "totalRequests": 400, "thresholds": ["p99 < 5ms"]},
                              [(STARVED, True), (STARVED, True)])
    assert verdict.exit_code == EXIT_THRESHOLDS and said == []


def test_errors_that_are_the_servers_answers_are_never_excused() -> None:
    served_errors = tally_of(90, bad=10)  # the service's own 5xx, in an interval where the client lagged
    verdict, _, _ = judged({"thresholds": ["errors% <= 1"], "intervalThresholds": ["errors% <= 1"]},
                           [(HEALTHY, False), (served_errors, True), (HEALTHY, False)])
    assert [o.verdict for o in verdict.outcomes or []] == ["BROKEN", "BROKEN"]
    timeouts = tally_of(90)  # and sends that failed as the stalled client timed them out
    timeouts.merge(timed_out(10))
    verdict, _, _ = judged({"thresholds": ["errors% <= 1"], "intervalThresholds": ["errors% <= 1"]},
                           [(HEALTHY, False), (timeouts, True), (HEALTHY, False)])
    assert [o.verdict for o in verdict.outcomes or []] == ["INCONCLUSIVE", "INCONCLUSIVE"]
    refusals = tally_of(90, failed=10)  # connections refused: an answer, however late it was read
    verdict, _, _ = judged({"thresholds": ["errors% <= 1"], "intervalThresholds": ["failed% <= 1"]},
                           [(HEALTHY, False), (refusals, True), (HEALTHY, False)])
    assert [o.verdict for o in verdict.outcomes or []] == ["BROKEN", "BROKEN"]


def reached(*backends: str) -> Span:
    """A span of one fast response from each backend."""
    tally = Tally()
    for backend in backends:
        tally.add(Result(status=200), MS, 0, backend=backend)
    return Span(Figures.of(tally, float(len(backends)), SECOND))


def test_a_backends_rule_is_judged_on_where_the_client_kept_pace() -> None:
    """How many backends a client that kept pace would have reached is unknown (at_best None): a
    broken rule is inconclusive only when the client kept pace in no interval (what it did reach
    includes what those intervals reached), and broken when it kept pace in some."""
    rule = parse_rule("backends >= 3", "run")
    few, many = reached("a", "b"), reached("a", "b", "c")
    assert at_best("backends", few) is None and could_hold(rule, few)
    assert run_rule_verdict(rule, many, few) == (True, False, None)
    assert run_rule_verdict(rule, few, None) == (False, False, None)  # the client kept pace throughout
    assert run_rule_verdict(rule, few, EMPTY) == (False, True, None)  # saturated throughout
    assert run_rule_verdict(rule, few, reached("a")) == (False, False, 1)


# --- status rules: the server's answers, never excused -----------------------------------------


def statuses(good: int, *, latency_ms: int = 1, timeouts: int = 0, skipped: int = 0, **answered: int) -> Tally:
    """counts() with each `s401=n` status answered n times too, in `latency_ms`."""
    tally = counts(good, latency_ms=latency_ms, timeouts=timeouts, skipped=skipped)
    for name, n in answered.items():
        for _ in range(n):
            tally.add(Result(status=int(name[1:])), latency_ms * MS, 0)
    return tally


STATUS_RULES = ("4xx% <= 1", "401% == 0", "2xx% >= 99", "3xx% < 1", "5xx% == 0")
# A client too slow to keep pace: 30 timeouts, 30 skipped, 40 answers read late, 10 of them 401 and 2 a 503.
STARVED_401 = Span(Figures.of(statuses(28, latency_ms=50, timeouts=30, skipped=30, s401=10, s503=2), 100.0, SECOND))


@pytest.mark.parametrize("text", STATUS_RULES)
def test_a_status_rule_at_best_is_as_measured(text: str) -> None:
    """A status is the server's answer however late the client read it: at_best is the measured share,
    and the timeouts and skips of a starved client are no part of it (they have no status)."""
    rule = parse_rule(text, "run")
    for span_ in (KEEPS, CLIENT_BREAKS, SERVER_BREAKS, REFUSING, STARVED_401, EMPTY):
        assert at_best(rule.metric, span_) == measure(rule.metric, span_)
    assert at_best("4xx%", STARVED_401) == 25.0 and at_best("5xx%", STARVED_401) == 5.0  # of its 40 answers
    assert at_best("2xx%", STARVED_401) == 70.0 and at_best("401%", EMPTY) is None


@pytest.mark.parametrize("text", STATUS_RULES)
def test_a_broken_status_rule_is_never_the_clients_doing(text: str) -> None:
    rule, interval_rule = parse_rule(text, "run"), parse_rule(text, "interval")
    broken = not rule.holds(measure(rule.metric, STARVED_401))  # type: ignore[arg-type]
    assert broken is (text != "3xx% < 1")
    for span_ in (STARVED_401, KEEPS, CLIENT_BREAKS, EMPTY):  # as bad%: no pace of the client's keeps it
        assert not could_hold(rule, span_)
    assert blames_the_service(interval_rule, STARVED_401, saturated=True)
    # A run broken only in its saturated part, and kept where the client kept pace: BROKEN all the same.
    assert run_rule_verdict(rule, STARVED_401, KEEPS)[:2] == (not broken, False)
    # Not one response in the run (a target that refused them all, on a starved node): nothing to measure,
    # BROKEN, as the refusals are the server's; never inconclusive for want of a status.
    refused = Span(Figures.of(counts(0, refused=100), 100.0, SECOND))
    assert run_rule_verdict(rule, refused, EMPTY) == (False, False, None)
    assert run_rule_verdict(rule, refused, refused) == (False, False, None)
    # Timeouts and skips alone (no status among them) leave every status rule as it was: kept.
    assert rule.holds(measure(rule.metric, CLIENT_BREAKS))  # type: ignore[arg-type]


def test_401s_in_a_saturated_interval_break_the_status_rules_and_exit_3() -> None:
    """The token expired while the node starved the client: the 401s are the service's answers, so
    the status rules are BROKEN, not INCONCLUSIVE, while goal%, broken by the client, is."""
    expired = statuses(30, latency_ms=50, timeouts=20, skipped=30, s401=20)
    verdict, text, said = judged({"thresholds": ["4xx% <= 1", "goal% >= 95"], "intervalThresholds": ["401% == 0"]},
                                 [(HEALTHY, False), (expired, True), (HEALTHY, False)])
    assert text.splitlines() == [
        "# threshold run 4xx% <= 1: 8% BROKEN",  # 20 of 250 answers
        "# threshold run goal% >= 95: 83.333% (100% where the client kept pace) INCONCLUSIVE",
        "# threshold interval 401% == 0: worst 40% (interval 1), broken in 1 of 3 intervals (1) BROKEN",
        "# thresholds: 2 of 3 broken, 1 of 3 inconclusive (broken only where the client could not keep pace)",
    ]
    assert verdict.exit_code == EXIT_THRESHOLDS and said == []
