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

import json
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from runner.config.schema import schema, settings_names, shortened, validate
from runner.config.settings import Settings, merge, settings_from
from runner.core.errors import UsageError
from runner.core.units import NS_PER_S
from runner.stats.histogram import HIGHEST_NS, LatencyHistogram
from runner.stats.recorder import Interval, Tally
from runner.stats.run import RunInfo, RunSummary

CLOCK_SLACK_NS = 1_000_000  # how far apart the shards' ends of one full interval may be
MAX_NS = 2**63 - 1  # a time offset a shard can have written (int64 nanoseconds)
MAX_START_WALL = 1e11  # seconds since 1970 (the year 5138): a later start is no start time


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
    source: str = ""  # where it was read: a file, or a pod in `kubectl logs --prefix` output

    @classmethod
    def from_summary(cls, summary: Mapping[str, Any], source: str = "") -> ShardRun:
        """A finished shard from its JSON summary; ValueError naming what is wrong if it cannot be merged.

        The summary comes back from a log, which may have been damaged or edited: every value
        the merge uses is checked here, so that a bad one is named once, with where it is,
        instead of failing deep inside the merge.
        """
        record = summary.get("shard")
        if not isinstance(record, dict):
            raise ValueError("the summary has no shard record (was the run split over shards?)")
        config = checked_config(summary.get("config"))
        check_run_record(record)
        return cls(record["index"], record["count"], float(record["startWall"]), config, list(record["urls"]),
                   record.get("urlSource"), list(record["intervals"]), record, source)


def run_settings(config: Mapping[str, Any]) -> dict[str, Any]:
    """A shard's settings that are the run's: the ones every shard of one run has alike."""
    return {key: value for key, value in config.items() if key not in _RUN_ONLY}


def checked_config(config: Any) -> dict[str, Any]:
    """A shard's printed config, checked against the schema as a config file would be.

    Keys this version does not know are left out of the check (a newer runner may print
    more); the merged run is made from the rest, so those must be valid.
    """
    if not isinstance(config, dict):
        raise ValueError(f"config: {_shown(config)} is not allowed; must be an object")
    names = set(settings_names())
    known = {key: value for key, value in config.items() if key in names}
    try:
        validate(known, lambda error: "config" + error.json_path[1:])
        settings = settings_from(merge(run_settings(known)))
    except UsageError as e:
        raise ValueError(str(e)) from None
    if settings.mode != "soak":
        raise ValueError(f"config.mode: {_shown(settings.mode)} is not allowed; shards split soaks only")
    return dict(config)


def check_run_record(record: Mapping[str, Any]) -> None:
    """ValueError naming the first value of a shard record that the merge could not use."""
    most = int(schema()["properties"]["shards"]["maximum"])  # a count above it could not have run
    index, count = _whole(record, "index", 0, MAX_NS), _whole(record, "count", 1, most)
    if index >= count:
        raise ValueError(f"shard.index: {index} is not allowed; must be below shard.count ({count})")
    _value(record, "startWall", _is_start_wall, f"a time in seconds since 1970, below {MAX_START_WALL:.0e}")
    _value(record, "urls", lambda v: isinstance(v, list) and bool(v) and all(isinstance(u, str) for u in v),
           "a list of URLs")
    _value(record, "urlSource", lambda v: v is None or isinstance(v, str), "a string or null", required=False)
    _whole(record, "endNs", 0, MAX_NS)
    _whole(record, "sendingEndNs", 0, MAX_NS)
    _value(record, "stopReason", lambda v: isinstance(v, str), "a string")
    _value(record, "cpuSeconds", lambda v: _is_number(v) and v >= 0, "a number, at least 0")
    _whole(record, "maxRssBytes", 0, MAX_NS)
    for key in ("uncorrected", "sendLag", "inUnit"):
        _histogram(record.get(key), f"shard.{key}")
    _value(record, "connections", _is_counts, "null or an object of whole numbers", required=False)
    _value(record, "intervals", lambda v: isinstance(v, list), "a list")
    for k, interval in enumerate(record["intervals"]):
        _check_interval(interval, f"shard.intervals[{k}]", len(record["urls"]))


def _check_interval(interval: Any, where: str, urls: int) -> None:
    """ValueError naming what is wrong with one interval record of a shard."""
    if not isinstance(interval, dict):
        raise ValueError(f"{where}: {_shown(interval)} is not allowed; must be an interval record")
    start = _whole(interval, "startNs", 0, MAX_NS, where)
    _whole(interval, "endNs", start, MAX_NS, where)
    if interval.get("sendingEndNs") is not None:
        _whole(interval, "sendingEndNs", 0, MAX_NS, where)
    _value(interval, "tally", lambda v: isinstance(v, dict), "a tally record", where)
    _check_tally(interval["tally"], f"{where}.tally", urls)


def _check_tally(record: dict[str, Any], where: str, urls: int) -> None:
    """ValueError unless the tally reads back with counts of at least 0 and errors of the shard's URLs."""
    _histogram(record.get("latency"), f"{where}.latency", required=True)
    try:
        tally = Tally.from_record(record).to_record()
    except (ValueError, OverflowError) as e:  # int(Infinity) is an OverflowError
        raise ValueError(f"{where}: {e}") from None
    counts = [n for n in tally.values() if isinstance(n, int)] + [*tally["statuses"].values(),
                                                                   *tally["errors"].values()]
    if any(n < 0 for n in counts + [g["count"] for g in tally["errorGroups"]]):
        raise ValueError(f"{where}: a count below 0")
    grouped = sum(g["count"] for g in tally["errorGroups"])
    if grouped != tally["failed"]:
        raise ValueError(f"{where}.errorGroups: {grouped} failures is not allowed; must be the {tally['failed']} "
                         "failed")
    for group in tally["errorGroups"]:
        for url in [group["url"], *group["urls"]]:
            if not 0 <= url < urls:
                raise ValueError(f"{where}.errorGroups: URL index {url} is not allowed; must be below the number of "
                                 f"shard.urls ({urls})")


def _histogram(record: Any, where: str, *, required: bool = False) -> None:
    """ValueError unless the histogram record reads back, its exact statistics within its range."""
    if record is None and not required:
        return
    if not isinstance(record, dict):
        raise ValueError(f"{where}: {_shown(record)} is not allowed; must be a histogram record")
    top = _whole(record, "max", 0, HIGHEST_NS, where)
    low = _whole(record, "min", 0, top, where)
    for key in ("sum", "sumSq"):
        _value(record, key, lambda v: type(v) is int and v >= 0, "a whole number, at least 0", where)
    try:
        n = LatencyHistogram.from_record(record).count
    except ValueError as e:
        raise ValueError(f"{where}: {e}") from None
    _whole(record, "sum", n * low, n * top, where)
    _whole(record, "sumSq", n * low * low, n * top * top, where)


def _whole(record: Mapping[str, Any], key: str, low: int, high: int, where: str = "shard") -> int:
    """record[key], a whole number from low to high, or a ValueError naming it."""
    allowed = f"a whole number, at least {low}" if high == MAX_NS else f"a whole number from {low} to {high}"
    _value(record, key, lambda v: type(v) is int and low <= v <= high, allowed, where)
    return int(record[key])


def _value(record: Mapping[str, Any], key: str, good: Callable[[Any], bool], allowed: str, where: str = "shard",
           *, required: bool = True) -> None:
    """A ValueError naming record[key] and what is allowed, unless it is good (or absent and not required)."""
    if key not in record:
        if required:
            raise ValueError(f"{where}.{key}: missing")
        return
    if not good(record[key]):
        raise ValueError(f"{where}.{key}: {_shown(record[key])} is not allowed; must be {allowed}")


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def _is_start_wall(value: Any) -> bool:
    return _is_number(value) and 0 <= value < MAX_START_WALL


def _is_counts(value: Any) -> bool:
    return value is None or (isinstance(value, dict) and all(type(n) is int and n >= 0 for n in value.values()))


def _shown(value: Any) -> str:
    """A bad value as JSON, shortened: enough to find it in the log."""
    return shortened(json.dumps(value, ensure_ascii=False, default=str))


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
    intervals = merge_intervals(info, shards, count)
    present = sorted(s.index for s in shards)
    gone = sorted(set(range(count)) - set(present) - set(incomplete))
    cut = sorted(set(incomplete))
    notes = [f"shard {i} of {count}: no output found, not merged" for i in gone]
    notes += [f"shard {i} of {count}: its output has no usable summary (cut off or damaged), not merged"
              for i in cut]
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
    settings: Settings = settings_from(merge(run_settings(first.config)))
    start_wall = min(s.start_wall for s in shards)
    return RunInfo(settings, first.urls, first.url_source, 0, start_wall)


def merge_intervals(info: RunInfo, shards: Sequence[ShardRun], count: int) -> list[Interval]:
    """The run's intervals: each shard's matched by its start on the common grid, and added.

    Of the run's `count` shards, those with no output count as sending all through every
    interval (their load was due, and nothing says it was sent); those merged count for
    the time they were sending.
    """
    groups: dict[int, list[tuple[int, dict[str, Any]]]] = {}
    for shard in shards:
        offset = _offset_ns(info, shard)
        for record in shard.intervals:
            slot = round((offset + int(record["startNs"])) / info.settings.interval_ns)
            groups.setdefault(slot, []).append((offset, record))
    unknown = count - len(shards)
    return [merged_interval(info, k, slot, groups[slot], count, unknown) for k, slot in enumerate(sorted(groups))]


def merged_interval(info: RunInfo, index: int, slot: int, parts: Sequence[tuple[int, dict[str, Any]]],
                    shares: int, unknown: int = 0) -> Interval:
    """Interval `index` of the run, at grid slot `slot`: the shards' records (each with its
    shard's clock offset) added up.

    The run is split into `shares` equal parts (shards, or workers); its goal in this
    interval is each part's for the time it was sending here (`unknown` parts: all of it).
    A shard that started an interval late, or had stopped, adds nothing to it, so the
    edge intervals of shards started on different boundaries keep a true goal.

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
    due = sum(_sending_ns(offset, r, start, start + length) for offset, r in parts) + unknown * length
    return Interval(index, start, end, tally, None if None in sending else max(s for s in sending if s is not None),
                    round(due / shares))


def _sending_ns(offset: int, record: dict[str, Any], start: int, end: int) -> int:
    """How long, within [start, end), the shard of this interval record was sending."""
    begin = max(start, offset + int(record["startNs"]))
    stop = min(end, offset + int(record["endNs"]))
    if record.get("sendingEndNs") is not None:
        stop = min(stop, offset + int(record["sendingEndNs"]))
    if abs(stop - end) < CLOCK_SLACK_NS:
        stop = end
    if abs(begin - start) < CLOCK_SLACK_NS:
        begin = start
    return max(0, stop - begin)


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
        due_ns=sum(interval.due_span_ns for interval in intervals),
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
    of one start an interval apart. Their intervals still line up and add up, and each
    interval's goal counts the shards sending in it, but the first and last intervals then
    hold only some shards' load: a rate lower than the run's, worth a word.
    """
    slots = {s.index: round(_offset_ns(info, s) / info.settings.interval_ns) for s in shards}
    if len(set(slots.values())) < 2:
        return []
    late = ", ".join(f"shard {i}: {n} interval{'s' if n > 1 else ''} late" for i, n in sorted(slots.items()) if n)
    return [f"the shards did not start together ({late}); the first and last intervals hold only some shards' load"]


def _offset_ns(info: RunInfo, shard: ShardRun) -> int:
    """Where a shard's own time 0 falls on the merged run's clock."""
    return round((shard.start_wall - info.wall_start) * NS_PER_S)

