"""The verdict: a run judged against its thresholds, every interval as it closes, the run at its end.

It is a reporter: it hears of each closed interval and of the finished run, like the others.
At the end it prints one comment line per threshold (`# threshold run p99 < 50ms: 12.3ms ok`),
before the JSON summary, adds a `thresholds` section to that summary, and gives the exit
code: 3 when any threshold is broken, so a Job running it shows Failed and the alerts on
failed Jobs fire. The lines start with `# ` so that slow_cooker-style log readers skip them.

A rule broken only where the client could not keep pace says nothing of the service: its
verdict is inconclusive (exit code 9), so that a 3 always means the service. The rule,
pure (run_rule_verdict(), blames_the_service()), in docs/thresholds.md: a run rule broken on the run is
inconclusive when the run without its client-saturated intervals keeps it (or has nothing
left to measure); an interval rule, when every interval that broke it was saturated. Either
way, what the client's pace cannot make worse is the server's alone (at_best): a 5xx, a refused
connection or a reset is an answer however late it is read, so a bad% rule is never excused,
nor an errors% or failed% rule that such answers alone break, nor a latency rule that even the
fastest response broke, nor a rule no client could have kept (a `rate` above the one asked for).
A bench runs flat out, saturated as a rule: its verdict is judged as measured, never inconclusive.

With abortOnThreshold it also stops the run as soon as the verdict is certain: an interval
rule broken, or a run rule out of reach whatever the rest of the run does. With
stopAtBrokenRule (the capacity search: stages that ramp up until the service gives) it stops
at the first interval that breaks an interval rule, and reports the target rate of the last
interval before it that kept them all (lastGoodRate). It stops it the
way a first SIGTERM does (the run's own stop, given to it with bind_stop), so the last
interval line, the thresholds and the summary are printed exactly once, as after a signal.
"""

from __future__ import annotations

import math
import os
import signal
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any, TextIO

from runner.config.rules import BACKENDS, LATENCIES, RATE, Rule, number, status_codes
from runner.config.settings import Settings
from runner.config.targets import matching, url_slots
from runner.core.errors import EXIT_INCONCLUSIVE, EXIT_OK, EXIT_THRESHOLDS
from runner.load.model import schedule_of
from runner.load.result import ErrorKind
from runner.report.base import Reporter
from runner.report.keys import LAST_GOOD_RATE
from runner.stats.figures import Figures, goal
from runner.stats.recorder import Interval, Tally
from runner.stats.runinfo import RunInfo, RunSummary
from runner.stats.thresholds import Plan, Span, bounds, measure

_LISTED_INTERVALS = 10  # broken intervals named on a line; the summary lists them all
# Failures a client that could not keep pace can cause: a timeout is measured by its own clock,
# and a request cancelled was abandoned at the run's stop. Every other kind is the server's answer.
PACE_FAILURES = (ErrorKind.TIMEOUT, ErrorKind.CANCELLED)


@dataclass(frozen=True)
class Outcome:
    """One rule's verdict: for the run, its value; for intervals, the worst one's."""

    rule: Rule
    ok: bool
    measured: float | None  # base unit (ns, %, req/s); None when there was nothing to measure
    worst: int | None = None  # interval rules: the interval that measured `measured`
    judged: int = 0  # interval rules: intervals that had something to measure
    broken: tuple[int, ...] = ()  # interval rules: the intervals that broke it
    shares: int = 1  # the run was split in this many shards: a rate measured is this one's times that
    part: Fraction | None = None  # a scoped rule in a split run: this shard's part of its URLs' sends (url_part)
    elsewhere: bool = False  # a scoped rule whose URLs this shard never sends to: other shards judge it
    inconclusive: bool = False  # broken, but only where the client could not keep pace (module docstring)
    kept: float | None = None  # an inconclusive run rule: its value without the client-saturated intervals

    @property
    def verdict(self) -> str:
        """`ok`, `BROKEN` or `INCONCLUSIVE`, as the line says it."""
        return "ok" if self.ok else "INCONCLUSIVE" if self.inconclusive else "BROKEN"

    def line(self) -> str:
        """`# threshold run p99 < 50ms: 12.3ms ok`, one line, for the log."""
        verdict = self.verdict
        rule = f"# threshold {self.rule.scope} {self.rule.text}"
        if self.rule.scope == "run":
            value = "nothing to measure" if self.measured is None else self._shown(self.measured)
            if self.elsewhere:
                value = "not sent to by this shard (other shards send to it)"
            elif self.inconclusive:
                kept = "nothing to measure" if self.kept is None else self._shown(self.kept)
                value += f" ({kept} where the client kept pace)"
            return f"{rule}: {value} {verdict}\n"
        if self.measured is None:
            return f"{rule}: no interval to measure {verdict}\n"
        text = f"{rule}: worst {self._shown(self.measured)} (interval {self.worst})"
        if self.broken:
            shown = ", ".join(map(str, self.broken[:_LISTED_INTERVALS]))
            more = ", ..." if len(self.broken) > _LISTED_INTERVALS else ""
            text += f", broken in {len(self.broken)} of {self.judged} intervals ({shown}{more})"
            if self.inconclusive:
                text += ", each one where the client could not keep pace"
        return f"{text} {verdict}\n"

    def _shown(self, measured: float) -> str:
        """The value; a shard's rate, which stands for the whole run's, says so and what it was
        made of, lest `rate >= 90: 100 req/s` be read as what this pod sent: its own times the
        shards, or for a scoped rule divided by its part of its URLs' sends (url_part)."""
        text = self.rule.show(measured)
        if self.rule.metric != RATE or self.shares == 1:
            return text
        if self.part is None:
            return text + f" (whole run, extrapolated: this shard's {self.rule.show(measured / self.shares)} x " \
                f"{self.shares} shards)"
        if self.part == 1:
            return text + " (whole run: no other shard sends to its URLs)"
        return text + (f" (whole run, extrapolated: this shard's {self.rule.show(measured * self.part)} x "
                       f"{number(float(1 / self.part))}, as it makes {self.part} of the run's sends to its URLs)")

    def record(self) -> dict[str, Any]:
        """The verdict as the JSON summary's `thresholds.rules` item."""
        data: dict[str, Any] = {
            "rule": self.rule.text,
            "scope": self.rule.scope,
            "measured": None if self.measured is None else self.rule.in_unit(self.measured),
            "unit": self.rule.unit,
            "ok": self.ok,
            "inconclusive": self.inconclusive,
        }
        if self.rule.url is not None:
            data["url"] = self.rule.url
        if self.rule.phase is not None:
            data["phase"] = self.rule.phase
        if self.rule.scope == "interval":
            data |= {"worstInterval": self.worst, "judgedIntervals": self.judged, "brokenIntervals": list(self.broken)}
        return data


@dataclass
class _IntervalRecord:
    """An interval rule's verdicts so far."""

    judged: int = 0
    broken: list[int] = field(default_factory=list)
    blamed: int = 0  # of the broken intervals, those the service is to blame for (blames_the_service())
    worst: float | None = None
    worst_index: int | None = None

    def judge(self, rule: Rule, index: int, span: Span, saturated: bool) -> bool:
        """Count one interval's value; True if it broke the rule."""
        measured = measure(rule.metric, span, rule.phase)
        if measured is None:
            return False
        self.judged += 1
        if self.worst is None or _worse(rule, measured, self.worst):
            self.worst, self.worst_index = measured, index
        if rule.holds(measured):
            return False
        self.broken.append(index)
        self.blamed += blames_the_service(rule, span, saturated)
        return True


def at_best(metric: str, span: Span, phase: str | None = None) -> float | None:
    """The metric's value on the span had the client's own delay cost nothing: what the server alone
    decided. A bad response (5xx) is its answer however late it is read, and so is a failure other
    than a timeout (the client's clock) or a cancel (the run's stop): a refused connection, a
    reset, a TLS or protocol error; so bad%, errors% and failed% count those, and a status rule
    (`4xx%`, a share of the responses alone) is as measured. A client's delay
    comes and goes and only ever adds to a latency, so every latency is at best the fastest
    response's: one that even it breaks is the server's. The rest is at its best: every due send
    answered (goal%) but those the server failed, no skip, the rate asked for. None when there is
    nothing to measure."""
    f = span.figures
    if phase is not None:  # a phase's latency too is at best its fastest response's
        latency = f.phases.get(phase)
        return float(latency.min_ns) if latency is not None and latency.count else None
    codes = status_codes(metric)
    if codes is not None:  # a status is the server's answer, however late it was read: as measured
        return f.status_percent(codes)
    refused = f.failed - sum(f.errors.get(kind, 0) for kind in PACE_FAILURES)  # the server's own failures
    if metric in ("bad%", "errors%", "failed%"):
        if not f.requests:
            return None
        return ((f.bad if metric != "failed%" else 0) + (refused if metric != "bad%" else 0)) * 100 / f.requests
    if metric in LATENCIES:
        return float(f.latency.min_ns) if f.responses else None
    if metric == "skipped%":
        return 0.0
    if metric == BACKENDS:  # how many backends a client that kept pace would have reached: unknown
        return None
    if metric == "goal%":  # every due send answered, but those the server itself failed
        return min(max(100.0 - refused * 100 / f.due, 0.0), 100.0) if f.due else 100.0
    assert metric == RATE, metric
    if f.due_seconds <= 0:
        return None
    if f.due is None:
        return math.inf  # a bench: its rate is the client's pace itself
    return f.due * span.shares / f.due_seconds


def could_hold(rule: Rule, span: Span) -> bool:
    """Whether the rule would have held on the span had the client kept pace (at_best): if not, the
    server broke it, whatever the client did (5xx answers; latencies even the fastest response
    broke; a rule no client could keep). A broken bad% or status rule (`4xx%`) never could: its
    value is the server's answers alone, and with none at all there was not one status to keep it."""
    if rule.metric == "bad%" or status_codes(rule.metric) is not None:
        return False
    best = at_best(rule.metric, span, rule.phase)
    return best is None or rule.holds(best)


def blames_the_service(rule: Rule, span: Span, saturated: bool) -> bool:
    """Whether an interval that broke an interval rule blames the service: the client kept pace in
    it, or what the client's pace cannot change broke the rule there all the same."""
    return not saturated or not could_hold(rule, span)


def run_rule_verdict(rule: Rule, run: Span, unsaturated: Span | None) -> tuple[bool, bool, float | None]:
    """A run rule's verdict: (ok, inconclusive, its value without the saturated intervals).

    `unsaturated` is the run without the intervals in which the client was saturated, or
    None when there were none (the run is all there is). A broken rule is inconclusive when
    that part keeps it or has nothing to measure, and what the client's pace cannot change
    keeps it on the whole run: its breaking is the client's doing, as far as can be told.
    """
    measured = measure(rule.metric, run, rule.phase)
    if measured is not None and rule.holds(measured):
        return True, False, None
    if unsaturated is None or not could_hold(rule, run):
        return False, False, None
    kept = measure(rule.metric, unsaturated, rule.phase)
    return False, kept is None or rule.holds(kept), kept


def _worse(rule: Rule, a: float, b: float) -> bool:
    """Whether `a` is further than `b` on the wrong side of the rule: higher for <, lower for >."""
    return a > b if rule.op in ("<", "<=") else a < b


class Verdict(Reporter):
    """Judges a run against its thresholds; prints the verdict before the summary."""

    def __init__(self, rules: Sequence[Rule], out: TextIO, *, abort: bool = False,
                 stop_at_broken: bool = False) -> None:
        self._out = out
        self._run_rules = [r for r in rules if r.scope == "run"]
        self._interval_rules = [r for r in rules if r.scope == "interval"]
        self._records = [_IntervalRecord() for _ in self._interval_rules]
        self._abort = abort
        self._stop_at_broken = stop_at_broken
        self._last_good: tuple[int, float | None] | None = None  # the last interval that kept every interval rule
        self._first_broken: tuple[int, float | None] | None = None  # ... and the first that did not
        # What the closed intervals add up to, for telling early that a run rule cannot hold.
        self._so_far: Tally | None = Tally() if abort and self._run_rules else None
        self._plan = Plan(None, None, None)
        self._shares = 1  # the shards the run is split in (RunInfo.shard.count)
        self._stop: Callable[[str], None] = _stop_by_signal
        # The intervals in which the client kept pace, added up, for the run rules' inconclusive verdict.
        self._unsaturated = Tally()
        self._unsaturated_due: float | None = 0.0  # its sends due (None: a bench, nothing is due)
        self._unsaturated_due_ns = 0
        self._saturated = 0  # intervals in which it did not
        self._judged = 0  # intervals heard of
        self._paced = True  # not a bench, whose client runs flat out and is saturated as a rule
        self._last_saturated = False
        self.aborted: str | None = None  # why the run was stopped early, if it was
        self.outcomes: list[Outcome] | None = None  # every rule's verdict, once the run has finished

    @classmethod
    def for_settings(cls, settings: Settings, out: TextIO) -> Verdict | None:
        """The verdict of a run with these settings; None when they state no thresholds."""
        if not settings.thresholds.rules:
            return None
        return cls(settings.thresholds.rules, out, abort=settings.thresholds.abort,
                   stop_at_broken=settings.thresholds.stop_at_broken)

    @property
    def passed(self) -> bool:
        return self.outcomes is not None and all(o.ok for o in self.outcomes)

    @property
    def inconclusive(self) -> bool:
        """Whether no rule is broken, but some are inconclusive: nothing is said of the service."""
        outcomes = self.outcomes or []
        return any(o.inconclusive for o in outcomes) and all(o.ok or o.inconclusive for o in outcomes)

    @property
    def exit_code(self) -> int:
        if self.passed:
            return EXIT_OK
        return EXIT_INCONCLUSIVE if self.inconclusive else EXIT_THRESHOLDS

    def inconclusive_line(self) -> str:
        """What to say on stderr of an inconclusive verdict: which rules, and why that is no failure."""
        rules = ", ".join(f"{o.rule.scope} {o.rule.text}" for o in self.outcomes or [] if o.inconclusive)
        return (f"inconclusive: {rules} broke only where the client could not keep pace (client-saturated in "
                f"{self._saturated} of {self._judged} intervals): this says nothing of the service; give the "
                "runner more CPU or a quieter node")

    def bind_stop(self, stop: Callable[[str], None]) -> None:
        self._stop = stop

    def start(self, info: RunInfo) -> None:
        self._plan = plan_of(info)
        self._shares = info.shard.count
        self._paced = info.model.paced  # a bench runs flat out: saturated is its normal

    def interval(self, info: RunInfo, interval: Interval) -> None:
        span = interval_span(info, interval)
        saturated = interval.client.saturated and self._paced
        broke = [rule for rule, record in zip(self._interval_rules, self._records, strict=True)
                 if record.judge(rule, interval.index, span, saturated)]
        self._judged += 1
        self._saturated += saturated
        self._last_saturated = saturated
        if not saturated and self._run_rules:
            self._unsaturated.merge(interval.tally)
            due = self._unsaturated_due
            self._unsaturated_due = None if due is None or interval.due is None else due + interval.due
            self._unsaturated_due_ns += interval.due_span_ns
        if self._so_far is not None:
            self._so_far.merge(interval.tally)
        if self._first_broken is None:
            rate = _whole_run(span.figures.rate_target, self._shares)
            if broke:
                self._first_broken = (interval.index, rate)
            elif span.whole:  # a partial interval's rate says nothing of what held
                self._last_good = (interval.index, rate)
        if self.aborted is not None or not (self._abort or (self._stop_at_broken and broke)):
            return
        if broke:
            self._abort_run(broke[0], f"broken in interval {interval.index}")
            return
        so_far = self._so_far
        if so_far is None:
            return
        for rule in self._run_rules:
            if rule.url is not None:
                continue  # the closed intervals' tallies are the run's, not the URL's: judged at the end
            if not rule.can_hold(*bounds(rule.metric, so_far, self._plan, rule.phase)):
                self._abort_run(rule, f"can no longer hold after interval {interval.index}")
                return

    def _abort_run(self, rule: Rule, why: str) -> None:
        self.aborted = f"{rule.scope} {rule.text} {why}"
        self._stop(f"threshold {rule.scope} {rule.text}")

    def finish(self, summary: RunSummary) -> None:
        outcomes = self.judge(summary)
        lines = [outcome.line() for outcome in outcomes]
        broken = sum(not o.ok and not o.inconclusive for o in outcomes)
        inconclusive = sum(o.inconclusive for o in outcomes)
        parts = [f"{broken} of {len(outcomes)} broken"] if broken else []
        if inconclusive:
            parts.append(f"{inconclusive} of {len(outcomes)} inconclusive (broken only where the client could not "
                         "keep pace)")
        total = ", ".join(parts) or f"all {len(outcomes)} ok"
        lines.append(f"# thresholds: {total}" + (f"; stopped early: {self.aborted}" if self.aborted else "") + "\n")
        lines += [f"# thresholds judged with {stop}: its share of the rest counts as due and not sent\n"
                  for stop in summary.stopped_before_the_others()]  # a merged run's goal% says so, this says why
        if self._stop_at_broken:
            lines.append(self._capacity_line())
        self._out.write("".join(lines))
        self._out.flush()

    def judge(self, summary: RunSummary) -> list[Outcome]:
        """Every rule's verdict on the finished run (worked out once)."""
        if self.outcomes is None:
            span = run_span(summary)
            unsaturated = self._unsaturated_span(summary) if self._saturated else None
            outcomes = []
            for rule in self._run_rules:
                if rule.url is not None and not sent_to(summary.info, rule.url):
                    outcomes.append(Outcome(rule, True, None, shares=self._shares, elsewhere=True))
                    continue
                if rule.url is not None:  # judged on its URLs' sends as they are: never inconclusive
                    measured = measure(rule.metric, url_span(summary, rule.url))
                    outcomes.append(Outcome(rule, measured is not None and rule.holds(measured), measured,
                                            shares=summary.info.shard.count, part=url_part(summary.info, rule.url)))
                    continue
                ok, inconclusive, kept = run_rule_verdict(rule, span, unsaturated)
                outcomes.append(Outcome(rule, ok, measure(rule.metric, span, rule.phase), shares=self._shares,
                                        inconclusive=inconclusive, kept=kept))
            for rule, record in zip(self._interval_rules, self._records, strict=True):
                outcomes.append(Outcome(rule, not record.broken, record.worst, record.worst_index, record.judged,
                                        tuple(record.broken), self._shares,
                                        inconclusive=bool(record.broken) and not record.blamed))
            self.outcomes = outcomes
        return self.outcomes

    @property
    def last_good_rate(self) -> float | None:
        """The capacity search's answer: the target rate (req/s, the whole run's) of the last whole
        interval before the first broken one that kept every interval rule; None if none did."""
        return None if self._last_good is None else self._last_good[1]

    def _capacity_line(self) -> str:
        """`# capacity: ...`: what the capacity search found, beside the thresholds' lines."""
        def rate(value: float | None) -> str:
            return "no rate" if value is None else f"{round(value, 3):g} req/s"
        held = "no whole interval kept every interval rule" if self._last_good is None else \
            f"the last rate that held: {rate(self._last_good[1])} (interval {self._last_good[0]})"
        broke = "no interval broke an interval rule" if self._first_broken is None else \
            f"interval {self._first_broken[0]} at {rate(self._first_broken[1])} broke one"
        return f"# capacity: {held}; {broke}\n"

    def _unsaturated_span(self, summary: RunSummary) -> Span:
        """The run without its client-saturated intervals: what the client kept pace in. What came
        back after the last interval (the drain) goes with it, as it does with its line."""
        tally = self._unsaturated
        if summary.drain is not None and not self._last_saturated:
            tally = Tally()
            tally.merge(self._unsaturated)
            tally.merge(summary.drain)
        due = self._unsaturated_due if summary.due is not None else None
        return Span(Figures.of(tally, due, self._unsaturated_due_ns), shares=summary.info.shard.count)

    def section(self, summary: RunSummary) -> dict[str, Any]:
        """The JSON summary's `thresholds` section (and lastGoodRate, for a capacity search)."""
        outcomes = self.judge(summary)
        data: dict[str, Any] = {"thresholds": {
            "passed": all(o.ok for o in outcomes),
            "inconclusive": self.inconclusive,
            "stoppedEarly": self.aborted,
            "rules": [o.record() for o in outcomes],
        }}
        if self._stop_at_broken:
            rate = self.last_good_rate
            shown = None if rate is None else round(rate, 6)
            data[LAST_GOOD_RATE] = int(shown) if shown is not None and shown.is_integer() else shown  # 15, not 15.0
        return data


def _whole_run(rate: float | None, shares: int) -> float | None:
    """A shard's rate as the whole run's: each of `shares` shards sends its equal share."""
    return None if rate is None else rate * shares


def _stop_by_signal(reason: str) -> None:
    """Stop a run whose driver gave no stop of its own, as Kubernetes would: SIGTERM to this process.

    A run split over local workers is driven by a parent that passes SIGTERM on to each.
    """
    os.kill(os.getpid(), signal.SIGTERM)


def interval_span(info: RunInfo, interval: Interval) -> Span:
    """An interval as the rules see it: goal% and rate only when it was a whole interval long."""
    return Span(interval.figures, whole=interval.due_span_ns >= info.settings.pace.interval_ns,
                shares=info.shard.count)


def run_span(summary: RunSummary) -> Span:
    return Span(summary.figures, shares=summary.info.shard.count)


def url_span(summary: RunSummary, selector: str) -> Span:
    """The sends to the URLs a scoped rule names, as the rules see them (runner.config.targets.matching)."""
    urls = summary.info.urls
    slots = url_slots(urls)
    return Span(summary.figures_of_urls(slots.slot_of[i] for i in matching(selector, urls)),
                shares=float(1 / url_part(summary.info, selector)))


def url_part(info: RunInfo, selector: str) -> Fraction:
    """This shard's part of the run's sends to the URLs a scoped rule names, which it sends to: its
    rate to them stands for the whole run's divided by this, not times the shards (a shard whose
    stride skips URLs sends more of the others' sends; runner.load.shards.Shard.part_of)."""
    return info.part_of(matching(selector, info.urls))


def sent_to(info: RunInfo, selector: str) -> bool:
    """Whether this process sends to any URL a scoped rule names: a shard whose stride skips them
    (runner.load.shards) has nothing to judge it on, and no reason to fail a pod for it."""
    return not info.reached().isdisjoint(matching(selector, info.urls))


def plan_of(info: RunInfo) -> Plan:
    """What this process's whole run will be, if nothing stops it early."""
    s = info.settings
    total = info.shard.share(s.pace.total_requests) if s.pace.total_requests else None
    schedule = schedule_of(s.pace, info.shard, 0)
    by_time = schedule.planned_sends() if info.model.paced else None
    if by_time is None:
        return Plan(total, None, None, counted=total is not None)
    if total is not None and total < by_time:
        return Plan(total, None, None, counted=True)  # it ends with its last send made, skipped ones aside
    assert schedule.end_ns is not None
    return Plan(by_time, goal(schedule.sends_due(0, schedule.end_ns)), schedule.end_ns / 1e9, shares=info.shard.count)
