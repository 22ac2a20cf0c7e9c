"""What reporters are told, and when: at the start, after each interval, at the end.

Reporters turn these plain records into text or files. They never touch the target (the
metrics reporter's only traffic is pushes to a Pushgateway, from a thread of their own) and
never see a Result: by the time they hear of an interval it is counts and histograms.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from runner.config.settings import Settings
from runner.core import redact
from runner.load.shards import ALONE, Shard
from runner.stats.histogram import LatencyHistogram
from runner.stats.recorder import BenchTally, Interval, Tally

UNIT_NS = {"ms": 1_000_000, "us": 1_000, "ns": 1}


@dataclass(frozen=True)
class RunInfo:
    """What a run is about to do."""

    settings: Settings
    urls: list[str]  # as they may be shown: every reporter prints or exports them (see __post_init__)
    url_source: str | None  # the list file the URLs came from, if any
    start_ns: int  # monotonic time of the grid's start: send 0 is due then
    wall_start: float  # the same moment as a Unix time
    shard: Shard = ALONE  # which part of the run this process sends

    def __post_init__(self) -> None:
        """The URLs with their passwords and secret query values hidden, once for every report:
        the startup line, failure lines, the summary and a shard's record all print these."""
        object.__setattr__(self, "urls", [redact.url(url) for url in self.urls])

    def wall(self, t_ns: int) -> float:
        """The Unix time of a monotonic moment of this run."""
        return self.wall_start + (t_ns - self.start_ns) / 1e9

    @property
    def qps(self) -> float:
        """The rate this process sends at: the run's, or its shard's part of it."""
        return self.settings.qps / self.shard.stride

    @property
    def concurrency(self) -> int:
        """This process's clients: all of the run's, or its shard's part."""
        return self.shard.share(self.settings.concurrency)


@dataclass(frozen=True)
class RunSummary:
    """What a finished run did, in total."""

    info: RunInfo
    intervals: int
    end_ns: int  # monotonic time the last interval closed
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
    due_ns: int | None = None  # a merged run: its goal's span at the full rate (see Interval.due_ns)
    failed_workers: dict[int, str] | None = None  # local workers that died or raised: what happened to each

    @property
    def elapsed_ns(self) -> int:
        return self.end_ns - self.info.start_ns

    @property
    def sending_ns(self) -> int:
        """How long requests were being sent: what the achieved rate is over."""
        return self.sending_end_ns - self.info.start_ns

    @property
    def goal_ns(self) -> int:
        """What the run's goal is over: its sending time, or a merged run's own due span."""
        return self.sending_ns if self.due_ns is None else self.due_ns


class Reporter:
    """Told of a run at its start, after each interval, and at the end; each hook does nothing
    unless a reporter overrides it, so a reporter writes only the hooks it needs."""

    # Call progress() each time this many more sends have finished; 0: never. (ab prints
    # "Completed N requests" as it goes; the count is kept by the run, not per result here.)
    progress_every: int = 0

    def bind_stop(self, stop: Callable[[str], None]) -> None:
        """Before start(): `stop(reason)` ends the run early, exactly as a first SIGTERM does.

        For a reporter that judges the run (the thresholds' verdict) and may know before the
        end that it has failed; it never touches the target, it only asks the run to stop.
        """

    def start(self, info: RunInfo) -> None:
        """Before the first send."""

    def progress(self, info: RunInfo, done: int) -> None:
        """When `done`, a multiple of progress_every, sends have finished."""

    def interval(self, info: RunInfo, interval: Interval) -> None:
        """After each interval has closed, the last (perhaps partial) one included."""

    def finish(self, summary: RunSummary) -> None:
        """Once, after the last interval."""


def in_unit(ns: int | float, unit: str) -> int:
    """A latency in the run's unit, truncated toward zero as slow_cooker prints it."""
    return int(ns // UNIT_NS[unit])


def rfc3339(unix: float, *, fraction: bool = False) -> str:
    """A Unix time as RFC 3339 in local time, `Z` when the offset is zero (as Go prints it)."""
    moment = datetime.fromtimestamp(unix, UTC).astimezone()
    text = moment.isoformat(timespec="milliseconds" if fraction else "seconds")
    return text.replace("+00:00", "Z")
