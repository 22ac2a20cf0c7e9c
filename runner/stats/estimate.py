"""Run-wide latency percentiles estimated from per-interval ones, when nothing better is left.

A log cut off before its JSON summary (or slow_cooker's, whose summary has no mean) still
has each interval's min, p50, p95, p99, p999 and max. Percentiles do not add up, but each
interval's row pins down its latency distribution at those points; joining the points
with straight lines gives one distribution per interval, and weighting each by its count
of responses gives one for the run. Its percentiles and mean are estimates, and are always
labelled so: they are exact only where every interval agrees.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from itertools import pairwise

# One interval: (responses, [(fraction of responses, latency at or below which they fall), ...]),
# the fractions rising from 0 (the min) to 1 (the max).
Group = tuple[int, Sequence[tuple[float, float]]]

_BISECTIONS = 200


def interval_points(low: float, quantiles: Mapping[float, float | None], high: float) -> list[tuple[float, float]]:
    """An interval's (fraction, latency) points from its min, known quantiles and max.

    Each latency is kept within [min, max] and never below the one before, so a row
    printed with slow_cooker's p999 a bucket above its max still makes a distribution.
    """
    raw = [(0.0, low), *sorted((q, v) for q, v in quantiles.items() if v is not None), (1.0, high)]
    points, floor = [], low
    for fraction, value in raw:
        floor = max(floor, min(value, high))
        points.append((fraction, floor))
    return points


def estimate(groups: Sequence[Group], quantiles: Mapping[str, float]) -> dict[str, float]:
    """Each wanted quantile (name -> fraction, as {"p50": 0.5}) and "mean", for the whole run.

    Empty when no interval had a response: there is nothing to estimate from.
    """
    groups = [(n, points) for n, points in groups if n > 0 and points]
    total = sum(n for n, _ in groups)
    if not total:
        return {}
    found = {name: _quantile(groups, total, q) for name, q in quantiles.items()}
    found["mean"] = sum(n * _mean(points) for n, points in groups) / total
    return found


def _quantile(groups: Sequence[Group], total: int, q: float) -> float:
    """The smallest latency at or below which a fraction q of all responses fall."""
    low = min(points[0][1] for _, points in groups)
    high = max(points[-1][1] for _, points in groups)
    if _fraction_at(groups, total, low) >= q:
        return low
    for _ in range(_BISECTIONS):
        middle = (low + high) / 2
        if middle in (low, high):
            break
        if _fraction_at(groups, total, middle) >= q:
            high = middle
        else:
            low = middle
    return high


def _fraction_at(groups: Sequence[Group], total: int, x: float) -> float:
    return sum(n * _cdf(points, x) for n, points in groups) / total


def _cdf(points: Sequence[tuple[float, float]], x: float) -> float:
    """The fraction of one interval's responses at or below x."""
    if x < points[0][1]:
        return 0.0
    for (u0, v0), (u1, v1) in pairwise(points):
        if x < v1:  # and v0 <= x, so v1 > v0
            return u0 + (u1 - u0) * (x - v0) / (v1 - v0)
    return 1.0


def _mean(points: Sequence[tuple[float, float]]) -> float:
    """Mean of the distribution the points describe: each stretch is uniform between its ends."""
    return sum((u1 - u0) * (v0 + v1) / 2 for (u0, v0), (u1, v1) in pairwise(points))
