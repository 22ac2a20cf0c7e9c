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
from collections.abc import Mapping, Sequence
from dataclasses import replace
from itertools import pairwise
from typing import Any

from runner.config.files import read_log
from runner.core.columns import LATENCY_COLUMNS
from runner.core.lazymethods import dataclass
from runner.core.units import UNIT_NS
from runner.readback.figures import LATENCY_KEYS, RunFigures, figures, json_int, json_number
from runner.readback.logscan import MAX_LINE_NOTES, IntervalRow, JsonBlock, LogScan, Startup, scan
from runner.readback.partialjson import read_object
from runner.report import keys as k
from runner.stats.figures import SUMMARY_PERCENTILES

__all__ = ["IntervalRow", "LoadedRun", "RunFigures", "Startup", "load_run", "read_run"]

_SLOW_COOKER_KEYS = frozenset(SUMMARY_PERCENTILES)
# A shard's intervals are its summary's bulk, several times the rest once decoded: left in the
# text, `soak merge` reads them one at a time (runner.stats.merge) and the reports never do.
_LAZY_ARRAYS = ((k.SHARD, "intervals"),)


@dataclass(frozen=True)
class LoadedRun:
    """A finished run as read from one file, with what was skipped or assumed in `notes`."""

    source: str  # the file's name as given
    intervals: tuple[IntervalRow, ...]
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
    data = read_log(path)  # a regular file, stdin or a shell's pipe; a device or a FIFO is refused
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
    run_figures = figures(summary, intervals, unit, slow_cooker, lines.startup, notes)
    if not intervals and summary is None:
        notes.append("nothing in it is soak's or slow_cooker's output")
    return LoadedRun(source, tuple(intervals), summary, run_figures, unit, slow_cooker, lines.startup, tuple(notes))


def _note_lines(lines: LogScan, found: _Summary | None, notes: list[str]) -> None:
    """What the scan skipped or read in passing, in words."""
    if lines.ab_lines and (found is None or k.BENCH not in found.members):
        # A bench log's ab report is expected and its figures are in the summary: said only without one.
        notes.append(f"{lines.ab_lines} line{_s(lines.ab_lines)} of ab's report skipped: only the JSON summary of "
                     "`soak bench` is read, and there is none")
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
    intervals: list[IntervalRow] | None


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
    found = read_object(text, _LAZY_ARRAYS)
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


def _interval_stats(summary: Mapping[str, Any], notes: list[str]) -> list[IntervalRow] | None:
    """The summary's intervalStats as IntervalRow; None when it has none or they do not read."""
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


def _interval_from_stats(entry: Any) -> IntervalRow | None:
    if not isinstance(entry, dict):
        return None
    ints = (k.ITER, k.GOOD, k.BAD, k.FAILED, k.BHASH)
    if not all(json_int(entry.get(key)) for key in ints) or any(json_number(entry.get(key)) is None
                                                                for key in LATENCY_COLUMNS):
        return None
    t, goal = entry.get(k.GOAL_T), entry.get(k.GOAL_PERCENT)  # null in a bench, which has no goal
    if (t is not None and json_number(t) is None) or (goal is not None and not json_int(goal)):
        return None
    if not isinstance(entry.get(k.END), str) or not isinstance(entry.get(k.INTERVAL), str):
        return None
    errors = entry.get(k.ERRORS)
    return IntervalRow(
        entry[k.END], entry[k.ITER], entry[k.GOOD], entry[k.BAD], entry[k.FAILED], t, goal,
        entry[k.INTERVAL], **{key: entry[key] for key in LATENCY_COLUMNS}, bhash=entry[k.BHASH],
        skipped=entry[k.SKIPPED] if json_int(entry.get(k.SKIPPED)) else None,
        errors={str(k): v for k, v in errors.items() if json_int(v)} if isinstance(errors, dict) else None,
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
    lines: list[IntervalRow], stats: list[IntervalRow] | None, slow_cooker: bool, notes: list[str]
) -> list[IntervalRow]:
    """The summary's intervalStats when it has them (checked against the lines), else the lines."""
    if slow_cooker:
        lines = [replace(i, p999=None) for i in lines]
    lines = _within_int64(lines, "interval line", notes)
    if stats is not None:
        stats = _within_int64(stats, "intervalStats entry", notes)
    if stats is None:
        _note_gaps(lines, notes)
        return lines
    if lines:
        _note_disagreements(lines, stats, notes)
    return stats


# The largest figure any run prints: both engines and slow_cooker count in signed 64-bit integers.
# A row with a larger one is damaged or made up, and its numbers would overflow the float arithmetic
# of the run-wide estimates (runner.stats.estimate): it is left out, with a note.
_LARGEST = 2**63 - 1
_FIGURES = ("good", "bad", "failed", "t", *LATENCY_COLUMNS, "bhash", "skipped")


def _within_int64(rows: list[IntervalRow], what: str, notes: list[str]) -> list[IntervalRow]:
    """The rows whose every figure a run could have printed; a note for each left out."""
    kept = []
    for row in rows:
        big = next((name for name in _FIGURES if abs(getattr(row, name) or 0) > _LARGEST), None)
        if big is None:
            kept.append(row)
        else:
            notes.append(f"the {what} of iter {row.iter} has a {big} beyond what any run counts"
                         " (a damaged log?); left out")
    return kept


def _note_gaps(intervals: Sequence[IntervalRow], notes: list[str]) -> None:
    """Intervals missing from the lines: the log was cut at the top (`--tail`) or lost lines."""
    if not intervals:
        return
    if intervals[0].iter != 0:
        notes.append(f"the interval lines start at iter {intervals[0].iter}: the earlier ones are not in the file")
    missing = sum(max(b.iter - a.iter - 1, 0) for a, b in pairwise(intervals))
    if missing or any(b.iter <= a.iter for a, b in pairwise(intervals)):
        notes.append(f"the interval lines are not one unbroken run of iterations ({missing} missing between them)")


_COMPARED = ("timestamp", "good", "bad", "failed", "goal_percent", "interval", *LATENCY_COLUMNS, "bhash")


def _as_printed(name: str, value: Any) -> Any:
    """A summary figure as its interval line prints it: latencies truncated to whole units."""
    return int(value) if name in LATENCY_COLUMNS and value is not None else value


def _note_disagreements(lines: list[IntervalRow], stats: list[IntervalRow], notes: list[str]) -> None:
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


# --- Values from untrusted JSON -------------------------------------------------------------


