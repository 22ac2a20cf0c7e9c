"""Remote write and native histograms, pure parts: buckets against their definition in exact integers,
the hand encoder against protobuf's own decoding, the backlog's bound and what a write's answer means."""

from __future__ import annotations

import io
import random
import struct
import threading
import tracemalloc
from bisect import bisect_left

import pytest
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

from runner.metrics import native, remotewrite
from runner.metrics.export import Answer, Backlog, Exporter, Frame, Outcome, judge
from runner.metrics.native import NativeHistogram
from runner.metrics.tally import EDGES_NS
from runner.stats.histogram import LatencyHistogram, slot

F = descriptor_pb2.FieldDescriptorProto


def _prompb() -> dict[str, type]:
    """prompb's WriteRequest and the messages it holds, from their field numbers and types as
    prometheus/prompb/types.proto and remote.proto declare them (no generated code)."""
    file = descriptor_pb2.FileDescriptorProto(name="prompb_test.proto", package="prometheus", syntax="proto3")

    def message(name: str, *fields: tuple[str, int, int, int, str]) -> None:
        m = file.message_type.add(name=name)
        for field_name, number, kind, label, type_name in fields:
            f = m.field.add(name=field_name, number=number, type=kind, label=label)
            if type_name:
                f.type_name = type_name

    one, many = F.LABEL_OPTIONAL, F.LABEL_REPEATED
    message("Label", ("name", 1, F.TYPE_STRING, one, ""), ("value", 2, F.TYPE_STRING, one, ""))
    message("Sample", ("value", 1, F.TYPE_DOUBLE, one, ""), ("timestamp", 2, F.TYPE_INT64, one, ""))
    message("BucketSpan", ("offset", 1, F.TYPE_SINT32, one, ""), ("length", 2, F.TYPE_UINT32, one, ""))
    message("Histogram", ("count_int", 1, F.TYPE_UINT64, one, ""), ("count_float", 2, F.TYPE_DOUBLE, one, ""),
            ("sum", 3, F.TYPE_DOUBLE, one, ""), ("schema", 4, F.TYPE_SINT32, one, ""),
            ("zero_threshold", 5, F.TYPE_DOUBLE, one, ""), ("zero_count_int", 6, F.TYPE_UINT64, one, ""),
            ("negative_spans", 8, F.TYPE_MESSAGE, many, ".prometheus.BucketSpan"),
            ("negative_deltas", 9, F.TYPE_SINT64, many, ""),
            ("positive_spans", 11, F.TYPE_MESSAGE, many, ".prometheus.BucketSpan"),
            ("positive_deltas", 12, F.TYPE_SINT64, many, ""), ("reset_hint", 14, F.TYPE_INT32, one, ""),
            ("timestamp", 15, F.TYPE_INT64, one, ""))
    message("TimeSeries", ("labels", 1, F.TYPE_MESSAGE, many, ".prometheus.Label"),
            ("samples", 2, F.TYPE_MESSAGE, many, ".prometheus.Sample"),
            ("histograms", 4, F.TYPE_MESSAGE, many, ".prometheus.Histogram"))
    message("WriteRequest", ("timeseries", 1, F.TYPE_MESSAGE, many, ".prometheus.TimeSeries"))
    pool = descriptor_pool.DescriptorPool()
    pool.Add(file)
    return {name: message_factory.GetMessageClass(pool.FindMessageTypeByName(f"prometheus.{name}"))
            for name in ("WriteRequest", "Histogram")}


PROMPB = _prompb()


def decode(body: bytes):  # type: ignore[no-untyped-def]
    request = PROMPB["WriteRequest"]()
    request.ParseFromString(body)
    return request


def exact_bucket(ns: int) -> int | None:
    """The bucket of `ns` by the definition, in whole numbers: i such that 2^((i-1)/16) < ns/1e9 <= 2^(i/16),
    that is (ns^16 <= 2^i * 10^144) first holding at i; the zero bucket up to 2^-20 s."""
    if ns * 2**20 <= 10**9:
        return None

    def at_most(i: int) -> bool:  # ns <= 1e9 * 2^(i/16)
        return ns**16 * 2 ** max(-i, 0) <= 2 ** max(i, 0) * 10**144

    i = native.LOW_INDEX
    while not at_most(i):
        i += 1
    return i


def test_every_edge_is_the_last_nanosecond_of_its_bucket() -> None:
    for index, edge in zip(range(native.LOW_INDEX - 1, native.HIGH_INDEX + 1), native.EDGES_NS, strict=True):
        if index < native.LOW_INDEX:
            assert exact_bucket(edge) is None and exact_bucket(edge + 1) == native.LOW_INDEX
            continue
        assert exact_bucket(edge) == index, index
        assert exact_bucket(edge + 1) == index + 1, index
    assert native.EDGES_NS[-1] >= 3_600_000_000_000 > native.EDGES_NS[-2]  # up to an hour, the HDR histograms' top
    # 4.4% wide: "a few percent", as histogram_quantile's error
    assert all(b / a < 1.0454 for a, b in zip(native.EDGES_NS[1:], native.EDGES_NS[2:]))  # (whole ns: 0.1% at 1 us)


def test_a_latency_counted_by_place_lands_in_its_exact_bucket() -> None:
    rng = random.Random(11)
    to_bucket = native.buckets_of_places(EDGES_NS)
    values = [0, 1, 953, 954, *native.EDGES_NS[:40], *(e + 1 for e in native.EDGES_NS[:40])]
    values += [int(10 ** rng.uniform(2, 12.5)) for _ in range(3000)]
    places = [0] * (len(EDGES_NS) + 1)
    for v in values:
        places[bisect_left(EDGES_NS, v)] += 1
    h = native.from_places(places, to_bucket, sum(values))
    want: dict[int | None, int] = {}
    for v in values:
        want[exact_bucket(v)] = want.get(exact_bucket(v), 0) + 1
    assert dict(h.buckets) == want
    assert h.count == len(values) and h.sum_s == sum(values) / 1e9


def test_an_hdr_histogram_in_native_buckets_is_exact_to_its_own_buckets() -> None:
    rng = random.Random(5)
    histogram, values = LatencyHistogram(), [0, 0, 500]
    values += [int(10 ** rng.uniform(3, 11)) for _ in range(2000)]
    for v in values:
        histogram.record(v)
    got = native.counts_of(histogram)
    assert sum(got.values()) == len(values)
    # A value counts in the bucket of the first edge whose HDR bucket is not below its own (counts_up_to's rule).
    want: dict[int | None, int] = {}
    for v in values:
        place = next(p for p, edge in enumerate(native.EDGES_NS) if slot(v) <= slot(edge))
        key = None if place == 0 else native.LOW_INDEX + place - 1
        want[key] = want.get(key, 0) + 1
    assert got == want


@pytest.mark.parametrize("seed", range(30))
def test_spans_and_deltas_decode_to_the_buckets(seed: int) -> None:
    rng = random.Random(seed)
    indices = sorted(rng.sample(range(-320, 200), rng.randrange(1, 40)))
    buckets = [(i, rng.randrange(1, 10**6)) for i in indices]
    runs, deltas = native.spans(buckets)
    decoded, index, count = {}, 0, 0
    iterator = iter(deltas)
    for n, (offset, length) in enumerate(runs):
        index = offset if n == 0 else index + offset
        for _ in range(length):
            count += next(iterator)
            if count:
                decoded[index] = count
            index += 1
    assert decoded == dict(buckets)
    assert sum(length for _, length in runs) == len(deltas)
    offset, dense = native.dense(buckets)
    assert {offset + 1 + k: n for k, n in enumerate(dense) if n} == dict(buckets)  # OTLP's bucket j is Prometheus' j+1


def test_the_encoder_writes_what_protobuf_reads() -> None:
    labels = (("job", "soak"), ("__name__", "soak_requests_total"), ("url", "http://h/ä?x=1"))
    h = NativeHistogram({None: 7, -300: 1, -299: 2, -295: 3, 12: 4}, 17, 12.5)
    body = remotewrite.write_request([
        remotewrite.sample_series(labels, 1234.5, 1_796_300_000_123),
        remotewrite.sample_series((("__name__", "x"),), -0.25, 0),
        remotewrite.histogram_series((("__name__", "soak_request_duration_seconds"), ("url", "u")), h, 42),
    ])
    request = decode(body)
    first, second, third = request.timeseries
    assert [(label.name, label.value) for label in first.labels] == sorted(labels)  # sorted, as the spec asks
    assert [(s.value, s.timestamp) for s in first.samples] == [(1234.5, 1_796_300_000_123)]
    assert [(s.value, s.timestamp) for s in second.samples] == [(-0.25, 0)]
    (histogram,) = third.histograms
    assert (histogram.count_int, histogram.sum, histogram.schema, histogram.timestamp) == (17, 12.5, 4, 42)
    assert (histogram.zero_threshold, histogram.zero_count_int) == (2**-20, 7)
    runs, deltas = native.spans(h.positive())
    assert [(s.offset, s.length) for s in histogram.positive_spans] == runs
    assert list(histogram.positive_deltas) == deltas
    # Joined, two requests are one holding both's series: how frames kept after a failure go with the next.
    assert len(decode(body + body).timeseries) == 6


def test_an_empty_histogram_is_a_valid_message() -> None:
    (series,) = decode(remotewrite.histogram_series((("__name__", "h"),), NativeHistogram({}, 0, 0.0), 1)).timeseries
    assert series.histograms[0].count_int == 0 and not series.histograms[0].positive_spans


@pytest.mark.parametrize(("status", "said", "sent", "outcome"), [
    (204, "", 3, Outcome.WRITTEN), (200, "", 0, Outcome.WRITTEN),
    (400, "out of order sample", 3, Outcome.REFUSED), (404, "", 0, Outcome.REFUSED), (413, "", 0, Outcome.REFUSED),
    (429, "", 0, Outcome.KEPT), (500, "", 0, Outcome.KEPT), (503, "", 3, Outcome.KEPT), (0, "", 3, Outcome.KEPT),
    (500, "native histograms are disabled", 3, Outcome.NO_NATIVE),
    (400, "native histograms are disabled", 3, Outcome.NO_NATIVE),
    (500, "native histograms are disabled", 0, Outcome.KEPT),  # none sent: not them
])
def test_what_an_answer_means(status: int, said: str, sent: int, outcome: Outcome) -> None:
    assert judge(Answer(status, "", said), sent) == (outcome, False)


def test_a_receiver_that_writes_fewer_histograms_than_it_was_sent_is_found_out() -> None:
    written = {"X-Prometheus-Remote-Write-Histograms-Written": "0"}
    assert judge(Answer(204, "", "", written), 5) == (Outcome.WRITTEN, True)
    assert judge(Answer(204, "", "", {"X-Prometheus-Remote-Write-Histograms-Written": "5"}), 5) == (Outcome.WRITTEN,
                                                                                                  False)
    assert judge(Answer(204, "", "", written), 0) == (Outcome.WRITTEN, False)


def test_the_backlog_stays_bounded_over_a_thousand_intervals() -> None:
    """A receiver down for 1,000 intervals: the backlog holds at most its limit, the newest frames, in order."""
    limit = 1 << 20
    backlog = Backlog(limit)
    frame_bytes = 40_000  # about a write of 3 URLs' series
    tracemalloc.start()
    try:
        for k in range(1000):
            backlog.add(Frame(struct.pack("<I", k) + bytes(frame_bytes), bytes(1000), 3))
            assert backlog.held <= limit
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    kept = len(backlog)
    assert kept == limit // (frame_bytes + 4 + 1000) and backlog.dropped == 1000 - kept
    assert peak < 2 * limit  # the frames kept, and one on its way in
    body, histograms = backlog.body()
    firsts = [struct.unpack("<I", body[i:i + 4])[0] for i in range(0, len(body), frame_bytes + 4 + 1000)]
    assert firsts == list(range(1000 - kept, 1000)) and histograms == 3 * kept
    assert len(backlog.body(histograms=False)[0]) == kept * (frame_bytes + 4)


def test_a_failing_receiver_is_one_line_per_cause_and_its_points_go_with_the_next_write() -> None:
    """1,000 writes to a receiver down, then failing with 500s, then back: one line for each cause, the
    backlog bounded throughout, and the first write that is answered carries every frame kept."""
    answers = [Answer(0, "Connection refused")] * 600 + [Answer(500, "Internal Server Error", "boom")] * 399 + [
        Answer(204, "No Content")]
    sent: list[bytes] = []
    step = threading.Semaphore(0)

    def send(body: bytes) -> Answer:
        sent.append(body)
        step.release()
        return answers[len(sent) - 1]

    err = io.StringIO()
    exporter: Exporter[int] = Exporter("remoteWrite", "http://127.0.0.1:9/api/v1/write",
                                       lambda k: Frame(k.to_bytes(4, "big") * 2500), send, err, backlog=Backlog(100_000))
    try:
        for k in range(1000):
            exporter.write_soon(k)
            assert step.acquire(timeout=10)  # one write at a time, so that each interval makes one
            assert exporter.backlog.held <= 100_000
        assert exporter.wait(1000, 10)
    finally:
        exporter.close()
    assert err.getvalue().splitlines() == [
        "soak: remoteWrite http://127.0.0.1:9/api/v1/write: Connection refused; the points are kept and go with the "
        "next write",
        "soak: remoteWrite http://127.0.0.1:9/api/v1/write: more than 97 KiB of points not yet written: the oldest "
        "are dropped",
        "soak: remoteWrite http://127.0.0.1:9/api/v1/write: HTTP 500 Internal Server Error: boom; the points are "
        "kept and go with the next write",
    ]
    last = sent[-1]
    frames = [int.from_bytes(last[i:i + 4], "big") for i in range(0, len(last), 10_000)]
    assert frames == list(range(990, 1000)) and len(exporter.backlog) == 0 and exporter.writes == 1
