"""The verdict: a run judged against its thresholds, every interval as it closes, the run at its end.

It is a reporter: it hears of each closed interval and of the finished run, like the others.
At the end it prints one comment line per threshold (`# threshold run p99 < 50ms: 12.3ms ok`),
before the JSON summary, adds a `thresholds` section to that summary, and gives the exit
code: 3 when any threshold is broken, so a Job running it shows Failed and the alerts on
failed Jobs fire. The lines start with `# ` so that slow_cooker-style log readers skip them.

A rule broken only where the client's own delay may have changed its figure says nothing of
the service: its verdict is inconclusive (exit code 9), so that a 3 always means the service.
What the client's delay may have changed in each interval is said by its Pace
(runner.stats.client.pace_of: which latencies it may be in and by how much, which sends it may
have cost); the rule, pure (at_best(), could_hold(), blames_the_service(), run_rule_verdict()),
is in docs/thresholds.md. A rule is inconclusive when the figure, had the client's delay cost
nothing (at_best), would have kept it: an interval rule, in every interval that broke it; a run
rule, on the run, and on the intervals where the client's delay changed none of its figure (if
any). Every other figure is the server's alone: a bad% rule, a latency the kernel timed from the
write of the request, a skip behind a request slower than the gap between a client's sends, a
refused connection or a timeout of a client that kept pace. A bench runs flat out: its verdict
is judged as measured, never inconclusive.

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
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import field
from fractions import Fraction
from typing import Any, TextIO

from runner.config.rules import BACKENDS, LATENCIES, RATE, Rule, number, status_codes
from runner.config.settings import Settings
from runner.config.targets import matching, url_slots
from runner.core.errors import EXIT_INCONCLUSIVE, EXIT_OK, EXIT_THRESHOLDS
from runner.core.lazymethods import dataclass
from runner.load.model import schedule_of
from runner.report.base import Reporter
from runner.report.clientnotes import short
from runner.report.keys import LAST_GOOD_RATE
from runner.stats.client import Pace, run_pace
from runner.stats.figures import Figures, goal, goal_percent
from runner.stats.recorder import Interval, Tally
from runner.stats.runinfo import RunInfo, RunSummary
from runner.stats.thresholds import Plan, Span, bounds, measure

_LISTED_INTERVALS = 10  # broken intervals named on a line; the summary lists them all


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
    inconclusive: bool = False  # broken, but only where the client's delay may have changed its figure
    kept: float | None = None  # an inconclusive run rule: its value where the client kept pace
    why: str = ""  # an inconclusive rule: what the client's delay may have changed in its figure (delay_words)

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
                value += f" ({kept} where the client kept pace; the client's own delay may have changed {self.why})"
            return f"{rule}: {value} {verdict}\n"
        if self.measured is None:
            return f"{rule}: no interval to measure {verdict}\n"
        text = f"{rule}: worst {self._shown(self.measured)} (interval {self.worst})"
        if self.broken:
            shown = ", ".join(map(str, self.broken[:_LISTED_INTERVALS]))
            more = ", ..." if len(self.broken) > _LISTED_INTERVALS else ""
            text += f", broken in {len(self.broken)} of {self.judged} intervals ({shown}{more})"
            if self.inconclusive:
                text += f", each one where the client's own delay may have changed {self.why}"
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
    excused: Pace = Pace()  # what the client's delay may have changed in the others, added up
    worst: float | None = None
    worst_index: int | None = None

    def judge(self, rule: Rule, index: int, span: Span, paced: bool = True) -> bool:
        """Count one interval's value; True if it broke the rule. `paced`: not a bench, whose
        client runs flat out, its figures judged as measured."""
        measured = measure(rule.metric, span, rule.phase)
        if measured is None:
            return False
        self.judged += 1
        if self.worst is None or _worse(rule, measured, self.worst):
            self.worst, self.worst_index = measured, index
        if rule.holds(measured):
            return False
        self.broken.append(index)
        if not paced or blames_the_service(rule, span):
            self.blamed += 1
        else:
            self.excused = self.excused.merge(span.pace)
        return True


def at_best(metric: str, span: Span, phase: str | None = None) -> float | None:
    """The metric's value on the span had the client's own delay cost nothing (span.pace): what the
    server alone decided, as far as can be told. A latency without the delay its Pace may have put
    in it (Pace.best; a phase's, less the most of it); goal%, rate and skipped% with the sends its
    delay may have cost as if made and answered, and backends with one more for each that would have
    opened a connection (as often as the span's sends did); errors% and failed% without the
    timeouts it may have caused. Everything else is the server's answer however late it is read
    (a bad%, a status rule such as `4xx%`, a 5xx, a refused connection): as measured. None when
    there is nothing to measure."""
    f, pace = span.figures, span.pace
    measured = measure(metric, span, phase)
    if measured is None:
        return None
    if phase is not None:
        return max(measured - pace.lag_ns, 0.0)
    if metric in LATENCIES:
        return measured if pace.best is None else pace.best.ns(metric)
    if metric in ("errors%", "failed%"):
        part = (f.bad if metric == "errors%" else 0) + f.failed - pace.timeouts
        return part * 100 / f.requests
    if metric == "skipped%":
        return (f.skipped - pace.skipped) * 100 / (f.requests + f.skipped)
    if metric == "goal%":
        return goal_percent(f.responses + pace.sends, f.due)
    if metric == BACKENDS:  # a send it may have cost met a new backend only on a new connection
        opening = f.connections_opened / f.requests if f.requests else 1.0  # as often as the span's sends opened one
        return measured + math.ceil(pace.sends * opening)
    if metric == RATE and f.due is not None:  # the sends it may have cost as made, never beyond those due
        made = min(f.requests + pace.skipped + pace.crossed, f.due)
        return max(measured, made * span.shares / f.due_seconds)
    return measured


# The kinds of figure the client's delay may change, and what in a span's Pace says it may have.
_CHANGES: dict[str, Callable[[Pace], int]] = {
    "latency": lambda pace: pace.delayed,  # responses whose latency its delay may be in
    "sends": lambda pace: pace.cost,  # sends it may have cost the goal: goal%, rate, the backends they would have met
    "skips": lambda pace: pace.skipped,
    "timeouts": lambda pace: pace.timeouts,
}


def _family(metric: str, phase: str | None = None) -> str:
    """Which kind of figure (_CHANGES) a metric is; "" for one the client's delay never changes
    (bad%: the server's answers)."""
    if phase is not None or metric in LATENCIES:
        return "latency"
    return {"goal%": "sends", RATE: "sends", BACKENDS: "sends", "skipped%": "skips", "errors%": "timeouts",
            "failed%": "timeouts"}.get(metric, "")


def changed(metric: str, pace: Pace, phase: str | None = None) -> bool:
    """Whether the client's delay may have changed the metric's figure in a span, by its Pace."""
    test = _CHANGES.get(_family(metric, phase))
    return test is not None and test(pace) > 0


def could_hold(rule: Rule, span: Span) -> bool:
    """Whether the rule would have held on the span had the client's own delay cost nothing
    (at_best): if not, the server broke it, whatever the client did. A broken bad% or status rule
    (`4xx%`) never could: its value is the server's answers alone, and with none at all there was
    not one status to keep it."""
    if rule.metric == "bad%" or status_codes(rule.metric) is not None:
        return False
    best = at_best(rule.metric, span, rule.phase)
    return best is None or rule.holds(best)


def blames_the_service(rule: Rule, span: Span) -> bool:
    """Whether an interval that broke an interval rule blames the service: the client's delay
    cannot have changed its figure there, or the rule breaks without what it may have changed."""
    return not changed(rule.metric, span.pace, rule.phase) or not could_hold(rule, span)


def run_rule_verdict(rule: Rule, run: Span, kept_pace: Span | None) -> tuple[bool, bool, float | None]:
    """A run rule's verdict: (ok, inconclusive, its value where the client kept pace).

    `kept_pace` is the run without the intervals in which the client's delay may have changed
    the rule's figure (changed()), or None when there were none. A broken rule is inconclusive
    when, had the client's delay cost nothing, it would have held on the run (could_hold, on the
    run's Pace), and the intervals where it kept pace keep it too, or have nothing to measure.
    """
    measured = measure(rule.metric, run, rule.phase)
    if measured is not None and rule.holds(measured):
        return True, False, None
    if kept_pace is None or not could_hold(rule, run):
        return False, False, None
    kept = measure(rule.metric, kept_pace, rule.phase)
    return False, kept is None or rule.holds(kept), kept


def delay_words(metric: str, pace: Pace, phase: str | None = None) -> str:
    """Which figure the client's delay may have changed, how, and by how much, in words: `p99: up to
    2.4s of it may be in the latency of 120 responses`, `goal%: it may have cost 18 sends (4 skipped,
    14 due late in an interval), running up to 131.1ms behind`, `goal%: it may have cost 44 sends (44
    skipped at the run's end), running up to 1s behind`: never more than the span's goal missed
    (Pace.cost), however many sends it may have pushed past an interval's end."""
    figure = metric if phase is None else f"{phase}.{metric}"
    behind = f", running up to {short(pace.behind_ns)} behind" if pace.behind_ns else ""
    if phase is not None or metric in LATENCIES:
        return (f"{figure}: up to {short(pace.lag_ns)} of it may be in the latency of {pace.delayed} "
                f"{_plural(pace.delayed, 'response')}")
    if metric in ("goal%", RATE, BACKENDS):  # never more than the goal missed (Pace.cost)
        crossed = max(pace.cost - pace.skipped - pace.timeouts, 0)
        parts = [f"{n} {what}" for n, what in ((pace.skipped - pace.at_end, "skipped"),
                                                (pace.at_end, "skipped at the run's end"),
                                                (pace.timeouts, "timed out"), (crossed, "due late in an interval"))
                 if n]
        cost = pace.skipped + pace.timeouts + crossed
        return f"{figure}: it may have cost {cost} {_plural(cost, 'send')} ({', '.join(parts)}){behind}"
    if metric == "skipped%":
        return f"{figure}: it may have caused {pace.skipped} {_plural(pace.skipped, 'skip')}{behind}"
    return (f"{figure}: {pace.timeouts} {_plural(pace.timeouts, 'timeout')} may be its own, its loop having "
            f"lagged {short(pace.behind_ns)}, half the timeout or more")


def _plural(n: int, word: str) -> str:
    return word if n == 1 else word + "s"


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
        # For the run rules' inconclusive verdict: per kind of figure (_family), the intervals in which
        # the client's delay changed none of it, added up; and what it may have changed in all of them.
        families = {_family(rule.metric, rule.phase) for rule in self._run_rules}
        self._kept_pace = {family: _Part() for family in families if family}
        self._pace = Pace()
        self._changed: Counter[frozenset[str]] = Counter()  # intervals by the kinds of figure it changed in them
        self._judged = 0  # intervals heard of
        self._paced = True  # not a bench, whose client runs flat out: judged as measured
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
        inconclusive = [o for o in self.outcomes or [] if o.inconclusive]
        rules = ", ".join(f"{o.rule.scope} {o.rule.text}" for o in inconclusive)
        families = {_family(o.rule.metric, o.rule.phase) for o in inconclusive}
        changed = sum(n for kinds, n in self._changed.items() if kinds & families)
        return (f"inconclusive: {rules} broke only where the client's own delay may have changed "
                f"{'its figure' if len(inconclusive) == 1 else 'their figures'} (in {changed} of {self._judged} "
                "intervals): this says nothing of the service; give the runner more CPU or a quieter node")

    def bind_stop(self, stop: Callable[[str], None]) -> None:
        self._stop = stop

    def start(self, info: RunInfo) -> None:
        self._plan = plan_of(info)
        self._shares = info.shard.count
        self._paced = info.model.paced  # a bench runs flat out: judged as measured

    def interval(self, info: RunInfo, interval: Interval) -> None:
        span = interval_span(info, interval)
        broke = [rule for rule, record in zip(self._interval_rules, self._records, strict=True)
                 if record.judge(rule, interval.index, span, self._paced)]
        self._judged += 1
        pace = span.pace if self._paced else Pace()
        self._pace = self._pace.merge(pace)
        self._changed[frozenset(family for family, test in _CHANGES.items() if test(pace))] += 1
        for family, part in self._kept_pace.items():
            part.add(interval, _CHANGES[family](pace) > 0)
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
            parts.append(f"{inconclusive} of {len(outcomes)} inconclusive (broken only where the client's own delay "
                         "may have changed the figure)")
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
            pace = run_pace(summary.tally, self._pace)
            span = Span(summary.figures, shares=summary.info.shard.count, pace=pace)
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
                part = self._kept_pace.get(_family(rule.metric, rule.phase))
                kept_pace = part.span(summary) if part is not None and part.changed else None
                ok, inconclusive, kept = run_rule_verdict(rule, span, kept_pace)
                outcomes.append(Outcome(rule, ok, measure(rule.metric, span, rule.phase), shares=self._shares,
                                        inconclusive=inconclusive, kept=kept,
                                        why=delay_words(rule.metric, pace, rule.phase) if inconclusive else ""))
            for rule, record in zip(self._interval_rules, self._records, strict=True):
                inconclusive = bool(record.broken) and not record.blamed
                outcomes.append(Outcome(rule, not record.broken, record.worst, record.worst_index, record.judged,
                                        tuple(record.broken), self._shares, inconclusive=inconclusive,
                                        why=delay_words(rule.metric, record.excused, rule.phase) if inconclusive
                                        else ""))
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


@dataclass
class _Part:
    """The intervals of a run in which the client's delay changed none of one kind of figure, added
    up: what a run rule on that kind is judged on where the client kept pace (run_rule_verdict)."""

    tally: Tally = field(default_factory=Tally)
    due: float | None = 0.0  # their sends due (None: a bench, nothing is due)
    due_ns: int = 0
    changed: int = 0  # the intervals in which it did change some
    last_changed: bool = False

    def add(self, interval: Interval, changed: bool) -> None:
        self.changed += changed
        self.last_changed = changed
        if not changed:
            self.tally.merge(interval.tally)
            self.due = None if self.due is None or interval.due is None else self.due + interval.due
            self.due_ns += interval.due_span_ns

    def span(self, summary: RunSummary) -> Span:
        """These intervals as a span. What came back after the last interval (the drain) goes with
        it, as it does with its line."""
        tally = self.tally
        if summary.drain is not None and not self.last_changed:
            tally = Tally()
            tally.merge(self.tally)
            tally.merge(summary.drain)
        due = self.due if summary.due is not None else None
        return Span(Figures.of(tally, due, self.due_ns), shares=summary.info.shard.count)


def _stop_by_signal(reason: str) -> None:
    """Stop a run whose driver gave no stop of its own, as Kubernetes would: SIGTERM to this process.

    A run split over local workers is driven by a parent that passes SIGTERM on to each.
    """
    os.kill(os.getpid(), signal.SIGTERM)


def interval_span(info: RunInfo, interval: Interval) -> Span:
    """An interval as the rules see it: goal% and rate only when it was a whole interval long; with
    what the client's delay may have changed in it."""
    return Span(interval.figures, whole=interval.due_span_ns >= info.settings.pace.interval_ns,
                shares=info.shard.count, pace=interval.pace)


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
