"""Counts an engine filed itself, as the recorder's records: Tally, BenchTally and Interval.

The native engine (runner/load/native) counts every result itself, in Recorder's filing
rules, and hands over one interval at a time as runner.load.native.records' records.
`TakenRecorder` has the part of Recorder's interface a run uses (close, drain_from,
next_index, and the run-wide figures: total, uncorrected, send_lag, in_unit, bench,
connections, client, drain, drain_end_ns, per_url) over an engine that is Taking, so what
comes after it (reports, thresholds, merges) never knows which engine counted. Each
interval's counts become a Tally here, once per interval; its histograms hold the engine's
counts up to each one's max (LatencyHistogram.from_counts).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping
from typing import Protocol

from runner.core.lazymethods import dataclass
from runner.core.redact import printable
from runner.load.model import LoadModel
from runner.load.native.records import BenchCounts, HistogramCounts, RunFigures, Taken, TallyCounts
from runner.load.schedule import Grid
from runner.stats.client import ClientMeter, PaceTerms
from runner.stats.figures import NO_BACKEND, OTHER_BACKENDS
from runner.stats.histogram import LatencyHistogram
from runner.stats.phases import PhaseTally
from runner.stats.recorder import (
    BACKENDS_KEPT,
    OTHER_TEXTS,
    BenchTally,
    ErrorGroup,
    Interval,
    Tally,
    error_pattern,
    interval_due,
    phased,
)

PROTOCOL = "HTTP/1.1"  # what every native connection speaks (Recorder.connections' key, with its TLS version)


class Taking(Protocol):
    """An engine that files its results itself and hands them over an interval at a time (the
    native one: runner.load.native.engine)."""

    def take(self, k: int, *, final: bool = False, until_ns: int | None = None) -> Taken:
        ...

    def figures(self) -> RunFigures:
        ...

    def drain_from(self, t_ns: int) -> None:
        ...


@dataclass(frozen=True)
class ConnectionCounts:
    """Connections the engine opened (sockets made, one per address a dial tried) and closed (by
    either side, for any reason: a failure, the server's close, a lifetime's end, a stop that cut
    a request off; the idle ones left at the run's end are closed uncounted, as FastSession.aclose
    closes them) in an interval (as it was taken: each counts where the engine was when it
    happened) or a run."""

    opened: int
    closed: int


class TakenRecorder:
    """Recorder's interface over the intervals an engine takes (see the module's docstring)."""

    def __init__(self, engine: Taking, grid: Grid, model: LoadModel, *,
                 due: Callable[[int, int], float] | None = None, unit_ns: int | None = None,
                 shown: Callable[[str], str] = printable, terms: PaceTerms | None = None,
                 live_bench: bool = True) -> None:
        """`live_bench`: a bench's figures go with every interval (Interval.bench), as a local worker
        sends them home (runner.run.workers); without it they are taken at the final close only, the
        intervals before it carrying none: copying them out of the engine was most of a close's cost."""
        self._engine = engine
        self._live_bench = live_bench
        self._terms = terms
        self._grid = grid
        self._due = due  # the sends due between two moments (Schedule.sends_due); None for a bench
        self._unit_ns = unit_ns
        self._shown = shown
        self._next = 0
        self.total = phased()
        self.uncorrected = LatencyHistogram() if model.corrected else None
        self.in_unit = LatencyHistogram.for_unit(unit_ns) if unit_ns else None
        self.bench = BenchTally() if model.ab_phases else None
        self.send_lag = LatencyHistogram() if model.paced else None
        self.connections: Counter[str] = Counter()
        self.client = ClientMeter(grid, paced=model.paced)  # the engine's timer is its only source (close)
        self.drain: Tally | None = None
        self.drain_end_ns = 0
        # Per URL slot, for the whole run (as Recorder.per_url): the engine's, taken at the final close.
        self.per_url: list[Tally] | None = None
        # Each backend's name as shown (Recorder._backend), for the first BACKENDS_KEPT values met.
        self._backends: dict[bytes, str] = {}
        # Told each taken tally's backends (the metrics' soak_backend_responses_total), when set.
        self.backends_counted: Callable[[Mapping[str, int]], None] | None = None
        # Connections opened and closed, per interval (index k) and for the run.
        self.interval_connections: list[ConnectionCounts] = []
        self.run_connections = ConnectionCounts(0, 0)

    @property
    def next_index(self) -> int:
        return self._next

    def drain_from(self, t_ns: int) -> None:
        """As Recorder.drain_from: results ending at or after `t_ns` are the drain."""
        self._engine.drain_from(t_ns)

    def close(self, end_ns: int | None = None, *, final: bool = False, sending_end_ns: int | None = None,
              cpu_s: float | None = None, now_ns: int | None = None) -> Interval:
        """As Recorder.close: the next interval, at its grid boundary or at `end_ns` if it ends early.

        The engine first counts the skips of open-model clients waiting for room that fell
        due before the interval's end (Engine.skip_due_before, which soak.py calls there).
        """
        k = self._next
        start, end = self._grid.end_of(k - 1), self._grid.end_of(k) if end_ns is None else end_ns
        taken = self._engine.take(k, final=final, until_ns=end)
        tally = self._counted(self.tally(taken.tally))
        tally.connections_opened, tally.connections_closed = taken.opened, taken.closed
        if final:
            for later in taken.later:
                tally.merge(self._counted(self.tally(later)))
            if taken.drain is not None:
                self.drain = self._counted(self.tally(taken.drain))
                self.drain_end_ns = taken.drain_end_ns
                self.total.merge(self.drain)
            if taken.per_url is not None:
                self.per_url = [self.tally(counts) for counts in taken.per_url]
        self.total.merge(tally)
        self._next += 1
        self.interval_connections.append(ConnectionCounts(taken.opened, taken.closed))
        self._meter_ticks(taken)
        live = self.bench is not None and self._live_bench  # a bench's figures with every interval, as Recorder's
        if final or live:
            self._take_figures()
        client = self.client.close(cpu_s, end if now_ns is None else now_ns, start, end, final=final)
        due = interval_due(self._due, start, end, sending_end_ns)
        interval = Interval(k, start, end, tally, sending_end_ns, client=client,
                            bench=self.bench if final or live else None, due=due, terms=self._terms or PaceTerms())
        self.client.counted(k, interval.pace)
        return interval

    def leftover(self) -> Tally:
        """As Recorder.leftover: what no closed interval holds, added up (a warm-up's requests that
        came back once it had ended, runner.run.warmup), with the connections opened and closed since
        the last close; taken from the engine once, when it is done, as are its run-wide figures
        (connections). No interval is closed: next_index stays."""
        taken = self._engine.take(self._next, final=True)
        tally = self.tally(taken.tally)
        tally.connections_opened, tally.connections_closed = taken.opened, taken.closed
        for later in taken.later:
            tally.merge(self.tally(later))
        if taken.drain is not None:
            tally.merge(self.tally(taken.drain))
        self._take_figures()
        return tally

    def _meter_ticks(self, taken: Taken) -> None:
        """The engine timer's firings since the last take, to the client meter as the Python engine's
        are: those on time within a period in bulk, each later one (a stall) with its times, so the
        ticks it swallowed count in the intervals they were due in; then when the next is due, so
        one not yet run by the close counts as late until then (the process was stopped)."""
        for due, ran in taken.stalls:
            self.client.tick(due, ran)
        self.client.loop_lags(histogram(taken.loop_lag))
        self.client.expect(taken.next_tick_ns)

    def tally(self, counts: TallyCounts | None) -> Tally:
        """One of the engine's tallies as a Tally (None: an empty one); its failure texts made
        printable, as Recorder.record does."""
        if counts is None:
            return phased()
        tally = Tally(
            good=counts.good, bad=counts.bad, failed=counts.failed, skipped=counts.skipped,
            skipped_at_end=counts.skipped_at_end, late=counts.late, late_max_ns=counts.late_max_ns,
            kernel_clocked=counts.kernel_clocked,
            delayed_max_ns=counts.delayed_max_ns,
            bytes_in=counts.bytes_in, bytes_out=counts.bytes_out, statuses=Counter(counts.statuses),
            errors=Counter(counts.errors), latency=histogram(counts.latency),
            phases=phases(counts.phases),
            connections_opened=counts.opened, connections_closed=counts.closed,
            hash_checked=counts.hash_checked, hash_mismatches=counts.hash_mismatches,
        )
        for raw, count in counts.backends:  # in the order met, as Recorder met them
            tally.count_backend(self._backend(raw), count)
        if counts.other_backends:
            tally.count_backend(OTHER_BACKENDS, counts.other_backends)
        for group in counts.groups:
            shown = self._shown(group.text)
            key = (group.kind, OTHER_TEXTS if group.pattern == OTHER_TEXTS else error_pattern(shown))
            tally.add_group(key, ErrorGroup(group.total, shown, group.url, set(group.urls), group.more_urls,
                                            group.varied))
        return tally

    def _backend(self, raw: bytes) -> str:
        """A backend's value as Recorder counts it: shown (redacted, printable), its bytes read as
        latin-1 (one character each, whatever they are), NO_BACKEND for a response without it."""
        shown = self._backends.get(raw)
        if shown is None:
            shown = self._shown(raw.decode("latin-1")) or NO_BACKEND
            if len(self._backends) < BACKENDS_KEPT:
                self._backends[raw] = shown
        return shown

    def _counted(self, tally: Tally) -> Tally:
        """A taken tally, its backends told to whoever counts them too (the metrics)."""
        if tally.backends and self.backends_counted is not None:
            self.backends_counted(tally.backends)
        return tally

    def _take_figures(self) -> None:
        """The run-wide figures so far (copied by the engine, so they may be kept)."""
        figures = self._engine.figures()
        if self.send_lag is not None and figures.send_lag is not None:
            self.send_lag = histogram(figures.send_lag)
            assert figures.lateness is not None  # kept with send_lag
            self.client.lateness = histogram(figures.lateness)
        if self.uncorrected is not None and figures.uncorrected is not None:
            self.uncorrected = histogram(figures.uncorrected)
        if self.in_unit is not None and figures.in_unit is not None:
            self.in_unit = histogram(figures.in_unit, self._unit_ns)
        self.connections = by_protocol(figures.connections, figures.tls_connections)
        self.run_connections = ConnectionCounts(figures.opened, figures.closed)
        if self.bench is not None and figures.bench is not None:
            self.bench = self.bench_tally(figures.bench)

    def bench_tally(self, counts: BenchCounts) -> BenchTally:
        server = counts.server
        return BenchTally(
            waiting=histogram(counts.waiting), total_reused=histogram(counts.total_reused),
            connect_new=histogram(counts.connect_new), processing_new=histogram(counts.processing_new),
            total_new=histogram(counts.total_new), document_length=counts.document_length,
            length_mismatches=counts.length_mismatches, kept_alive=counts.kept_alive,
            header_bytes=counts.header_bytes, server=self._shown(server) if server else server,
            last_end_ns=counts.last_end_ns, first_response_ns=counts.first_response_ns,
            server_ns=counts.server_ns, other_lengths=Counter(counts.other_lengths),
        )


def by_protocol(connections: int, tls: Mapping[str, int]) -> Counter[str]:
    """Recorder.connections from the engine's count of new connections that carried a response and
    the count of those over TLS by version: {"HTTP/1.1": 3, "HTTP/1.1 TLSv1.3": 2}: the HTTP
    version, then the TLS version if any, as the Python engine names each (httpx_transport.protocol)."""
    found = Counter({f"{PROTOCOL} {version}": n for version, n in tls.items() if n})
    plain = connections - sum(tls.values())
    if plain:
        found[PROTOCOL] = plain
    return found


def phases(parts: tuple[HistogramCounts, HistogramCounts, HistogramCounts, HistogramCounts, int]) -> PhaseTally:
    """The engine's (connect_new, tls_new, ttfb, body, reused) as a PhaseTally: it looks no name up
    (Python does, between intervals), so each new connection's dns is 0, and tls_new holds the
    handshakes of those made over TLS only: the others' tls is 0."""
    connect_new, tls_new, ttfb, body, reused = parts
    tally = PhaseTally(connect_new=histogram(connect_new), tls_new=histogram(tls_new), ttfb=histogram(ttfb),
                       body=histogram(body), reused=reused)
    tally.dns_new.record(0, tally.connect_new.count)
    tally.tls_new.record(0, tally.connect_new.count - tally.tls_new.count)
    return tally


def histogram(parts: HistogramCounts, unit_ns: int | None = None) -> LatencyHistogram:
    """The engine's HistogramCounts as a LatencyHistogram over the same counts."""
    return LatencyHistogram.from_counts(*parts, unit_ns=unit_ns)
