"""The lines of a saved log, sorted: startup line, interval lines, JSON summary, stderr, the rest.

`kubectl logs` hands back stdout and stderr merged line by line, so an error line can sit
anywhere, even inside the JSON summary; a log can be cut off mid-line; someone may paste it
with its runs of spaces collapsed (the pallet's own README did) or save it with
`kubectl logs --timestamps`. This reads each line for what it is, keeps the JSON summary's
lines apart for runner.readback.partialjson, and counts and notes the lines that are none of these.
It never raises: a line it cannot place is skipped and noted.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping
from dataclasses import field
from typing import Any

from runner.core.columns import LOG_LINE, matched
from runner.core.durations import DurationError, parse_duration
from runner.core.lazymethods import dataclass
from runner.report.clientnotes import NOTE_PREFIXES
from runner.report.slowcooker import COUNT_REACHED, WARMUP_MARK
from runner.stats.figures import Sends

MAX_LINE_NOTES = 5  # lines noted one by one; the rest are counted
_QUOTE_CHARS = 60

_KUBECTL_TIMESTAMP = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d+(?:Z|[+-]\d\d:\d\d) ")
# `# sending 100 GET req/s with ...`, or a ramp's `# sending up to 100 GET req/s in 3 stages with ...`.
_STARTUP = re.compile(
    r"^# sending (up to )?(\d+(?:\.\d+)?) (\S+) req/s(?: in \d+ stages?)? with concurrency=(\d+) "
    r"(?:to (.+)|using url list (.+)) \.\.\.\s*$"
)
_HEADER = re.compile(r"^#\s+iter\s+good/b/f\s")
# IntervalRow's names for the line's columns, where they are the intervalStats' (the rest are alike).
_ROW_NAMES = {"iteration": "iter", "target": "t"}
# soak: once per group of alike errors per interval, on one URL or on several; then the rest in one line
_SOAK_ERROR = re.compile(r'^[A-Z]+ (?:(?:more than )?\d+ URLs, e\.g\. )?"(.*)": (.+) \((\d+) times?\)\s*$')
_SOAK_MORE_ERRORS = re.compile(r"^\.\.\. and \d+ more errors \((\d+) times?\)\s*$")
_SLOW_COOKER_ERROR = re.compile(r'^[A-Z][a-z]+ "(.*)": (.+?)\s*$')  # Go's net/http, once per failure
# Comment lines of ours: the thresholds' verdict (verdict.py), the notes on the client and the drain.
_OWN_COMMENTS = ("# threshold", COUNT_REACHED, WARMUP_MARK, *NOTE_PREFIXES)
# ab's report and the lines around it (runner/report/abreport.py, as ApacheBench 2.3 prints them):
# expected in a bench log, whose JSON summary holds the same figures, so read past without a note.
_AB_LABELS = ("Server Software", "Server Hostname", "Server Port", "Document Path", "Document Length",
              "Concurrency Level", "Time taken for tests", "Complete requests", "Failed requests",
              "Non-2xx responses", "Keep-Alive requests", "Total transferred", "Total body sent", "HTML transferred",
              "Requests per second", "Time per request", "Transfer rate", "Connect", "Processing", "Waiting", "Total")
_AB_LINE = re.compile(
    r"^(?:(?:" + "|".join(map(re.escape, _AB_LABELS)) + r"):\s.*"
    r"|This is ApacheBench, .*|Copyright 1996 Adam Twiss, .*|Licensed to The Apache Software Foundation, .*"
    r"|Benchmarking \S+ \(be patient\)(?:\.*done)?|\.\.done|(?:Completed|Finished) \d+ requests"
    r"|\s+\(Connect: \d+, Receive: \d+, Length: \d+, Exceptions: \d+\)|\s+[\d.]+ kb/s (?:sent|total)"
    r"|Connection Times \(ms\)|\s+min\s+mean\[\+/-sd\]\s+median\s+max"
    r"|Percentage of the requests served within a certain time \(ms\)|\s*\d+%\s+\d+(?: \(longest request\))?"
    r"|(?:WARNING|ERROR): The median and mean for .*|\s+(?:deviation apart\.|These results are) .*)\s*$"
)
_OWN_NOTE = "soak: "  # the runner's own lines on stderr: the Linkerd proxy awaited, a TLS warning, ...


@dataclass(frozen=True)
class IntervalRow(Sends):
    """One interval read back from a log: its line's columns (or its intervalStats entry); latencies in
    the run's unit, None where not known. A row, not the figures of runner.stats.figures: a log
    tells only what it printed."""

    timestamp: str  # end of the interval, as printed
    iter: int
    good: int
    bad: int
    failed: int
    t: float | None  # the interval's goal, in requests; None for a bench, which has none
    goal_percent: int | None
    interval: str  # its length as printed: `1m0s`, `500ms`, `1.504s`
    min: float  # integers from a line; to 3 decimals from a summary's intervalStats
    p50: float
    p95: float
    p99: float
    p999: float | None  # None for slow_cooker, whose p999 column is its max
    max: float
    bhash: int
    skipped: int | None = None  # only the JSON summary's intervalStats know these two
    errors: Mapping[str, int] | None = None  # by kind (intervalStats) or by error text (stderr lines)

    @property
    def seconds(self) -> float | None:
        """The interval's length in seconds; None when its printed form is not a duration."""
        try:
            return parse_duration(self.interval) / 1e9
        except DurationError:
            return None


@dataclass(frozen=True)
class Startup:
    """What the startup line says: `# sending 100 GET req/s with concurrency=5 to URL ...`."""

    rate: float | None  # the total rate, for soak and slow_cooker alike; None for stages (the line gives their peak)
    method: str
    concurrency: int
    target: str  # the URL(s), or the URL list file


@dataclass
class JsonBlock:
    """The lines of one JSON summary, and where they were."""

    first_line: int
    lines: list[str]
    last_line: int
    closed: bool = False  # ended by its closing brace, not by the end of the file or another run


@dataclass
class LogScan:
    """What the lines of one log are; scan() fills it in one pass."""

    startup: Startup | None = None
    intervals: list[IntervalRow] = field(default_factory=list)
    blocks: list[JsonBlock] = field(default_factory=list)
    soak_errors: int = 0  # stderr lines in soak's form: `GET "url": text (3 times)`, `... and 2 more errors (5 times)`
    slow_cooker_errors: int = 0  # stderr lines in Go's form: `Get "url": text`
    trailing_errors: int = 0  # error lines after the last interval line
    ab_lines: int = 0  # lines of ab's report (a bench log's), read past
    skipped: int = 0  # lines that are none of the above
    skip_notes: list[str] = field(default_factory=list)  # the first MAX_LINE_NOTES of them, in words
    notes: list[str] = field(default_factory=list)  # everything else worth saying
    timestamp_prefixes: int = 0  # lines that carried `kubectl logs --timestamps`' prefix
    _pending: Counter[str] = field(default_factory=Counter)  # errors since the last interval line
    _block: JsonBlock | None = None


def scan(text: str) -> LogScan:
    """Sort every line of `text`; only the last run in it is kept when it holds several."""
    found = LogScan()
    lines = text.splitlines()
    ends_cleanly = text.endswith(("\n", "\r"))
    for number, raw in enumerate(lines, 1):
        line = _without_prefix(found, raw)
        cut = number == len(lines) and not ends_cleanly
        if found._block is not None and not _ends_block(found, line):
            _in_block(found, number, line)
        else:
            _line(found, number, line, cut)
    if found._block is not None:
        _close_block(found, closed=False)
    return found


def startup_line(line: str) -> re.Match[str] | None:
    """The match of a run's startup line (behind a `kubectl logs --timestamps` prefix or not), else None.

    A run's output begins with it, so where several runs' logs were joined into one text
    (`cat pod-0.log pod-1.log`) it is where each of them begins.
    """
    return _STARTUP.match(without_timestamp(line))


def without_timestamp(line: str) -> str:
    """The line without the timestamp `kubectl logs --timestamps` puts before it."""
    m = _KUBECTL_TIMESTAMP.match(line)
    return line if m is None else line[m.end():]


def _without_prefix(found: LogScan, line: str) -> str:
    """The line without the timestamp `kubectl logs --timestamps` puts before it, counted."""
    bare = without_timestamp(line)
    if len(bare) != len(line):
        found.timestamp_prefixes += 1
    return bare


def _line(found: LogScan, number: int, line: str, cut: bool) -> None:
    """A line outside any JSON summary."""
    stripped = line.strip()
    if not stripped:
        return
    if stripped.startswith("{"):
        found._block = JsonBlock(number, [stripped], number)
        if stripped != "{":  # the whole summary on one line, as `jq -c` writes it, or the start of one
            _close_block(found, closed=stripped.endswith("}"))
    elif (m := _STARTUP.match(line)) is not None:
        _startup(found, number, m)
    elif _HEADER.match(line) or stripped.startswith(_OWN_COMMENTS):
        pass
    elif (m := LOG_LINE.match(line)) is not None and not (cut and m.group("change") is None):
        # A last line cut off before the space after bhash may have lost digits of bhash.
        _interval(found, m)
    elif _AB_LINE.match(line) and not cut:
        found.ab_lines += 1
    elif not _error_line(found, stripped) and not stripped.startswith(_OWN_NOTE):
        _skip(found, number, line, "the last line is cut off" if cut else "not soak or slow_cooker output")


def _ends_block(found: LogScan, line: str) -> bool:
    """A line that cannot be inside the summary being read: a new summary, run or interval line."""
    if line.rstrip() != "{" and _STARTUP.match(line) is None and LOG_LINE.match(line) is None:
        return False
    _close_block(found, closed=False)
    return True


def _in_block(found: LogScan, number: int, line: str) -> None:
    """A line inside a JSON summary: its own lines are indented, or its closing brace; others are not its."""
    block = found._block
    assert block is not None
    if line.rstrip() == "}":
        block.lines.append("}")
        block.last_line = number
        _close_block(found, closed=True)
    elif line[:1].isspace():
        block.lines.append(line)
        block.last_line = number
    elif line.strip() and not _error_line(found, line.strip()) and not line.startswith(_OWN_NOTE):
        _skip(found, number, line, "inside the JSON summary, not part of it")


def _close_block(found: LogScan, *, closed: bool) -> None:
    assert found._block is not None
    found._block.closed = closed
    found.blocks.append(found._block)
    found._block = None


def _error_line(found: LogScan, line: str) -> bool:
    """Whether the line is a failure reported on stderr; if so, count it toward the next interval."""
    if (m := _SOAK_ERROR.match(line)) is not None:
        found.soak_errors += 1
        text, times = m.group(2), int(m.group(3))
    elif (m := _SOAK_MORE_ERRORS.match(line)) is not None:
        found.soak_errors += 1
        text, times = "other errors", int(m.group(1))
    elif (m := _SLOW_COOKER_ERROR.match(line)) is not None:
        found.slow_cooker_errors += 1
        text, times = m.group(2), 1
    else:
        return False
    found._pending[text] += times
    found.trailing_errors += 1
    return True


def _startup(found: LogScan, number: int, m: re.Match[str]) -> None:
    if found.intervals or found.blocks:
        found.notes.append(f"line {number}: another run starts here; only the last run in the file is read")
        found.intervals.clear()
        found.blocks.clear()
        found._pending.clear()
        found.trailing_errors = 0
    rate = None if m.group(1) else float(m.group(2))  # a ramp's peak is not the rate it was asked to keep
    found.startup = Startup(rate, m.group(3), int(m.group(4)), m.group(5) or m.group(6))


def _interval(found: LogScan, m: re.Match[str]) -> None:
    """An interval line, with the errors reported on stderr since the one before."""
    row: dict[str, Any] = {_ROW_NAMES.get(key, key): value for key, value in matched(m).items() if key != "change"}
    errors = dict(found._pending) if found._pending else None
    found._pending.clear()
    found.trailing_errors = 0
    found.intervals.append(IntervalRow(**row, errors=errors))


def _skip(found: LogScan, number: int, line: str, why: str) -> None:
    found.skipped += 1
    if found.skipped <= MAX_LINE_NOTES:
        text = line.strip()
        quoted = repr(text if len(text) <= _QUOTE_CHARS else text[:_QUOTE_CHARS] + "...")
        found.skip_notes.append(f"line {number}: {why}, skipped: {quoted}")
