"""An inconclusive verdict: a rule broken only where the client's own delay may have changed its figure.

The rule (runner.report.verdict): what the client's delay may have changed in a span is its Pace
(runner.stats.client.pace_of, tested in test_pace.py). A figure at best is the figure had that
delay cost nothing: a latency without the delay its Pace may put in it, goal%, rate and skipped%
with the sends it may have cost as made and answered, errors% and failed% without the timeouts it
may have caused; every other figure (bad%, a refused connection, a 5xx) as measured. An interval
rule is inconclusive when in every interval that broke it the client's delay may have changed its
figure and the figure at best keeps it; a run rule, when the figure at best on the run keeps it
and so do the intervals in which its delay changed none of it (or there are none). Judged here for
every metric and case against an oracle written from those sentences, and through the reporter.
"""

from __future__ import annotations

import io
import itertools
from typing import Any

import pytest

from runner.commands.termination import verdict_lines
from runner.config.rules import LATENCIES, METRICS, parse_rule
from runner.core.errors import EXIT_INCONCLUSIVE, EXIT_OK, EXIT_THRESHOLDS
from runner.load.result import ErrorKind, Result
from runner.report.outcome import ExitCode
from runner.report.verdict import Verdict, at_best, blames_the_service, changed, could_hold, run_rule_verdict
from runner.stats.client import ClientFigures, Pace, PaceTerms, pace_of
from runner.stats.figures import Figures
from runner.stats.histogram import LatencyHistogram
from runner.stats.recorder import Interval, Tally
from runner.stats.thresholds import Span, measure
from tests.unit.test_verdict import MS, SECOND, START, info_for, summary_of

# One rule per metric, each broken by the "breaks" spans below and kept by KEEPS.
RULES = {
    "p50": "p50 < 5ms", "p75": "p75 < 5ms", "p90": "p90 < 5ms", "p95": "p95 < 5ms", "p99": "p99 < 5ms",
    "p999": "p999 < 5ms", "max": "max < 5ms", "mean": "mean < 5ms", "goal%": "goal% >= 95",
    "errors%": "errors% <= 1", "failed%": "failed% <= 1", "bad%": "bad% <= 1", "skipped%": "skipped% <= 1",
    "rate": "rate >= 95",
}
CLOSED = PaceTerms(room=5)  # 5 clients at 100 req/s: 50 ms between a client's sends; timeout 10 s


def lagging(lag: int) -> ClientFigures:
    histogram = LatencyHistogram()
    histogram.record(min(lag, 100_000), 99)
    histogram.record(lag)
    return ClientFigures(0.05, histogram)


def counts(good: int, *, latency_ms: float = 1, kernel: bool = True, bad: int = 0, timeouts: int = 0,
           refused: int = 0, skipped: int = 0, late_max: int = 0) -> Tally:
    """`good` responses and `bad` 5xx in `latency_ms`, timed by the kernel (or the loop), and so on."""
    tally = Tally()
    for status, n in ((200, good), (503, bad)):
        for _ in range(n):
            tally.add(Result(status=status, kernel_clock=kernel), int(latency_ms * MS), 0)
    for kind, n in ((ErrorKind.TIMEOUT, timeouts), (ErrorKind.REFUSED, refused)):
        for _ in range(n):
            tally.add(Result(error=kind, error_text=str(kind)), 0, 0)
    tally.skipped, tally.late, tally.late_max_ns = skipped, 1 if late_max else 0, late_max
    return tally


def span(tally: Tally, lag: int = 100_000) -> Span:
    """A 1 s interval at 100 req/s, its client's loop lagging up to `lag`."""
    figures = Figures.of(tally, 100.0, SECOND)
    return Span(figures, pace=pace_of(tally, figures, lagging(lag), CLOSED))


KEEPS = span(counts(100))
# A client stopped for 6 s: its loop read answers late (it timed them: TLS), its timeouts and skips
# may be its own, and the sends due in it may have gone out after it. No 5xx.
STALLED = span(counts(40, latency_ms=50, kernel=False, timeouts=30, skipped=30), lag=6 * SECOND)
# The same counts from a client that kept pace (a loop 30 ms late at worst, answers kernel-timed).
SERVER_BREAKS = span(counts(40, latency_ms=50, bad=10, timeouts=20, skipped=30), lag=30 * MS)
# A busy node (its loop 30 ms late, answers timed by the kernel) and a server slow on purpose.
SLOW_ON_PURPOSE = span(counts(25, latency_ms=200, skipped=75, late_max=30 * MS), lag=30 * MS)
# A target that never answers, on a busy node.
NEVER_ANSWERS = span(counts(0, timeouts=10, skipped=90, late_max=40 * MS), lag=40 * MS)
# A tenth of the connections refused, by a server whose client stalled: an answer, however late read.
REFUSING = span(counts(90, kernel=False, refused=10), lag=6 * SECOND)
BREAKS = (STALLED, SERVER_BREAKS, SLOW_ON_PURPOSE, NEVER_ANSWERS, REFUSING)
EMPTY = Span(Figures.of(Tally(), 0.0, 0))  # nothing to measure: no sends, no goal


def test_every_metric_has_a_rule_here() -> None:
    assert set(RULES) == set(METRICS) - {"backends"}  # below: the spans here name no backend
    for metric, text in RULES.items():
        rule = parse_rule(text, "run")
        assert rule.holds(measure(metric, KEEPS))  # type: ignore[arg-type]
        assert not rule.holds(measure(metric, SERVER_BREAKS))  # type: ignore[arg-type]


def best_oracle(metric: str, s: Span) -> float | None:
    """at_best, from the sentence: the figure had the client's delay cost nothing."""
    f, pace = s.figures, s.pace
    value = measure(metric, s)
    if value is None:
        return None
    if metric in LATENCIES:
        return value if pace.best is None else pace.best.ns(metric)
    if metric in ("errors%", "failed%"):
        return ((f.bad if metric == "errors%" else 0) + f.failed - pace.timeouts) * 100 / f.requests
    if metric == "skipped%":
        return (f.skipped - pace.skipped) * 100 / (f.requests + f.skipped)
    if metric == "goal%":
        return min((f.responses + pace.skipped + pace.timeouts + pace.crossed) * 100 / 100.0, 100.0)
    if metric == "rate":
        return max(value, min(f.requests + pace.skipped + pace.crossed, 100.0))
    return value  # bad%: the server's answers


@pytest.mark.parametrize("metric", RULES)
def test_at_best_is_the_figure_without_what_the_clients_delay_may_have_changed(metric: str) -> None:
    for s in (KEEPS, *BREAKS):
        assert at_best(metric, s) == pytest.approx(best_oracle(metric, s)), s.pace
    assert at_best(metric, EMPTY) is None


def test_what_each_span_says_the_client_may_have_changed() -> None:
    """The cases of the issue, by what their Pace holds."""
    assert KEEPS.pace == Pace(cpu_share=0.05)  # on time, kernel-timed: nothing
    stalled = STALLED.pace
    assert (stalled.skipped, stalled.timeouts, stalled.delayed, stalled.crossed) == (30, 30, 40, 70)
    assert stalled.best is not None and stalled.best.ns("p50") == 0  # 6 s of lag: any of the 50 ms may be its own
    assert SERVER_BREAKS.pace.sends == 2 and not SERVER_BREAKS.pace.saturated  # 30 ms late: 2 may have crossed
    assert SERVER_BREAKS.pace.skipped == 0  # each request took the gap between a client's sends
    assert SLOW_ON_PURPOSE.pace.skipped == 0 and not SLOW_ON_PURPOSE.pace.saturated  # every answer slower than the gap
    assert NEVER_ANSWERS.pace.sends == 0 and not NEVER_ANSWERS.pace.saturated
    assert REFUSING.pace.timeouts == 0 and REFUSING.pace.delayed == 90


def broken(rule_text: str, s: Span) -> bool:
    rule = parse_rule(rule_text, "interval")
    value = measure(rule.metric, s)
    return value is not None and not rule.holds(value)


@pytest.mark.parametrize("metric", RULES)
def test_the_server_broke_what_the_clients_delay_cannot_have_changed(metric: str) -> None:
    text = RULES[metric]
    rule = parse_rule(text, "interval")
    for s in BREAKS:
        best = best_oracle(metric, s)
        holds_at_best = best is None or rule.holds(best)
        assert could_hold(rule, s) is (holds_at_best and metric != "bad%")  # bad%: the server's answers alone
        if broken(text, s):
            assert blames_the_service(rule, s) is (not changed(metric, s.pace) or not holds_at_best), s.pace
    # The cases of the issue: a latency the kernel timed, a slow server's skips, a target that never
    # answers, each on a busy node; and 5xx answers.
    for s in (SERVER_BREAKS, SLOW_ON_PURPOSE, NEVER_ANSWERS):
        assert blames_the_service(rule, s) or not broken(text, s), (metric, s.pace)
    # What a stalled client may have changed is excused; the server's answers and a rule no client
    # could have kept are not.
    assert blames_the_service(rule, STALLED) is (metric == "bad%") or not broken(text, STALLED)
    assert blames_the_service(parse_rule("rate >= 1000", "interval"), STALLED)
    assert blames_the_service(parse_rule("p99 < 1ns", "interval"), SERVER_BREAKS)


def test_p99_under_1ms_measured_at_15ms_on_kernel_timed_answers_is_broken_however_late_the_client() -> None:
    rule = parse_rule("p99 < 1ms", "interval")
    for lag in (3 * MS, 40 * MS, 2 * SECOND):
        s = span(counts(500, latency_ms=15, late_max=lag), lag=lag)
        assert blames_the_service(rule, s) and at_best("p99", s) == 15 * MS
    timed_by_the_loop = span(counts(500, latency_ms=15, kernel=False), lag=4 * MS)
    assert at_best("p99", timed_by_the_loop) == 11 * MS and blames_the_service(rule, timed_by_the_loop)
    assert not blames_the_service(rule, span(counts(500, latency_ms=15, kernel=False), lag=15 * MS))


def oracle(text: str, run: Span, kept_pace: Span | None) -> tuple[bool, bool]:
    """(ok, inconclusive), from the rule's sentence."""
    rule = parse_rule(text, "run")
    value = measure(rule.metric, run)
    if value is not None and rule.holds(value):
        return True, False
    if kept_pace is None:  # the client's delay changed its figure in no interval: the service broke it
        return False, False
    best = best_oracle(rule.metric, run)
    if best is not None and not rule.holds(best):
        return False, False
    kept = measure(rule.metric, kept_pace)
    return False, kept is None or rule.holds(kept)


@pytest.mark.parametrize("text", [*RULES.values(), "rate >= 1000", "p99 < 1ns"])
def test_a_run_rule_is_inconclusive_exactly_when_the_oracle_says(text: str) -> None:
    rule = parse_rule(text, "run")
    runs = (KEEPS, *BREAKS)
    for run, kept_pace in itertools.product(runs, (None, *runs, EMPTY)):
        ok, inconclusive, kept = run_rule_verdict(rule, run, kept_pace)
        assert (ok, inconclusive) == oracle(text, run, kept_pace), (run.pace, kept_pace)
        assert not (ok and inconclusive)
        if inconclusive:
            assert kept_pace is not None and kept == measure(rule.metric, kept_pace)


# --- through the reporter: a run of 1 s intervals at 100 req/s -----------------------------------


def judged(layer: dict[str, Any], intervals: list[tuple[Tally, int]]) -> tuple[Verdict, str, list[str]]:
    """A verdict told of these intervals (tally, its client's loop lag); its lines and the exit line said."""
    info = info_for({"iterations": len(intervals), **layer})
    out = io.StringIO()
    verdict = Verdict.for_settings(info.settings, out)
    assert verdict is not None
    verdict.start(info)
    for index, (tally, lag) in enumerate(intervals):
        start = START + index * SECOND
        verdict.interval(info, Interval(index, start, start + SECOND, tally, due=100.0, client=lagging(lag),
                                        terms=info.pace_terms))
    summary = summary_of(info, [tally for tally, _ in intervals])
    verdict.finish(summary)
    said: list[str] = []
    outcome = ExitCode(said.append, verdict)
    outcome.finish(summary)
    assert outcome.code == verdict.exit_code or not summary.tally.responses  # 8: not one came back
    return verdict, out.getvalue(), said


QUIET = 100_000
HEALTHY = counts(100)
STOPPED = counts(40, skipped=60, late_max=2500 * MS)  # 60 skipped as a stop of 2.5 s pushed its sends back


def test_goal_broken_only_where_the_client_may_have_cost_it_is_inconclusive_and_says_how() -> None:
    verdict, text, said = judged({"thresholds": ["goal% >= 95"], "intervalThresholds": ["goal% >= 95"]},
                                 [(HEALTHY, QUIET), (STOPPED, 2500 * MS), (HEALTHY, QUIET), (HEALTHY, QUIET)])
    assert verdict.exit_code == EXIT_INCONCLUSIVE and verdict.inconclusive and not verdict.passed
    assert text.splitlines() == [
        "# threshold run goal% >= 95: 85% (100% where the client kept pace; the client's own delay may have changed "
        "goal%: it may have cost 100 sends (60 skipped, 40 due late in an interval), running up to 2.5s behind) "
        "INCONCLUSIVE",
        "# threshold interval goal% >= 95: worst 40% (interval 1), broken in 1 of 4 intervals (1), each one where "
        "the client's own delay may have changed goal%: it may have cost 100 sends (60 skipped, 40 due late in an "
        "interval), running up to 2.5s behind INCONCLUSIVE",
        "# thresholds: 2 of 2 inconclusive (broken only where the client's own delay may have changed the figure)",
    ]
    assert said == ["inconclusive: run goal% >= 95, interval goal% >= 95 broke only where the client's own delay "
                    "may have changed their figures (in 1 of 4 intervals): this says nothing of the service; give "
                    "the runner more CPU or a quieter node (exit code 9)"]
    # The termination message says it as the log does: the exit line first, then the verdict's.
    assert verdict_lines(verdict) == ["2 of 2 thresholds inconclusive",
                                      *(line.removeprefix("# ") for line in text.splitlines()[:2])]
    section = verdict.section(summary_of(info_for({}), [HEALTHY]))["thresholds"]
    assert section["passed"] is False and section["inconclusive"] is True
    assert [rule["inconclusive"] for rule in section["rules"]] == [True, True]


def test_broken_where_the_client_kept_pace_too_is_broken() -> None:
    verdict, text, said = judged({"thresholds": ["goal% >= 95"], "intervalThresholds": ["goal% >= 95"]},
                                 [(HEALTHY, QUIET), (STOPPED, 2500 * MS), (counts(60), QUIET), (HEALTHY, QUIET)])
    assert verdict.exit_code == EXIT_THRESHOLDS and not verdict.inconclusive
    assert text.splitlines()[-1] == "# thresholds: 2 of 2 broken"
    assert said == []  # the verdict lines say it


def test_a_busy_node_excuses_nothing_it_did_not_change() -> None:
    """A node busy with other work: the client's loop 40 ms late, every interval. nginx's own
    latency (15 ms, kernel-timed) breaks `p99 < 1ms`; a target that never answers breaks goal% and
    errors%; a server slow on purpose breaks goal% by its skips: each BROKEN."""
    for tally in (counts(100, latency_ms=15, late_max=40 * MS), counts(0, timeouts=10, skipped=90, late_max=40 * MS),
                  counts(25, latency_ms=200, skipped=75, late_max=40 * MS)):
        verdict, text, _ = judged({"thresholds": ["p99 < 1ms", "goal% >= 95", "errors% <= 1"]},
                                  [(tally, 40 * MS)] * 3)
        assert "INCONCLUSIVE" not in text and not verdict.inconclusive and not verdict.passed, text


def test_a_broken_rule_beside_an_inconclusive_one_is_a_failure() -> None:
    verdict, text, _ = judged({"thresholds": ["goal% >= 95", "bad% <= 1"]},
                              [(HEALTHY, QUIET), (counts(35, bad=5, skipped=60, late_max=2500 * MS), 2500 * MS),
                               (HEALTHY, QUIET)])
    assert [o.verdict for o in verdict.outcomes or []] == ["INCONCLUSIVE", "BROKEN"]
    assert verdict.exit_code == EXIT_THRESHOLDS
    assert text.splitlines()[-1] == ("# thresholds: 1 of 2 broken, 1 of 2 inconclusive (broken only where the "
                                     "client's own delay may have changed the figure)")
    assert verdict_lines(verdict)[0] == "1 of 2 thresholds broken, 1 of 2 inconclusive"


def test_latency_the_loop_timed_through_a_stall_is_inconclusive_and_names_how_much() -> None:
    stalled = counts(100, latency_ms=300, kernel=False)
    verdict, text, _ = judged({"thresholds": ["p99 < 50ms"]}, [(stalled, 2400 * MS)] * 3)
    assert verdict.exit_code == EXIT_INCONCLUSIVE
    assert text.splitlines()[0] == (
        "# threshold run p99 < 50ms: 300ms (nothing to measure where the client kept pace; the client's own delay "
        "may have changed p99: up to 300ms of it may be in the latency of 300 responses) INCONCLUSIVE")
    healthy, _, _ = judged({"thresholds": ["p99 < 50ms", "goal% >= 95"]}, [(HEALTHY, 2400 * MS)] * 3)
    assert healthy.exit_code == EXIT_OK and not healthy.inconclusive  # lagging, and yet every rule kept


def test_a_bench_is_judged_as_measured_as_its_client_runs_flat_out() -> None:
    stalled = counts(100, latency_ms=300, kernel=False)
    verdict, _, said = judged({"mode": "bench", "totalRequests": 400, "thresholds": ["p99 < 5ms"]},
                              [(stalled, 2400 * MS), (stalled, 2400 * MS)])
    assert verdict.exit_code == EXIT_THRESHOLDS and said == []


def test_errors_that_are_the_servers_answers_are_never_excused() -> None:
    served_errors = counts(90, bad=10, kernel=False)  # the service's own 5xx, where the client stalled
    verdict, _, _ = judged({"thresholds": ["errors% <= 1"], "intervalThresholds": ["errors% <= 1"]},
                           [(HEALTHY, QUIET), (served_errors, 6 * SECOND), (HEALTHY, QUIET)])
    assert [o.verdict for o in verdict.outcomes or []] == ["BROKEN", "BROKEN"]
    timeouts = counts(90, timeouts=10)  # sends the client timed out while its loop stalled 6 s of a 10 s timeout
    verdict, text, _ = judged({"thresholds": ["errors% <= 1"], "intervalThresholds": ["errors% <= 1"]},
                              [(HEALTHY, QUIET), (timeouts, 6 * SECOND), (HEALTHY, QUIET)])
    assert [o.verdict for o in verdict.outcomes or []] == ["INCONCLUSIVE", "INCONCLUSIVE"]
    assert "errors%: 10 timeouts may be its own, its loop having lagged 6s, half the timeout or more" in text
    busy = counts(90, timeouts=10, late_max=40 * MS)  # and where it lagged 40 ms: the server's
    verdict, _, _ = judged({"thresholds": ["errors% <= 1"], "intervalThresholds": ["errors% <= 1"]},
                           [(HEALTHY, QUIET), (busy, 40 * MS), (HEALTHY, QUIET)])
    assert [o.verdict for o in verdict.outcomes or []] == ["BROKEN", "BROKEN"]
    refusals = counts(90, refused=10, kernel=False)  # connections refused: an answer, however late it was read
    verdict, _, _ = judged({"thresholds": ["errors% <= 1"], "intervalThresholds": ["failed% <= 1"]},
                           [(HEALTHY, QUIET), (refusals, 6 * SECOND), (HEALTHY, QUIET)])
    assert [o.verdict for o in verdict.outcomes or []] == ["BROKEN", "BROKEN"]


def reached(*backends: str, skipped: int = 0) -> Tally:
    """One fast response from each backend."""
    tally = Tally()
    for backend in backends:
        tally.add(Result(status=200, kernel_clock=True), MS, 0, backend=backend)
    tally.skipped = skipped
    return tally


def test_a_backends_rule_counts_a_backend_more_for_each_send_the_client_may_have_cost() -> None:
    """Five clients that keep their connections reach five backends, however many sends a busy node
    pushed past an interval's end: a send meets a new backend only on a new connection, and they
    opened one for a few of their sends. `backends >= 10` is broken. A stop that cost a hundred
    sends of a run that opened a connection each time may have cost the backends they would have
    met: inconclusive there."""
    rule = parse_rule("backends >= 3", "run")
    few = Span(Figures.of(reached("a", "b"), 2.0, SECOND))
    assert at_best("backends", few) == 2 and not could_hold(rule, few)
    cut = Span(few.figures, pace=Pace(skipped=5))
    assert at_best("backends", cut) == 2 and not could_hold(rule, cut)  # on kept connections: none new
    fresh = reached("a", "b")
    fresh.connections_opened = 2  # each send opened its connection
    cut = Span(Figures.of(fresh, 2.0, SECOND), pace=Pace(skipped=5))
    assert at_best("backends", cut) == 7 and could_hold(rule, cut)
    assert not could_hold(parse_rule("backends >= 10", "run"), cut)
    assert not could_hold(parse_rule("backends <= 1", "run"), cut)  # more sends never reach fewer
    kept = reached(*"abcdefghij")
    kept.connections_opened = 5  # five clients' connections for 10 sends: one send in two opened one
    assert at_best("backends", Span(Figures.of(kept, 10.0, SECOND), pace=Pace(crossed=3))) == 12  # 10 + ceil(1.5)
    many = Span(Figures.of(reached("a", "b", "c"), 3.0, SECOND))
    assert run_rule_verdict(rule, many, few) == (True, False, None)
    assert run_rule_verdict(rule, cut, None) == (False, False, None)  # its delay changed nothing anywhere
    assert run_rule_verdict(rule, cut, EMPTY) == (False, True, None)  # it may have cost sends throughout
    assert run_rule_verdict(rule, cut, Span(Figures.of(reached("a"), 1.0, SECOND))) == (False, False, 1)
    stalled = Span(Figures.of(Tally(), 6.0, SECOND), pace=Pace(crossed=6))  # nothing sent: any send might have
    assert at_best("backends", stalled) is None  # nothing to measure


# --- status rules: the server's answers, never excused -----------------------------------------


def statuses(good: int, *, latency_ms: int = 1, timeouts: int = 0, skipped: int = 0, **answered: int) -> Tally:
    """counts() with each `s401=n` status answered n times too, in `latency_ms`."""
    tally = counts(good, latency_ms=latency_ms, timeouts=timeouts, skipped=skipped)
    for name, n in answered.items():
        for _ in range(n):
            tally.add(Result(status=int(name[1:])), latency_ms * MS, 0)
    return tally


STATUS_RULES = ("4xx% <= 1", "401% == 0", "2xx% >= 99", "3xx% < 1", "5xx% == 0")
# A client stalled 6 s: 30 timeouts, 30 skipped, 40 answers read late, 10 of them 401 and 2 a 503.
STARVED_401 = span(statuses(28, latency_ms=50, timeouts=30, skipped=30, s401=10, s503=2), lag=6 * SECOND)


@pytest.mark.parametrize("text", STATUS_RULES)
def test_a_status_rule_at_best_is_as_measured(text: str) -> None:
    """A status is the server's answer however late the client read it: at_best is the measured share,
    and the timeouts and skips of a starved client are no part of it (they have no status)."""
    rule = parse_rule(text, "run")
    for span_ in (KEEPS, *BREAKS, STARVED_401, EMPTY):
        assert at_best(rule.metric, span_) == measure(rule.metric, span_)
    assert at_best("4xx%", STARVED_401) == 25.0 and at_best("5xx%", STARVED_401) == 5.0  # of its 40 answers
    assert at_best("2xx%", STARVED_401) == 70.0 and at_best("401%", EMPTY) is None


@pytest.mark.parametrize("text", STATUS_RULES)
def test_a_broken_status_rule_is_never_the_clients_doing(text: str) -> None:
    rule, interval_rule = parse_rule(text, "run"), parse_rule(text, "interval")
    broken = not rule.holds(measure(rule.metric, STARVED_401))  # type: ignore[arg-type]
    assert broken is (text != "3xx% < 1")
    for span_ in (STARVED_401, KEEPS, STALLED, EMPTY):  # as bad%: no pace of the client's keeps it
        assert not could_hold(rule, span_)
    assert blames_the_service(interval_rule, STARVED_401)
    # A run broken only where the client stalled, and kept where it kept pace: BROKEN all the same.
    assert run_rule_verdict(rule, STARVED_401, KEEPS)[:2] == (not broken, False)
    # Not one response in the run (a target that refused them all, on a starved node): nothing to measure,
    # BROKEN, as the refusals are the server's; never inconclusive for want of a status.
    refused = Span(Figures.of(counts(0, refused=100), 100.0, SECOND))
    assert run_rule_verdict(rule, refused, EMPTY) == (False, False, None)
    assert run_rule_verdict(rule, refused, refused) == (False, False, None)
    # Timeouts and skips alone (no status among them) leave every status rule as it was: kept.
    assert rule.holds(measure(rule.metric, STALLED))  # type: ignore[arg-type]


def test_401s_in_a_saturated_interval_break_the_status_rules_and_exit_3() -> None:
    """The token expired while the node stalled the client 6 s: the 401s are the service's answers,
    so the status rules are BROKEN, not INCONCLUSIVE, while goal%, which its delay may have cut, is."""
    expired = statuses(30, latency_ms=50, timeouts=20, skipped=30, s401=20)
    verdict, text, said = judged({"thresholds": ["4xx% <= 1", "goal% >= 95"], "intervalThresholds": ["401% == 0"]},
                                 [(HEALTHY, QUIET), (expired, 6 * SECOND), (HEALTHY, QUIET)])
    assert text.splitlines() == [
        "# threshold run 4xx% <= 1: 8% BROKEN",  # 20 of 250 answers
        "# threshold run goal% >= 95: 83.333% (100% where the client kept pace; the client's own delay may have "
        "changed goal%: it may have cost 120 sends (30 skipped, 20 timed out, 70 due late in an interval), running "
        "up to 6s behind) INCONCLUSIVE",
        "# threshold interval 401% == 0: worst 40% (interval 1), broken in 1 of 3 intervals (1) BROKEN",
        "# thresholds: 2 of 3 broken, 1 of 3 inconclusive (broken only where the client's own delay may have changed "
        "the figure)",
    ]
    assert verdict.exit_code == EXIT_THRESHOLDS and said == []
