"""Thresholds measured: a rule's metric on a span of a run, and what the rest of a run can still make of it.

Pure arithmetic over figures and tallies (the rules themselves are read by runner.config.rules). Saying
whether a rule can still hold when only part of the run is known is what lets a run stop
early instead of spending another hour on a verdict that is already certain.
"""

from __future__ import annotations

import math

from runner.config.rules import BACKENDS, LATENCIES, RATE, status_codes
from runner.core.lazymethods import dataclass
from runner.stats.client import Pace
from runner.stats.figures import Figures, backends_reached
from runner.stats.histogram import LatencyHistogram
from runner.stats.recorder import Tally


@dataclass(frozen=True)
class Span:
    """What a rule is measured on: one interval, or the whole run, by its figures."""

    figures: Figures
    whole: bool = True  # False for a partial interval, too short to judge goal% and rate on
    shares: float = 1  # its rate, times this, is the run's: the shards of a split run (a scoped rule: see verdict)
    pace: Pace = Pace()  # what the client's own delay may have changed in it (stats.client.pace_of)


def measure(metric: str, span: Span, phase: str | None = None) -> float | None:
    """The metric's value over the span, in its base unit (ns, %, req/s); None with nothing to measure.

    Each is the span's figure of that name (runner.stats.figures: the same number the line,
    the summary and the gauges show, before they round it). goal%, rate and backends are judged
    only on a whole span; a shard's rate stands for the whole run's. A latency of a `phase`
    (a rule like `connect.p99`) is that phase's figure; None where no response's phases were timed.
    A status rule (`4xx%`) is a share of the responses, None where none came back.
    """
    f = span.figures
    codes = status_codes(metric)
    if codes is not None:
        return f.status_percent(codes)
    if phase is not None:
        latency = f.phases.get(phase)
        return latency.ns(metric) if latency is not None and latency.count else None
    if metric in LATENCIES:
        return f.latency.ns(metric) if f.responses else None
    if metric == "goal%":
        return f.goal_percent if span.whole and f.due is not None and f.due > 0 else None
    if metric == RATE:
        return f.rate_achieved * span.shares if f.due_seconds > 0 and span.whole else None
    if metric == BACKENDS:
        # Sends that all failed reached no backend: 0, which `backends >= N` is there to catch.
        # Not judged on a partial interval: its few sends may not have met every backend.
        return float(f.backends_reached) if f.requests and span.whole else None
    percent = {"errors%": f.errors_percent, "failed%": f.failed_percent, "bad%": f.bad_percent,
               "skipped%": f.skipped_percent}
    return percent[metric]


def _latency(metric: str, histogram: LatencyHistogram) -> float:
    percentile = LATENCIES[metric]
    if metric == "max":
        return float(histogram.max)
    if metric == "mean":
        return histogram.mean
    assert percentile is not None
    return float(histogram.percentiles([percentile])[percentile])


def _share(metric: str, tally: Tally) -> int:
    """The requests an errors%, failed% or bad% counts."""
    return {"errors%": tally.bad + tally.failed, "failed%": tally.failed, "bad%": tally.bad}[metric]


@dataclass(frozen=True)
class Plan:
    """The whole run, as far as it is known before it ends, for bounding what it will measure."""

    sends: int | None  # sends due in the whole run; None when only a signal ends it
    target: float | None  # the run's goal t at its end; None for a bench or an end not known
    seconds: float | None  # how long sends will have been due; None when not known
    counted: bool = False  # `sends` counts sends made (totalRequests): skipped ones come on top
    shares: int = 1  # as Span.shares


UNBOUNDED = (-math.inf, math.inf)


def bounds(metric: str, so_far: Tally, plan: Plan, phase: str | None = None) -> tuple[float, float]:
    """The lowest and highest value the metric can still have at the end of the run.

    `so_far` is what the closed intervals hold. Every send not yet in it (in flight, or not
    yet due) may still turn out either way: all answered at once, or all failed. A rule
    that neither end satisfies is certainly broken. Without a planned end only `max` is
    bounded (it never falls). A `phase`'s latency is bounded as the latency is, on its histogram.
    """
    histogram = so_far.latency
    if phase is not None:
        if so_far.phases is None:
            return UNBOUNDED
        histogram = so_far.phases.histograms()[phase]
    if metric == BACKENDS:
        return _backends_bounds(so_far, plan)
    if plan.sends is None:
        return (float(histogram.max), math.inf) if metric == "max" and histogram.count else UNBOUNDED
    if plan.counted:
        return _counted_bounds(metric, so_far, plan, histogram)
    rest = max(plan.sends - so_far.requests - so_far.skipped, 0)
    return _bounds_with(metric, so_far, plan, rest, histogram)


def _backends_bounds(so_far: Tally, plan: Plan) -> tuple[float, float]:
    """The backends reached never fall, and any send still to come may reach a new one."""
    reached = float(backends_reached(so_far.backends))
    if plan.sends is None:
        return reached, math.inf
    rest = plan.sends - so_far.requests - (0 if plan.counted else so_far.skipped)
    return reached, math.inf if rest > 0 else reached


def _counted_bounds(metric: str, so_far: Tally, plan: Plan, histogram: LatencyHistogram) -> tuple[float, float]:
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
    return _bounds_with(metric, so_far, plan, rest, histogram)  # latencies and errors%: as any run, `rest` to come


def _bounds_with(metric: str, so_far: Tally, plan: Plan, rest: int,
                 histogram: LatencyHistogram) -> tuple[float, float]:
    """Bounds when `rest` more sends (made or skipped) are to come; `histogram`: the latencies judged."""
    assert plan.sends is not None
    if metric in LATENCIES:
        return _latency_bounds(metric, histogram, rest)
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
    codes = status_codes(metric)
    if codes is not None:
        return _status_bounds(so_far, codes, rest)
    share, requests = _share(metric, so_far), so_far.requests
    if requests + rest == 0:
        return UNBOUNDED
    return share / (requests + rest) * 100, 100.0 if rest else share / requests * 100


def _status_bounds(so_far: Tally, codes: range, rest: int) -> tuple[float, float]:
    """A status rule's bounds: each send to come is a response of another status, or of this one
    (a failure, which has none, leaves the share as it is, between the two)."""
    count = sum(n for code, n in so_far.statuses.items() if code in codes)
    responses = so_far.responses
    if responses + rest == 0:
        return UNBOUNDED
    return count / (responses + rest) * 100, (count + rest) / (responses + rest) * 100


def _latency_bounds(metric: str, histogram: LatencyHistogram, rest: int) -> tuple[float, float]:
    """A latency's bounds: at best, every send to come is answered at once (in 0 ns)."""
    n = histogram.count
    if not n:
        return UNBOUNDED
    high = math.inf if rest else _latency(metric, histogram)
    if metric == "max":
        return float(histogram.max), high
    if metric == "mean":
        return histogram.sum / (n + rest), high
    percentile = LATENCIES[metric]
    assert percentile is not None
    # The rank HdrHistogram takes the percentile at, among the measured values and `rest`
    # zeros (its own rounding: the same floats give the same rank), then among the measured
    # values alone. Fewer than `rest` more responses would only make it a later rank.
    rank = max(int(percentile * (n + rest) / 100 + 0.5), 1) - rest
    if rank <= 0:
        return 0.0, high
    wanted = rank / n * 100
    return float(histogram.percentiles([wanted])[wanted]), high
