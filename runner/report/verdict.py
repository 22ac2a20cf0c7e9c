"""The verdict: a run judged against its thresholds, every interval as it closes, the run at its end.

It is a reporter: it hears of each closed interval and of the finished run, like the others.
At the end it prints one comment line per threshold (`# threshold run p99 < 50ms: 12.3ms ok`),
before the JSON summary, adds a `thresholds` section to that summary, and gives the exit
code: 3 when any threshold is broken, so a Job running it shows Failed and the alerts on
failed Jobs fire. The lines start with `# ` so that slow_cooker-style log readers skip them.

With abortOnThreshold it also stops the run as soon as the verdict is certain: an interval
rule broken, or a run rule out of reach whatever the rest of the run does. With
stopAtBrokenRule (the capacity search: stages that ramp up until the service gives) it stops
at the first interval that breaks an interval rule, and reports the target rate of the last
interval before it that kept them all (lastGoodRate). It stops it the
way a first SIGTERM does (the run's own stop, given to it with bind_stop), so the last
interval line, the thresholds and the summary are printed exactly once, as after a signal.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, TextIO

from runner.config.rules import RATE, Rule
from runner.config.settings import Settings
from runner.config.targets import matching, url_slots
from runner.core.errors import EXIT_OK, EXIT_THRESHOLDS
from runner.load.model import schedule_of
from runner.report.base import Reporter
from runner.report.keys import LAST_GOOD_RATE
from runner.stats.figures import goal
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
    elsewhere: bool = False  # a scoped rule whose URLs this shard never sends to: other shards judge it

    def line(self) -> str:
        """`# threshold run p99 < 50ms: 12.3ms ok`, one line, for the log."""
        verdict = "ok" if self.ok else "BROKEN"
        rule = f"# threshold {self.rule.scope} {self.rule.text}"
        if self.rule.scope == "run":
            value = "nothing to measure" if self.measured is None else self._shown(self.measured)
            if self.elsewhere:
                value = "not sent to by this shard (other shards send to it)"
            return f"{rule}: {value} {verdict}\n"
        if self.measured is None:
            return f"{rule}: no interval to measure {verdict}\n"
        text = f"{rule}: worst {self._shown(self.measured)} (interval {self.worst})"
        if self.broken:
            shown = ", ".join(map(str, self.broken[:_LISTED_INTERVALS]))
            more = ", ..." if len(self.broken) > _LISTED_INTERVALS else ""
            text += f", broken in {len(self.broken)} of {self.judged} intervals ({shown}{more})"
        return f"{text} {verdict}\n"

    def _shown(self, measured: float) -> str:
        """The value; a shard's rate, which stands for the whole run's, says so and what it was
        made of, lest `rate >= 90: 100 req/s` be read as what this pod sent."""
        text = self.rule.show(measured)
        if self.rule.metric == RATE and self.shares > 1:
            own = self.rule.show(measured / self.shares)
            text += f" (whole run, extrapolated: this shard's {own} x {self.shares} shards)"
        return text

    def record(self) -> dict[str, Any]:
        """The verdict as the JSON summary's `thresholds.rules` item."""
        data: dict[str, Any] = {
            "rule": self.rule.text,
            "scope": self.rule.scope,
            "measured": None if self.measured is None else self.rule.in_unit(self.measured),
            "unit": self.rule.unit,
            "ok": self.ok,
        }
        if self.rule.url is not None:
            data["url"] = self.rule.url
        if self.rule.scope == "interval":
            data |= {"worstInterval": self.worst, "judgedIntervals": self.judged, "brokenIntervals": list(self.broken)}
        return data


@dataclass
class _IntervalRecord:
    """An interval rule's verdicts so far."""

    judged: int = 0
    broken: list[int] = field(default_factory=list)
    worst: float | None = None
    worst_index: int | None = None

    def judge(self, rule: Rule, index: int, measured: float | None) -> bool:
        """Count one interval's value; True if it broke the rule."""
        if measured is None:
            return False
        self.judged += 1
        if self.worst is None or _worse(rule, measured, self.worst):
            self.worst, self.worst_index = measured, index
        if rule.holds(measured):
            return False
        self.broken.append(index)
        return True


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
    def exit_code(self) -> int:
        return EXIT_OK if self.passed else EXIT_THRESHOLDS

    def bind_stop(self, stop: Callable[[str], None]) -> None:
        self._stop = stop

    def start(self, info: RunInfo) -> None:
        self._plan = plan_of(info)
        self._shares = info.shard.count

    def interval(self, info: RunInfo, interval: Interval) -> None:
        span = interval_span(info, interval)
        broke = [rule for rule, record in zip(self._interval_rules, self._records, strict=True)
                 if record.judge(rule, interval.index, measure(rule.metric, span))]
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
            if not rule.can_hold(*bounds(rule.metric, so_far, self._plan)):
                self._abort_run(rule, f"can no longer hold after interval {interval.index}")
                return

    def _abort_run(self, rule: Rule, why: str) -> None:
        self.aborted = f"{rule.scope} {rule.text} {why}"
        self._stop(f"threshold {rule.scope} {rule.text}")

    def finish(self, summary: RunSummary) -> None:
        outcomes = self.judge(summary)
        lines = [outcome.line() for outcome in outcomes]
        broken = sum(not o.ok for o in outcomes)
        total = f"{broken} of {len(outcomes)} broken" if broken else f"all {len(outcomes)} ok"
        lines.append(f"# thresholds: {total}" + (f"; stopped early: {self.aborted}" if self.aborted else "") + "\n")
        if self._stop_at_broken:
            lines.append(self._capacity_line())
        self._out.write("".join(lines))
        self._out.flush()

    def judge(self, summary: RunSummary) -> list[Outcome]:
        """Every rule's verdict on the finished run (worked out once)."""
        if self.outcomes is None:
            span = run_span(summary)
            outcomes = []
            for rule in self._run_rules:
                if rule.url is not None and not sent_to(summary.info, rule.url):
                    outcomes.append(Outcome(rule, True, None, shares=self._shares, elsewhere=True))
                    continue
                measured = measure(rule.metric, span if rule.url is None else url_span(summary, rule.url))
                outcomes.append(Outcome(rule, measured is not None and rule.holds(measured), measured,
                                        shares=self._shares))
            for rule, record in zip(self._interval_rules, self._records, strict=True):
                outcomes.append(Outcome(rule, not record.broken, record.worst, record.worst_index, record.judged,
                                        tuple(record.broken), self._shares))
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
                shares=summary.info.shard.count)


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
