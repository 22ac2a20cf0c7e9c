"""Latency histograms: HdrHistogram in nanoseconds, 3 significant digits, 1 ns to 1 hour.

Nanoseconds so that every latency unit (ms, us, ns) can be printed from one histogram by
truncation, exactly as slow_cooker truncates when it records in the unit. The memory is
fixed (about 270 KB per histogram) however many values are recorded: a 60-minute soak
keeps no per-request data. Values above an hour are recorded as an hour.
"""

from __future__ import annotations

import ctypes
import sys
import weakref
from array import array
from bisect import bisect_left
from collections.abc import Iterable, Iterator
from itertools import accumulate

from hdrh.histogram import HdrHistogram

LOWEST_NS = 1
HIGHEST_NS = 3_600_000_000_000
DIGITS = 3

# HdrHistogram's bucket layout for 3 significant digits and a lowest value of 1: values below
# 2048 each have their own slot; above, bucket b (b >= 1) holds 1024 slots 2**b wide. Recording
# computes the slot here, in two lines, instead of through hdrh's five Python calls: a load
# tester records several latencies per request, and hdrh's record_value cost ~0.7 us each.
_PROBE = HdrHistogram(LOWEST_NS, HIGHEST_NS, DIGITS)
_HALF_MAGNITUDE = _PROBE.sub_bucket_half_count_magnitude  # 10
_HALF_COUNT = _PROBE.sub_bucket_half_count  # 1024
_MASK = _PROBE.sub_bucket_mask  # 2047
_SHIFT = _HALF_MAGNITUDE + 1  # 11
assert _PROBE.unit_magnitude == 0 and _MASK == (1 << _SHIFT) - 1
assert ctypes.sizeof(type(_PROBE.counts)._type_) == array("Q").itemsize  # _values_at reads the counts so
del _PROBE


def slot(value: int) -> int:
    """The index of `value`'s count in an HdrHistogram's counts array (hdrh's _counts_index_for)."""
    bucket = (value | _MASK).bit_length() - _SHIFT
    return ((bucket + 1) << _HALF_MAGNITUDE) + (value >> bucket) - _HALF_COUNT


class LatencyHistogram:
    """An HDR histogram of latencies in nanoseconds, with exact min, max, mean and deviation.

    The buckets know values to 0.1%; the exact statistics are kept beside them (a sum and a
    sum of squares), so min, max, mean and standard deviation are the true ones.
    """

    __slots__ = ("_hdr", "_counts", "_highest", "count", "min", "max", "sum", "sum_sq")

    def __init__(self, lowest: int = LOWEST_NS, highest: int = HIGHEST_NS) -> None:
        if lowest != LOWEST_NS:
            raise ValueError("the slot arithmetic assumes a lowest trackable value of 1")
        self._hdr = HdrHistogram(lowest, highest, DIGITS)
        # hdrh's encoder points back at its histogram: a reference cycle that only the cyclic
        # GC frees, and it runs by object counts, blind to the 270 KB each pair holds, so a
        # long run's closed intervals piled up (about 0.4 MB an interval). A weak reference
        # lets each histogram go the moment it is dropped.
        self._hdr.encoder.histogram = weakref.proxy(self._hdr)
        self._counts = self._hdr.counts
        self._highest = self._hdr.highest_trackable_value
        self.count = 0  # hdrh's own total, min and max are brought up to date before hdrh is used
        self.min = 0  # exact; 0 while empty
        self.max = 0
        self.sum = 0
        self.sum_sq = 0

    @classmethod
    def for_unit(cls, unit_ns: int) -> LatencyHistogram:
        """A histogram of values already truncated to a unit (the same hour, in that unit).

        What slow_cooker records when it measures in ms or us: its CSV is written from one.
        Recording in the unit, rather than converting ns buckets afterwards, keeps every
        row exact: a 3-digit ns bucket that straddles a unit boundary cannot say on which
        side its values were.
        """
        return cls(LOWEST_NS, max(HIGHEST_NS // unit_ns, 2))

    @classmethod
    def merged(cls, *parts: LatencyHistogram) -> LatencyHistogram:
        """A new histogram holding every value recorded in `parts`."""
        whole = cls()
        for part in parts:
            whole.add(part)
        return whole

    def record(self, ns: int, count: int = 1) -> None:
        """Record one value, clamped to the trackable range; 0 lands in the first bucket, as in Go."""
        if not count:
            return
        if ns < 0:
            ns = 0
        elif ns > self._highest:
            ns = self._highest
        bucket = (ns | _MASK).bit_length() - _SHIFT
        self._counts[((bucket + 1) << _HALF_MAGNITUDE) + (ns >> bucket) - _HALF_COUNT] += count
        if not self.count or ns < self.min:
            self.min = ns
        if ns > self.max:
            self.max = ns
        self.count += count
        self.sum += ns * count
        self.sum_sq += ns * ns * count

    def add(self, other: LatencyHistogram) -> None:
        """Add every value recorded in `other`."""
        if other.count:
            self.min = other.min if not self.count else min(self.min, other.min)
        self.max = max(self.max, other.max)
        self.sum += other.sum
        self.sum_sq += other.sum_sq
        self._synced().add(other._synced())
        self.count += other.count

    def _synced(self) -> HdrHistogram:
        """hdrh's histogram, its total, min and max brought up to date with what was recorded here."""
        hdr = self._hdr
        hdr.total_count = self.count
        hdr.max_value = self.max
        hdr.min_value = self.min if self.count else sys.maxsize
        return hdr

    @property
    def mean(self) -> float:
        return self.sum / self.count if self.count else 0.0

    def stdev(self, *, sample: bool = False) -> float:
        """Standard deviation: of the population, or of a sample (n - 1, as ab prints it)."""
        n = self.count
        if n < 2:
            return 0.0
        squares = self.sum_sq - self.sum * self.sum / n
        return (max(squares, 0.0) / (n - 1 if sample else n)) ** 0.5

    def percentiles(self, wanted: Iterable[float]) -> dict[float, int]:
        """The value at each percentile; 0 when empty.

        As in Go's hdrhistogram, a percentile is the highest value of its bucket, which
        can exceed every value recorded by up to 0.1%; it is capped at the exact maximum,
        so p999 never reads larger than max.
        """
        wanted = list(wanted)
        if not self.count:
            return {p: 0 for p in wanted}
        found = self._values_at(wanted)
        return {p: min(found[p], self.max) for p in wanted}

    def _values_at(self, wanted: list[float]) -> dict[float, int]:
        """hdrh's get_percentile_to_value_dict(wanted), exactly, a few times faster.

        hdrh walks the counts from the first slot with a Python call per slot: about a
        millisecond for latencies of 100 us, each time an interval is printed. Here the
        counts up to the max's slot are added up in C and each percentile's slot is found
        by bisection. The counts are read as one array.array copy of their bytes: slicing the
        ctypes array made a Python int per slot through ctypes, half the scan's cost (a run's
        end makes ten of these scans, over ~15,000 slots each for latencies up to 20 ms).
        A histogram whose buckets hold more than its max says (one read back from an edited
        record) is left to hdrh.
        """
        hdr = self._synced()
        counts = array("Q")
        counts.frombytes(memoryview(self._counts).cast("B")[: (slot(self.max) + 1) * counts.itemsize])
        totals = list(accumulate(counts))
        if totals[-1] != self.count:
            return hdr.get_percentile_to_value_dict(wanted)
        found: dict[float, int] = {}
        for percentile in sorted(set(wanted)):
            if percentile > 100:
                break
            index = bisect_left(totals, hdr.get_target_count_at_percentile(percentile))
            value = hdr.get_value_from_index(index)
            found[percentile] = (hdr.get_highest_equivalent_value(value) if percentile
                                 else hdr.get_lowest_equivalent_value(value))
        return found

    def counts_up_to(self, values_ns: Iterable[int]) -> list[int]:
        """How many values were recorded at or below each of `values_ns` (sorted), to the bucket: a
        value in the same bucket as one of them counts as at or below it (0.1% of it at most)."""
        if not self.count:
            return [0 for _ in values_ns]
        totals = list(accumulate(self._counts[: slot(self.max) + 1]))
        return [totals[min(slot(max(v, 0)), len(totals) - 1)] for v in values_ns]

    def buckets(self) -> Iterator[tuple[int, int, int]]:
        """(lowest value, highest value, count) of every bucket from the first to the highest used.

        The same rows as Go hdrhistogram's Distribution(), which slow_cooker writes as CSV:
        zero-count buckets included, nothing after the bucket of the largest value.
        """
        hdr = self._synced()
        remaining = self.count
        index = 0
        while remaining > 0:
            count = hdr.get_count_at_index(index)
            value = hdr.get_value_from_index(index)
            yield hdr.get_lowest_equivalent_value(value), hdr.get_highest_equivalent_value(value), count
            remaining -= count
            index += 1

    def encode(self) -> str:
        """The standard compressed, base64 HdrHistogram encoding ("HISTFAAA...")."""
        return self._synced().encode().decode("ascii")

    @classmethod
    def from_counts(cls, counts: object, count: int, low: int, high: int, total: int, total_sq: int, *,
                    unit_ns: int | None = None) -> LatencyHistogram:
        """A histogram whose counts array is `counts` itself, with its exact statistics.

        `counts` is a writable buffer of hdrhistogram's counts array for this histogram's
        range (the native engine's, a slot() per value), or None for an empty histogram. It
        is used in place, not copied: the native engine hands each interval's histogram over
        this way instead of Python recording every value again. `unit_ns`: a for_unit one.
        """
        histogram = cls.for_unit(unit_ns) if unit_ns else cls()
        if counts is not None:
            hdr = histogram._hdr
            array_type = type(hdr.counts)
            if memoryview(counts).nbytes != ctypes.sizeof(array_type):  # type: ignore[arg-type]
                raise ValueError(f"counts of {memoryview(counts).nbytes} bytes, "  # type: ignore[arg-type]
                                 f"expected {ctypes.sizeof(array_type)}")
            array = array_type.from_buffer(counts)
            hdr.counts = hdr.encoder.payload.counts = histogram._counts = array
        histogram.count, histogram.min, histogram.max, histogram.sum, histogram.sum_sq = (
            count, low, high, total, total_sq)
        return histogram

    @classmethod
    def restored(cls, hdr: str, low: int, high: int, total: int, total_sq: int) -> LatencyHistogram:
        """A histogram from its encoded buckets ("" for none) and its exact statistics, as a shard wrote them."""
        histogram = cls()
        if hdr:
            decoded = HdrHistogram.decode(hdr)
            histogram._synced().add(decoded)
            histogram.count = decoded.get_total_count()
            decoded.encoder.histogram = None  # no cycle: freed at once (see __init__)
        histogram.min, histogram.max, histogram.sum, histogram.sum_sq = low, high, total, total_sq
        return histogram
