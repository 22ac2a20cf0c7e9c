"""A finished run read back from what it left: a JSON summary, `kubectl logs`, or slow_cooker's log.

Reports (`soak compare`, `soak plot`) start from whatever the user kept, and that is rarely
clean: `kubectl logs` mixes stderr lines in anywhere, a killed pod or `--tail` cuts the log
short (sometimes mid-summary, mid-line), someone pastes it with its spaces collapsed, or it
is slow_cooker's own output. So loading never fails on content: it reads what it can,
rebuilds what is missing from what is there, and says in plain words, in `notes`, every
line it skipped and everything it assumed. Only a file that cannot be opened is an error.

Everything here is pure except read_run(), which only reads the file.
"""

from __future__ import annotations

import json
import math
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields, replace
from itertools import pairwise
from typing import Any

from hdrh.histogram import HdrHistogram

from runner.core.errors import UsageError
from runner.core.units import UNIT_NS
from runner.readback.logscan import MAX_LINE_NOTES, IntervalFigures, JsonBlock, LogScan, Startup, scan
from runner.readback.partialjson import read_object
from runner.report import keys as k
from runner.report.slowcooker import goal_percent
from runner.report.summary import SUMMARY_PERCENTILES
from runner.stats.estimate import estimate, interval_points

__all__ = ["IntervalFigures", "LoadedRun", "RunFigures", "Startup", "load_run", "read_run"]

LATENCY_KEYS = (*SUMMARY_PERCENTILES, k.MIN, k.MEAN, k.MAX)
_SLOW_COOKER_KEYS = frozenset(SUMMARY_PERCENTILES)
_INTERVAL_QUANTILES = {"p50": 0.5, "p95": 0.95, "p99": 0.99, "p999": 0.999}
_ESTIMATED_QUANTILES = {key: p / 100 for key, p in SUMMARY_PERCENTILES.items()}


@dataclass(frozen=True)
class RunFigures:
    """The run as a whole, for reports: each figure None when nothing in the file tells it.

    Latencies are in nanoseconds, so runs measured in different units compare directly.
    """

    requests: int | None = None
    good: int | None = None
    bad: int | None = None
    failed: int | None = None
    skipped: int | None = None
    goal_percent: float | None = None
    rate_target: float | None = None
    rate_achieved: float | None = None
    duration_seconds: float | None = None
    intervals: int | None = None
    bench_rps: float | None = None  # a bench run's requests per second, from its "bench" section
    latency_ns: Mapping[str, float] = field(default_factory=dict)  # p50 ... p999, min, mean, max
    estimated: frozenset[str] = frozenset()  # latency keys that are estimates from interval rows

    @property
    def failed_percent(self) -> float | None:
        if self.failed is None or not self.requests:
            return None
        return self.failed / self.requests * 100


@dataclass(frozen=True)
class LoadedRun:
    """A finished run as read from one file, with what was skipped or assumed in `notes`."""

    source: str  # the file's name as given
    intervals: tuple[IntervalFigures, ...]
    summary: Mapping[str, Any] | None  # the JSON summary as found (only its whole members if cut off)
    figures: RunFigures  # from the summary where it tells, else rebuilt from the intervals
    latency_unit: str  # of the intervals' latencies and the summary's
    slow_cooker: bool  # slow_cooker's output rather than soak's
    startup: Startup | None
    notes: tuple[str, ...]

    @property
    def usable(self) -> bool:
        """Whether the file held anything of a run at all."""
        return bool(self.intervals) or self.summary is not None


def read_run(path: str, assumed_unit: str = "ms") -> LoadedRun:
    """Load the run in a file (`-` for stdin); a file that cannot be read is a UsageError."""
    try:
        if path == "-":
            data = sys.stdin.buffer.read()
        else:
            with open(path, "rb") as f:
                data = f.read()
    except OSError as e:
        raise UsageError(f"{path}: {e.strerror or e}") from None
    return load_run(data.decode("utf-8", errors="replace"), path, assumed_unit)


def load_run(text: str, source: str, assumed_unit: str = "ms") -> LoadedRun:
    """Load a run from the text of a log or summary; never raises on what the text holds."""
    lines = scan(text)
    notes = list(lines.notes)
    found = _summary(lines.blocks, notes)
    _note_lines(lines, found, notes)
    slow_cooker = _is_slow_cooker(lines, found, notes)
    intervals = _choose_intervals(lines.intervals, found.intervals if found else None, slow_cooker, notes)
    summary = found.members if found else None
    unit = _unit(summary, assumed_unit, bool(intervals), notes)
    figures = _figures(summary, intervals, unit, slow_cooker, lines.startup, notes)
    if not intervals and summary is None:
        notes.append("nothing in it is soak's or slow_cooker's output")
    return LoadedRun(source, tuple(intervals), summary, figures, unit, slow_cooker, lines.startup, tuple(notes))


def _note_lines(lines: LogScan, found: _Summary | None, notes: list[str]) -> None:
    """What the scan skipped or read in passing, in words."""
    if found is not None and k.BENCH in found.members and lines.skipped:
        notes.append(f"{lines.skipped} lines of ab's report skipped: the JSON summary holds its figures")
    else:
        notes += lines.skip_notes
        if lines.skipped > MAX_LINE_NOTES:
            more = lines.skipped - MAX_LINE_NOTES
            notes.append(f"{more} more line{_s(more)} that are not soak or slow_cooker output skipped")
    errors = lines.soak_errors + lines.slow_cooker_errors
    counted = errors - lines.trailing_errors
    if counted:
        notes.append(f"{counted} error line{_s(counted)} from stderr, each read as a failure of the interval "
                     "line after it")
    if lines.trailing_errors:
        notes.append(f"{lines.trailing_errors} error line{_s(lines.trailing_errors)} after the last interval line, "
                     "in no interval")
    if lines.timestamp_prefixes:
        notes.append(f"{lines.timestamp_prefixes} lines began with a timestamp from kubectl logs --timestamps, "
                     "removed")


def _s(n: int) -> str:
    return "" if n == 1 else "s"


# --- The JSON summary ---------------------------------------------------------------------


@dataclass(frozen=True)
class _Summary:
    """The JSON summary found: its members, whether it was whole, and its intervalStats."""

    members: dict[str, Any]
    whole: bool
    intervals: list[IntervalFigures] | None


def _summary(blocks: Sequence[JsonBlock], notes: list[str]) -> _Summary | None:
    """The run's JSON summary: the last one that reads, with notes on what was lost."""
    found = None
    for block in blocks:
        found = _read_block(block, notes) or found
    if found is None:
        return None
    members, whole = found
    return _Summary(members, whole, _interval_stats(members, notes))


def _read_block(block: JsonBlock, notes: list[str]) -> tuple[dict[str, Any], bool] | None:
    """One JSON block's members and whether it was whole; what could not be read, in a note."""
    text = "\n".join(block.lines)
    where = f"line {block.first_line}" if block.last_line == block.first_line else \
        f"lines {block.first_line}-{block.last_line}"
    found = read_object(text)
    one_line = len(block.lines) == 1 and block.lines[0] != "{"
    if found is None or (one_line and not found.members):
        notes.append(f"{where}: JSON that cannot be read, skipped")
        return None
    members = found.members
    if not found.complete:
        lost = len(text) - len(text[found.stop:].lstrip(", \t\r\n"))  # where the first member lost begins
        line = block.first_line + text.count("\n", 0, lost)
        how = "broken" if block.closed else "cut off"
        inside = f" inside {json.dumps(found.cut_inside)}" if found.cut_inside else ""
        kept = f"kept the {len(members)} whole keys before it" if members else "none of it could be kept"
        notes.append(f"JSON summary {how} at line {line}{inside}: {kept}")
        if not members:
            return None
    if not _looks_like_summary(members):
        notes.append(f"{where}: JSON that is not a soak or slow_cooker summary, skipped")
        return None
    return members, found.complete


def _looks_like_summary(members: Mapping[str, Any]) -> bool:
    known = {*LATENCY_KEYS, k.REQUESTS, k.RATE, k.LATENCY_UNIT, k.BENCH, k.INTERVAL_STATS}
    return any(key in members for key in known)


def _interval_stats(summary: Mapping[str, Any], notes: list[str]) -> list[IntervalFigures] | None:
    """The summary's intervalStats as IntervalFigures; None when it has none or they do not read."""
    stats = summary.get(k.INTERVAL_STATS)
    if not isinstance(stats, list) or not stats:
        return None
    intervals = []
    for index, entry in enumerate(stats):
        figures = _interval_from_stats(entry)
        if figures is None:
            notes.append(f"the JSON summary's intervalStats[{index}] cannot be read; used the interval lines")
            return None
        intervals.append(figures)
    return intervals


def _interval_from_stats(entry: Any) -> IntervalFigures | None:
    if not isinstance(entry, dict):
        return None
    ints = (k.ITER, k.GOOD, k.BAD, k.FAILED, k.BHASH)
    latencies = (k.MIN, "p50", "p95", "p99", "p999", k.MAX)
    if not all(_is_int(entry.get(key)) for key in ints) or any(_number(entry.get(k)) is None for k in latencies):
        return None
    t, goal = entry.get(k.GOAL_T), entry.get(k.GOAL_PERCENT)  # null in a bench, which has no goal
    if (t is not None and _number(t) is None) or (goal is not None and not _is_int(goal)):
        return None
    if not isinstance(entry.get(k.END), str) or not isinstance(entry.get(k.INTERVAL), str):
        return None
    errors = entry.get(k.ERRORS)
    return IntervalFigures(
        entry[k.END], entry[k.ITER], entry[k.GOOD], entry[k.BAD], entry[k.FAILED], t, goal,
        entry[k.INTERVAL], entry[k.MIN], entry["p50"], entry["p95"], entry["p99"], entry["p999"], entry[k.MAX],
        entry[k.BHASH],
        skipped=entry[k.SKIPPED] if _is_int(entry.get(k.SKIPPED)) else None,
        errors={str(k): v for k, v in errors.items() if _is_int(v)} if isinstance(errors, dict) else None,
    )


# --- Whose output, which intervals, which unit --------------------------------------------


def _is_slow_cooker(lines: LogScan, summary: _Summary | None, notes: list[str]) -> bool:
    """slow_cooker's output or soak's, from the evidence: the summary's keys, error lines, p999s.

    A whole summary of exactly slow_cooker's six keys is its; any other key is soak's. So is
    a p999 below max (slow_cooker's p999 column is its max, or one bucket above it).
    """
    soak = slow = False
    if summary is not None:
        slow = summary.whole and set(summary.members) == _SLOW_COOKER_KEYS
        soak = bool(set(summary.members) - _SLOW_COOKER_KEYS)
    soak = soak or lines.soak_errors > 0 or any(i.p999 is not None and i.p999 < i.max for i in lines.intervals)
    slow = slow or lines.slow_cooker_errors > 0 or any(i.p999 is not None and i.p999 > i.max for i in lines.intervals)
    if slow and not soak:
        notes.append("slow_cooker log: its p999 (column and summary) is its max, so p999 is not known")
        return True
    if slow and soak:
        notes.append("the file looks like both soak's and slow_cooker's output; read as soak's")
    elif not soak and lines.intervals:
        notes.append("nothing tells whether this is soak's or slow_cooker's output; read as soak's")
    return False


def _choose_intervals(
    lines: list[IntervalFigures], stats: list[IntervalFigures] | None, slow_cooker: bool, notes: list[str]
) -> list[IntervalFigures]:
    """The summary's intervalStats when it has them (checked against the lines), else the lines."""
    if slow_cooker:
        lines = [replace(i, p999=None) for i in lines]
    if stats is None:
        _note_gaps(lines, notes)
        return lines
    if lines:
        _note_disagreements(lines, stats, notes)
    return stats


def _note_gaps(intervals: Sequence[IntervalFigures], notes: list[str]) -> None:
    """Intervals missing from the lines: the log was cut at the top (`--tail`) or lost lines."""
    if not intervals:
        return
    if intervals[0].iter != 0:
        notes.append(f"the interval lines start at iter {intervals[0].iter}: the earlier ones are not in the file")
    missing = sum(max(b.iter - a.iter - 1, 0) for a, b in pairwise(intervals))
    if missing or any(b.iter <= a.iter for a, b in pairwise(intervals)):
        notes.append(f"the interval lines are not one unbroken run of iterations ({missing} missing between them)")


_COMPARED = ("timestamp", "good", "bad", "failed", "goal_percent", "interval",
             "min", "p50", "p95", "p99", "p999", "max", "bhash")


def _as_printed(name: str, value: Any) -> Any:
    """A summary figure as its interval line prints it: latencies truncated to whole units."""
    return int(value) if name in _LATENCIES and value is not None else value


_LATENCIES = ("min", "p50", "p95", "p99", "p999", "max")


def _note_disagreements(lines: list[IntervalFigures], stats: list[IntervalFigures], notes: list[str]) -> None:
    """Check the interval lines against intervalStats, which win: say where they differ."""
    by_iter = {i.iter: i for i in stats}
    differences = []
    for line in lines:
        stat = by_iter.get(line.iter)
        if stat is None:
            differences.append(f"iter {line.iter} is not in intervalStats")
            continue
        differences += [
            f"iter {line.iter} {name}: {getattr(line, name)} in the line, {getattr(stat, name)} in the summary"
            for name in _COMPARED if getattr(line, name) != _as_printed(name, getattr(stat, name))
        ]
        if line.t is not None and stat.t is not None and abs(line.t - stat.t) > 0.5005:  # the line rounds t
            differences.append(f"iter {line.iter} t: {line.t} in the line, {stat.t} in the summary")
    if differences:
        more = f" (and {len(differences) - 3} more)" if len(differences) > 3 else ""
        notes.append("the interval lines disagree with the JSON summary's intervalStats, which are used: "
                     + "; ".join(differences[:3]) + more)
    if len(lines) < len(stats):
        notes.append(f"the file has {len(lines)} of the {len(stats)} interval lines; all {len(stats)} are in "
                     "the JSON summary's intervalStats, which are used")


def _unit(summary: Mapping[str, Any] | None, assumed: str, has_intervals: bool, notes: list[str]) -> str:
    unit = summary.get(k.LATENCY_UNIT) if summary is not None else None
    if isinstance(unit, str) and unit in UNIT_NS:
        return unit
    if has_intervals or summary is not None:
        notes.append(f"the latency unit is not in the file; assumed {assumed} (--assumeUnit changes it)")
    return assumed


# --- Figures for the whole run ------------------------------------------------------------


def _figures(
    summary: Mapping[str, Any] | None,
    intervals: Sequence[IntervalFigures],
    unit: str,
    slow_cooker: bool,
    startup: Startup | None,
    notes: list[str],
) -> RunFigures:
    """The summary's figures, each missing one rebuilt from the intervals, with notes saying which."""
    told = _from_summary(summary, unit, slow_cooker, notes) if summary is not None else RunFigures()
    rebuilt = _from_intervals(intervals, unit, startup) if intervals else RunFigures()
    merged, filled = _merge(told, rebuilt)
    n = len(intervals)
    lines = f"{n} interval{'s' if n != 1 else ''}"
    if summary is None and intervals:
        notes.append(f"no JSON summary (the log was cut off, or the run had noLatencySummary): figures from {lines}")
    elif filled:
        notes.append(f"not in the JSON summary, so from the {lines}: {', '.join(filled)}")
    if merged.estimated:
        estimated = [key for key in LATENCY_KEYS if key in merged.estimated]
        notes.append(f"estimated from the intervals' percentiles, not measured: {', '.join(estimated)}")
    return merged


_FIGURE_NAMES = {"goal_percent": "goal%", "rate_target": "target rate", "rate_achieved": "achieved rate",
                 "duration_seconds": "duration", "bench_rps": "bench req/s"}


def _merge(told: RunFigures, rebuilt: RunFigures) -> tuple[RunFigures, list[str]]:
    """`told`, with each figure it lacks taken from `rebuilt`; and the names of those taken."""
    values: dict[str, Any] = {}
    filled = []
    for f in fields(RunFigures):
        if f.name in ("latency_ns", "estimated"):
            continue
        mine, theirs = getattr(told, f.name), getattr(rebuilt, f.name)
        values[f.name] = mine if mine is not None else theirs
        if mine is None and theirs is not None:
            filled.append(_FIGURE_NAMES.get(f.name, f.name))
    latency = dict(told.latency_ns)
    for key, value in rebuilt.latency_ns.items():
        if key not in latency:
            latency[key] = value
            if key not in rebuilt.estimated:
                filled.append(key)
    estimated = frozenset(k for k in rebuilt.estimated if k not in told.latency_ns)
    return RunFigures(**values, latency_ns=latency, estimated=estimated), filled


def _from_summary(summary: Mapping[str, Any], unit: str, slow_cooker: bool, notes: list[str]) -> RunFigures:
    """What the JSON summary itself tells."""
    scale = UNIT_NS[unit]
    told = {key: value * scale for key in LATENCY_KEYS if (value := _number(summary.get(key))) is not None}
    latency = told | _histogram_latencies(summary, notes)
    if "min" in told:
        # The histogram's min is the lowest value of its bucket, up to 0.1% under the exact
        # min that the summary's key truncates to its unit: the true min is at least the key.
        latency["min"] = max(latency["min"], told["min"])
    if slow_cooker:
        latency.pop("p999", None)
    rate, bench = _section(summary, k.RATE), _section(summary, k.BENCH)
    return RunFigures(
        requests=_count(summary.get(k.REQUESTS)),
        good=_count(summary.get(k.GOOD)),
        bad=_count(summary.get(k.BAD)),
        failed=_count(summary.get(k.FAILED)),
        skipped=_count(summary.get(k.SKIPPED)),
        goal_percent=_number(summary.get(k.GOAL_PERCENT)),
        rate_target=_number(rate.get(k.RATE_TARGET)),
        rate_achieved=_number(rate.get(k.RATE_ACHIEVED)),
        duration_seconds=_number(summary.get(k.DURATION_SECONDS)),
        intervals=_count(summary.get(k.INTERVALS)),
        bench_rps=_number(bench.get(k.BENCH_REQUESTS_PER_SECOND)),
        latency_ns=latency,
    )


def _histogram_latencies(summary: Mapping[str, Any], notes: list[str]) -> dict[str, float]:
    """p50 ... p999, min and max in ns from the summary's HDR histogram.

    To 0.1%, where the summary's own keys are truncated to whole units: a 0.4 ms p50 is 0
    there. Taking min and max from the same histogram keeps every percentile between them.
    """
    histogram = _section(summary, k.HISTOGRAM)
    encoded = histogram.get(k.HISTOGRAM_HDR)
    if not isinstance(encoded, str) or histogram.get(k.HISTOGRAM_UNIT, "ns") != "ns":
        return {}
    try:
        hdr = HdrHistogram.decode(encoded)
        if not hdr.get_total_count():
            return {}
        found = hdr.get_percentile_to_value_dict(list(SUMMARY_PERCENTILES.values()))
        low, high = hdr.get_min_value(), hdr.get_max_value()
    except Exception:  # noqa: BLE001 - any damage to untrusted base64/zlib/struct data reads as "unreadable"
        notes.append("the JSON summary's histogram cannot be read; its percentile keys are used instead")
        return {}
    return {**{key: float(found[p]) for key, p in SUMMARY_PERCENTILES.items()}, "min": float(low), "max": float(high)}


def _from_intervals(intervals: Sequence[IntervalFigures], unit: str, startup: Startup | None) -> RunFigures:
    """What the intervals tell of the whole run: counts and rate exactly, percentiles as estimates."""
    good = sum(i.good for i in intervals)
    bad = sum(i.bad for i in intervals)
    failed = sum(i.failed for i in intervals)
    seconds = [s for i in intervals if (s := i.seconds) is not None]
    duration = sum(seconds) if len(seconds) == len(intervals) else None
    skipped = [i.skipped for i in intervals]
    goals = [i.t for i in intervals]
    goal = sum(t for t in goals if t is not None) if None not in goals else None  # a bench has none
    rate_target = startup.rate if startup is not None else (goal / duration if goal and duration else None)
    return RunFigures(
        requests=good + bad + failed,
        good=good,
        bad=bad,
        failed=failed,
        skipped=sum(s for s in skipped if s is not None) if None not in skipped else None,
        goal_percent=goal_percent(good + bad, goal) if goal is not None else None,
        rate_target=rate_target,
        rate_achieved=round((good + bad + failed) / duration, 3) if duration else None,
        duration_seconds=round(duration, 3) if duration is not None else None,
        intervals=len(intervals),
        **_interval_latencies(intervals, UNIT_NS[unit]),
    )


def _interval_latencies(intervals: Sequence[IntervalFigures], scale: int) -> dict[str, Any]:
    """min and max exactly (to the unit); percentiles and mean estimated from each interval's row."""
    answered = [i for i in intervals if i.responses]
    if not answered:
        return {}
    groups = [
        (i.responses, interval_points(i.min, {q: getattr(i, key) for key, q in _INTERVAL_QUANTILES.items()}, i.max))
        for i in answered
    ]
    found = estimate(groups, _ESTIMATED_QUANTILES)
    if any(i.p999 is None for i in answered):
        found.pop("p999", None)  # slow_cooker's rows have no real p999 to estimate it from
    latency = {key: round(value, 3) * scale for key, value in found.items()}
    latency["min"] = min(i.min for i in answered) * scale
    latency["max"] = max(i.max for i in answered) * scale
    return {"latency_ns": latency, "estimated": frozenset(found)}


# --- Values from untrusted JSON -------------------------------------------------------------


def _section(summary: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    """A nested object of the summary, or an empty one when it is missing or not an object."""
    value = summary.get(key)
    return value if isinstance(value, dict) else {}


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _number(value: Any) -> float | None:
    """A finite JSON number, or None for anything else (strings, booleans, null, NaN)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return value if math.isfinite(value) else None


def _count(value: Any) -> int | None:
    return value if _is_int(value) and value >= 0 else None
