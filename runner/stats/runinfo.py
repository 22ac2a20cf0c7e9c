"""A run as the reports see it: what it was about to do (RunInfo), and what it did (RunSummary).

Plain records, built by the run (or by merging shards) and handed to every reporter; they
hold counts and histograms, never a Result.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from dataclasses import field
from fractions import Fraction
from typing import Any

from runner.config.settings import Settings
from runner.config.targets import Targets
from runner.core import redact
from runner.core.durations import format_duration
from runner.core.lazymethods import dataclass
from runner.core.units import NS_PER_S
from runner.load.model import LoadModel, model_for
from runner.load.shards import ALONE, Shard
from runner.stats.client import ClientFigures, PaceTerms
from runner.stats.figures import Figures
from runner.stats.histogram import LatencyHistogram
from runner.stats.recorder import BenchTally, Tally

SIGNAL_STOP = "signal "  # how the stop reason of a run stopped by SIGINT or SIGTERM starts: `signal SIGTERM`


@dataclass(frozen=True)
class RunInfo:
    """What a run is about to do."""

    settings: Settings
    urls: list[str]  # as they may be shown: every reporter prints or exports them (see __post_init__)
    url_source: str | None  # the list file the URLs came from, if any
    start_ns: int  # monotonic time of the grid's start: send 0 is due then
    wall_start: float  # the same moment as a Unix time
    shard: Shard = ALONE  # which part of the run this process sends
    weights: tuple[int, ...] = ()  # the URLs' weights (runner.config.targets.Targets); () for the even split
    engine: str = "python"  # which engine sends it: "native" or "python" (runner.run.build.engine_for)

    def __post_init__(self) -> None:
        """The URLs with their passwords and secret query values hidden, once for every report:
        the startup line, failure lines, the summary and a shard's record all print these. Made
        printable too: a run's own URLs always are, but a merged run's come from logs, which anyone
        may have written (an ESC in one reached the terminal through `soak merge`)."""
        object.__setattr__(self, "urls", [redact.printable(redact.url(url)) for url in self.urls])

    def reached(self) -> frozenset[int]:
        """The URLs (indices) this process sends to: all, unless it is a shard whose stride skips some."""
        if self.shard.alone:
            return frozenset(range(len(self.urls)))
        return frozenset(self.shard.urls(Targets(tuple(self.urls), self.weights).wheel))

    def part_of(self, urls: Collection[int]) -> Fraction:
        """This process's shard's part of the run's sends to these URLs (indices): 1 for a run not split
        over shards; else as the wheel splits them (runner.load.shards.Shard.part_of), not 1/shards."""
        if self.shard.count == 1:
            return Fraction(1)
        return self.shard.pod().part_of(Targets(tuple(self.urls), self.weights).wheel, urls)

    @property
    def model(self) -> LoadModel:
        """This process's load model, as its settings make it (the same value build() made)."""
        return model_for(self.settings.pace, self.shard)

    def wall(self, t_ns: int) -> float:
        """The Unix time of a monotonic moment of this run."""
        return self.wall_start + (t_ns - self.start_ns) / 1e9

    @property
    def qps(self) -> float:
        """The rate this process sends at: the run's, or its shard's part of it."""
        return self.settings.pace.qps / self.shard.stride

    @property
    def concurrency(self) -> int:
        """This process's clients: all of the run's, or its shard's part."""
        return self.shard.share(self.settings.pace.concurrency)

    @property
    def pace_terms(self) -> PaceTerms:
        """What judging an interval's pace needs of this run (stats.client.pace_of)."""
        return PaceTerms.of(self.settings, self.shard)


@dataclass(frozen=True)
class Warmup:
    """What a warm-up (runner.run.warmup) measured, apart from the run: its requests, its stragglers
    included, and the sends its schedule made due."""

    tally: Tally
    due: float | None  # unrounded, from its schedule; None without one
    span_ns: int  # how long it sent
    intervals: int  # its lines
    connections: dict[str, int] = field(default_factory=dict)  # those it opened, which the run then went on over
    figures: Figures = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "figures", Figures.of(self.tally, self.due, self.span_ns))


@dataclass(frozen=True)
class RunSummary:
    """What a finished run did, in total."""

    info: RunInfo
    intervals: int
    end_ns: int  # monotonic time the run ended: the last interval's end, or the drain's last response
    sending_end_ns: int  # when sending stopped: the schedule's end, a signal, or the last of totalRequests
    tally: Tally  # the sum of all intervals
    uncorrected: LatencyHistogram | None  # open model: latency from the actual send
    send_lag: LatencyHistogram | None  # paced runs: how late sends went out against the schedule
    in_unit: LatencyHistogram | None  # with a latency CSV: the latencies truncated to the unit
    stop_reason: str  # iterations, duration, totalRequests, or signal SIGxxx
    cpu_seconds: float  # the process's CPU time during the run
    max_rss_bytes: int  # the process's peak resident memory
    bench: BenchTally | None = None  # bench mode: ab's per-phase timings and counts
    connections: dict[str, int] | None = None  # connections opened, by protocol: {"HTTP/1.1 TLSv1.3": 5}
    shards: dict[str, Any] | None = None  # a merged run: how many shards, which were merged, missing, cut
    failed_workers: dict[int, str] | None = None  # local workers that died or raised: what happened to each
    client: ClientFigures | None = None  # how the client itself fared: lag, CPU, lateness, saturated intervals
    drain: Tally | None = None  # what came back after the last interval ended (in `tally` too)
    last_interval_end_ns: int | None = None  # when the last interval ended (end_ns adds the drain)
    # The sends the schedule made due over the run (Schedule.sends_due, unrounded; a merged
    # run's, its intervals' added up); None without a schedule (a bench).
    due: float | None = None
    # Per URL slot (runner.config.targets.UrlSlots, in the order of their labels): the run's
    # sends made to each, in `tally` too; None for a run whose URLs share one slot.
    per_url: tuple[Tally, ...] | None = None
    warmup: Warmup | None = None  # what the warm-up before the run measured (in none of the above)
    # Its figures, computed once here for every report (runner.stats.figures).
    figures: Figures = field(init=False, repr=False, compare=False)
    url_figures: tuple[Figures, ...] = field(init=False, repr=False, compare=False)  # per_url's; () without

    def __post_init__(self) -> None:
        object.__setattr__(self, "figures", Figures.of(self.tally, self.due, self.sending_ns))
        object.__setattr__(self, "url_figures", tuple(Figures.of(t, None, self.sending_ns)
                                                      for t in self.per_url or ()))

    def figures_of_urls(self, slots: Iterable[int]) -> Figures:
        """The figures of the sends to some URL slots together (a threshold scoped to a URL that
        is listed on several hosts); the run's own when its URLs share one slot."""
        wanted = sorted(set(slots))
        if self.per_url is None:
            return self.figures
        if len(wanted) == 1:
            return self.url_figures[wanted[0]]
        tally = Tally()
        for slot in wanted:
            tally.merge(self.per_url[slot])
        return Figures.of(tally, None, self.sending_ns)

    @property
    def stop_signal(self) -> str | None:
        """The signal that stopped the run before its planned end (`SIGTERM`), or None.

        A merged run's stop reason lists its parts' (`iterations, signal SIGTERM`): one part
        stopped so is enough, as its share of the run was not sent. A signal that came once the
        schedule had ended (while the last responses were awaited) leaves the reason the schedule's.
        """
        for reason in self.stop_reason.split(", "):
            if reason.startswith(SIGNAL_STOP):
                return reason[len(SIGNAL_STOP):]
        return None

    @property
    def unanswered(self) -> bool:
        """Whether requests were sent and not one response came back: the target answered nothing."""
        return self.figures.requests > 0 and self.figures.responses == 0

    @property
    def elapsed_ns(self) -> int:
        return self.end_ns - self.info.start_ns

    @property
    def sending_ns(self) -> int:
        """How long requests were being sent: what the achieved rate is over."""
        return self.sending_end_ns - self.info.start_ns

    def stopped_before_the_others(self) -> list[str]:
        """A merged run: each shard a signal stopped an interval or more before the others, as early_stop()
        says it (`shard 1 of 3 stopped by SIGTERM after 10m0s of 59m0s, 49m0s before the others`)."""
        shards = self.shards or {}
        interval_ns = self.info.settings.pace.interval_ns
        return [early_stop(stop, shards["count"], self.info) for stop in shards.get("stopped", ())
                if before_the_others(stop, interval_ns)]


# --- a merged run's shards stopped by a signal (its summary's `shards.stopped`: runner.stats.merge) ---


def before_the_others(stop: Mapping[str, Any], interval_ns: int) -> bool:
    """Whether a shard a signal stopped (its `shards.stopped` record) stopped a whole interval or more
    before the last one did: part of the run is then missing, as a missing shard's is (exit 5). Pods
    that a Job's deletion stops all at once stop within moments of each other: the run was cut
    (exit 7), and what they owe is those moments."""
    return float(stop["notSentSeconds"]) * NS_PER_S >= interval_ns


def early_stop(stop: Mapping[str, Any], count: int, info: RunInfo) -> str:
    """`shard 1 of 3 stopped by SIGTERM after 10m0s of 59m0s, 49m0s before the others`, from its record."""
    planned = info.settings.pace.run_ns
    of = f" of {format_duration(planned)}" if planned is not None else ""
    return (f"shard {stop['shard']} of {count} stopped by {str(stop['stopReason']).removeprefix(SIGNAL_STOP)} after "
            f"{format_duration(_to_ms(float(stop['sendingSeconds'])))}{of}, "
            f"{format_duration(_to_ms(float(stop['notSentSeconds'])))} before the others")


def _to_ms(seconds: float) -> int:
    """Seconds as ns, to the millisecond, as a partial interval's length is shown."""
    return round(seconds * 1000) * 1_000_000
