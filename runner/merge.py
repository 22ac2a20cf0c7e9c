"""One result from the shards of a run: counts added, histograms merged, nothing averaged.

A shard prints, inside its JSON summary, a `shard` record: every interval's whole tally
(counts, errors, and its HDR histogram with the exact min, max and sums) and the run's
other histograms. Merging adds the tallies interval by interval, so every merged
percentile comes from the merged buckets, exactly as if one process had recorded every
request. Intervals are matched by where they start on the shards' common grid, so a shard
that started one interval late still lines up, and last intervals cut short at slightly
different moments still merge into one. The same merge serves `soak merge` (records read back from
pods' logs) and local workers (records sent by the worker processes).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from runner.config import Settings, merge, settings_from
from runner.histogram import LatencyHistogram
from runner.recorder import Interval, Tally
from runner.report import RunInfo, RunSummary

NS_PER_S = 1_000_000_000
CLOCK_SLACK_NS = 1_000_000  # how far apart the shards' ends of one full interval may be


# --- what a shard reports -----------------------------------------------------------------


def interval_record(info: RunInfo, interval: Interval) -> dict[str, Any]:
    """One closed interval of a shard, whole: times as offsets from the run's start, and its tally."""
    return {
        "iter": interval.index,
        "startNs": interval.start_ns - info.start_ns,
        "endNs": interval.end_ns - info.start_ns,
        "sendingEndNs": None if interval.sending_end_ns is None else interval.sending_end_ns - info.start_ns,
        "tally": interval.tally.to_record(),
    }


def run_record(summary: RunSummary, intervals: list[dict[str, Any]]) -> dict[str, Any]:
    """A shard's whole run: which shard, its intervals, and what only the run knows."""
    info = summary.info
    return {
        "index": info.shard.index,
        "count": info.shard.count,
        "worker": info.shard.worker,
        "workers": info.shard.workers,
        "startWall": info.wall_start,
        "urls": info.urls,
        "urlSource": info.url_source,
        "endNs": summary.end_ns - info.start_ns,
        "sendingEndNs": summary.sending_end_ns - info.start_ns,
        "stopReason": summary.stop_reason,
        "cpuSeconds": summary.cpu_seconds,
        "maxRssBytes": summary.max_rss_bytes,
        "uncorrected": _histogram_record(summary.uncorrected),
        "sendLag": _histogram_record(summary.send_lag),
        "inUnit": _histogram_record(summary.in_unit),
        "connections": summary.connections,
        "intervals": intervals,
    }


def _histogram_record(histogram: LatencyHistogram | None) -> dict[str, Any] | None:
    return None if histogram is None else histogram.to_record()


# --- what the merge works from ------------------------------------------------------------


@dataclass
class ShardRun:
    """One shard's results: its record, the config it ran with, and whether it finished."""

    index: int
    count: int
    start_wall: float
    config: dict[str, Any]
    urls: list[str]
    url_source: str | None
    intervals: list[dict[str, Any]]
    run: dict[str, Any] | None = None  # the run record; None until (or unless) the shard finished

    @classmethod
    def from_summary(cls, summary: Mapping[str, Any]) -> ShardRun:
        """A finished shard from its JSON summary; ValueError if it holds no shard record."""
        record = summary.get("shard")
        if not isinstance(record, dict):
            raise ValueError("the summary has no shard record (was the run split over shards?)")
        try:
            return cls(int(record["index"]), int(record["count"]), float(record["startWall"]),
                       dict(summary["config"]), list(record["urls"]), record.get("urlSource"),
                       list(record["intervals"]), record)
        except (KeyError, TypeError, ValueError) as e:
            raise ValueError(f"the summary's shard record is incomplete: {e}") from None


@dataclass
class Merged:
    """The merged run, ready for the usual reporters, and what the merge had to say."""

    info: RunInfo
    intervals: list[Interval]
    summary: RunSummary
    notes: list[str] = field(default_factory=list)


def merge_shards(shards: Sequence[ShardRun], expected: int | None = None, incomplete: Iterable[int] = ()) -> Merged:
    """The shards' run as one: intervals matched by their end and added, histograms merged.

    `expected` is the number of shards the run had; `incomplete` the ones whose output was
    cut short: both are reported in the summary's `shards` section and in the notes.
    """
    if not shards:
        raise ValueError("no shard finished: nothing to merge")
    count = expected or max(s.count for s in shards)
    info = merged_info(shards)
    intervals = merge_intervals(info, shards)
    present = sorted(s.index for s in shards)
    gone = sorted(set(range(count)) - set(present) - set(incomplete))
    cut = sorted(set(incomplete))
    notes = [f"shard {i} of {count}: no output found, not merged" for i in gone]
    notes += [f"shard {i} of {count}: its output was cut off before its summary, not merged" for i in cut]
    notes += _apart(info, shards)
    summary = merged_summary(info, intervals, shards, {"count": count, "merged": present, "missing": gone,
                                                       "incomplete": cut})
    return Merged(info, intervals, summary, notes)


# Settings about running, not about the result: a merge neither splits, nor stops early,
# nor serves metrics, nor writes the pods' CSV file paths on this machine.
_RUN_ONLY = ("shard", "shards", "workers", "abortOnThreshold", "metricAddr", "pushgateway", "reportLatenciesCSV",
             "linkerdAwait", "linkerdShutdown")


def merged_info(shards: Sequence[ShardRun]) -> RunInfo:
    """The run as a whole: its full settings, URLs, and a start at the earliest shard's."""
    first = min(shards, key=lambda s: s.index)
    config = {key: value for key, value in first.config.items() if key not in _RUN_ONLY}
    settings: Settings = settings_from(merge(config))
    start_wall = min(s.start_wall for s in shards)
    return RunInfo(settings, first.urls, first.url_source, 0, start_wall)


def merge_intervals(info: RunInfo, shards: Sequence[ShardRun]) -> list[Interval]:
    """The run's intervals: each shard's matched by its start on the common grid, and added."""
    groups: dict[int, list[tuple[int, dict[str, Any]]]] = {}
    for shard in shards:
        offset = _offset_ns(info, shard)
        for record in shard.intervals:
            slot = round((offset + int(record["startNs"])) / info.settings.interval_ns)
            groups.setdefault(slot, []).append((offset, record))
    return [merged_interval(info, k, slot, groups[slot]) for k, slot in enumerate(sorted(groups))]


def merged_interval(info: RunInfo, index: int, slot: int, parts: Sequence[tuple[int, dict[str, Any]]]) -> Interval:
    """Interval `index` of the run, at grid slot `slot`: the shards' records (each with its
    shard's clock offset) added up.

    The shards' clocks agree to a few microseconds, not exactly: an interval that every
    shard ran in full is exactly one interval long, not a hair more, so its goal `t` is
    the interval's and not a fraction of a request above it.
    """
    length = info.settings.interval_ns
    start = slot * length
    tally = Tally()
    for _, record in parts:
        tally.merge(Tally.from_record(record["tally"]))
    end = max(offset + int(r["endNs"]) for offset, r in parts)
    if abs(end - (start + length)) < CLOCK_SLACK_NS:
        end = start + length
    # A shard that sent to the interval's end (None) keeps the whole interval's goal: the
    # run's sending stopped only where every shard's had.
    sending = [None if r.get("sendingEndNs") is None else offset + int(r["sendingEndNs"]) for offset, r in parts]
    return Interval(index, start, end, tally, None if None in sending else max(s for s in sending if s is not None))


def merged_summary(info: RunInfo, intervals: Sequence[Interval], shards: Sequence[ShardRun],
                   report: dict[str, Any] | None) -> RunSummary:
    """The run's summary: the intervals' sum, every shard's histograms merged, its CPU added up."""
    tally = Tally()
    for interval in intervals:
        tally.merge(interval.tally)
    runs = [(s, s.run) for s in shards if s.run is not None]
    ends = [_offset_ns(info, s) + int(run["endNs"]) for s, run in runs] or [intervals[-1].end_ns if intervals else 0]
    sending = [_offset_ns(info, s) + int(run["sendingEndNs"]) for s, run in runs] or ends
    reasons = sorted({str(run["stopReason"]) for _, run in runs})
    return RunSummary(
        info=info,
        intervals=len(intervals),
        end_ns=max(ends),
        sending_end_ns=max(sending),
        tally=tally,
        uncorrected=_merged_histogram(run.get("uncorrected") for _, run in runs),
        send_lag=_merged_histogram(run.get("sendLag") for _, run in runs),
        in_unit=_merged_histogram(run.get("inUnit") for _, run in runs),
        stop_reason=", ".join(reasons) or "unknown",
        cpu_seconds=sum(float(run["cpuSeconds"]) for _, run in runs),
        max_rss_bytes=max((int(run["maxRssBytes"]) for _, run in runs), default=0),
        connections=_added(run.get("connections") for _, run in runs),
        shards=report,
    )


def _added(counts: Iterable[dict[str, int] | None]) -> dict[str, int] | None:
    """Per-key sums of the shards' counts; None if no shard had any."""
    present = [c for c in counts if c is not None]
    if not present:
        return None
    total: dict[str, int] = {}
    for count in present:
        for key, n in count.items():
            total[key] = total.get(key, 0) + int(n)
    return total


def _merged_histogram(records: Iterable[dict[str, Any] | None]) -> LatencyHistogram | None:
    present = [r for r in records if r is not None]
    if not present:
        return None
    return LatencyHistogram.merged(*(LatencyHistogram.from_record(r) for r in present))


def _apart(info: RunInfo, shards: Sequence[ShardRun]) -> list[str]:
    """A note when the shards did not all start on the same interval boundary.

    Each pod starts at the next boundary by its own clock, so pods that come up on either side
    of one start an interval apart. Their intervals still line up and add up, but the first
    and last intervals then hold only some shards' load, which shows as goal% below 100.
    """
    slots = {s.index: round(_offset_ns(info, s) / info.settings.interval_ns) for s in shards}
    if len(set(slots.values())) < 2:
        return []
    late = ", ".join(f"shard {i}: {n} interval{'s' if n > 1 else ''} late" for i, n in sorted(slots.items()) if n)
    return [f"the shards did not start together ({late}); the first and last intervals hold only some shards' load"]


def _offset_ns(info: RunInfo, shard: ShardRun) -> int:
    """Where a shard's own time 0 falls on the merged run's clock."""
    return round((shard.start_wall - info.wall_start) * NS_PER_S)

