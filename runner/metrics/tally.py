"""Counting a run's results for Prometheus: per URL slot and status, latencies by bucket.

Counting costs a few integer increments and one bisect per result, in plain Python objects
(prometheus_client's own Counter.inc() and Histogram.observe() take a lock each, several per
request at tens of thousands of requests a second). The collector (runner.metrics.collector)
turns a copy of these counts into metric families when /metrics is scraped or a push is made.
"""

from __future__ import annotations

from bisect import bisect_left
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import replace
from fractions import Fraction
from typing import Protocol

# The url label and its bound are the URL list's (the summary's perUrl counts URLs alike); named here too.
from runner.config.targets import OTHER_URLS as OTHER_URLS
from runner.config.targets import URL_SERIES_CAP as URL_SERIES_CAP
from runner.config.targets import UrlSlots as UrlSlots
from runner.config.targets import url_label as url_label
from runner.config.targets import url_slots as url_slots
from runner.core.lazymethods import dataclass
from runner.load.model import LoadModel
from runner.load.native.records import MetricsCounts
from runner.load.result import Result, is_good
from runner.load.schedule import Skips
from runner.metrics import native
from runner.stats.client import is_late
from runner.stats.figures import BACKENDS_SHOWN, NO_BACKEND, OTHER_BACKENDS
from runner.stats.recorder import BACKENDS_KEPT


def exponential_buckets(start: float, factor: float, count: int) -> list[float]:
    """Go's prometheus.ExponentialBuckets, multiplication for multiplication, so the `le` labels match."""
    buckets = []
    for _ in range(count):
        buckets.append(start)
        start *= factor
    return buckets


@dataclass(frozen=True)
class HistogramSpec:
    """One exposed histogram: its name, help, and bucket bounds in its own unit."""

    name: str
    help: str
    unit_ns: int  # slow_cooker's: values truncated to this unit; 0 for seconds, not truncated
    bounds: tuple[float, ...]

    def last_ns(self, bound: float) -> int:
        """The largest latency in ns that an observation <= `bound` can have come from."""
        if self.unit_ns:
            return (int(bound) + 1) * self.unit_ns - 1  # slow_cooker observes float(ns // unit)
        return int(Fraction(repr(bound)) * 1_000_000_000)


SLOW_COOKER_HISTOGRAMS = (
    HistogramSpec("latency_ms", "RPC latency distributions in milliseconds.", 1_000_000,
                  tuple(exponential_buckets(0.5, 1.3, 50))),
    HistogramSpec("latency_us", "RPC latency distributions in microseconds.", 1_000,
                  tuple(exponential_buckets(1, 1.35, 50))),
    HistogramSpec("latency_ns", "RPC latency distributions in nanoseconds.", 1,
                  tuple(exponential_buckets(1, 1.5, 50))),
)


DURATION = HistogramSpec(
    "soak_request_duration_seconds",
    "Latency of responses (any status), from just before sending to the response headers, by URL.",
    0,
    (0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60),
)


# Every histogram's bucket edges as latencies in ns, in one sorted list: a result finds its
# place among all of them with one bisect, and each histogram's buckets are sums of places. The
# native histograms' bounds (runner.metrics.native, 511 of them) are among them, so a place lies
# in one native bucket: the bisect takes two more steps, and a push adds up four times the places.
EDGES_NS = tuple(sorted({spec.last_ns(b) for spec in (*SLOW_COOKER_HISTOGRAMS, DURATION) for b in spec.bounds}
                        | set(native.EDGES_NS)))


# Each histogram's bounds, as places among EDGES_NS: bucket i counts the results in places 0 .. PLACES[name][i].
PLACES = {spec.name: [EDGES_NS.index(spec.last_ns(b)) for b in spec.bounds]
          for spec in (*SLOW_COOKER_HISTOGRAMS, DURATION)}


STATUSES = 1000  # responses are counted per URL in a list indexed by status; any other status as 0


def reached_by(slots: UrlSlots, urls: Iterable[int]) -> UrlSlots:
    """The slots, with series only for those of the URLs (indices) this process sends to.

    A shard of a run split over pods sends to some URLs only (Shard.urls); a zero-valued series
    for every other URL of the list told Prometheus that this shard soaked them, and its alerts
    (per URL, per pod) blamed URLs that some other shard found healthy. Slots stay where they
    are, so every shard labels a URL alike, and "other" means the same everywhere.
    """
    return replace(slots, shown=frozenset(slots.slot_of[url] for url in urls))


class MetricsTally:
    """Every result of a run, counted by URL slot and status, and every response's latency by bucket.

    It is the engine's sink's second stop, after the recorder, when metrics are on.
    `shown`: with a backendHeader, how a backend's name may be shown (redact.Secrets.shown, as
    the recorder shows it); responses are then counted by backend label (backend_label).
    """

    def __init__(self, slots: UrlSlots, model: LoadModel | None = None,
                 shown: Callable[[str], str] | None = None) -> None:
        # The latency a response counts with, as the recorder measures it; None for a sum of
        # other tallies (summed(), WorkerTallies), which records nothing itself.
        self._model = model
        self._followed: Callable[[], MetricsCounts | None] | None = None  # an engine's own counts (follow())
        self._slot_of = slots.slot_of
        self._shown = shown
        self._labels: dict[str, str] = {}  # a backend's raw value -> its label, for the first BACKENDS_KEPT met
        count = len(slots.labels)
        self.skipped = 0
        self.late = 0  # sends that left LATE_NS or more after they could and should have (the client's delay)
        self.connections_opened = 0
        self.connections_closed = 0
        self.backends: Counter[str] = Counter()  # responses by backend label
        self.statuses = [[0] * STATUSES for _ in range(count)]  # per slot: responses by status
        self.failures: Counter[tuple[int, str]] = Counter()  # (slot, error kind) -> failed sends
        places = len(EDGES_NS) + 1
        self.good = [[0] * places for _ in range(count)]  # per slot: good responses per place among EDGES_NS
        self.bad = [[0] * places for _ in range(count)]
        self.good_ns = [0] * count  # per slot: the sum of good responses' latencies
        self.bad_ns = [0] * count

    def took_over(self, protocols: list[str], free_ns: int) -> None:
        """Connections a warm-up handed on to the run, counted as the run's (Recorder.took_over)."""
        self.connections_opened += len(protocols)

    def record(self, result: Result | Skips) -> None:
        if isinstance(result, Skips):
            self.skipped += result.count
            return
        if is_late(result):
            self.late += 1
        if result.connected_ns:
            self.connections_opened += 1
        self.connections_closed += result.connections_closed
        slot = self._slot_of[result.url_index]
        if result.error:
            self.failures[slot, result.error] += 1
            return
        if self._shown is not None:
            label = self._labels.get(result.backend)
            if label is None:
                label = self._backend_label(result.backend)
            self.backends[label] += 1
        status = result.status
        self.statuses[slot][status if status < STATUSES else 0] += 1
        assert self._model is not None, "a sum of tallies records nothing"
        latency = self._model.latency_ns(result)
        place = bisect_left(EDGES_NS, latency)
        if is_good(status):
            self.good[slot][place] += 1
            self.good_ns[slot] += latency
        else:
            self.bad[slot][place] += 1
            self.bad_ns[slot] += latency

    def _backend_label(self, raw: str) -> str:
        """A backend's label: its name as shown, for the first BACKENDS_SHOWN names met, else
        OTHER_BACKENDS. First met, not most counted: a series never changes backend midway."""
        assert self._shown is not None
        name = self._shown(raw) if raw else NO_BACKEND
        named = len(self.backends) - (OTHER_BACKENDS in self.backends)
        label = name if name in self.backends or named < BACKENDS_SHOWN else OTHER_BACKENDS
        if len(self._labels) < BACKENDS_KEPT:
            self._labels[raw] = label
        return label

    def add_backends(self, counts: Mapping[str, int]) -> None:
        """Count responses by backend, already named as shown (an interval's Tally.backends, from an
        engine that counts them itself, in the order met): labelled as _backend_label labels them.
        A new Counter each time, so that a snapshot taken from another thread meanwhile reads one whole."""
        backends = Counter(self.backends)
        for name, n in counts.items():
            named = len(backends) - (OTHER_BACKENDS in backends)
            label = name if name in backends or named < BACKENDS_SHOWN else OTHER_BACKENDS
            backends[label] += n
        self.backends = backends

    def layout(self) -> tuple[tuple[int, ...], int, tuple[int, ...]]:
        """What an engine that counts for it (follow()) needs to count as record() does: each URL's
        slot, the number of slots, and the bucket edges (records.Config.metrics)."""
        return self._slot_of, len(self.statuses), EDGES_NS

    def follow(self, counted: Callable[[], MetricsCounts | None]) -> None:
        """From now on, hold what an engine counts itself (`counted()`, read at each snapshot) instead
        of counting results here: the native engine tells Python of no single result."""
        self._followed = counted

    def snapshot(self) -> MetricsTally:
        """A copy, taken from another thread while results keep coming (each copy is one C call).

        The copy only holds counts: it records nothing, and a worker sends it home pickled
        with every interval, so it leaves out the map of every URL to its slot. Following the
        engine's own counts (follow()), it is what the engine has counted so far."""
        if self._followed is not None:
            counted = self._followed()
            copy = holding(counted) if counted is not None else MetricsTally(UrlSlots((), (), 0))
            copy.backends = Counter(self.backends)  # add_backends' (the engine's recorder's, per interval)
            return copy
        counts = MetricsCounts(
            skipped=self.skipped, late=self.late, opened=self.connections_opened, closed=self.connections_closed,
            statuses=[list(counts) for counts in self.statuses], failures=self.failures,
            good=[list(places) for places in self.good], bad=[list(places) for places in self.bad],
            good_ns=list(self.good_ns), bad_ns=list(self.bad_ns))
        return holding(counts, self._model, self.backends)


def holding(counts: MetricsCounts, model: LoadModel | None = None,
            backends: Mapping[str, int] | None = None) -> MetricsTally:
    """A MetricsTally that only holds `counts` and `backends` (what snapshot() gives): it records
    nothing and has no map of URLs to slots, so a worker's copy pickles small. An engine that
    counts for it (follow()) counts backends per interval instead (add_backends)."""
    tally = MetricsTally.__new__(MetricsTally)
    tally._model = model
    tally._followed = None
    tally._slot_of = ()
    tally._shown = None
    tally._labels = {}
    tally.skipped, tally.late = counts.skipped, counts.late
    tally.connections_opened, tally.connections_closed = counts.opened, counts.closed
    tally.backends = Counter(backends or {})
    tally.failures = Counter(counts.failures)
    tally.statuses, tally.good, tally.bad = counts.statuses, counts.good, counts.bad
    tally.good_ns, tally.bad_ns = counts.good_ns, counts.bad_ns
    return tally


def summed(tallies: Sequence[MetricsTally], slots: UrlSlots) -> MetricsTally:
    """Several processes' counts as one: every count added up (counters of a run split over workers)."""
    total = MetricsTally(slots)
    for tally in tallies:
        total.skipped += tally.skipped
        total.late += tally.late
        total.connections_opened += tally.connections_opened
        total.connections_closed += tally.connections_closed
        total.backends.update(tally.backends)
        total.failures.update(tally.failures)
        for slot in range(len(slots.labels)):
            total.statuses[slot] = [a + b for a, b in zip(total.statuses[slot], tally.statuses[slot], strict=True)]
            total.good[slot] = [a + b for a, b in zip(total.good[slot], tally.good[slot], strict=True)]
            total.bad[slot] = [a + b for a, b in zip(total.bad[slot], tally.bad[slot], strict=True)]
            total.good_ns[slot] += tally.good_ns[slot]
            total.bad_ns[slot] += tally.bad_ns[slot]
    return total


class WorkerTallies:
    """A run split over local workers, counted: the sum of each worker's latest counts.

    Each worker counts its own results and sends a copy of its counts with every interval it
    closes and with its summary (see workers.py), so the parent's metrics are those of the
    last closed interval: what a push after that interval must hold. A scrape in between
    sees them up to an interval late, and every counter only ever goes up.
    """

    def __init__(self, slots: UrlSlots) -> None:
        self.slots = slots  # made once, here, and handed to every worker
        self._latest: dict[int, MetricsTally] = {}
        self._sum = MetricsTally(slots)

    def update(self, worker: int, counts: MetricsTally) -> None:
        self._latest[worker] = counts
        self._sum = summed(list(self._latest.values()), self.slots)  # swapped whole: a scrape reads one sum

    def snapshot(self) -> MetricsTally:
        return self._sum  # never changed once made


class Counts(Protocol):
    """Where the metric families' counts come from: this process's tally, or its workers'."""

    def snapshot(self) -> MetricsTally: ...
