"""The recorder: classification, intervals on the grid, the run as the sum of its intervals."""

from __future__ import annotations

import dataclasses
import json
import math
import random
import statistics

import pytest

from runner.core.redact import Secrets
from runner.load.model import Bench, Closed, Open
from runner.load.result import ErrorKind, Result
from runner.load.schedule import Grid, Schedule, Skips
from runner.stats.record import tally_from_record, tally_record
from runner.stats.recorder import (
    ERROR_GROUPS,
    GROUP_URLS,
    OTHER_TEXTS,
    ErrorGroup,
    Interval,
    Recorder,
    Tally,
    interval_due,
)

START = 5_000_000_000_000
SECOND = 1_000_000_000
MS = 1_000_000
GRID = Grid(START, 10 * SECOND)


def response(status: int = 200, *, end: int = START + SECOND, latency: int = 2 * MS, due: int | None = None,
             start: int | None = None, body_hash: int | None = None, bytes_in: int = 100, bytes_out: int = 0,
             url_index: int = 0) -> Result:
    """A result with a response: sent at `start`, headers `latency` later, body read by `end`."""
    start = end - latency - 1000 if start is None else start
    return Result(seq=0, url_index=url_index, due_ns=start if due is None else due, start_ns=start,
                  headers_ns=start + latency, end_ns=end, status=status, bytes_in=bytes_in, bytes_out=bytes_out,
                  body_hash=body_hash)


def failure(kind: str = ErrorKind.REFUSED, text: str = "connection refused", *, end: int = START + SECOND,
            url_index: int = 0) -> Result:
    return Result(url_index=url_index, start_ns=end - MS, end_ns=end, error=kind, error_text=text, bytes_out=10)


def skip(*, due: int = START + SECOND) -> Skips:
    """One skipped send, due at `due`."""
    return Skips(Schedule(due, 1.0, 1), 0, 0, 1)


# --- classification ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("status", "good"),
    [(200, True), (201, True), (204, True), (299, True), (301, True), (302, True), (304, True), (399, True),
     (400, True), (404, True), (418, True), (429, True), (499, True),
     (500, False), (502, False), (503, False), (504, False), (599, False),
     (100, False), (101, False), (199, False), (0, False)],
)
def test_status_classification(status: int, good: bool) -> None:
    tally = Tally()
    tally.add(response(status), 2 * MS, 0)
    assert (tally.good, tally.bad, tally.failed) == ((1, 0, 0) if good else (0, 1, 0))
    assert tally.responses == 1 and tally.requests == 1
    assert tally.statuses == {status: 1}
    assert tally.latency.count == 1
    result = response(status)
    assert (result.good, result.bad, result.failed) == (good, not good, False)


@pytest.mark.parametrize("kind", tuple(ErrorKind))
def test_an_error_is_failed_and_has_no_latency(kind: str) -> None:
    tally = Tally()
    result = failure(kind, f"{kind}: something")
    result.status = 200  # even with a status (a body read error after the headers), an error is a failure
    tally.add(result, 5 * MS, 0)
    assert (tally.good, tally.bad, tally.failed, tally.skipped) == (0, 0, 1, 0)
    assert tally.requests == 1 and tally.responses == 0
    assert tally.latency.count == 0
    assert tally.min_ns == tally.max_ns == 0
    assert tally.errors == {kind: 1}
    assert tally.error_groups == {(kind, f"{kind}: something"): ErrorGroup(1, f"{kind}: something", 0, {0})}
    assert tally.statuses == {}
    assert result.failed and not result.good and not result.bad


def test_skipped_is_counted_apart_and_is_not_a_request() -> None:
    recorder = Recorder(GRID, Closed())
    recorder.record(skip())
    tally = recorder.close(final=True).tally
    assert (tally.good, tally.bad, tally.failed, tally.skipped) == (0, 0, 0, 1)
    assert tally.requests == 0 and tally.latency.count == 0


def test_bytes_are_counted_for_responses_and_failures_not_skips() -> None:
    recorder = Recorder(GRID, Closed())
    recorder.record(response(bytes_in=612, bytes_out=5, end=START + 1))
    recorder.record(failure(end=START + 2))  # 10 bytes out
    recorder.record(skip(due=START + 3))
    tally = recorder.close(final=True).tally
    assert (tally.bytes_in, tally.bytes_out) == (612, 15)


def test_failures_are_grouped_by_kind_and_text_across_urls() -> None:
    tally = Tally()
    for url_index, text in [(0, "a"), (0, "a"), (1, "a"), (0, "b")]:
        tally.add(failure(ErrorKind.TIMEOUT, text, url_index=url_index), 0, 0)
    tally.add(failure(ErrorKind.CLOSED, "a"), 0, 0)
    assert tally.error_groups == {(ErrorKind.TIMEOUT, "a"): ErrorGroup(3, "a", 0, {0, 1}),
                                  (ErrorKind.TIMEOUT, "b"): ErrorGroup(1, "b", 0, {0}),
                                  (ErrorKind.CLOSED, "a"): ErrorGroup(1, "a", 0, {0})}
    assert tally.errors == {ErrorKind.TIMEOUT: 4, ErrorKind.CLOSED: 1}


def test_texts_that_differ_in_their_numbers_are_one_group_with_a_real_example() -> None:
    tally = Tally()
    for expected in range(1000, 1975):
        tally.add(failure(ErrorKind.CLOSED, f"closed: cut short (received 3 bytes, expected {expected})"), 0, 0)
    tally.add(failure(ErrorKind.CLOSED, "closed: cut short (received 3 bytes, expected 1000)"), 0, 0)
    assert list(tally.error_groups) == [(ErrorKind.CLOSED, "closed: cut short (received # bytes, expected #)")]
    group = tally.error_groups[(ErrorKind.CLOSED, "closed: cut short (received # bytes, expected #)")]
    assert (group.count, group.text, group.varied) == (976, "closed: cut short (received 3 bytes, expected 1000)", True)


def test_a_group_keeps_a_bounded_number_of_urls() -> None:
    tally = Tally()
    for url_index in range(100_000):
        tally.add(failure(url_index=url_index), 0, 0)
    [group] = tally.error_groups.values()
    assert group.count == 100_000 and group.url == 0
    assert len(group.urls) == GROUP_URLS and group.more_urls


def test_the_number_of_groups_is_bounded_and_nothing_is_lost() -> None:
    """A server that says something new every time: groups up to the bound, then its kind's overflow group."""
    tally = Tally()
    for k in range(ERROR_GROUPS + 50):
        tally.add(failure(ErrorKind.PROTOCOL, f"protocol: {'x' * (k + 1)}"), 0, 0)
    tally.add(failure(ErrorKind.REFUSED, "refused, new kind"), 0, 0)
    assert len(tally.error_groups) == ERROR_GROUPS + 2
    assert tally.error_groups[(ErrorKind.PROTOCOL, OTHER_TEXTS)].count == 50
    assert tally.error_groups[(ErrorKind.PROTOCOL, OTHER_TEXTS)].varied
    assert tally.error_groups[(ErrorKind.REFUSED, OTHER_TEXTS)].count == 1
    assert sum(g.count for g in tally.error_groups.values()) == tally.failed == ERROR_GROUPS + 51
    merged = Tally()
    for _ in range(3):
        merged.merge(tally)
    assert len(merged.error_groups) == ERROR_GROUPS + 2
    assert sum(g.count for g in merged.error_groups.values()) == merged.failed == 3 * tally.failed


def test_merged_groups_do_not_depend_on_the_order_of_merging() -> None:
    """Shards and workers merge in any order: counts, URLs and whether there were more agree."""
    parts = []
    for part in range(4):
        tally = Tally()
        for url_index in range(part * 9, part * 9 + 12):
            tally.add(failure(ErrorKind.CLOSED, f"closed after {url_index} bytes", url_index=url_index), 0, 0)
        parts.append(tally)
    orders = [parts, parts[::-1], [parts[2], parts[0], parts[3], parts[1]]]
    merged = []
    for order in orders:
        total = Tally()
        for tally in order:
            total.merge(tally)
        [group] = total.error_groups.values()
        merged.append((group.count, group.urls, group.more_urls, group.varied))
    assert merged[0] == merged[1] == merged[2] == (48, set(range(GROUP_URLS)), True, True)


def test_merging_copies_groups_so_a_reported_interval_never_changes() -> None:
    interval = Tally()
    interval.add(failure(), 0, 0)
    run = Tally()
    run.merge(interval)
    run.merge(interval)
    assert interval.error_groups[(ErrorKind.REFUSED, "connection refused")].count == 1


def test_error_groups_survive_their_record() -> None:
    tally = Tally()
    for url_index in range(30):
        tally.add(failure(ErrorKind.CLOSED, f"closed after {url_index} bytes", url_index=url_index), 0, 0)
    tally.add(failure(ErrorKind.TLS, "tls: bad certificate", url_index=3), 0, 0)
    back = tally_from_record(json.loads(json.dumps(tally_record(tally))))
    assert back.error_groups == tally.error_groups


def test_an_earlier_versions_error_texts_are_read_into_groups() -> None:
    """A shard summary saved before errors were grouped (`errorTexts`, no kind) can still be merged."""
    record = tally_record(Tally())
    del record["errorGroups"]
    record["failed"] = 6
    record["errorTexts"] = [[0, "connection refused", 2], [1, "connection refused", 1], [0, "got 10 bytes", 3]]
    back = tally_from_record(record)
    assert back.error_groups == {("", "connection refused"): ErrorGroup(3, "connection refused", 0, {0, 1}),
                                 ("", "got # bytes"): ErrorGroup(3, "got 10 bytes", 0, {0})}


def test_the_recorder_hides_secrets_and_escapes_texts_before_they_are_counted() -> None:
    recorder = Recorder(GRID, Bench(), shown=Secrets(["S3cretT0ken"]).shown)
    recorder.record(failure(ErrorKind.PROTOCOL, "protocol: bad line 'Bearer S3cretT0ken\x1b[2J'"))
    recorder.record(dataclasses.replace(response(), server="srv S3cretT0ken\x07"))
    assert recorder.bench is not None and recorder.bench.server == "srv <hidden>\\x07"  # ab's "Server Software"
    tally = recorder.close()
    assert list(tally.tally.error_groups) == [(ErrorKind.PROTOCOL, "protocol: bad line 'Bearer <hidden>\\x#b[#J'")]
    assert next(iter(tally.tally.error_groups.values())).text == "protocol: bad line 'Bearer <hidden>\\x1b[2J'"


def test_the_recorder_escapes_texts_without_secrets_too() -> None:
    recorder = Recorder(GRID, Closed())
    recorder.record(failure(ErrorKind.PROTOCOL, "a\x1bb"))
    assert [g.text for g in recorder.close().tally.error_groups.values()] == ["a\\x1bb"]


# --- min, max, mean, stdev ---------------------------------------------------------------------


def test_min_max_mean_stdev_exact() -> None:
    latencies = [3 * MS, 1 * MS, 7 * MS, 2 * MS, 2 * MS]
    tally = Tally()
    for latency in latencies:
        tally.add(response(latency=latency), latency, 0)
    assert tally.min_ns == 1 * MS
    assert tally.max_ns == 7 * MS
    assert tally.mean_ns == 3 * MS
    assert tally.stdev_ns == pytest.approx(statistics.pstdev(latencies), rel=1e-12)
    assert tally.stdev_ns == pytest.approx(math.sqrt(4.4) * MS, rel=1e-12)


def test_min_is_the_first_latency_not_zero() -> None:
    tally = Tally()
    tally.add(failure(), 0, 0)  # failures do not set min
    tally.add(response(latency=9 * MS), 9 * MS, 0)
    assert tally.min_ns == 9 * MS == tally.max_ns
    assert tally.stdev_ns == 0.0


def test_empty_tally() -> None:
    tally = Tally()
    assert (tally.min_ns, tally.max_ns, tally.mean_ns, tally.stdev_ns) == (0, 0, 0.0, 0.0)
    assert tally.requests == tally.responses == 0


def test_stdev_is_stable_for_large_equal_latencies() -> None:
    tally = Tally()
    for _ in range(1000):
        tally.add(response(latency=3_600 * SECOND), 3_600 * SECOND, 0)
    assert tally.stdev_ns == 0.0
    assert tally.mean_ns == 3_600 * SECOND


# --- body hash ---------------------------------------------------------------------------------


def test_hash_mismatches_count_only_sampled_bodies() -> None:
    expected = 0xCBF29CE484222325
    tally = Tally()
    tally.add(response(body_hash=None), MS, expected)  # not sampled: not checked
    tally.add(response(body_hash=expected), MS, expected)  # sampled, matches
    tally.add(response(body_hash=12345), MS, expected)  # sampled, differs
    tally.add(response(503, body_hash=1), MS, expected)  # differs, whatever the status
    tally.add(failure(), 0, expected)  # no body
    assert tally.hash_checked == 3
    assert tally.hash_mismatches == 2
    assert type(tally.hash_mismatches) is int


def test_recorder_uses_its_hash_value() -> None:
    recorder = Recorder(GRID, Closed(), hash_value=42)
    recorder.record(response(body_hash=42))
    recorder.record(response(body_hash=43))
    interval = recorder.close()
    assert (interval.tally.hash_checked, interval.tally.hash_mismatches) == (2, 1)


# --- intervals on the grid ---------------------------------------------------------------------


def test_results_count_in_the_interval_of_their_end() -> None:
    recorder = Recorder(GRID, Closed())
    recorder.record(response(200, end=START + 1 * SECOND))
    recorder.record(response(200, end=START + 10 * SECOND - 1))
    recorder.record(response(500, end=START + 10 * SECOND))  # on the boundary: interval 1
    recorder.record(response(404, end=START + 15 * SECOND))
    first = recorder.close()
    assert (first.index, first.start_ns, first.end_ns) == (0, START, START + 10 * SECOND)
    assert (first.tally.good, first.tally.bad) == (2, 0)
    second = recorder.close()
    assert (second.index, second.start_ns, second.end_ns) == (1, START + 10 * SECOND, START + 20 * SECOND)
    assert (second.tally.good, second.tally.bad) == (1, 1)
    assert second.span_ns == 10 * SECOND


def test_an_interval_closed_late_keeps_its_own_results_only() -> None:
    """The report for interval 0 runs 300 ms late: results that ended in interval 1 meanwhile
    stay in interval 1, and results of interval 0 that arrive before the close still count in 0."""
    recorder = Recorder(GRID, Closed())
    recorder.record(response(end=START + 9 * SECOND))
    recorder.record(response(end=START + 10 * SECOND + 100 * MS))  # already interval 1
    recorder.record(response(end=START + 10 * SECOND - 1))  # recorded late, but ended in interval 0
    recorder.record(failure(end=START + 10 * SECOND + 200 * MS))
    first = recorder.close()
    assert (first.tally.good, first.tally.failed) == (2, 0)
    second = recorder.close()
    assert (second.tally.good, second.tally.failed) == (1, 1)
    assert recorder.next_index == 2


def test_a_result_for_an_already_closed_interval_goes_to_the_next_open_one() -> None:
    recorder = Recorder(GRID, Closed())
    recorder.close()
    recorder.record(response(end=START + 5 * SECOND))  # interval 0 is closed already
    assert recorder.close().tally.good == 1


def test_connections_taken_over_from_a_warmup_are_opened_in_the_interval_they_join() -> None:
    """Issue 32: a warm-up's connections vanished from the run's counts, which then closed more than
    they opened (interval 0: 0 opened, 5 closed). Those the run takes over count as opened in it:
    before its start, in interval 0; after an interval closed, in the open one; after its end, in
    the drain; and by what they speak in its connections. A session with none adds nothing."""
    recorder = Recorder(GRID, Closed())
    recorder.drain_from(START + 25 * SECOND)
    recorder.took_over(["HTTP/1.1", "HTTP/1.1"], START - 300 * MS)  # free before the run began
    recorder.took_over([], START - 200 * MS)
    recorder.record(dataclasses.replace(response(end=START + 2 * SECOND), connections_closed=1))
    first = recorder.close()
    assert (first.tally.connections_opened, first.tally.connections_closed) == (2, 1)
    recorder.took_over(["HTTP/1.1 TLSv1.3"], START + 5 * SECOND)  # interval 0 had closed: interval 1's
    recorder.took_over(["HTTP/1.1"], START + 26 * SECOND)  # after the run's end: the drain's
    assert recorder.close().tally.connections_opened == 1
    assert recorder.close(final=True).tally.connections_opened == 0
    assert recorder.total.connections_opened == 4 and recorder.total.connections_closed == 1
    assert recorder.connections == {"HTTP/1.1": 3, "HTTP/1.1 TLSv1.3": 1}


def test_skips_count_in_the_interval_of_their_due_time() -> None:
    recorder = Recorder(GRID, Closed())
    recorder.record(skip(due=START + 3 * SECOND))
    recorder.record(skip(due=START + 13 * SECOND))
    assert recorder.close().tally.skipped == 1
    assert recorder.close().tally.skipped == 1


def test_an_empty_interval() -> None:
    recorder = Recorder(GRID, Closed())
    interval = recorder.close()
    assert isinstance(interval, Interval)
    assert (interval.index, interval.tally.requests, interval.tally.latency.count) == (0, 0, 0)


def test_a_partial_last_interval_ends_at_the_stop_time() -> None:
    recorder = Recorder(GRID, Closed())
    recorder.close()
    recorder.record(response(end=START + 12 * SECOND))
    last = recorder.close(START + 13 * SECOND, final=True)
    assert (last.index, last.start_ns, last.end_ns, last.span_ns) == (1, START + 10 * SECOND, START + 13 * SECOND,
                                                                      3 * SECOND)
    assert last.tally.good == 1


def test_the_final_close_absorbs_results_recorded_after_its_end() -> None:
    recorder = Recorder(GRID, Closed())
    recorder.record(response(end=START + 1 * SECOND))
    recorder.record(response(end=START + 11 * SECOND))  # in flight when sending stopped at 10.5 s
    recorder.record(failure(ErrorKind.CANCELLED, "cancelled", end=START + 35 * SECOND))
    last = recorder.close(START + 10 * SECOND + 500 * MS, final=True)
    assert (last.tally.good, last.tally.failed) == (2, 1)
    assert recorder.total.requests == 3
    assert recorder.next_index == 1


def test_a_non_final_close_does_not_absorb_later_intervals() -> None:
    recorder = Recorder(GRID, Closed())
    recorder.record(response(end=START + 11 * SECOND))
    assert recorder.close().tally.requests == 0
    assert recorder.total.requests == 0
    assert recorder.close().tally.requests == 1
    assert recorder.total.requests == 1


# --- the run is the sum of its intervals -------------------------------------------------------


def test_the_run_tally_is_the_merge_of_the_intervals() -> None:
    rng = random.Random(11)
    recorder = Recorder(GRID, Closed(), hash_value=7)
    all_latencies = []
    for _ in range(3000):
        end = START + rng.randrange(0, 50 * SECOND)
        roll = rng.random()
        if roll < 0.05:
            recorder.record(failure(rng.choice(tuple(ErrorKind)), "e", end=end))
        elif roll < 0.1:
            recorder.record(skip(due=end))
        else:
            latency = rng.randrange(100_000, 900 * MS)
            all_latencies.append(latency)
            recorder.record(response(rng.choice([200, 204, 302, 404, 500, 503]), end=end, latency=latency,
                                     body_hash=rng.choice([None, 7, 8])))
    intervals = [recorder.close() for _ in range(4)] + [recorder.close(START + 50 * SECOND, final=True)]
    run = recorder.total
    summed = Tally()
    for interval in intervals:
        summed.merge(interval.tally)
    for name in ("good", "bad", "failed", "skipped", "hash_checked", "hash_mismatches", "bytes_in", "bytes_out"):
        assert getattr(run, name) == getattr(summed, name) == sum(getattr(i.tally, name) for i in intervals), name
    assert (run.min_ns, run.max_ns) == (summed.min_ns, summed.max_ns)
    assert (run.latency.sum, run.latency.sum_sq) == (summed.latency.sum, summed.latency.sum_sq)
    assert all(i.tally.requests for i in intervals)
    assert run.good + run.bad == len(all_latencies)
    assert run.requests + run.skipped == 3000
    assert run.min_ns == min(all_latencies) == min(i.tally.min_ns for i in intervals if i.tally.responses)
    assert run.max_ns == max(all_latencies) == max(i.tally.max_ns for i in intervals)
    assert run.mean_ns == pytest.approx(statistics.fmean(all_latencies), rel=1e-12)
    assert run.stdev_ns == pytest.approx(statistics.pstdev(all_latencies), rel=1e-9)
    assert run.statuses == summed.statuses and sum(run.statuses.values()) == len(all_latencies)
    assert run.errors == summed.errors and sum(run.errors.values()) == run.failed
    wanted = [50, 75, 90, 95, 99, 99.9, 100]
    assert run.latency.count == len(all_latencies)
    assert run.latency.percentiles(wanted) == summed.latency.percentiles(wanted)
    assert list(run.latency.buckets()) == list(summed.latency.buckets())
    assert [i.index for i in intervals] == [0, 1, 2, 3, 4]


def test_merge_min_ignores_spans_without_responses() -> None:
    a, b, c = Tally(), Tally(), Tally()
    a.add(response(latency=5 * MS), 5 * MS, 0)
    b.add(failure(), 0, 0)  # min_ns stays 0 here
    c.add(response(latency=3 * MS), 3 * MS, 0)
    run = Tally()
    for part in (b, a, b, c):
        run.merge(part)
    assert run.min_ns == 3 * MS
    assert run.max_ns == 5 * MS
    assert run.failed == 2 and run.good == 2


# --- open model: corrected latency -------------------------------------------------------------


def test_closed_model_latency_is_from_the_actual_send() -> None:
    recorder = Recorder(GRID, Closed())
    assert recorder.uncorrected is None
    due = START + SECOND
    recorder.record(response(due=due, start=due + 40 * MS, latency=5 * MS, end=due + 50 * MS))
    tally = recorder.close().tally
    assert tally.min_ns == tally.max_ns == 5 * MS


def test_open_model_latency_is_from_the_due_time() -> None:
    recorder = Recorder(GRID, Open(1000))
    due = START + SECOND
    late = response(due=due, start=due + 40 * MS, latency=5 * MS, end=due + 50 * MS)
    assert late.latency_ns == 5 * MS
    assert late.corrected_latency_ns == 45 * MS
    recorder.record(late)
    on_time = response(due=due + SECOND, start=due + SECOND, latency=2 * MS, end=due + SECOND + 3 * MS)
    recorder.record(on_time)
    recorder.record(failure(end=due + 2 * SECOND))  # a failure adds no latency to either
    tally = recorder.close().tally
    assert (tally.min_ns, tally.max_ns) == (2 * MS, 45 * MS)
    assert tally.latency.percentiles([100]) == {100: 45 * MS}
    assert recorder.uncorrected is not None
    assert recorder.uncorrected.count == 2
    assert recorder.uncorrected.max == 5 * MS
    assert recorder.uncorrected.percentiles([50, 100]) == {50: 2 * MS + 895, 100: 5 * MS}


def test_corrected_latency_never_counts_from_after_the_send() -> None:
    """A send that went out before its due time (a timer firing early) is measured from the send."""
    early = Result(due_ns=START + 10 * MS, start_ns=START + 9 * MS, headers_ns=START + 12 * MS, end_ns=START + 13 * MS,
                   status=200)
    assert early.corrected_latency_ns == 3 * MS == early.latency_ns


# --- per URL ---------------------------------------------------------------------------------


def test_per_url_tallies_add_up_to_the_run_and_are_bounded_by_the_url_slots() -> None:
    """Each result counts in its URL's slot too (the metrics' url slots: a URL listed twice shares
    one, URLs beyond the cap share "other"), drain included: the slots add up to the run."""
    from runner.config.targets import URL_SERIES_CAP, url_slots
    from runner.report.summary import per_url_list
    from runner.stats.runinfo import RunInfo, RunSummary

    urls = [f"http://a.example/{n}" for n in range(URL_SERIES_CAP + 5)] + ["http://a.example/0"]
    slots = url_slots(urls)
    recorder = Recorder(GRID, Closed(), slot_of=slots.slot_of)
    assert recorder.per_url is not None and len(recorder.per_url) == URL_SERIES_CAP + 1
    recorder.drain_from(START + 10 * SECOND)
    for n in range(len(urls)):
        recorder.record(response(500 if n % 3 == 0 else 200, url_index=n, latency=(n + 1) * MS))
        recorder.record(failure(url_index=n, end=START + 11 * SECOND))  # in the drain
    recorder.record(skip())
    recorder.close(final=True)
    total = recorder.total
    assert sum(t.requests for t in recorder.per_url) == total.requests == 2 * len(urls)
    assert sum(t.good for t in recorder.per_url) == total.good and sum(t.bad for t in recorder.per_url) == total.bad
    assert recorder.per_url[0].requests == 4  # listed twice: its two responses and two failures
    assert recorder.per_url[URL_SERIES_CAP].requests == 2 * 5  # the five beyond the cap, together
    assert recorder.per_url[3].latency.max == 4 * MS and recorder.per_url[3].errors == {ErrorKind.REFUSED: 1}
    from runner.config.settings import merge, settings_from
    info = RunInfo(settings_from(merge({})), urls, None, START, 1e9)
    summary = RunSummary(info, 1, START + 11 * SECOND, START + 10 * SECOND, total, None, None, None, "iterations",
                         0.0, 0, per_url=tuple(recorder.per_url))
    entries = per_url_list(summary)
    assert [e["url"] for e in entries] == [*slots.labels[:URL_SERIES_CAP], "other"]
    assert entries[-1]["urls"] == 5 and entries[3]["max"] == 4 and entries[3]["p50"] == 4
    assert entries[0]["statusCodes"] == {"200": 1, "500": 1} and entries[0]["errors"] == {"refused": 2}


def test_one_url_slot_keeps_no_per_url_tallies() -> None:
    """A run of one URL (or one URL listed twice) has nothing to split: its tally is the run's."""
    assert Recorder(GRID, Closed(), slot_of=(0, 0)).per_url is None
    assert Recorder(GRID, Closed()).per_url is None


def test_an_intervals_due_sends_stop_where_sending_stopped() -> None:
    """interval_due: one rule for Recorder's and TakenRecorder's goal `t`."""
    spans: list[tuple[int, int]] = []

    def due(start: int, end: int) -> float:
        spans.append((start, end))
        return (end - start) / 1e8

    assert interval_due(None, 0, 10**9, None) is None  # a bench has no schedule
    assert interval_due(due, 10**9, 2 * 10**9, None) == 10.0
    assert interval_due(due, 10**9, 2 * 10**9, 15 * 10**8) == 5.0  # stopped mid-interval
    assert interval_due(due, 10**9, 2 * 10**9, 5 * 10**8) == 0.0  # stopped before it began: none due
    assert spans == [(10**9, 2 * 10**9), (10**9, 15 * 10**8), (10**9, 10**9)]
