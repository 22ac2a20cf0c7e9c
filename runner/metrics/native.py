"""Native histograms: latencies in Prometheus' exponential buckets (OTLP's exponential histogram alike).

A classic histogram's buckets are fixed edges (soak_request_duration_seconds: 100us, 250us,
..., 60s), and histogram_quantile interpolates inside one that may be 2.5 times as wide as the
last. A native histogram's bucket i at schema s holds the values in (2^((i-1)/2^s), 2^(i/2^s)]
seconds: at SCHEMA 4, each bucket is 2^(1/16) = 1.044 times the one before, so a quantile read
from it is within 4.4% of the true value, everywhere from a nanosecond to an hour. OTLP's
exponential histogram is the same layout (its scale is the schema), its bucket j being
Prometheus' j + 1: (base^j, base^(j+1)].

The counts come from what soak already counts, never per request here: the metrics tally's
latencies by place among EDGES_NS (runner.metrics.tally), whose edges include every bucket
bound below (so a place lies in exactly one bucket, and a bucket's count is exact), and the
phases' HDR histograms of each closed interval (exact to their 0.1%: a value that close above a
bound counts below it, as PhaseBuckets counts the classic buckets).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence

from runner.core.lazymethods import dataclass
from runner.stats.histogram import HIGHEST_NS, LatencyHistogram

SCHEMA = 4  # 16 buckets per doubling: 4.4% wide
PER_DOUBLING = 2**SCHEMA
# The zero bucket holds every value up to 2^-20 s (954 ns: no response is that fast, some phases
# are: dns and connect on a reused connection are 0); from there on, every bucket is at least
# 42 ns wide, so no two end on the same nanosecond.
ZERO_THRESHOLD_S = 2.0**-20
ZERO = None  # the zero bucket's key among a histogram's buckets


def bound_s(index: int) -> float:
    """The upper bound of bucket `index`, in seconds."""
    return 2.0 ** (index / PER_DOUBLING)


def _index_of_ns(ns: int) -> int:
    """The bucket that holds a latency of `ns` > 0 (worked out from the float bounds, then checked
    against them, so the rounding of log2 never puts a value beside its bucket)."""
    index = math.ceil(math.log2(ns / 1e9) * PER_DOUBLING)
    while ns > bound_ns(index):
        index += 1
    while ns <= bound_ns(index - 1):
        index -= 1
    return index


def bound_ns(index: int) -> int:
    """The largest whole number of nanoseconds in bucket `index` (its upper bound, rounded down)."""
    return math.floor(bound_s(index) * 1e9)


# Buckets from the one just above the zero bucket to the one holding the HDR histograms' highest value (an hour).
LOW_INDEX = round(math.log2(ZERO_THRESHOLD_S) * PER_DOUBLING) + 1
ZERO_EDGE_NS = bound_ns(LOW_INDEX - 1)  # the zero bucket's last nanosecond
HIGH_INDEX = _index_of_ns(HIGHEST_NS)
# Each bucket's last nanosecond, the zero bucket's first: the edges the tally counts among too.
EDGES_NS = tuple(bound_ns(i) for i in range(LOW_INDEX - 1, HIGH_INDEX + 1))
assert len(set(EDGES_NS)) == len(EDGES_NS), "two buckets end on the same nanosecond"


def bucket_of(place: int, edges: Sequence[int]) -> int | None:
    """The bucket of a place among `edges` (which hold EDGES_NS): the place holds the values in
    (edges[place - 1], edges[place]]; ZERO up to ZERO_EDGE_NS; beyond the last edge, the bucket
    after HIGH_INDEX (no latency is recorded above an hour)."""
    if place >= len(edges):
        return HIGH_INDEX + 1
    edge = edges[place]
    return ZERO if edge <= ZERO_EDGE_NS else _index_of_ns(edge)


def buckets_of_places(edges: Sequence[int]) -> list[int | None]:
    """bucket_of for every place among `edges` (the last: above them all), worked out once."""
    return [bucket_of(place, edges) for place in range(len(edges) + 1)]


@dataclass(frozen=True)
class NativeHistogram:
    """One native histogram's state: counts by bucket index (the zero bucket under ZERO), and the
    exact count and sum (seconds)."""

    buckets: Mapping[int | None, int]
    count: int
    sum_s: float

    @property
    def zero_count(self) -> int:
        return self.buckets.get(ZERO, 0)

    def positive(self) -> list[tuple[int, int]]:
        """(index, count) of every bucket above zero that holds a value, in order."""
        return sorted((i, n) for i, n in self.buckets.items() if i is not None and n)


@dataclass(frozen=True)
class NativeFamily:
    """A family of native histograms: its name, its help, and each series' labels and state."""

    name: str
    help: str
    series: list[tuple[dict[str, str], NativeHistogram]]


def from_places(places: Iterable[int], to_bucket: Sequence[int | None], sum_ns: int) -> NativeHistogram:
    """A histogram from counts per place (buckets_of_places says each place's bucket)."""
    buckets: dict[int | None, int] = {}
    count = 0
    for place, n in enumerate(places):
        if n:
            key = to_bucket[place]
            buckets[key] = buckets.get(key, 0) + n
            count += n
    return NativeHistogram(buckets, count, sum_ns / 1e9)


def counts_of(histogram: LatencyHistogram) -> dict[int | None, int]:
    """An HDR histogram's values by bucket, exact to its 0.1% (LatencyHistogram.counts_up_to)."""
    if not histogram.count:
        return {}
    below = histogram.counts_up_to(EDGES_NS)
    buckets: dict[int | None, int] = {}
    if below[0]:
        buckets[ZERO] = below[0]
    for offset, (before, upto) in enumerate(zip(below, below[1:], strict=False)):
        if upto > before:
            buckets[LOW_INDEX + offset] = upto - before
    if histogram.count > below[-1]:  # above the last edge: an hour's bucket's neighbour, as bucket_of says
        buckets[HIGH_INDEX + 1] = histogram.count - below[-1]
    return buckets


def added(total: Mapping[int | None, int], more: Mapping[int | None, int]) -> dict[int | None, int]:
    """Bucket counts added up: a run's, from its intervals'."""
    summed = dict(total)
    for key, n in more.items():
        summed[key] = summed.get(key, 0) + n
    return summed


def spans(buckets: list[tuple[int, int]]) -> tuple[list[tuple[int, int]], list[int]]:
    """Prometheus' encoding of a histogram's buckets: spans (offset from the end of the span before,
    the first from 0; length) over the buckets with a count, and each count as the difference from
    the one before it (the first from 0). A gap of one or two empty buckets is written as zeros
    inside a span, as Prometheus writes it, rather than as a new span."""
    runs: list[tuple[int, int]] = []
    counts: list[int] = []
    last = None
    for index, n in buckets:
        gap = 0 if last is None else index - last - 1
        if last is not None and gap <= 2:
            offset, length = runs[-1]
            runs[-1] = (offset, length + gap + 1)
            counts.extend([0] * gap)
        else:
            runs.append((index if last is None else gap, 1))
        counts.append(n)
        last = index
    deltas = [n - before for before, n in zip([0, *counts], counts, strict=False)]
    return runs, deltas


def dense(buckets: list[tuple[int, int]]) -> tuple[int, list[int]]:
    """OTLP's encoding of a histogram's buckets: the index of the first (in OTLP's numbering, one
    below Prometheus'), and every count from it to the last, empty buckets included."""
    if not buckets:
        return 0, []
    first, last = buckets[0][0], buckets[-1][0]
    counts = [0] * (last - first + 1)
    for index, n in buckets:
        counts[index - first] = n
    return first - 1, counts
