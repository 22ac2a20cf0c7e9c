"""The recorder: counts and latency histograms per interval and for the whole run.

A result counts in the interval in which it completed, judged by its own timestamp on the
fixed grid, not by when the interval was closed: a report that runs a little late does
not steal results from the next interval. Closing an interval adds it to the run's totals,
so the run is exactly the sum of its intervals.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import field

from runner.core.lazymethods import dataclass
from runner.core.measures import BACKENDS_KEPT
from runner.core.redact import printable
from runner.load.model import LoadModel
from runner.load.result import ErrorKind, Result, is_good
from runner.load.schedule import Grid, Skips
from runner.stats.client import ClientFigures, ClientMeter, Pace, PaceTerms, holds_delay, is_late, pace_of
from runner.stats.figures import NO_BACKEND, OTHER_BACKENDS, Figures, Sends
from runner.stats.histogram import LatencyHistogram
from runner.stats.phases import PhaseTally, waiting_ns

# Failures are grouped by kind and by their text with every run of digits as one placeholder:
# a server's numbers ("received 3 bytes, expected 1042") would otherwise make each failure a
# line of its own. A tally keeps at most ERROR_GROUPS groups; failures of a new text beyond
# them join their kind's OTHER_TEXTS group. A group remembers up to GROUP_URLS of the URLs it
# failed on, enough to say "3 URLs" or "more than 20 URLs": so however many URLs and texts a
# run meets, its error records stay small, in memory and in a shard's summary.
ERROR_GROUPS = 100
GROUP_URLS = 20
OTHER_TEXTS = "*"  # the pattern of a kind's overflow group: no digits pattern is a lone "*"
_DIGITS = re.compile(r"\d+")
# backendHeader: a tally counts the responses of up to BACKENDS_KEPT backends by name (the
# figures show the first BACKENDS_SHOWN of them by count; the rules, runner.config.rules, say the
# number), those of any further ones as OTHER_BACKENDS; a response without the header counts as
# NO_BACKEND (runner.stats.figures), beside the names and never in the place of one.
_NOT_NAMES = (NO_BACKEND, OTHER_BACKENDS)
# A bench counts the responses of up to this many body lengths other than the first response's
# (BenchTally.other_lengths): enough for any page whose length varies a little, in little memory.
OTHER_LENGTHS = 64


def error_pattern(text: str) -> str:
    """What failures of one group have in common: the text with each run of digits as `#`."""
    return _DIGITS.sub("#", text)


@dataclass
class ErrorGroup:
    """Failures of one kind whose texts differ at most in their numbers: how many, which URLs,
    and one real text to print (the first one seen)."""

    count: int
    text: str  # an example: a real text, never the pattern
    url: int  # the URL of the example
    urls: set[int]  # up to GROUP_URLS of the URLs these failures were on
    more_urls: bool = False  # whether they were on more URLs than `urls` holds
    varied: bool = False  # whether the texts differed (in their numbers, or in the overflow group, at all)

    def add(self, url: int, text: str) -> None:
        self.count += 1
        self._add_url(url)
        if not self.varied and text != self.text:
            self.varied = True

    def _add_url(self, url: int) -> None:
        if url not in self.urls:
            if len(self.urls) < GROUP_URLS:
                self.urls.add(url)
            else:
                self.more_urls = True

    def merge(self, other: ErrorGroup) -> None:
        """Add another span's group of the same key; this one's example stays."""
        self.count += other.count
        self.varied = self.varied or other.varied or other.text != self.text
        self.more_urls = self.more_urls or other.more_urls
        urls = self.urls | other.urls
        if len(urls) > GROUP_URLS:  # the lowest ones, so merging in any order keeps the same
            urls = set(sorted(urls)[:GROUP_URLS])
            self.more_urls = True
        self.urls = urls

    def copy(self) -> ErrorGroup:
        return ErrorGroup(self.count, self.text, self.url, set(self.urls), self.more_urls, self.varied)


@dataclass
class Tally(Sends):
    """Counts and latencies of one span of a run: one interval, or the whole run."""

    good: int = 0
    bad: int = 0
    failed: int = 0
    skipped: int = 0
    skipped_at_end: int = 0  # of the skipped, those its client got to only once sending was over (Skips.at_end)
    late: int = 0  # sends that left late (stats.client.is_late): the client's own delay
    late_max_ns: int = 0  # the latest of them
    kernel_clocked: int = 0  # responses timed by the kernel's receive timestamps (Result.kernel_clock)
    delayed_max_ns: int = 0  # the slowest response whose latency the client's delay may be in (holds_delay)
    hash_checked: int = 0
    hash_mismatches: int = 0
    bytes_in: int = 0
    bytes_out: int = 0
    connections_opened: int = 0  # sends that opened a connection (Result.connected_ns)
    connections_closed: int = 0  # connections seen to end (Result.connections_closed); never more than opened
    statuses: Counter[int] = field(default_factory=Counter)
    backends: Counter[str] = field(default_factory=Counter)  # responses by backendHeader value (count_backend)
    errors: Counter[str] = field(default_factory=Counter)  # failed sends by error kind
    error_groups: dict[tuple[str, str], ErrorGroup] = field(default_factory=dict)  # by (kind, error_pattern)
    latency: LatencyHistogram = field(default_factory=LatencyHistogram)
    # Where the responses' time went (runner.stats.phases): the recorder's intervals, drain and run
    # have it; a per-URL tally does not (a phase is the run's figure), nor one read from a record without it.
    phases: PhaseTally | None = None

    def add_late(self, result: Result) -> None:
        """Count a send that left late (stats.client.is_late), and how late."""
        if is_late(result):
            self.late += 1
            self.late_max_ns = max(self.late_max_ns, result.client_lag_ns)

    def add(self, result: Result, latency_ns: int, hash_value: int, error_text: str | None = None,
            backend: str | None = None) -> None:
        """Count one send made; `latency_ns` is used only if it got a response, `error_text`
        (the failure's text as it may be shown; by default the result's own) only if it failed,
        `backend` (its backendHeader as it may be shown; None when the run names none) only if
        it got a response."""
        self.bytes_out += result.bytes_out
        self.bytes_in += result.bytes_in
        if result.connected_ns:
            self.connections_opened += 1
        self.connections_closed += result.connections_closed
        if result.error:
            self.failed += 1
            self.errors[result.error] += 1
            self._group(result.error, result.url_index, result.error_text if error_text is None else error_text)
            return
        if is_good(result.status):
            self.good += 1
        else:
            self.bad += 1
        self.statuses[result.status] += 1
        if backend is not None:
            self.count_backend(backend or NO_BACKEND)
        if result.kernel_clock:
            self.kernel_clocked += 1
        if holds_delay(result):
            self.delayed_max_ns = max(self.delayed_max_ns, latency_ns)
        if result.body_hash is not None:
            self.hash_checked += 1
            self.hash_mismatches += result.body_hash != hash_value
        self.latency.record(latency_ns)
        if self.phases is not None:
            self.phases.add(result)

    def merge(self, other: Tally) -> None:
        """Add another span's counts and latencies to this one."""
        for name in ("good", "bad", "failed", "skipped", "skipped_at_end", "late", "kernel_clocked", "hash_checked",
                     "hash_mismatches", "bytes_in", "bytes_out", "connections_opened", "connections_closed"):
            setattr(self, name, getattr(self, name) + getattr(other, name))
        self.late_max_ns = max(self.late_max_ns, other.late_max_ns)
        self.delayed_max_ns = max(self.delayed_max_ns, other.delayed_max_ns)
        self.statuses.update(other.statuses)
        for backend, count in other.backends.items():
            self.count_backend(backend, count)
        self.errors.update(other.errors)
        for key, group in other.error_groups.items():
            self.add_group(key, group.copy())
        self.latency.add(other.latency)
        if other.phases is not None:
            if self.phases is None:
                self.phases = PhaseTally()
            self.phases.merge(other.phases)

    def count_backend(self, backend: str, count: int = 1) -> None:
        """Count responses of one backend: by its name among the first BACKENDS_KEPT, else as OTHER_BACKENDS,
        so that a header whose value changes with every response costs no more than that.

        NO_BACKEND and OTHER_BACKENDS take no name's place: OTHER_BACKENDS only ever follows
        BACKENDS_KEPT names, so the backends reached are exact up to BACKENDS_KEPT and, beyond,
        BACKENDS_KEPT (at least that many), whatever order tallies are merged or read back in."""
        backends = self.backends
        if backend in backends or backend in _NOT_NAMES:
            backends[backend] += count
            return
        named = len(backends) - (NO_BACKEND in backends) - (OTHER_BACKENDS in backends)
        backends[backend if named < BACKENDS_KEPT else OTHER_BACKENDS] += count

    def _group(self, kind: str, url: int, text: str) -> None:
        """Count one failure in its group, making the group if it is the first of its kind and text."""
        key = self._group_key(kind, error_pattern(text))
        group = self.error_groups.get(key)
        if group is None:
            self.error_groups[key] = ErrorGroup(1, text, url, {url})
        else:
            group.add(url, text)

    def add_group(self, key: tuple[str, str], group: ErrorGroup) -> None:
        """Add a group of failures (this tally's from now on) to the group where it belongs."""
        key = self._group_key(*key)
        mine = self.error_groups.get(key)
        if mine is None:
            self.error_groups[key] = group
        else:
            mine.merge(group)

    def _group_key(self, kind: str, pattern: str) -> tuple[str, str]:
        """Where a group that is not in this tally yet goes: its own key, or with ERROR_GROUPS
        already kept, its kind's overflow group."""
        if (kind, pattern) in self.error_groups or len(self.error_groups) < ERROR_GROUPS:
            return kind, pattern
        return kind, OTHER_TEXTS

    # Latency statistics of the good and bad responses, exact (0 when there were none).
    @property
    def min_ns(self) -> int:
        return self.latency.min

    @property
    def max_ns(self) -> int:
        return self.latency.max

    @property
    def mean_ns(self) -> float:
        return self.latency.mean

    @property
    def stdev_ns(self) -> float:
        """Population standard deviation of the latencies."""
        return self.latency.stdev()


def phased() -> Tally:
    """An empty tally that times its responses' phases, as the recorder's intervals and run do."""
    return Tally(phases=PhaseTally())


@dataclass
class BenchTally:
    """ab's figures for a whole bench run: per-phase timings and the counts its report needs.

    The phases are ab's (ab.c): connect = connection ready - start (0 on a kept-alive
    connection), waiting = first response byte - request written (the response headers
    stand for the first byte), total = end of body - start, processing = total - connect.
    One histogram each, for the run only: memory stays flat however long the bench.
    Only responses are timed, as ab times only the requests it completes.

    A request on a kept-alive connection has connect 0 and processing equal to its total,
    so it records two values (its total, its waiting) instead of four; phases() puts the
    four histograms together. At tens of thousands of requests a second, that is the
    difference between bookkeeping that shows in the client's CPU and bookkeeping that does not.
    """

    waiting: LatencyHistogram = field(default_factory=LatencyHistogram)
    total_reused: LatencyHistogram = field(default_factory=LatencyHistogram)  # requests with no connect
    connect_new: LatencyHistogram = field(default_factory=LatencyHistogram)  # requests that connected
    processing_new: LatencyHistogram = field(default_factory=LatencyHistogram)
    total_new: LatencyHistogram = field(default_factory=LatencyHistogram)
    document_length: int | None = None  # body length of the first response
    length_mismatches: int = 0  # responses whose body length differs from the first one's ("Length")
    kept_alive: int = 0  # responses after which the server kept the connection open (ab's "Keep-Alive requests")
    header_bytes: int = 0  # response heads, failed sends' included (what ab's "Total transferred" adds)
    server: str | None = None  # the first response's Server header ("" when it had none)
    last_end_ns: int = 0  # when the last send ended: the end of ab's "Time taken for tests"
    # For merging local workers' benches exactly (merge.merged_bench): when the first response
    # and the first Server header came, and how many responses had each length other than the
    # first one's (up to OTHER_LENGTHS lengths), so that Length can be counted again against
    # whichever worker's first response was the run's first. Touched only on a mismatch.
    first_response_ns: int = 0
    server_ns: int = 0
    other_lengths: Counter[int] = field(default_factory=Counter)

    def add(self, result: Result, server: str | None = None, *, waiting: bool = True) -> None:
        """Count one send that was made (a response or a failure; never a skip); `server`: its
        Server header as it may be shown (by default the result's own). `waiting=False`: its
        Waiting is left to the caller, the recorder, which times it once as the ttfb phase."""
        if result.end_ns > self.last_end_ns:
            self.last_end_ns = result.end_ns
        self.header_bytes += result.header_bytes
        if self.server is None and result.status:  # as ab: from the first response head, even one cut short
            self.server = result.server if server is None else server
            self.server_ns = result.end_ns
        if result.error:
            return
        start = result.start_ns
        total = result.end_ns - start
        if result.connected_ns:
            connect = result.connected_ns - start
            self.connect_new.record(connect)
            self.processing_new.record(total - connect)
            self.total_new.record(total)
        else:
            self.total_reused.record(total)
        if waiting:
            self.waiting.record(waiting_ns(result))
        if result.kept_alive:
            self.kept_alive += 1
        if self.document_length is None:
            self.document_length = result.bytes_in
            self.first_response_ns = result.end_ns
        elif result.bytes_in != self.document_length:
            self.length_mismatches += 1
            if result.bytes_in in self.other_lengths or len(self.other_lengths) < OTHER_LENGTHS:
                self.other_lengths[result.bytes_in] += 1

    def phases(self) -> dict[str, LatencyHistogram]:
        """The four phase histograms by name, in ab's row order."""
        connect = LatencyHistogram.merged(self.connect_new)
        connect.record(0, self.total_reused.count)
        processing = LatencyHistogram.merged(self.processing_new, self.total_reused)
        return {"connect": connect, "processing": processing, "waiting": self.waiting, "total": self.total}

    @property
    def total(self) -> LatencyHistogram:
        """Every timed request's total time, start to end of body."""
        return LatencyHistogram.merged(self.total_new, self.total_reused)


@dataclass(frozen=True)
class Interval:
    """A closed interval: its place on the grid and what happened in it."""

    index: int
    start_ns: int
    end_ns: int  # the grid boundary, or the stop time for a last, partial interval
    tally: Tally
    sending_end_ns: int | None = None  # when sending stopped, if it stopped before the run's end
    # A merged interval: how long sends were due in it at the run's full rate, counting each
    # shard for its share of the time it was sending (shards that started an interval late).
    due_ns: int | None = None
    client: ClientFigures = field(default_factory=ClientFigures)  # how the client itself fared
    # Bench mode: the run's ab figures so far, the live tally (read it at once): a local worker
    # sends them home with each interval, so a worker that dies later loses nothing measured.
    # The native engine's intervals carry them only there, and at the last (TakenRecorder's live_bench).
    bench: BenchTally | None = None
    # The sends the schedule made due in it (Schedule.sends_due, unrounded); None without a
    # schedule (a bench). From the load model, never worked out again downstream.
    due: float | None = None
    # What judging the client's pace needs of the run (stats.client.PaceTerms); default: no room
    # to judge skips by, the default timeout.
    terms: PaceTerms = field(default_factory=PaceTerms, repr=False, compare=False)
    # Its figures, computed once here for every report (runner.stats.figures).
    figures: Figures = field(init=False, repr=False, compare=False)
    # What the client's own delay may have changed in it (stats.client.pace_of), judged once here:
    # `client.saturated` says whether it was saturated so.
    pace: Pace = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "figures", Figures.of(self.tally, self.due, self.due_span_ns))
        object.__setattr__(self, "pace", pace_of(self.tally, self.figures, self.client, self.terms))
        self.client.saturated = self.pace.saturated

    @property
    def span_ns(self) -> int:
        return self.end_ns - self.start_ns

    @property
    def due_span_ns(self) -> int:
        """The part of the interval in which sends were due: all of it, unless sending stopped."""
        if self.due_ns is not None:
            return self.due_ns
        end = self.end_ns if self.sending_end_ns is None else min(self.end_ns, self.sending_end_ns)
        return max(0, end - self.start_ns)


def interval_due(due: Callable[[int, int], float] | None, start_ns: int, end_ns: int,
                 sending_end_ns: int | None) -> float | None:
    """The sends due in the interval from `start_ns` to `end_ns` (`due`: Schedule.sends_due; None
    without a schedule, a bench): none after sending stopped, so the goal stops growing there.
    One rule for every recorder, whichever engine counted."""
    if due is None:
        return None
    due_end = end_ns if sending_end_ns is None else min(end_ns, sending_end_ns)
    return due(start_ns, max(start_ns, due_end))


class Recorder:
    """Receives every Result (it is the engine's sink) and closes intervals on request.

    It reads each Result and lets it go; it never changes one (a later stop of the sink, the
    metrics tally, sees what the transport made).
    """

    def __init__(
        self, grid: Grid, model: LoadModel, *, due: Callable[[int, int], float] | None = None, hash_value: int = 0,
        unit_ns: int | None = None, shown: Callable[[str], str] = printable, slot_of: Sequence[int] = (),
        backends: bool = False, terms: PaceTerms | None = None,
    ) -> None:
        self._grid = grid
        self._model = model
        self._terms = terms  # for judging each interval's pace (stats.client.pace_of)
        self._due = due  # the sends due between two moments (Schedule.sends_due); None for a bench
        # How a server's or a library's text becomes printable (redact.Secrets.shown): applied to
        # every failure text and Server header before it is counted, so that no secret value and
        # no control character is ever printed, exported or merged from here on.
        self._shown = shown
        # backendHeader named: each response's backend, as shown, counted; the texts shown so
        # far kept (up to BACKENDS_KEPT), for a run meets the same few names over and over.
        self._backends: dict[str, str] | None = {} if backends else None
        self._hash_value = hash_value
        self._open: dict[int, Tally] = {}
        self._next = 0  # the first interval not yet closed
        self.total = phased()  # every closed interval's, added up (and the drain, once the last has closed)
        # Open model: latency from the actual send too, beside the corrected one.
        self.uncorrected = LatencyHistogram() if model.corrected else None
        # For the latency CSV: the run's latencies truncated to the unit, as slow_cooker records them.
        self._unit_ns = unit_ns or 1
        self.in_unit = LatencyHistogram.for_unit(unit_ns) if unit_ns else None
        # Bench mode: ab's per-phase timings and counts for the run.
        self.bench = BenchTally() if model.ab_phases else None
        # Paced runs: how late each send went out against its due time (the schedule's accuracy).
        self.send_lag = LatencyHistogram() if model.paced else None
        # Connections opened, by what they speak ("HTTP/2 TLSv1.3"): what the run really measured.
        self.connections: Counter[str] = Counter()
        # The client's own figures: loop lag, CPU, lateness (fed by the run).
        self.client = ClientMeter(grid, paced=model.paced)
        # The drain: results that came back after the last interval ended, counted apart from it.
        self._drain_from: int | None = None
        self.drain: Tally | None = None
        self.drain_end_ns = 0  # when the last of them came back
        # Per URL, for the whole run: a tally per url slot (runner.config.targets.UrlSlots: at most
        # URL_SERIES_CAP + 1, however long the list), each result counted in its URL's too. None
        # with one slot only, whose tally would be the run's.
        self._slot_of = slot_of
        slots = max(slot_of, default=0) + 1
        self.per_url: list[Tally] | None = [Tally() for _ in range(slots)] if slots > 1 else None

        self._open_interval()

    @property
    def next_index(self) -> int:
        return self._next

    def _open_interval(self) -> None:
        """Make the next interval the current one: most results land in it, found without a lookup."""
        self._current = self._open.get(self._next) or self._open.setdefault(self._next, phased())
        self._current_end = self._grid.end_of(self._next)
        if self._drain_from is not None:
            self._current_end = min(self._current_end, self._drain_from)

    def drain_from(self, t_ns: int) -> None:
        """The last interval ends at `t_ns`: results that end later are the drain, counted apart.

        So the last interval's counts, goal and latency describe its own window, not the wait
        for stragglers (up to a timeout) that follows it; the run's totals still include them.
        """
        self._drain_from = t_ns if self._drain_from is None else min(self._drain_from, t_ns)
        self._current_end = min(self._current_end, self._drain_from)

    def record(self, result: Result | Skips) -> None:
        """Count one send made, or a run of skipped ones (the engine's sink)."""
        if isinstance(result, Skips):
            self._skip(result)
            return
        end = result.end_ns
        tally = self._current if end < self._current_end else self._tally_at(end)
        if self.bench is not None:
            self.bench.add(result, self._shown(result.server), waiting=False)
        if result.protocol:
            self.connections[result.protocol] += 1
        if self.send_lag is not None and result.start_ns and result.error != ErrorKind.CANCELLED:
            self.send_lag.record(result.start_ns - result.due_ns)
            self.client.late(result.client_lag_ns)
            tally.add_late(result)
        per_url = self.per_url
        if result.error:
            text = self._shown(result.error_text)
            tally.add(result, 0, self._hash_value, text)
            if per_url is not None:
                per_url[self._slot_of[result.url_index]].add(result, 0, self._hash_value, text)
            return
        latency = self._model.latency_ns(result)
        backend = self._backend(result.backend)
        tally.add(result, latency, self._hash_value, backend=backend)
        if self._model.corrected and is_late(result):  # timed from its due time: its lateness is in it
            tally.delayed_max_ns = max(tally.delayed_max_ns, latency)
        if per_url is not None:
            per_url[self._slot_of[result.url_index]].add(result, latency, self._hash_value, backend=backend)
        if self.uncorrected is not None:
            self.uncorrected.record(result.latency_ns)
        if self.in_unit is not None:
            self.in_unit.record(latency // self._unit_ns)

    def _tally_at(self, t_ns: int) -> Tally:
        """Where what happened at `t_ns` counts: its interval, the open one if that has closed, or the drain."""
        if self._drain_from is not None and t_ns >= self._drain_from:
            return self._drained(t_ns)
        k = max(self._next, self._grid.index(t_ns))
        return self._open.get(k) or self._open.setdefault(k, phased())

    def took_over(self, protocols: list[str], free_ns: int) -> None:
        """Connections a warm-up's client handed on (runner.load.handoff.Handoff), by what they speak, free from
        `free_ns`: the run goes on over them, so they count as opened in it, in the interval they
        joined it (0, unless the warm-up's last request outlived the run's start), and its
        connectionsClosed, which counts their ends, stays at most its connectionsOpened."""
        if protocols:
            self._tally_at(free_ns).connections_opened += len(protocols)
            self.connections.update(protocols)

    def _backend(self, raw: str) -> str | None:
        """A response's backend as it may be shown (redacted and printable); None when none is counted."""
        known = self._backends
        if known is None:
            return None
        shown = known.get(raw)
        if shown is None:
            shown = self._shown(raw)
            if len(known) < BACKENDS_KEPT:
                known[raw] = shown
        return shown

    def _skip(self, skips: Skips) -> None:
        """Skipped sends count in the interval they were due in (never the drain: they were due
        before the end), or in the open one if theirs has closed: arithmetic per interval, not per send."""
        for index, count in skips.by_interval(self._grid):
            k = max(self._next, index)
            tally = self._open.get(k) or self._open.setdefault(k, phased())
            tally.skipped += count
            if skips.at_end:
                tally.skipped_at_end += count

    def _drained(self, end_ns: int) -> Tally:
        if self.drain is None:
            self.drain = phased()
        self.drain_end_ns = max(self.drain_end_ns, end_ns)
        return self.drain

    def leftover(self) -> Tally:
        """What was recorded and no closed interval holds: the drain and later intervals' results
        (a warm-up's requests that came back once it had ended, runner.run.warmup), added up."""
        tally = Tally()
        for later in self._open.values():
            tally.merge(later)
        if self.drain is not None:
            tally.merge(self.drain)
        return tally

    def close(self, end_ns: int | None = None, *, final: bool = False, sending_end_ns: int | None = None,
              cpu_s: float | None = None, now_ns: int | None = None) -> Interval:
        """Close the next interval, at its grid boundary or at `end_ns` if it ends early.

        The final interval also takes every result recorded after its end (requests that
        were in flight when sending stopped), so nothing measured is left out.
        `sending_end_ns` says when sending stopped, if it has: no sends were due after it.
        `cpu_s` and `now_ns`: the process's CPU time and the clock as it closes, for the
        client's own figures.
        """
        k = self._next
        tally = self._open.pop(k, None) or phased()
        if final:
            for later in sorted(self._open):
                tally.merge(self._open.pop(later))
            if self.drain is not None:
                self.total.merge(self.drain)
        self.total.merge(tally)
        self._next += 1
        self._open_interval()
        start = self._grid.end_of(k - 1)
        end = self._grid.end_of(k) if end_ns is None else end_ns
        client = self.client.close(cpu_s, end if now_ns is None else now_ns, start, end, final=final)
        due = interval_due(self._due, start, end, sending_end_ns)
        if self.bench is not None:
            self._bench_waiting(tally, final)
        interval = Interval(k, start, end, tally, sending_end_ns, client=client, bench=self.bench, due=due,
                            terms=self._terms or PaceTerms())
        self.client.counted(k, interval.pace)
        return interval

    def _bench_waiting(self, closed: Tally, final: bool) -> None:
        """ab's Waiting is the ttfb phase (phases.waiting_ns), timed once per response: the closed
        interval's are added to the bench's, and at the end the drain's, so that when the run ends
        it holds every response's, as if the bench had recorded each (between intervals, up to the
        last closed one)."""
        assert self.bench is not None
        for tally in (closed, self.drain if final else None):
            if tally is not None and tally.phases is not None:
                self.bench.waiting.add(tally.phases.ttfb)
