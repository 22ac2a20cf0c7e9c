"""An inconclusive verdict: a rule broken only where the client could not keep pace blames nobody.

The rule (runner.report.verdict): a run rule broken on the run is inconclusive when the run
without its client-saturated intervals keeps it, or has nothing left to measure; an interval
rule, when every interval that broke it was saturated. What the client's pace cannot make
worse stays the server's: bad responses, alone or as the bad part of errors%. Judged here for
every combination, against an oracle written from that sentence, and through the reporter.
"""

from __future__ import annotations

import io
import itertools
from typing import Any

import pytest

from runner.commands.termination import verdict_lines
from runner.config.rules import METRICS, parse_rule
from runner.core.errors import EXIT_INCONCLUSIVE, EXIT_OK, EXIT_THRESHOLDS
from runner.report.outcome import ExitCode
from runner.report.verdict import Verdict, blames_the_service, run_rule_verdict, server_alone_holds
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


def span(good: int, *, latency_ms: int = 1, bad: int = 0, failed: int = 0, skipped: int = 0,
         seconds: float = 1.0) -> Span:
    tally = tally_of(good, latency_ms * MS, bad=bad, failed=failed)
    tally.skipped = skipped
    return Span(Figures.of(tally, 100 * seconds, int(seconds * SECOND)))


# Spans of 1 s at 100 req/s that keep every rule of RULES, that break every one of them but bad% as
# a slow client would (late, few, failing sends: no 5xx), and that break all with the server's 5xx.
KEEPS = span(100)
CLIENT_BREAKS = span(40, latency_ms=50, failed=30, skipped=30)
SERVER_BREAKS = span(40, latency_ms=50, bad=10, failed=20, skipped=30)
EMPTY = Span(Figures.of(Tally(), 0.0, 0))  # nothing to measure: no sends, no goal


def test_every_metric_has_a_rule_here() -> None:
    assert set(RULES) == set(METRICS)
    for metric, text in RULES.items():
        rule = parse_rule(text, "run")
        assert rule.metric == metric
        assert rule.holds(measure(metric, KEEPS))  # type: ignore[arg-type]
        assert rule.holds(measure(metric, CLIENT_BREAKS)) is (metric == "bad%")  # type: ignore[arg-type]
        assert not rule.holds(measure(metric, SERVER_BREAKS))  # type: ignore[arg-type]


@pytest.mark.parametrize("metric", RULES)
def test_what_the_clients_pace_cannot_change_is_the_servers_alone(metric: str) -> None:
    rule = parse_rule(RULES[metric], "run")
    server_metric = metric in ("bad%", "errors%")
    assert server_alone_holds(rule, CLIENT_BREAKS) is (metric != "bad%")  # no 5xx at all, yet bad% broke
    assert server_alone_holds(rule, SERVER_BREAKS) is (not server_metric)  # 10% 5xx break bad% and errors%
    assert server_alone_holds(rule, KEEPS) is (metric != "bad%")


@pytest.mark.parametrize("metric", RULES)
def test_an_interval_blames_the_service_unless_the_client_could_not_keep_pace_there(metric: str) -> None:
    rule = parse_rule(RULES[metric], "interval")
    for broken, saturated in itertools.product((CLIENT_BREAKS, SERVER_BREAKS), (False, True)):
        expected = not saturated or metric == "bad%" or (metric == "errors%" and broken is SERVER_BREAKS)
        assert blames_the_service(rule, broken, saturated) is expected, (broken is SERVER_BREAKS, saturated)


def oracle(metric: str, run: Span, unsaturated: Span | None) -> tuple[bool, bool]:
    """(ok, inconclusive), from the rule's sentence."""
    rule = parse_rule(RULES[metric], "run")
    value = measure(metric, run)
    if value is not None and rule.holds(value):
        return True, False
    if unsaturated is None:  # no interval was saturated: the service broke it
        return False, False
    if metric == "bad%":
        return False, False
    if metric == "errors%":
        bad = measure("bad%", run)
        if bad is not None and not rule.holds(bad):
            return False, False
    kept = measure(metric, unsaturated)
    return False, kept is None or rule.holds(kept)


@pytest.mark.parametrize("metric", RULES)
def test_a_run_rule_is_inconclusive_exactly_when_the_oracle_says(metric: str) -> None:
    rule = parse_rule(RULES[metric], "run")
    runs = (KEEPS, CLIENT_BREAKS, SERVER_BREAKS, EMPTY)
    for run, unsaturated in itertools.product(runs, (None, *runs)):
        ok, inconclusive, kept = run_rule_verdict(rule, run, unsaturated)
        assert (ok, inconclusive) == oracle(metric, run, unsaturated), (run, unsaturated)
        assert not (ok and inconclusive)
        if inconclusive:
            assert unsaturated is not None and kept == measure(metric, unsaturated)


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


HEALTHY, STARVED = tally_of(100), tally_of(40, 50 * MS)  # 40 answers of 100 due, late: the client's doing


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


def test_errors_that_are_5xx_answers_are_never_excused() -> None:
    served_errors = tally_of(90, bad=10)  # the service's own 5xx, in an interval where the client lagged
    verdict, _, _ = judged({"thresholds": ["errors% <= 1"], "intervalThresholds": ["errors% <= 1"]},
                           [(HEALTHY, False), (served_errors, True), (HEALTHY, False)])
    assert [o.verdict for o in verdict.outcomes or []] == ["BROKEN", "BROKEN"]
    timeouts = tally_of(90, failed=10)  # sends that failed as the stalled client timed them out
    verdict, _, _ = judged({"thresholds": ["errors% <= 1"], "intervalThresholds": ["errors% <= 1"]},
                           [(HEALTHY, False), (timeouts, True), (HEALTHY, False)])
    assert [o.verdict for o in verdict.outcomes or []] == ["INCONCLUSIVE", "INCONCLUSIVE"]
