"""Latency histograms: HdrHistogram in nanoseconds, 3 significant digits, 1 ns to 1 hour.

Nanoseconds so that every latency unit (ms, us, ns) can be printed from one histogram by
truncation, exactly as slow_cooker truncates when it records in the unit. The memory is
bounded (at most about 270 KB per histogram, hdrhistogram's counts array for the range)
however many values are recorded: a 60-minute soak keeps no per-request data. Values above
an hour are recorded as an hour.

The counts are kept in hdrhistogram's own layout, but only up to the slot of the largest
value recorded (most latencies fill a few thousand of its 32,768 slots), in an array.array
that grows as larger values come: no 270 KB is allocated, zeroed, added or scanned for a
histogram that holds a few values, or none. hdrh itself is used only to encode and decode
("HISTFAAA..."): the slot arithmetic, the percentile walk and the merge are here, each
pinned to hdrh's in tests/unit/test_histogram.py.
"""

from __future__ import annotations

import ctypes
import sys
import weakref
from array import array
from bisect import bisect_left
from collections.abc import Callable, Iterable, Iterator, Sequence
from itertools import accumulate

from hdrh.histogram import HdrHistogram
from pyhdrh import add_array  # hdrh's own C loop: one counts array added to another

try:  # the optional C extension (setup.py): the running totals in one C loop
    from runner.load.native._counts import running_totals as _summed_in_c
except ImportError:  # not built here: itertools.accumulate, a Python int per slot
    _summed_in_c = None
_summed: Callable[[array[int], int, int], bytes] | None = _summed_in_c

LOWEST_NS = 1
HIGHEST_NS = 3_600_000_000_000
DIGITS = 3

# HdrHistogram's bucket layout for 3 significant digits and a lowest value of 1: values below
# 2048 each have their own slot; above, bucket b (b >= 1) holds 1024 slots 2**b wide. Recording
# computes the slot here, in two lines, instead of through hdrh's five Python calls: a load
# tester records several latencies per request, and hdrh's record_value cost ~0.7 us each.
_HALF_MAGNITUDE = 10  # hdrh's sub_bucket_half_count_magnitude for 3 digits
_HALF_COUNT = 1 << _HALF_MAGNITUDE  # 1024
_MASK = 2 * _HALF_COUNT - 1  # 2047: hdrh's sub_bucket_mask with a unit magnitude of 0
_SHIFT = _HALF_MAGNITUDE + 1  # 11
_WORD = array("Q").itemsize
assert _WORD == 8  # hdrh's word size: its counts and the native engine's are 64-bit


def slot(value: int) -> int:
    """The index of `value`'s count in an HdrHistogram's counts array (hdrh's _counts_index_for)."""
    bucket = (value | _MASK).bit_length() - _SHIFT
    return ((bucket + 1) << _HALF_MAGNITUDE) + (value >> bucket) - _HALF_COUNT


def lowest_in(index: int) -> int:
    """The lowest value counted in slot `index` (hdrh's get_value_from_index)."""
    bucket = (index >> _HALF_MAGNITUDE) - 1
    if bucket < 0:
        return index
    return ((index & (_HALF_COUNT - 1)) + _HALF_COUNT) << bucket


def highest_in(index: int) -> int:
    """The highest value counted in slot `index` (hdrh's get_highest_equivalent_value of its lowest)."""
    return lowest_in(index) + (1 << max((index >> _HALF_MAGNITUDE) - 1, 0)) - 1


def counts_len(highest: int) -> int:
    """hdrh's counts_len for values from 1 to `highest` at 3 digits: its counts array's slots."""
    return slot(highest) // _HALF_COUNT * _HALF_COUNT + _HALF_COUNT if highest >= 2 * _HALF_COUNT \
        else 2 * _HALF_COUNT


def running_totals(counts: array[int], start: int, stop: int) -> Sequence[int]:
    """counts[start:stop] summed slot by slot: each slot's count and every one before it from `start`."""
    if _summed is not None:
        return memoryview(_summed(counts, start, stop)).cast("Q")
    return list(accumulate(counts[start:stop]))


def target_count(percentile: float, count: int) -> int:
    """How many values lie at or below a percentile's value (hdrh's get_target_count_at_percentile)."""
    return max(int(min(percentile, 100.0) * count / 100 + 0.5), 1)


class LatencyHistogram:
    """An HDR histogram of latencies in nanoseconds, with exact min, max, mean and deviation.

    The buckets know values to 0.1%; the exact statistics are kept beside them (a sum and a
    sum of squares), so min, max, mean and standard deviation are the true ones.
    """

    __slots__ = ("_counts", "_low", "_walked", "_highest", "count", "min", "max", "sum", "sum_sq")

    def __init__(self, lowest: int = LOWEST_NS, highest: int = HIGHEST_NS) -> None:
        if lowest != LOWEST_NS:
            raise ValueError("the slot arithmetic assumes a lowest trackable value of 1")
        # The counts of slots 0 up to the highest one that may hold a value (None while empty):
        # every slot past its end holds none. _low: the lowest slot that may hold one.
        self._counts: array[int] | None = None
        self._low = 0
        # The counts summed once, slot by slot, for every percentile asked of these counts (_walk).
        self._walked: tuple[tuple[int, int, int], int, Sequence[int]] | None = None
        self._highest = highest
        self.count = 0  # exact; all 0 while empty
        self.min = 0
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
        index = ((bucket + 1) << _HALF_MAGNITUDE) + (ns >> bucket) - _HALF_COUNT
        try:
            self._counts[index] += count  # type: ignore[index]
        except (IndexError, TypeError):  # past the counts' end, or none yet
            self._reach(index + 1)[index] += count
        if not self.count or ns < self.min:
            self.min = ns
            self._low = index
        if ns > self.max:
            self.max = ns
        self.count += count
        self.sum += ns * count
        self.sum_sq += ns * ns * count

    def _reach(self, length: int) -> array[int]:
        """The counts, at least `length` slots long (the new ones 0)."""
        counts = self._counts
        if counts is None:
            counts = self._counts = array("Q", bytes(length * _WORD))
        elif len(counts) < length:
            counts.frombytes(bytes((length - len(counts)) * _WORD))
        return counts

    def add(self, other: LatencyHistogram) -> None:
        """Add every value recorded in `other`: its counts slot by slot, from its lowest to its last."""
        theirs = other._counts
        if other.count:
            self.min = other.min if not self.count else min(self.min, other.min)
        if theirs is not None:
            low, end = other._low, len(theirs)
            mine = self._reach(end)
            add_array(mine.buffer_info()[0] + low * _WORD, theirs.buffer_info()[0] + low * _WORD, end - low, _WORD)
            self._low = low if not self.count else min(self._low, low)
        self.max = max(self.max, other.max)
        self.sum += other.sum
        self.sum_sq += other.sum_sq
        self.count += other.count

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
        so p999 never reads larger than max. The values are hdrh's get_percentile_to_value_dict's:
        the first slot whose running total reaches the percentile's share of the count.
        """
        wanted = list(wanted)
        if not self.count:
            return {p: 0 for p in wanted}
        low, totals = self._walk()
        found: dict[float, int] = {}
        for percentile in sorted(set(wanted)):
            if percentile > 100:
                break
            index = low + min(bisect_left(totals, target_count(percentile, self.count)), len(totals) - 1)
            found[percentile] = highest_in(index) if percentile else lowest_in(index)
        return {p: min(found[p], self.max) for p in wanted}

    def _walk(self) -> tuple[int, Sequence[int]]:
        """(a slot, the running total of the counts from it to the max's slot): summed once for every
        percentile asked while nothing more is recorded (a figure, a pace, a threshold read the same
        histogram), and only over the slots between the min's and the max's, where every value is.

        A histogram whose buckets hold values outside its min and max (one read back from an
        edited record) is summed from its first slot to its last: hdrh's walk.
        """
        key = (self.count, self._low, self.max)
        walked = self._walked
        if walked is not None and walked[0] == key:
            return walked[1], walked[2]
        counts = self._counts
        if counts is None:  # a count with no counts (a record made so): every value in slot 0
            counts = array("Q", [self.count])
        low = self._low
        stop = min(slot(self.max) + 1, len(counts))
        totals = running_totals(counts, min(low, stop), stop)
        if not totals or totals[-1] != self.count:
            low, totals = 0, running_totals(counts, 0, len(counts))
        self._walked = (key, low, totals)
        return low, totals

    def counts_up_to(self, values_ns: Iterable[int]) -> list[int]:
        """How many values were recorded at or below each of `values_ns` (sorted), to the bucket: a
        value in the same bucket as one of them counts as at or below it (0.1% of it at most)."""
        if not self.count:
            return [0 for _ in values_ns]
        low, totals = self._walk()
        last = len(totals) - 1
        return [totals[min(index, last)] if index >= 0 else 0
                for index in (slot(max(v, 0)) - low for v in values_ns)]

    def buckets(self) -> Iterator[tuple[int, int, int]]:
        """(lowest value, highest value, count) of every bucket from the first to the highest used.

        The same rows as Go hdrhistogram's Distribution(), which slow_cooker writes as CSV:
        zero-count buckets included, nothing after the bucket of the largest value.
        """
        remaining = self.count
        for index, count in enumerate(self._counts or ()):
            if remaining <= 0:
                return
            value = lowest_in(index)
            yield value, highest_in(index), count
            remaining -= count

    def encode(self) -> str:
        """The standard compressed, base64 HdrHistogram encoding ("HISTFAAA...")."""
        hdr = self._synced()
        return hdr.encode().decode("ascii")

    def _synced(self) -> HdrHistogram:
        """An hdrh histogram of these counts, its total, min and max these (to encode; and for tests)."""
        hdr = HdrHistogram(LOWEST_NS, self._highest, DIGITS)
        # hdrh's encoder points back at its histogram: a reference cycle that only the cyclic
        # GC frees, blind to the 270 KB it holds. A weak reference frees it once dropped.
        hdr.encoder.histogram = weakref.proxy(hdr)
        counts = self._counts
        if counts:
            ctypes.memmove(ctypes.addressof(hdr.counts), counts.buffer_info()[0],
                           min(len(counts), hdr.counts_len) * _WORD)
        hdr.total_count = self.count
        hdr.max_value = self.max
        hdr.min_value = self.min if self.count else sys.maxsize
        return hdr

    @classmethod
    def from_counts(cls, counts: object, count: int, low: int, high: int, total: int, total_sq: int, *,
                    unit_ns: int | None = None) -> LatencyHistogram:
        """A histogram of the counts in `counts`, with its exact statistics.

        `counts` is a buffer of hdrhistogram's counts array for this histogram's range (the
        native engine's, a slot() per value), or None for an empty histogram. Its slots up to
        the max's are copied (a few thousand of them, for most latencies): the native engine
        hands each interval's histogram over this way instead of Python recording every
        value again. `unit_ns`: a for_unit one.
        """
        histogram = cls.for_unit(unit_ns) if unit_ns else cls()
        if counts is not None:
            view = memoryview(counts).cast("B")  # type: ignore[arg-type]
            expected = counts_len(histogram._highest) * _WORD
            if view.nbytes != expected:
                raise ValueError(f"counts of {view.nbytes} bytes, expected {expected}")
            if count:
                histogram._counts = array("Q")
                histogram._counts.frombytes(view[:(slot(high) + 1) * _WORD])
                histogram._low = slot(low)
        histogram.count, histogram.min, histogram.max, histogram.sum, histogram.sum_sq = (
            count, low, high, total, total_sq)
        return histogram

    @classmethod
    def restored(cls, hdr: str, low: int, high: int, total: int, total_sq: int) -> LatencyHistogram:
        """A histogram from its encoded buckets ("" for none) and its exact statistics, as a shard wrote them."""
        histogram = cls()
        if hdr:
            decoded = HdrHistogram.decode(hdr)
            whole = HdrHistogram(LOWEST_NS, HIGHEST_NS, DIGITS)  # the same layout, whatever the record's range
            whole.add(decoded)
            decoded.encoder.histogram = whole.encoder.histogram = None  # no cycles: freed at once (see _synced)
            histogram.count = whole.get_total_count()
            if histogram.count:
                histogram._counts = array("Q")
                used = (slot(whole.get_max_value()) + 1) * _WORD
                histogram._counts.frombytes(memoryview(whole.counts).cast("B")[:used])
                histogram._low = slot(whole.get_min_value())
        histogram.min, histogram.max, histogram.sum, histogram.sum_sq = low, high, total, total_sq
        return histogram
