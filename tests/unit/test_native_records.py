"""The native engine's tallies as the recorder's records: pure conversion, no engine needed."""

from __future__ import annotations

from collections import Counter
from typing import Any

from runner.config.targets import url_slots
from runner.load.model import Bench, Closed
from runner.load.native.records import (
    BenchCounts,
    GroupCounts,
    HistogramCounts,
    MetricsCounts,
    RunFigures,
    Taken,
    TallyCounts,
)
from runner.load.schedule import Grid
from runner.metrics.tally import MetricsTally, holding
from runner.stats.figures import BACKENDS_SHOWN, NO_BACKEND, OTHER_BACKENDS
from runner.stats.native import TakenRecorder, by_protocol
from runner.stats.recorder import BACKENDS_KEPT, OTHER_TEXTS, Tally

EMPTY = HistogramCounts(None, 0, 0, 0, 0, 0)


def recorder(shown=lambda text: text.replace("s3cret", "***")) -> TakenRecorder:  # noqa: ANN001
    return TakenRecorder(None, Grid(0, 10**9), Closed(), shown=shown)  # type: ignore[arg-type]  # tally() needs no engine


def counts(**changed: Any) -> TallyCounts:
    base = TallyCounts(good=3, bad=1, failed=4, skipped=2, skipped_at_end=1, late=1, late_max_ns=5_000_000,
                       delayed_max_ns=7_000_000, kernel_clocked=3,
                       bytes_in=10, bytes_out=0, statuses={200: 3, 503: 1}, errors={"closed": 3, "protocol": 1},
                       groups=[], latency=EMPTY, phases=(EMPTY, EMPTY, EMPTY, EMPTY, 0), backends=[], other_backends=0,
                       opened=0, closed=0, hash_checked=3, hash_mismatches=1)
    return base._replace(**changed)


def test_a_tally_keeps_every_count() -> None:
    tally = recorder().tally(counts())
    assert (tally.good, tally.bad, tally.failed, tally.skipped, tally.late, tally.late_max_ns) == (3, 1, 4, 2, 1,
                                                                                                    5_000_000)
    assert tally.delayed_max_ns == 7_000_000 and tally.skipped_at_end == 1
    assert (tally.hash_checked, tally.hash_mismatches) == (3, 1)  # the bhash column, and the summary's
    assert tally.statuses == Counter({200: 3, 503: 1}) and tally.errors == Counter({"closed": 3, "protocol": 1})
    assert tally.requests == 8 and tally.latency.count == 0
    assert recorder().tally(None).requests == 0  # an interval nothing landed in


def test_a_tally_takes_the_engines_phases_dns_and_tls_0() -> None:
    connect, ttfb, body = (HistogramCounts(None, 2, 5, 9, 14, 106), HistogramCounts(None, 4, 1, 7, 16, 70),
                           HistogramCounts(None, 4, 2, 2, 8, 16))
    phases = recorder().tally(counts(phases=(connect, EMPTY, ttfb, body, 2))).phases
    assert phases is not None and phases.reused == 2
    found = phases.histograms()
    assert {name: (h.count, h.min, h.max, h.sum) for name, h in found.items()} == {
        "dns": (4, 0, 0, 0), "connect": (4, 0, 9, 14), "tls": (4, 0, 0, 0), "ttfb": (4, 1, 7, 16),
        "body": (4, 2, 2, 8)}


def test_a_tally_takes_the_handshakes_of_the_connections_made_over_tls() -> None:
    """Three new connections, two over TLS (handshakes of 5 and 8 ns): tls is those two and a 0 for
    the plain one, as PhaseTally.add times a plain connection's tls; two reused add their zeros."""
    connect, tls = HistogramCounts(None, 3, 4, 9, 20, 0), HistogramCounts(None, 2, 5, 8, 13, 0)
    ttfb = body = HistogramCounts(None, 5, 1, 1, 5, 5)
    phases = recorder().tally(counts(phases=(connect, tls, ttfb, body, 2))).phases
    assert phases is not None
    found = phases.histograms()
    assert (found["tls"].count, found["tls"].min, found["tls"].max, found["tls"].sum) == (5, 0, 8, 13)
    assert (found["dns"].count, found["dns"].sum, found["connect"].count) == (5, 0, 5)


def test_connections_are_counted_by_what_they_spoke() -> None:
    assert by_protocol(5, {"TLSv1.3": 2, "TLSv1.2": 1}) == Counter(
        {"HTTP/1.1": 2, "HTTP/1.1 TLSv1.3": 2, "HTTP/1.1 TLSv1.2": 1})
    assert by_protocol(2, {"TLSv1.3": 2}) == Counter({"HTTP/1.1 TLSv1.3": 2})
    assert by_protocol(0, {}) == Counter()


def test_backends_are_counted_as_the_recorder_counts_them() -> None:
    """The engine's raw values, in the order met: shown (secrets hidden), "" as NO_BACKEND, and the
    count beyond the engine's SOAK_BACKENDS_KEPT values as OTHER_BACKENDS, as Tally.count_backend."""
    raw = [(b"pod-1", 3), (b"", 2), (b"s3cret-pod", 1), (b"caf\xe9", 1)]
    tally = recorder().tally(counts(backends=raw, other_backends=4))
    assert list(tally.backends.items()) == [("pod-1", 3), (NO_BACKEND, 2), ("***-pod", 1), ("caf\u00e9", 1),
                                            (OTHER_BACKENDS, 4)]
    python = Tally()  # the Python engine's recorder, counting the same responses one by one
    for name, n in [("pod-1", 3), (NO_BACKEND, 2), ("***-pod", 1), ("caf\u00e9", 1)]:
        for _ in range(n):
            python.count_backend(name)
    python.count_backend(OTHER_BACKENDS, 4)
    assert tally.backends == python.backends


def test_a_full_engine_table_spills_into_other_as_a_full_tally_does() -> None:
    raw = [(f"pod-{i}".encode(), 1) for i in range(BACKENDS_KEPT)]
    tally = recorder().tally(counts(backends=raw, other_backends=7))
    assert len(tally.backends) == BACKENDS_KEPT + 1 and tally.backends[OTHER_BACKENDS] == 7


def test_a_url_tally_keeps_its_connections() -> None:
    tally = recorder().tally(counts(opened=5, closed=4))
    assert (tally.connections_opened, tally.connections_closed) == (5, 4)


def test_metrics_label_each_intervals_backends_as_the_first_met() -> None:
    """MetricsTally.add_backends: the first BACKENDS_SHOWN names met keep their label, any later
    one is OTHER_BACKENDS, as record() labels them; a snapshot following the engine carries them."""
    metrics = MetricsTally(url_slots(["http://a/"]), shown=str)
    first = {f"pod-{i}": 1 for i in range(BACKENDS_SHOWN)}
    metrics.add_backends(first)
    metrics.add_backends({"pod-late": 2, "pod-0": 1})
    assert metrics.backends[OTHER_BACKENDS] == 2 and metrics.backends["pod-0"] == 2
    assert "pod-late" not in metrics.backends
    metrics.follow(lambda: None)
    assert metrics.snapshot().backends == metrics.backends


def test_failure_texts_are_shown_and_grouped_by_what_is_shown() -> None:
    groups = [
        GroupCounts("closed", "closed: received # bytes", 2, "closed: received 3 bytes", 0, (0, 1), False, True),
        GroupCounts("protocol", "protocol: s#cret #", 1, "protocol: s3cret 1", 1, (1,), False, False),
        GroupCounts("protocol", "protocol: s#cret #", 1, "protocol: s3cret 2", 0, (0,), True, False),
        GroupCounts("closed", OTHER_TEXTS, 1, "closed: whatever", 0, (0,), False, False),
    ]
    tally = recorder().tally(counts(groups=groups))
    assert list(tally.error_groups) == [("closed", "closed: received # bytes"), ("protocol", "protocol: *** #"),
                                        ("closed", OTHER_TEXTS)]
    assert tally.error_groups[("closed", "closed: received # bytes")].urls == {0, 1}
    shown = tally.error_groups[("protocol", "protocol: *** #")]  # two of the engine's groups, one once shown
    assert (shown.count, shown.text, shown.urls, shown.more_urls, shown.varied) == (2, "protocol: *** 1", {0, 1},
                                                                                    True, True)
    assert all("s3cret" not in group.text for group in tally.error_groups.values())


def test_metrics_counts_become_a_metrics_tally() -> None:
    tally = holding(MetricsCounts(skipped=1, late=2, opened=4, closed=3, statuses=[[0] * 1000],
                                  failures={(0, "reset"): 3}, good=[[1, 2]], bad=[[0, 0]], good_ns=[30], bad_ns=[0]))
    assert tally.skipped == 1 and tally.late == 2 and tally.failures == Counter({(0, "reset"): 3})
    assert (tally.connections_opened, tally.connections_closed) == (4, 3)
    assert tally.snapshot().good == [[1, 2]]


class _Engine:
    """What TakenRecorder takes from: empty intervals, and how often the run's figures were copied."""

    def __init__(self) -> None:
        self.copies = 0

    def take(self, k: int, *, final: bool = False, until_ns: int | None = None) -> Taken:
        return Taken(None, [], None, 0, EMPTY, [], None, 0, 0, None)

    def figures(self) -> RunFigures:
        self.copies += 1
        bench = BenchCounts(EMPTY, EMPTY, EMPTY, EMPTY, EMPTY, 612, 0, 5, 900, "nginx", 0, 0, 0, {})
        return RunFigures(5, None, None, None, None, None, 1, {}, 1, 0, False, 0, bench)


def test_a_bench_alone_takes_its_figures_from_the_engine_at_its_end_only() -> None:
    """Copying ab's figures out of the engine was most of an interval close's cost; only a local
    worker, which sends them home with every interval, takes them at each close."""
    for live, copies in ((False, 1), (True, 3)):
        engine = _Engine()
        taken = TakenRecorder(engine, Grid(0, 10**9), Bench(), live_bench=live)  # type: ignore[arg-type]
        before = [taken.close(cpu_s=0.0, now_ns=(k + 1) * 10**9) for k in range(2)]
        last = taken.close(final=True, cpu_s=0.0, now_ns=3 * 10**9)
        assert engine.copies == copies
        assert [interval.bench is not None for interval in before] == [live, live]
        assert last.bench is not None and last.bench.kept_alive == 5 and last.bench.document_length == 612
