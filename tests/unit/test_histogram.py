"""The latency histogram: HDR, nanoseconds, 3 significant digits, percentiles capped at the max."""

from __future__ import annotations

import random
import statistics

import pytest
from hdrh.histogram import HdrHistogram

from runner.stats.histogram import DIGITS, HIGHEST_NS, LatencyHistogram, counts_len, slot


def filled(values: list[int]) -> LatencyHistogram:
    histogram = LatencyHistogram()
    for value in values:
        histogram.record(value)
    return histogram


def test_empty_histogram_gives_zeros() -> None:
    histogram = LatencyHistogram()
    assert histogram.count == 0
    assert histogram.max == 0
    assert histogram.percentiles([50, 95, 99, 99.9, 100]) == {50: 0, 95: 0, 99: 0, 99.9: 0, 100: 0}
    assert list(histogram.buckets()) == []


def test_small_values_are_exact() -> None:
    histogram = filled(list(range(1, 101)))
    assert histogram.count == 100
    assert histogram.max == 100
    assert histogram.percentiles([50, 75, 90, 95, 99, 99.9, 100]) == {
        50: 50, 75: 75, 90: 90, 95: 95, 99: 99, 99.9: 100, 100: 100}


def test_percentiles_of_microsecond_latencies() -> None:
    """1..1000 us: each percentile is the highest value of its 3-digit bucket, as in Go's hdrhistogram."""
    histogram = filled([v * 1000 for v in range(1, 1001)])
    found = histogram.percentiles([50, 90, 99, 99.9, 100])
    assert found == {50: 500_223, 90: 900_095, 99: 990_207, 99.9: 999_423, 100: 1_000_000}
    for p, value in found.items():
        exact = int(p * 10) * 1000
        assert exact <= value <= exact * 1.001  # within the 3-digit precision


def test_percentiles_within_precision_of_exact_on_random_data() -> None:
    rng = random.Random(7)
    values = sorted(int(rng.lognormvariate(14, 1)) for _ in range(20_000))  # ~1 ms median
    histogram = filled(values)
    for p in (50, 75, 90, 95, 99, 99.9):
        exact = values[max(0, round(p / 100 * len(values)) - 1)]
        found = histogram.percentiles([p])[p]
        assert exact <= found <= exact * 1.001 + 1, (p, exact, found)


def test_percentile_is_capped_at_the_exact_max() -> None:
    histogram = filled([123_456_789])
    # The bucket's highest value is 123469823; the recorded value is below it.
    assert histogram.percentiles([50, 99, 99.9, 100]) == {50: 123_456_789, 99: 123_456_789, 99.9: 123_456_789,
                                                          100: 123_456_789}
    assert histogram.max == 123_456_789


def test_p999_never_exceeds_max_but_lower_percentiles_keep_bucket_tops() -> None:
    histogram = filled([1_000_000] * 999 + [2_240_000])
    found = histogram.percentiles([50, 99.9, 100])
    assert found[100] == 2_240_000 == histogram.max
    assert found[99.9] == 1_000_447  # highest equivalent of 1 ms's bucket, below the max
    assert found[50] == 1_000_447


def test_record_with_count() -> None:
    histogram = LatencyHistogram()
    histogram.record(5_000, 3)
    histogram.record(7_000)
    assert histogram.count == 4
    assert histogram.max == 7_000
    assert histogram.percentiles([50, 75, 100]) == {50: 5_000 + 3, 75: 5_003, 100: 7_000}


def test_values_outside_the_range_are_clamped_to_zero_and_the_highest() -> None:
    histogram = LatencyHistogram()
    histogram.record(0)
    histogram.record(-5)
    histogram.record(HIGHEST_NS * 10)
    assert histogram.count == 3
    assert histogram.max == HIGHEST_NS
    assert histogram.percentiles([0, 50, 100]) == {0: 0, 50: 0, 100: HIGHEST_NS}


def test_add_combines_counts_percentiles_and_max() -> None:
    a = filled([1_000, 2_000, 3_000])
    b = filled([10_000, 20_000_000])
    a.add(b)
    assert a.count == 5
    assert a.max == 20_000_000
    assert a.percentiles([50, 100]) == {50: 3_001, 100: 20_000_000}
    assert b.count == 2 and b.max == 20_000_000  # the other is unchanged


def test_add_equals_recording_everything_in_one() -> None:
    rng = random.Random(3)
    values = [rng.randrange(1, 10**9) for _ in range(3000)]
    whole = filled(values)
    parts = [filled(values[i::3]) for i in range(3)]
    merged = LatencyHistogram()
    for part in parts:
        merged.add(part)
    wanted = [50, 75, 90, 95, 99, 99.9, 100]
    assert merged.count == whole.count == 3000
    assert merged.max == whole.max == max(values)
    assert merged.percentiles(wanted) == whole.percentiles(wanted)
    assert list(merged.buckets()) == list(whole.buckets())


def test_add_an_empty_histogram_changes_nothing() -> None:
    a = filled([5_000])
    a.add(LatencyHistogram())
    assert (a.count, a.max, a.percentiles([50])) == (1, 5_000, {50: 5_000})
    empty = LatencyHistogram()
    empty.add(a)
    assert (empty.count, empty.max) == (1, 5_000)


def test_buckets_run_from_zero_to_the_bucket_of_the_max() -> None:
    histogram = filled([3, 3, 7])
    assert list(histogram.buckets()) == [(0, 0, 0), (1, 1, 0), (2, 2, 0), (3, 3, 2), (4, 4, 0), (5, 5, 0),
                                         (6, 6, 0), (7, 7, 1)]


def test_buckets_cover_every_count_and_are_contiguous() -> None:
    histogram = filled([1, 5_000, 5_003, 123_456, 9_999_999])
    rows = list(histogram.buckets())
    assert sum(count for _, _, count in rows) == 5
    assert rows[0][0] == 0
    for (_, high, _), (low, _, _) in zip(rows, rows[1:]):
        assert low == high + 1
    low, high, count = rows[-1]
    assert low <= 9_999_999 <= high and count == 1


def test_a_unit_histogram_records_zero_in_the_first_bucket() -> None:
    milli = LatencyHistogram.for_unit(1_000_000)
    for value in (0, 0, 2, 3_600_000):
        milli.record(value)
    rows = list(milli.buckets())
    assert rows[0] == (0, 0, 2) and rows[-1][2] == 1 and milli.max == 3_600_000
    assert milli.percentiles([50, 100]) == {50: 0, 100: 3_600_000}


def test_encode_decodes_to_the_same_histogram() -> None:
    histogram = filled([1_000, 2_000, 3_000_000, 3_000_000])
    text = histogram.encode()
    assert text.startswith("HISTFAAA")
    decoded = HdrHistogram.decode(text)
    assert decoded.get_total_count() == 4
    assert decoded.get_max_value() == 3_000_319  # the highest value of 3 ms's bucket
    assert decoded.get_min_value() == 1_000
    assert decoded.get_value_at_percentile(50) == 2_000
    assert decoded.significant_figures == DIGITS


def test_exact_statistics_beside_the_buckets() -> None:
    values = [1_000, 2_000, 2_000, 7_000, 3_600_000_000_001]
    histogram = filled(values)
    clamped = values[:-1] + [HIGHEST_NS]
    assert (histogram.min, histogram.max, histogram.sum) == (1_000, HIGHEST_NS, sum(clamped))
    assert histogram.mean == statistics.fmean(clamped)
    assert histogram.stdev() == pytest.approx(statistics.pstdev(clamped), rel=1e-9)
    assert histogram.stdev(sample=True) == pytest.approx(statistics.stdev(clamped), rel=1e-9)
    other = filled([500, 9_000])
    histogram.add(other)
    assert (histogram.min, histogram.count) == (500, 7)
    assert histogram.sum == sum(clamped) + 9_500
    assert filled([5]).stdev(sample=True) == 0.0 and LatencyHistogram().mean == 0.0


def test_recording_matches_hdrh_slot_for_slot() -> None:
    """The inlined slot arithmetic puts every value where hdrh's record_value would."""
    from hdrh.histogram import HdrHistogram

    from runner.stats.histogram import slot

    rng = random.Random(5)
    edges = [0, 1, 2047, 2048, 2049, 4095, 4096, 4097, HIGHEST_NS - 1, HIGHEST_NS]
    values = edges + [rng.randint(0, HIGHEST_NS) for _ in range(20_000)] + [rng.randint(0, 10**7) for _ in range(20_000)]
    reference = HdrHistogram(1, HIGHEST_NS, DIGITS)
    ours = LatencyHistogram()
    for value in values:
        assert slot(value) == reference._counts_index_for(value), value
        reference.record_value(value)
        ours.record(value)
    assert ours.encode() == reference.encode().decode()
    wanted = [0, 50, 90, 99, 99.9, 100]
    theirs = reference.get_percentile_to_value_dict(wanted)
    assert ours.percentiles(wanted) == {p: min(theirs[p], max(values)) for p in wanted}
    assert ours.count == reference.get_total_count() == len(values)


@pytest.mark.parametrize("seed", range(40))
def test_percentiles_are_hdrhs_exactly_whatever_the_histogram(seed: int) -> None:
    """The percentiles are found by bisecting the summed counts, not by hdrh's walk: the same
    values for any data, any list of percentiles (0 and 100 included, repeated), any unit."""
    rng = random.Random(seed)
    unit = rng.choice([1, 1_000, 1_000_000])
    histogram = LatencyHistogram.for_unit(unit) if unit > 1 else LatencyHistogram()
    scale = rng.choice([10, 10**4, 10**6, 10**9, HIGHEST_NS])
    values = [rng.randint(0, scale) // unit for _ in range(rng.choice([1, 2, 7, 100, 5_000]))]
    for value in values:
        histogram.record(value, rng.choice([1, 1, 3]))
    wanted = [rng.choice([0, 0.1, 1, 25, 50, 50, 75, 90, 95, 99, 99.9, 99.99, 100]) for _ in range(6)]
    theirs = histogram._synced().get_percentile_to_value_dict(wanted)
    assert histogram.percentiles(wanted) == {p: min(theirs[p], histogram.max) for p in wanted}


def test_a_histogram_whose_buckets_pass_its_max_still_gets_hdrhs_percentiles() -> None:
    """A record edited to a max below its buckets: the percentiles are hdrh's, capped at that max."""
    record = filled([1_000, 2_000, 3_000_000])
    edited = LatencyHistogram.restored(record.encode(), 1_000, 2_000, 3_002_000, 10**13)
    theirs = edited._synced().get_percentile_to_value_dict([50, 99])
    assert edited.percentiles([50, 99]) == {50: min(theirs[50], 2_000), 99: 2_000}


def test_the_hdrh_histogram_made_to_encode_is_freed_at_once_not_by_the_cyclic_gc() -> None:
    """hdrh's encoder refers back to its histogram; a cycle kept every closed interval's
    270 KB until the cyclic GC ran, so a long run's memory grew (found by bench/run.py)."""
    import gc
    import weakref

    gc.disable()
    try:
        histogram = filled([1_000, 2_000])
        assert histogram.encode().startswith("HIST")
        hdr = histogram._synced()
        gone = weakref.ref(hdr)
        del hdr
        assert gone() is None
    finally:
        gc.enable()


@pytest.mark.parametrize("unit_ns", [None, 1_000, 1_000_000])
def test_a_histogram_from_a_counts_buffer_is_the_one_recorded(unit_ns: int | None) -> None:
    """The native engine hands over counts laid out by slot(): the same histogram as recording."""
    rng = random.Random(7)
    values = [rng.randrange(0, 5_000_000) for _ in range(2_000)] + [0, 1, 2047, 2048, HIGHEST_NS]
    recorded = LatencyHistogram.for_unit(unit_ns) if unit_ns else LatencyHistogram()
    for value in values:
        recorded.record(value)
    highest = recorded._highest
    clamped = [min(v, highest) for v in values]
    counts = bytearray(counts_len(highest) * 8)
    view = memoryview(counts).cast("Q")
    for value in clamped:
        view[slot(value)] += 1
    view.release()
    built = LatencyHistogram.from_counts(counts, len(clamped), min(clamped), max(clamped), sum(clamped),
                                         sum(v * v for v in clamped), unit_ns=unit_ns)
    wanted = [0, 50, 90, 99, 99.9, 100]
    assert built.percentiles(wanted) == recorded.percentiles(wanted)
    assert list(built.buckets()) == list(recorded.buckets())
    assert (built.count, built.min, built.max, built.mean) == (recorded.count, recorded.min, recorded.max,
                                                               recorded.mean)
    assert built.encode() == recorded.encode()
    merged = LatencyHistogram.merged(built, recorded)
    assert merged.count == 2 * recorded.count and merged.percentiles([50]) == recorded.percentiles([50])


def test_a_counts_buffer_of_the_wrong_size_is_refused() -> None:
    with pytest.raises(ValueError, match="expected"):
        LatencyHistogram.from_counts(bytearray(8 * 100), 1, 1, 1, 1, 1)
    empty = LatencyHistogram.from_counts(None, 0, 0, 0, 0, 0)
    assert empty.count == 0 and empty.percentiles([50]) == {50: 0}


def test_slot_bounds_are_hdrhs_for_every_slot() -> None:
    """lowest_in and highest_in, which turn a percentile's slot into its value, are hdrh's
    get_value_from_index and get_highest_equivalent_value, slot for slot, over the whole range."""
    from runner.stats.histogram import highest_in, lowest_in

    reference = HdrHistogram(1, HIGHEST_NS, DIGITS)
    for index in range(reference.counts_len):
        value = reference.get_value_from_index(index)
        assert lowest_in(index) == value == reference.get_lowest_equivalent_value(value), index
        assert highest_in(index) == reference.get_highest_equivalent_value(value), index
        assert slot(lowest_in(index)) == slot(highest_in(index)) == index


def test_counts_len_and_target_count_are_hdrhs() -> None:
    from runner.stats.histogram import target_count

    rng = random.Random(3)
    for highest in [2, 2047, 2048, 2049, 4095, 4096, 3_600, 3_600_000, HIGHEST_NS,
                    *(rng.randint(2, HIGHEST_NS) for _ in range(300))]:
        assert counts_len(highest) == HdrHistogram(1, highest, DIGITS).counts_len, highest
    reference = HdrHistogram(1, HIGHEST_NS, DIGITS)
    for count in (1, 2, 3, 7, 1000, 123_457):
        reference.total_count = count
        for percentile in (0, 0.1, 1, 25, 50, 66.6, 75, 90, 99, 99.9, 99.99, 100, 120):
            assert target_count(percentile, count) == reference.get_target_count_at_percentile(percentile)


def test_counts_are_kept_only_up_to_the_largest_value() -> None:
    """A histogram of a few small values holds a few slots, not hdrh's 270 KB; it grows as larger come."""
    histogram = LatencyHistogram()
    assert histogram.percentiles([50]) == {50: 0} and list(histogram.buckets()) == []
    histogram.record(1_000)
    assert len(histogram._counts or ()) == slot(1_000) + 1
    histogram.record(5_000_000)
    assert len(histogram._counts or ()) == slot(5_000_000) + 1
    assert histogram.percentiles([0, 50, 100]) == {0: 1_000, 50: 1_000, 100: 5_000_000}


@pytest.mark.parametrize("seed", range(20))
def test_adding_histograms_is_recording_their_values_in_one(seed: int) -> None:
    """add() adds counts slot by slot over the other's range only; the sum is the histogram of every value."""
    rng = random.Random(seed)
    parts = [[rng.randint(0, rng.choice([3_000, 10**6, 10**9, HIGHEST_NS])) for _ in range(rng.choice([0, 1, 50, 500]))]
             for _ in range(rng.randint(1, 4))]
    whole = LatencyHistogram()
    for values in parts:
        whole.add(filled(values))
    everything = filled([v for values in parts for v in values])
    wanted = [0, 1, 50, 90, 99, 99.9, 100]
    assert whole.percentiles(wanted) == everything.percentiles(wanted)
    assert list(whole.buckets()) == list(everything.buckets())
    assert whole.encode() == everything.encode()
    assert (whole.count, whole.min, whole.max, whole.sum) == (everything.count, everything.min, everything.max,
                                                              everything.sum)


def test_the_counts_are_summed_once_for_every_percentile_until_more_is_recorded() -> None:
    """Every percentile, count below a bound and figure of a histogram comes from one walk of its counts,
    made again only once it holds more."""
    histogram = filled([1_000, 2_000, 3_000])
    assert histogram.percentiles([50]) == {50: 2_000}
    walked = histogram._walk()
    assert histogram.percentiles([99])[99] == 3_000 and histogram.counts_up_to([2_000]) == [2]
    assert histogram._walk()[1] is walked[1]
    histogram.record(4_000_000)
    assert histogram._walk()[1] is not walked[1]
    assert histogram.percentiles([99]) == {99: 4_000_000} and histogram.counts_up_to([2_000, 10**7]) == [2, 4]


@pytest.mark.parametrize("seed", range(10))
def test_the_running_totals_are_the_same_summed_in_c_or_in_python(seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """The optional C loop (runner.load.native._counts) and itertools.accumulate, which sums where
    it is not built, give the same totals, so the same percentiles."""
    from array import array

    from runner.stats import histogram as module

    if module._summed is None:
        pytest.skip("the native extension is not built here")
    rng = random.Random(seed)
    counts = array("Q", (rng.choice([0, 0, 1, 7, 2**40]) for _ in range(rng.randint(1, 40_000))))
    start = rng.randrange(len(counts))
    stop = rng.randint(start, len(counts))
    in_c = list(module.running_totals(counts, start, stop))
    values = [rng.randint(0, rng.choice([10**4, 10**8, HIGHEST_NS])) for _ in range(2_000)]
    wanted = [0, 50, 90, 99, 99.9, 100]
    found = filled(values).percentiles(wanted)
    monkeypatch.setattr(module, "_summed", None)
    assert list(module.running_totals(counts, start, stop)) == in_c
    assert filled(values).percentiles(wanted) == found
    with pytest.raises(IndexError):
        module._summed_in_c(counts, start, len(counts) + 1)  # type: ignore[misc]
