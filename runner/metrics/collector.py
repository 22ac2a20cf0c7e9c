"""Prometheus metrics of a run: counted per result, exposed as slow_cooker's and as soak_* families.

slow_cooker's own names come first, with its meanings, so its dashboards keep working:

    requests      every result, failures included       (untyped, as plain `requests`)
    successes     good responses only (status 200-499)  (untyped, as plain `successes`)
    latency_ms    histograms of good responses' latencies, each truncated to its unit,
    latency_us    in slow_cooker's buckets (ms: 0.5 x 1.3^k; us: 1 x 1.35^k; ns: 1 x 1.5^k,
    latency_ns    50 buckets each)

prometheus_client insists that a counter's samples end in `_total`; slow_cooker's Go client
exposes plain `requests` and `successes`, so those two are untyped: the same series names,
and rate() and increase() work on them as before. Beside them, names that follow Prometheus'
conventions, with labels for the URL and the status class:

    soak_requests_total{url,status_class}     every result; status_class 1xx..5xx, or "failed"
    soak_failures_total{url,kind}             failed sends by kind (refused, timeout, ...)
    soak_skipped_total                        sends that were due but not sent
    soak_late_sends_total                     sends that left late by the client's own delay
    soak_connections_opened_total, soak_connections_closed_total
    soak_backend_responses_total{backend}     responses by backend, with a backendHeader
    soak_request_duration_seconds{url}        histogram of responses' latencies, good and bad
    soak_phase_seconds{phase}                 histogram of where the responses' time went (dns, connect,
                                              tls, ttfb, body), as of the last closed interval
    soak_other_urls                           URLs counted under url="other" (see below)
    soak_target_requests_per_second, soak_concurrency, soak_start_time_seconds,
    soak_intervals_total and soak_interval_* (the last closed interval's figures),
    soak_run_finished, soak_thresholds_passed, soak_threshold_passed{rule,scope},
    soak_build_info{version,engine}           1, labelled with the runner's version and engine

Written to a receiver (remoteWrite, OTLP), the latency by URL and by phase go also as native
histograms (runner.metrics.native), under the classic ones' names without their suffixes:
soak_request_duration_seconds{url} and soak_phase_seconds{phase}.

The `url` label has at most URL_SERIES_CAP + 1 values, however long the URL list: the first
URL_SERIES_CAP distinct URLs of the list have series of their own, and every later one is
counted under url="other", as Prometheus' naming guide asks of labels (every label value is
a time series; unbounded values, like user-supplied lists, are what it warns against). A
list of 40,000 URLs once made 850,000 series, 470 MB of counts and a push that never finished.

Counting happens per result in runner.metrics.tally; this module turns a copy of the counts
into metric families when /metrics is scraped or a push is made, from another thread, and
wires the counts, the reporter, the endpoint and the pusher together.
"""

from __future__ import annotations

import dataclasses
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from itertools import accumulate
from typing import TYPE_CHECKING, TextIO

from prometheus_client import CollectorRegistry
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
    UnknownMetricFamily,
)
from prometheus_client.registry import Collector
from prometheus_client.utils import floatToGoString

from runner import __version__
from runner.config.settings import Settings
from runner.config.targets import as_targets
from runner.core.columns import LINE_PERCENTILES
from runner.core.lazymethods import dataclass
from runner.core.redact import printable
from runner.load.model import LoadModel
from runner.load.shards import ALONE, Shard
from runner.metrics import native
from runner.metrics.push import FINAL_WAIT_S, Pusher
from runner.metrics.server import MetricServer
from runner.metrics.tally import (
    DURATION,
    EDGES_NS,
    OTHER_URLS,
    PLACES,
    SLOW_COOKER_HISTOGRAMS,
    STATUSES,
    URL_SERIES_CAP,
    Counts,
    HistogramSpec,
    MetricsTally,
    UrlSlots,
    WorkerTallies,
    reached_by,
    url_slots,
)
from runner.report.base import Reporter
from runner.stats.client import ClientFigures
from runner.stats.figures import BACKENDS_SHOWN, OTHER_BACKENDS, Figures
from runner.stats.phases import PHASES, PhaseTally
from runner.stats.recorder import Interval
from runner.stats.runinfo import RunInfo, RunSummary

if TYPE_CHECKING:
    from runner.metrics.export import Receiver
    from runner.report.verdict import Verdict

# Each histogram's `le` labels, written once rather than at every push (here, not in tally, so that
# a run without metrics never loads prometheus_client).
LES = {spec.name: [floatToGoString(b) for b in spec.bounds] for spec in (*SLOW_COOKER_HISTOGRAMS, DURATION)}


# A push or a scrape makes its body in a thread of its own, holding the GIL for about 5 ms;
# the event loop, woken meanwhile, waits for the GIL up to the interpreter's switch interval
# (5 ms by default) each time. A shorter one hands the GIL back to the loop sooner.
GIL_SWITCH_S = 0.001


@dataclass(frozen=True)
class LastInterval:
    """The last closed interval, for the soak_interval_* gauges: its figures, as every report has them."""

    end_time: float  # Unix time
    figures: Figures  # runner.stats.figures: computed once for every report
    client: ClientFigures  # how the client itself fared in it


@dataclass
class Gauges:
    """What the reporter hooks learn about the run, for the gauges: its shape, its last interval, its verdict."""

    target_rate: float | None = None
    concurrency: int = 0
    start_time: float = 0.0
    intervals: int = 0
    last: LastInterval | None = None
    finished: bool = False
    thresholds: list[tuple[str, str, bool]] | None = None  # (rule, scope, ok), once the run has finished
    phases: PhaseBuckets | None = None  # the closed intervals' phases, in DURATION's buckets
    # The same in native buckets, when the metrics are written to a receiver (NativePhases).
    native_phases: NativePhases | None = None
    engine: str = ""  # which engine sends the run (soak_build_info)

    # Every field is replaced, never changed in place: a copy (dataclasses.replace) is a snapshot.


@dataclass
class PhaseBuckets:
    """soak_phase_seconds: each phase's responses at or below each of DURATION's bounds, their
    count and sum, added up at each closed interval from its phase histograms (runner.stats.phases):
    no cost per request, and the same on either engine and over local workers. A bucket is exact
    to the HDR histogram's (0.1%): a value that close above a bound counts below it."""

    below: dict[str, list[int]]  # by phase, per DURATION bound
    count: dict[str, int]
    sum_ns: dict[str, int]

    @classmethod
    def empty(cls) -> PhaseBuckets:
        return cls({p: [0] * len(_PHASE_BOUNDS_NS) for p in PHASES}, dict.fromkeys(PHASES, 0), dict.fromkeys(PHASES, 0))

    def plus(self, phases: PhaseTally) -> PhaseBuckets:
        """These buckets with an interval's phases added: a new value, so that a snapshot of the last stays whole."""
        below, count, sum_ns = dict(self.below), dict(self.count), dict(self.sum_ns)
        for name, histogram in phases.histograms().items():
            below[name] = [a + b for a, b in zip(below[name], histogram.counts_up_to(_PHASE_BOUNDS_NS), strict=True)]
            count[name] += histogram.count
            sum_ns[name] += histogram.sum
        return PhaseBuckets(below, count, sum_ns)


@dataclass(frozen=True)
class NativePhases:
    """soak_phase_seconds as native histograms (runner.metrics.native): each phase's counts by native
    bucket, added up at each closed interval from its phase histograms, as PhaseBuckets adds the
    classic ones up (exact to the HDR histograms' 0.1%)."""

    phases: dict[str, native.NativeHistogram]

    @classmethod
    def empty(cls) -> NativePhases:
        return cls({p: native.NativeHistogram({}, 0, 0.0) for p in PHASES})

    def plus(self, phases: PhaseTally) -> NativePhases:
        summed = dict(self.phases)
        for name, histogram in phases.histograms().items():
            before = summed[name]
            summed[name] = native.NativeHistogram(native.added(before.buckets, native.counts_of(histogram)),
                                                  before.count + histogram.count, before.sum_s + histogram.sum / 1e9)
        return NativePhases(summed)


_PHASE_BOUNDS_NS = [DURATION.last_ns(bound) for bound in DURATION.bounds]


_PHASE_HELP = ("Where the responses' time went, by phase: dns, connect and tls (0 on a reused connection), ttfb "
               "(request written to the headers) and body (headers to the last byte); as of the last closed interval.")


def phase_family(phases: PhaseBuckets) -> Metric:
    """soak_phase_seconds{phase}, in soak_request_duration_seconds' buckets."""
    family = HistogramMetricFamily("soak_phase_seconds", _PHASE_HELP, labels=["phase"])
    for name in PHASES:
        below = zip(LES[DURATION.name], map(float, phases.below[name]), strict=True)
        buckets = [*below, ("+Inf", float(phases.count[name]))]
        family.add_metric([name], buckets, phases.sum_ns[name] / 1e9)
    return family


class MetricsReporter(Reporter):
    """Keeps the gauges' figures up to date at each interval and at the end, and has them pushed then.

    The endpoint lasts as long as the run: it closes after the final push.
    """

    def __init__(self, gauges: Gauges, verdict: Verdict | None = None, pusher: Pusher | None = None,
                 server: MetricServer | None = None, receivers: Sequence[Receiver] = (),
                 counts: Counts | None = None, slots: UrlSlots | None = None) -> None:
        self._gauges = gauges
        self._verdict = verdict
        self._pusher = pusher
        self._server = server
        self._receivers = receivers  # remote write, OTLP: each closed interval's snapshot is written
        self._counts = counts
        self._slots = slots
        self._last_write_s = 0.0

    def start(self, info: RunInfo) -> None:
        f = self._gauges
        f.target_rate = info.qps if info.model.paced else None
        f.concurrency = info.concurrency
        f.start_time = info.wall_start
        f.engine = info.engine
        if self._receivers:
            f.native_phases = NativePhases.empty()
        if self._pusher is not None:
            self._pusher.start(info)
        for receiver in self._receivers:
            receiver.start(info)

    def interval(self, info: RunInfo, interval: Interval) -> None:
        f = self._gauges
        f.last = LastInterval(info.wall(interval.end_ns), interval.figures, interval.client)
        if info.settings.pace.stages and interval.figures.rate_target is not None:
            f.target_rate = interval.figures.rate_target  # a ramp: the rate of the interval just closed
        f.intervals += 1
        if interval.tally.phases is not None and interval.tally.phases.count:
            f.phases = (f.phases or PhaseBuckets.empty()).plus(interval.tally.phases)
            if f.native_phases is not None:
                f.native_phases = f.native_phases.plus(interval.tally.phases)
        if self._pusher is not None:
            self._pusher.push_soon()
        if self._receivers:
            snapshot = self._snapshot(info.wall(interval.end_ns))
            for receiver in self._receivers:
                receiver.write_soon(snapshot)

    def finish(self, summary: RunSummary) -> None:
        if self._verdict is not None:
            self._gauges.thresholds = [(o.rule.text, o.rule.scope, o.ok) for o in self._verdict.judge(summary)]
        self._gauges.finished = True
        asks = []
        deadline = time.monotonic() + FINAL_WAIT_S  # for every final write together, the push's included
        if self._receivers:  # asked first, so that they go on while the Pushgateway is pushed to
            snapshot = self._snapshot(summary.info.wall(summary.end_ns))
            asks = [(receiver, receiver.write_final(snapshot)) for receiver in self._receivers]
        if self._pusher is not None:
            self._pusher.push_final()
            self._pusher.close()
        for receiver, ask in asks:
            receiver.wait(ask, deadline - time.monotonic())
        for receiver in self._receivers:
            receiver.close(max(deadline - time.monotonic(), 0.0))
        if self._server is not None:
            self._server.close()

    def _snapshot(self, at_s: float) -> Snapshot:
        """The figures as they are, for a write at `at_s` (a Unix time, after the last write's)."""
        assert self._counts is not None and self._slots is not None
        at_s = max(at_s, self._last_write_s + 0.001)  # the final write comes after the last interval's
        self._last_write_s = at_s
        return Snapshot(self._counts.snapshot(), dataclasses.replace(self._gauges), self._slots, at_s)


@dataclass(frozen=True)
class Snapshot:
    """The figures at one moment, for a write: taken on the event loop as an interval closes (a copy
    of the counts and the gauges, small and quick), encoded on a receiver's thread."""

    counts: MetricsTally
    gauges: Gauges
    slots: UrlSlots
    at_s: float  # Unix time: the samples' timestamp

    def families(self) -> list[Metric]:
        """Every family /metrics would show at this moment."""
        return list(SoakCollector(_Frozen(self.counts), self.gauges, self.slots).collect())

    def native_histograms(self) -> list[native.NativeFamily]:
        """The latency by URL and by phase as native histograms (the families' classic ones' figures)."""
        counts = self.counts
        to_bucket = _NATIVE_BUCKETS
        by_url = []
        for slot, label in enumerate(self.slots.labels):
            if self.slots.shown is not None and slot not in self.slots.shown:
                continue
            places = [good + bad for good, bad in zip(counts.good[slot], counts.bad[slot], strict=True)]
            sum_ns = counts.good_ns[slot] + counts.bad_ns[slot]
            by_url.append(({"url": label}, native.from_places(places, to_bucket, sum_ns)))
        families = [native.NativeFamily(DURATION.name, DURATION.help, by_url)]
        if self.gauges.native_phases is not None and self.gauges.phases is not None:
            families.append(native.NativeFamily("soak_phase_seconds", _PHASE_HELP, [
                ({"phase": name}, self.gauges.native_phases.phases[name]) for name in PHASES]))
        return families


_NATIVE_BUCKETS = native.buckets_of_places(EDGES_NS)  # each place's native bucket


@dataclass(frozen=True)
class _Frozen:
    """Counts that are already a snapshot."""

    counts: MetricsTally

    def snapshot(self) -> MetricsTally:
        return self.counts


@dataclass(eq=False)  # a registry keeps its collectors in a dict
class SoakCollector(Collector):
    """A prometheus_client collector: the run's metric families, made from a copy of the counts."""

    tally: Counts
    gauges: Gauges
    slots: UrlSlots

    def collect(self) -> Iterator[Metric]:
        counts = self.tally.snapshot()
        yield from slow_cooker_families(counts)
        yield from request_families(counts, self.slots)
        yield from gauge_families(self.gauges)


def status_class(status: int) -> str:
    return f"{status // 100}xx" if 100 <= status <= 999 else "other"


_CLASSES = [(status_class(low), low) for low in range(0, STATUSES, 100)]  # each class's first status


def slow_cooker_families(counts: MetricsTally) -> Iterator[Metric]:
    """slow_cooker's requests, successes, latency_ms, latency_us and latency_ns."""
    responses = sum(sum(by_status) for by_status in counts.statuses)
    successes = sum(sum(by_status[200:500]) for by_status in counts.statuses)
    yield UnknownMetricFamily("requests", "Number of requests", value=responses + sum(counts.failures.values()))
    yield UnknownMetricFamily("successes", "Number of successful requests", value=successes)
    good = [sum(column) for column in zip(*counts.good, strict=True)] if counts.good else [0] * (len(EDGES_NS) + 1)
    good_ns = sum(counts.good_ns)
    for spec in SLOW_COOKER_HISTOGRAMS:
        family = HistogramMetricFamily(spec.name, spec.help)
        family.add_metric([], histogram_buckets(spec, good), good_ns / (spec.unit_ns or 1_000_000_000))
        yield family


def request_families(counts: MetricsTally, slots: UrlSlots) -> Iterator[Metric]:
    """soak_requests_total, soak_failures_total, soak_skipped_total, soak_request_duration_seconds,
    soak_other_urls.

    Series are by URL slot (see UrlSlots), each with a url label of its own.
    """
    labels = slots.labels
    requests = CounterMetricFamily("soak_requests", "Requests sent, by URL and status class (failed: no response).",
                                   labels=["url", "status_class"])
    by_class: Counter[tuple[str, str]] = Counter()
    for slot, by_status in enumerate(counts.statuses):
        for group, low in _CLASSES:
            n = sum(by_status[low:low + 100])  # a slice's sum, in C: a push's work stays small
            if n:
                by_class[labels[slot], group] += n
    for (slot, _kind), n in counts.failures.items():
        by_class[labels[slot], "failed"] += n
    for (label, group), n in sorted(by_class.items()):
        requests.add_metric([label, group], n)
    yield requests
    failures = CounterMetricFamily("soak_failures", "Sends that got no HTTP response, by URL and kind.",
                                   labels=["url", "kind"])
    by_kind: Counter[tuple[str, str]] = Counter()
    for (slot, kind), n in counts.failures.items():
        by_kind[labels[slot], kind] += n
    for (label, kind), n in sorted(by_kind.items()):
        failures.add_metric([label, kind], n)
    yield failures
    yield CounterMetricFamily("soak_skipped", "Sends that were due but not sent (a client still busy, or too "
                              "many in flight).", value=counts.skipped)
    yield CounterMetricFamily("soak_connections_opened", "Connections opened (each behind a Service a new pick of "
                              "pod).", value=counts.connections_opened)
    yield CounterMetricFamily("soak_connections_closed", "Connections seen to end: by their lifetime, by the server, "
                              "or failed; those open at the end are not counted.", value=counts.connections_closed)
    if counts.backends:
        backends = CounterMetricFamily("soak_backend_responses", "Responses by the backend that answered (the "
                                       f"backendHeader's value; the first {BACKENDS_SHOWN} met, then "
                                       f'"{OTHER_BACKENDS}").', labels=["backend"])
        for backend, n in sorted(counts.backends.items()):
            backends.add_metric([backend], n)
        yield backends
    yield CounterMetricFamily("soak_late_sends", "Sends that left 2 ms or more after they could and should have: "
                              "the client's own delay, not the server's.", value=counts.late)
    duration = HistogramMetricFamily(DURATION.name, DURATION.help, labels=["url"])
    for slot, label in enumerate(labels):
        if slots.shown is not None and slot not in slots.shown:
            continue  # a URL this process never sends to: no series, not one of zeros
        places = [good + bad for good, bad in zip(counts.good[slot], counts.bad[slot], strict=True)]
        seconds = (counts.good_ns[slot] + counts.bad_ns[slot]) / 1e9
        duration.add_metric([label], histogram_buckets(DURATION, places), seconds)
    yield duration
    yield GaugeMetricFamily("soak_other_urls", f"Distinct URLs beyond the first {URL_SERIES_CAP} of the list, "
                            f'counted together under url="{OTHER_URLS}".', value=slots.others)


def histogram_buckets(spec: HistogramSpec, places: Sequence[int]) -> list[tuple[str, float]]:
    """Cumulative (le, count) pairs of a histogram, from counts per place among EDGES_NS."""
    cumulative = list(accumulate(places))
    buckets = [(le, float(cumulative[place])) for le, place in zip(LES[spec.name], PLACES[spec.name], strict=True)]
    return [*buckets, ("+Inf", float(cumulative[-1]))]


def gauge_families(f: Gauges) -> Iterator[Metric]:
    """The gauges: the run's shape, its last interval, and at the end its verdict."""
    if f.target_rate is not None:
        yield GaugeMetricFamily("soak_target_requests_per_second", "The rate this process is asked to send at.",
                                value=f.target_rate)
    yield GaugeMetricFamily("soak_concurrency", "Clients sending.", value=f.concurrency)
    yield GaugeMetricFamily("soak_start_time_seconds", "When the run started (send 0 was due), as a Unix time.",
                            value=f.start_time)
    if f.engine:
        info = GaugeMetricFamily("soak_build_info", "1, labelled with the runner's version and the engine that sends "
                                 "the run (native or python).", labels=["version", "engine"])
        info.add_metric([__version__, f.engine], 1)
        yield info
    yield CounterMetricFamily("soak_intervals", "Intervals closed (interval lines printed).", value=f.intervals)
    yield GaugeMetricFamily("soak_run_finished", "1 once the run has finished and its summary is printed, else 0.",
                            value=1 if f.finished else 0)
    if f.phases is not None:
        yield phase_family(f.phases)
    if f.last is not None:
        yield from _interval_families(f.last)
    if f.thresholds is not None:
        yield GaugeMetricFamily("soak_thresholds_passed", "1 if the finished run kept every threshold, 0 if it broke "
                                "any (its exit code then says how: 3, or 8 when not one response came back, 9 when "
                                "only where the client's own delay may have changed their figures).",
                                value=1 if all(ok for _, _, ok in f.thresholds) else 0)
        each = GaugeMetricFamily("soak_threshold_passed", "1 if the finished run kept this threshold, else 0.",
                                 labels=["rule", "scope"])
        for rule, scope, ok in f.thresholds:
            each.add_metric([rule, scope], 1 if ok else 0)
        yield each


def _interval_families(last: LastInterval) -> Iterator[Metric]:
    """The last interval's figures as gauges: ratios 0 to 1 where the lines show percents, seconds where ns."""
    f, client = last.figures, last.client
    yield GaugeMetricFamily("soak_interval_end_time_seconds", "When the last closed interval ended, as a Unix time.",
                            value=last.end_time)
    yield GaugeMetricFamily("soak_interval_requests_per_second", "Requests per second sent in the last interval.",
                            value=f.rate_achieved)
    if f.goal_percent is not None:
        yield GaugeMetricFamily("soak_interval_goal_ratio", "The last interval's responses against its goal, 0 to 1 "
                                "(goal% / 100).", value=f.goal_percent / 100)
    if f.errors_percent is not None:
        yield GaugeMetricFamily("soak_interval_errors_ratio", "The last interval's bad and failed requests against "
                                "all its requests, 0 to 1.", value=f.errors_percent / 100)
    # Labelled percentile (p50 ... p999, as the summary names them), not quantile: Prometheus keeps
    # that label for a summary's series, and these are gauges of one interval, with no count or sum.
    latency = GaugeMetricFamily("soak_interval_latency_seconds", "Latency percentiles of the last interval's "
                                "responses, exact.", labels=["percentile"])
    for key in LINE_PERCENTILES:  # the gauges show the interval line's
        latency.add_metric([key], f.latency.percentiles[key] / 1e9)
    yield latency
    yield GaugeMetricFamily("soak_interval_max_latency_seconds", "The slowest response of the last interval.",
                            value=f.latency.max_ns / 1e9)
    yield GaugeMetricFamily("soak_interval_client_saturated", "1 if the client's own delay may have changed a figure "
                            "of the last interval (sends skipped or timed out, a goal missed, a latency), else 0.",
                            value=float(client.saturated))
    yield GaugeMetricFamily("soak_interval_client_cpu_ratio", "The runner's CPU in the last interval, in cores.",
                            value=client.cpu_share)
    yield GaugeMetricFamily("soak_interval_loop_lag_seconds", "How late the runner's event loop ran a 10 ms timer "
                            "in the last interval, p99.", value=client.loop_lag.percentiles([99])[99] / 1e9)


class Metrics:
    """A run's metrics, wired together: the counts, the reporter, and the endpoint and the
    pusher that the settings ask for. close() when the run has ended.

    In one process, `tally` counts every result (the run feeds it, or has the native engine
    count into it). Split over local workers, each worker counts its own and `workers` sums
    them; `tally` is None.
    """

    def __init__(self, settings: Settings, model: LoadModel, urls: Sequence[str], verdict: Verdict | None,
                 err: TextIO, pod: Shard = ALONE, shown: Callable[[str], str] = printable) -> None:
        self.tally: MetricsTally | None = None
        self.workers: WorkerTallies | None = None
        counts: Counts
        slots = url_slots(urls)
        if not pod.alone:  # a shard of a run split over pods: series for its own URLs only
            slots = reached_by(slots, pod.urls(as_targets(urls).wheel))
        if settings.split.workers > 1:
            counts = self.workers = WorkerTallies(slots)
        else:
            counts = self.tally = MetricsTally(slots, model, shown if settings.report.backend_header else None)
            sys.setswitchinterval(min(sys.getswitchinterval(), GIL_SWITCH_S))  # this process sends too
        gauges = Gauges()
        registry = CollectorRegistry(auto_describe=False)
        registry.register(SoakCollector(counts, gauges, slots))
        self.server = MetricServer(settings.metrics.addr, registry) if settings.metrics.addr else None
        spec = settings.metrics
        self.pusher = Pusher(spec.pushgateway, spec.job, registry, err) if spec.pushgateway else None
        self.receivers: list[Receiver] = []
        if spec.written:
            from runner.metrics.receivers import receivers_for  # their libraries load only for a run that writes

            self.receivers = receivers_for(spec, err)
        self.reporter = MetricsReporter(gauges, verdict, self.pusher, self.server, self.receivers, counts, slots)

    def close(self) -> None:
        """Stop serving, pushing and writing, if the run ended without finishing (the reporter does it otherwise)."""
        if self.server is not None:
            self.server.close()
        if self.pusher is not None:
            self.pusher.close()
        for receiver in self.receivers:
            receiver.close(0.0)
