"""Thresholds: what a healthy run is, as rules like "p99 < 50ms". Pure: parsing and arithmetic.

The language is the one people already write in k6 thresholds and Prometheus alerts: a
metric, a comparison and a number with its unit, one rule per string.

    p99 < 50ms      p999 <= 0.2s      max < 1s          mean < 800us      p(95) < 20ms
    goal% >= 99     errors% <= 0.1    failed% <= 0.1%   bad% <= 0         skipped% <= 1
    rate >= 95/s

A rule is judged on the whole run (`thresholds`) or on every interval (`intervalThresholds`).
This module parses rules, measures a metric on a span of a run (an interval, or the run),
and says whether a rule can still hold when only part of the run is known: what lets a run
stop early instead of spending another hour on a verdict that is already certain.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from runner.core.errors import UsageError
from runner.stats.recorder import Tally

# Latencies: percentile (None for max and mean) of the responses' latencies.
LATENCIES: dict[str, float | None] = {
    "p50": 50, "p75": 75, "p90": 90, "p95": 95, "p99": 99, "p999": 99.9, "max": None, "mean": None,
}
# Percentages of a span's sends, 0 to 100.
PERCENTAGES = ("goal%", "errors%", "failed%", "bad%", "skipped%")
RATE = "rate"
METRICS = (*LATENCIES, *PERCENTAGES, RATE)

TIME_UNITS = {"ns": 1, "us": 1_000, "µs": 1_000, "ms": 1_000_000, "s": 1_000_000_000}
RATE_UNITS = ("", "/s", "req/s", "rps")
OPERATORS = ("<", "<=", ">", ">=")
SCOPES = ("run", "interval")

_RULE = re.compile(r"^(?P<metric>[^<>=!\s]+)\s*(?P<op>[<>=!]=?)\s*(?P<value>\d+(?:\.\d*)?|\.\d+)\s*(?P<unit>\S*)$")
_PERCENTILE = re.compile(r"^p\(?(\d+(?:\.\d+)?)\)?$")  # p99, p(99), p99.9, p(99.9)
_EXAMPLES = 'like "p99 < 50ms", "goal% >= 99" or "errors% <= 0.1"'
_LIST = ("p50 p75 p90 p95 p99 p999 max mean (latencies), goal% errors% failed% bad% skipped% (percentages) "
         "or rate (req/s)")


class ThresholdError(ValueError):
    """A rule that cannot be read; str() says why and what would be allowed, in one line."""


@dataclass(frozen=True)
class Rule:
    """One threshold: `metric op limit`, the limit in the metric's base unit (ns, %, req/s)."""

    text: str  # as written, spaces tidied: what the lines, the summary and the metrics show
    metric: str  # one of METRICS
    op: str  # one of OPERATORS
    limit: float
    unit: str  # the unit the rule was written in, for showing measured values: ms, %, req/s, ...
    scope: str = "run"  # run: judged on the whole run; interval: on every interval

    def holds(self, measured: float) -> bool:
        limit = self.limit
        if self.op == "<":
            return measured < limit
        if self.op == "<=":
            return measured <= limit
        if self.op == ">":
            return measured > limit
        return measured >= limit

    def can_hold(self, low: float, high: float) -> bool:
        """Whether some final value between `low` and `high` would keep the rule."""
        return self.holds(low) if self.op in ("<", "<=") else self.holds(high)

    def show(self, measured: float) -> str:
        """A measured value in the rule's own unit: `12.346ms`, `99.5%`, `98.2 req/s`."""
        if self.metric in LATENCIES:
            return number(measured / TIME_UNITS[self.unit]) + self.unit
        if self.metric == RATE:
            return number(measured) + " req/s"
        return number(measured) + "%"

    def in_unit(self, measured: float) -> float:
        """A measured value as a number in the rule's unit, for the JSON summary."""
        if self.metric in LATENCIES:
            return round(measured / TIME_UNITS[self.unit], 6)
        return round(measured, 6)


def number(x: float) -> str:
    """A figure to three decimals without trailing zeros; small ones to three significant digits."""
    text = f"{x:.3f}".rstrip("0").rstrip(".")
    if text in ("0", "-0") and x:
        decimals = 2 - math.floor(math.log10(abs(x)))
        text = f"{x:.{decimals}f}".rstrip("0").rstrip(".")
    return text


def parse_rule(text: str, scope: str = "run") -> Rule:
    """The rule a string states; ThresholdError says what is wrong with one that states none."""
    tidy = " ".join(str(text).split())
    found = _RULE.match(tidy)
    if not found:
        raise ThresholdError(f"must be a metric, a comparison and a number, {_EXAMPLES}")
    metric = _metric(found["metric"])
    op = found["op"]
    if op not in OPERATORS:
        raise ThresholdError(f"the comparison must be <, <=, > or >=, {_EXAMPLES}")
    value, unit = float(found["value"]), found["unit"]
    if metric in LATENCIES:
        return Rule(tidy, metric, op, value * _time_unit(metric, unit), "us" if unit == "µs" else unit, scope)
    if metric == RATE:
        if unit not in RATE_UNITS:
            raise ThresholdError(f'rate is in requests per second: write a number like "rate >= 95" or '
                                 f'"rate >= 95/s", without "{unit}"')
        return Rule(tidy, metric, op, value, "req/s", scope)
    if unit not in ("", "%"):
        raise ThresholdError(f'{metric} is a percentage: write a number like "{metric} <= 0.1" or '
                             f'"{metric} <= 0.1%", without "{unit}"')
    if value > 100:
        raise ThresholdError(f"{metric} is a percentage: the number must be from 0 to 100")
    return Rule(tidy, metric, op, value, "%", scope)


def _metric(word: str) -> str:
    """The metric a rule names: p(99) and p99.9 are p99 and p999; errors is errors%."""
    name = word.lower()
    percentile = _PERCENTILE.match(name)
    if percentile:
        name = "p" + percentile[1].replace(".", "")
    if name + "%" in PERCENTAGES:
        name += "%"
    if name not in METRICS:
        raise ThresholdError(f'unknown metric "{word}": the metrics are {_LIST}')
    return name


def _time_unit(metric: str, unit: str) -> int:
    if not unit:
        raise ThresholdError(f'{metric} is a latency: give its unit, ns, us, ms or s, like "{metric} < 50ms"')
    if unit not in TIME_UNITS:
        raise ThresholdError(f'"{unit}" is not a unit of time: {metric} takes ns, us, ms or s')
    return TIME_UNITS[unit]


def rules_for(run: list[str], interval: list[str], mode: str) -> tuple[Rule, ...]:
    """The rules of validated thresholds and intervalThresholds settings, run rules first.

    A bench has no rate to reach and so no goal: a goal% rule there could only ever fail.
    """
    rules = (*(parse_rule(text, "run") for text in run), *(parse_rule(text, "interval") for text in interval))
    for rule in rules:
        if rule.metric == "goal%" and mode == "bench":
            setting = "thresholds" if rule.scope == "run" else "intervalThresholds"
            raise UsageError(f'{setting}: "{rule.text}" is not allowed in bench mode, which has no rate to reach '
                             "and so no goal")
    return rules


# --- measuring ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Span:
    """What a rule is measured on: one interval, or the whole run."""

    tally: Tally
    seconds: float  # how long sends were due in it
    target: float | None  # sends due in it (the goal's `t`); None for a bench, which has no goal
    whole: bool = True  # False for a partial interval, too short to judge goal% and rate on
    shares: int = 1  # one shard of a run split in this many: its rate, times this, is the run's


def measure(metric: str, span: Span) -> float | None:
    """The metric's value over the span, in its base unit (ns, %, req/s); None with nothing to measure.

    Latencies are those of the responses, good and bad, as in the interval lines and the
    summary. errors% is (bad + failed) / requests; skipped% counts skipped sends against all
    the sends that were due (made or skipped); goal% is (good + bad) / t, at most 100.
    """
    t = span.tally
    if metric in LATENCIES:
        return _latency(metric, t) if t.responses else None
    if metric == "goal%":
        if span.target is None or span.target <= 0 or not span.whole:
            return None
        return min(t.responses / span.target * 100, 100.0)
    if metric == "skipped%":
        due = t.requests + t.skipped
        return t.skipped / due * 100 if due else None
    if metric == RATE:  # the whole run's rate: a shard sends its share of it
        return t.requests * span.shares / span.seconds if span.seconds > 0 and span.whole else None
    return _share(metric, t) * 100 / t.requests if t.requests else None


def _latency(metric: str, tally: Tally) -> float:
    percentile = LATENCIES[metric]
    if metric == "max":
        return float(tally.max_ns)
    if metric == "mean":
        return tally.mean_ns
    assert percentile is not None
    return float(tally.latency.percentiles([percentile])[percentile])


def _share(metric: str, tally: Tally) -> int:
    """The requests an errors%, failed% or bad% counts."""
    return {"errors%": tally.bad + tally.failed, "failed%": tally.failed, "bad%": tally.bad}[metric]


# --- telling early -------------------------------------------------------------------------


@dataclass(frozen=True)
class Plan:
    """The whole run, as far as it is known before it ends, for bounding what it will measure."""

    sends: int | None  # sends due in the whole run; None when only a signal ends it
    target: float | None  # the run's goal t at its end; None for a bench or an end not known
    seconds: float | None  # how long sends will have been due; None when not known
    counted: bool = False  # `sends` counts sends made (totalRequests): skipped ones come on top
    shares: int = 1  # as Span.shares


UNBOUNDED = (-math.inf, math.inf)


def bounds(metric: str, so_far: Tally, plan: Plan) -> tuple[float, float]:
    """The lowest and highest value the metric can still have at the end of the run.

    `so_far` is what the closed intervals hold. Every send not yet in it (in flight, or not
    yet due) may still turn out either way: all answered at once, or all failed. A rule
    that neither end satisfies is certainly broken. Without a planned end only `max` is
    bounded (it never falls).
    """
    if plan.sends is None:
        return (float(so_far.max_ns), math.inf) if metric == "max" and so_far.responses else UNBOUNDED
    if plan.counted:
        return _counted_bounds(metric, so_far, plan)
    rest = max(plan.sends - so_far.requests - so_far.skipped, 0)
    return _bounds_with(metric, so_far, plan, rest)


def _counted_bounds(metric: str, so_far: Tally, plan: Plan) -> tuple[float, float]:
    """Bounds in a run that ends after `plan.sends` requests made: skipped sends do not bring
    its end nearer but push it later, adding to its goal (t = sends made + skipped) and skipped%."""
    assert plan.sends is not None
    sends = plan.sends
    rest = max(sends - so_far.requests, 0)
    if metric == "goal%":
        due = sends + so_far.skipped
        return 0.0, min((so_far.responses + rest) / due * 100, 100.0) if due else 100.0
    if metric == "skipped%":
        due = sends + so_far.skipped
        return (so_far.skipped / due * 100 if due else 0.0), 100.0
    if metric == RATE:
        return UNBOUNDED
    return _bounds_with(metric, so_far, plan, rest)  # latencies and errors%: as any run, with `rest` to come


def _bounds_with(metric: str, so_far: Tally, plan: Plan, rest: int) -> tuple[float, float]:
    """Bounds when `rest` more sends (made or skipped) are to come."""
    assert plan.sends is not None
    if metric in LATENCIES:
        return _latency_bounds(metric, so_far, rest)
    if metric == "goal%":
        if not plan.target or plan.target <= 0:
            return UNBOUNDED
        low, high = so_far.responses, so_far.responses + rest
        return min(low / plan.target * 100, 100.0), min(high / plan.target * 100, 100.0)
    if metric == "skipped%":
        if plan.sends <= 0:
            return UNBOUNDED
        return so_far.skipped / plan.sends * 100, (so_far.skipped + rest) / plan.sends * 100
    if metric == RATE:
        if not plan.seconds:
            return UNBOUNDED
        return (so_far.requests * plan.shares / plan.seconds,
                (so_far.requests + rest) * plan.shares / plan.seconds)
    share, requests = _share(metric, so_far), so_far.requests
    if requests + rest == 0:
        return UNBOUNDED
    return share / (requests + rest) * 100, 100.0 if rest else share / requests * 100


def _latency_bounds(metric: str, so_far: Tally, rest: int) -> tuple[float, float]:
    """A latency's bounds: at best, every send to come is answered at once (in 0 ns)."""
    n = so_far.responses
    if not n:
        return UNBOUNDED
    high = math.inf if rest else _latency(metric, so_far)
    if metric == "max":
        return float(so_far.max_ns), high
    if metric == "mean":
        return so_far.latency.sum / (n + rest), high
    percentile = LATENCIES[metric]
    assert percentile is not None
    # The rank HdrHistogram takes the percentile at, among the measured values and `rest`
    # zeros (its own rounding: the same floats give the same rank), then among the measured
    # values alone. Fewer than `rest` more responses would only make it a later rank.
    rank = max(int(percentile * (n + rest) / 100 + 0.5), 1) - rest
    if rank <= 0:
        return 0.0, high
    wanted = rank / n * 100
    return float(so_far.latency.percentiles([wanted])[wanted]), high
