"""The interval line's columns, as data: one table (COLUMNS) that the line, its header, and the
pattern every log reader parses it with are all made from. A new percentile on the line is one
row here; the interval records of the JSON summary, the gauges and the client's notes show the
line's percentiles too (LINE_PERCENTILES). In core, as every layer from stats up reads it; pure
text, no figures (runner.stats.figures.Latency.in_line gives a span's for these columns).

The layout is slow_cooker's own, so existing log readers and eyes keep working (see
shared/reference/slow_cooker-output.md): its Go format string for the line,
"%s %4d %6d/%1d/%1d %d %3d%% %s %3d [%3d %3d %3d %4d ] %4d %6d %s\\n", and for the header,
"# %s iter   good/b/f t   goal%% %s min [p50 p95 p99  p999]  max bhash change\\n" padded by the
lengths of the run's timestamp and interval. slow_cooker's header does not line up with its
lines everywhere; where it does not, the column says by how much (`head`). In a unit finer
than ms, the latency columns are wider (EXTRA_DIGITS).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Self

from runner.core.lazymethods import dataclass
from runner.core.percentiles import PERCENTILES

# slow_cooker's widths are enough for ms. A microsecond is a thousand times finer, so its columns
# are three digits wider (a nanosecond's six): they line up wherever ms columns would, and drift
# only where ms ones do, at a latency of 1 s (10 s for p999 and max).
EXTRA_DIGITS = {"ms": 0, "us": 3, "ns": 6}
HEADER_MARK = "#"  # the header is a comment: `#`, in the first column of the timestamp's room
INTEGER = r"\d+"  # what most columns' values look like


@dataclass(frozen=True)
class Column:
    """One column of the interval line: its value's name, its word in the header, and its layout."""

    key: str  # Line's field; a latency's is the figure it shows: min, max or a percentile's key
    label: str  # its word in the header, right-aligned in its room there
    before: str = " "  # what comes before it on a line
    width: int = 0  # printed at least this wide, right-aligned (Go's %4d); 0: as long as it is
    after: str = ""  # what comes after it on a line: `%` after goal%, ` ]` closing the bracket (the header shows `]`)
    value: str = INTEGER  # what its value looks like to a reader (a pattern): an integer unless it says otherwise
    latency: bool = False  # wider by the unit's EXTRA_DIGITS
    sized: bool = False  # its room in the header is as long as the run's value (the timestamp, the interval)
    head: int = 0  # how much wider (or narrower) its room in the header is than on a line: slow_cooker's header
    optional: bool = False  # a reader takes a line without it: a pasted log loses the space a line ends in

    @property
    def integer(self) -> bool:
        return self.value == INTEGER


COLUMNS: tuple[Column, ...] = (
    Column("timestamp", "", before="", value=r"\d{4}-\d\d-\d\dT\S+", sized=True, head=-len(HEADER_MARK)),
    Column("iteration", "iter", width=4),
    Column("good", "good", width=6),
    Column("bad", "b", before="/", width=1),
    Column("failed", "f", before="/", width=1),
    Column("target", "t"),
    Column("goal_percent", "goal", width=3, after="%", head=3),
    Column("interval", "", value=r"\S+", sized=True, head=-2),
    Column("min", "min", width=3, latency=True),
    Column("p50", "p50", before=" [", width=3, latency=True),
    Column("p95", "p95", width=3, latency=True),
    Column("p99", "p99", width=3, latency=True),
    Column("p999", "p999", width=4, after=" ]", latency=True),
    Column("max", "max", width=4, latency=True),
    Column("bhash", "bhash", width=6, head=-1),
    Column("change", "change", value=r"[+-]*", optional=True),
)

LATENCY_COLUMNS = tuple(c.key for c in COLUMNS if c.latency)  # the latency columns in order: min, p50 ... max
# The percentiles the line shows, and so the summary's intervalStats, the gauges and the client's notes.
LINE_PERCENTILES = tuple(key for key in LATENCY_COLUMNS if key in PERCENTILES)
# The line's change column compares this percentile with the previous intervals' (slow_cooker's).
CHANGE_PERCENTILE = "p99"
assert set(LATENCY_COLUMNS) == {"min", "max", *LINE_PERCENTILES}, "a latency column shows min, max or a percentile"
assert CHANGE_PERCENTILE in LINE_PERCENTILES


@dataclass(frozen=True)
class Line:
    """The columns of one interval line, as printed: what interval_line() lays out, and a log reader reads back."""

    timestamp: str  # the interval's end, RFC 3339 to the second
    iteration: int
    good: int
    bad: int
    failed: int
    target: int  # the goal `t`, rounded to a whole send
    goal_percent: int  # truncated
    interval: str  # its length as Go prints a duration: `1s`, `534ms`
    latencies: tuple[int, ...]  # LATENCY_COLUMNS' figures, truncated to the unit
    bhash: int
    change: str  # `+`, `-`, or "" (see slowcooker.change_indicator)

    @classmethod
    def of(cls, found: Mapping[str, int | str | None]) -> Self:
        """The line of the values a pattern read (matched()), by column key."""
        latencies = tuple(int(found[key] or 0) for key in LATENCY_COLUMNS)
        values = {c.key: found[c.key] for c in COLUMNS if not c.latency}
        return cls(latencies=latencies, **{**values, "change": values["change"] or ""})  # type: ignore[arg-type]

    @property
    def requests(self) -> int:
        return self.good + self.bad + self.failed

    def latency(self, key: str) -> int:
        """A latency column's figure by its key (`p99`)."""
        return self.latencies[LATENCY_COLUMNS.index(key)]

    def values(self) -> tuple[int | str, ...]:
        """Each column's value, in COLUMNS' order."""
        latencies = iter(self.latencies)
        return tuple(next(latencies) if c.latency else getattr(self, c.key) for c in COLUMNS)


def interval_line(line: Line, unit: str = "ms") -> str:
    """One interval in slow_cooker's layout, its latency columns as wide as `unit` needs."""
    if len(line.latencies) != len(LATENCY_COLUMNS):
        raise ValueError(f"{len(line.latencies)} latencies for the columns {', '.join(LATENCY_COLUMNS)}")
    extra = EXTRA_DIGITS[unit]
    return "".join(c.before + str(value).rjust(c.width + (extra if c.latency else 0)) + c.after
                   for c, value in zip(COLUMNS, line.values(), strict=True)) + "\n"


def header_line(timestamp: str, interval: str, unit: str = "ms") -> str:
    """The column header, padded to line up with interval lines of this timestamp, interval and unit
    as slow_cooker's header does: each label right-aligned in its column's room."""
    sizes = {"timestamp": len(timestamp), "interval": len(interval)}
    extra = EXTRA_DIGITS[unit]
    pieces = []
    for c in COLUMNS:
        room = sizes[c.key] if c.sized else c.width + (extra if c.latency else 0) + len(c.after)
        pieces.append(c.before + (c.label + c.after.strip()).rjust(room + c.head))
    return HEADER_MARK + "".join(pieces) + "\n"


def pattern(lenient: bool = False) -> re.Pattern[str]:
    """What an interval line matches, each column a named group.

    Exactly as printed; or `lenient`, as log readers take it: any runs of spaces (a log pasted
    with them collapsed), trailing blanks, and a line without its optional columns.
    """
    parts = []
    for c in COLUMNS:
        room = c.width > 1 or c.latency  # a right-aligned value may have spaces before it
        group = f"(?P<{c.key}>{c.value})"
        if lenient:  # a run of spaces before a value may be any run; one after it, or padding, may be none
            part = _literal(c.before, " +") + (" *" if room and not c.before.endswith(" ") else "") + group \
                + _literal(c.after, " *")
        else:
            part = _literal(c.before) + (" *" if room else "") + group + _literal(c.after)
        parts.append(f"(?:{part})?" if c.optional and lenient else part)
    return re.compile("^" + "".join(parts) + (r"\s*$" if lenient else "$"))


def matched(match: re.Match[str]) -> dict[str, int | str | None]:
    """A matched line's values by column key: integers as numbers; None for a column the line lacks."""
    found: dict[str, int | str | None] = {}
    for c in COLUMNS:
        text = match.group(c.key)
        found[c.key] = int(text) if c.integer and text is not None else text
    return found


def _literal(text: str, blanks: str | None = None) -> str:
    """`text` as a pattern, each run of spaces in it as `blanks` (as it is, if None)."""
    pieces = re.findall(r" +|[^ ]+", text)
    return "".join((piece if blanks is None else blanks) if piece.isspace() else re.escape(piece) for piece in pieces)


# LINE: a line exactly as printed; LOG_LINE: a line as found in a saved log (lenient).
_PATTERNS = {"LINE": False, "LOG_LINE": True}


def __getattr__(name: str) -> re.Pattern[str]:
    """LINE and LOG_LINE, compiled when a reader first asks for one: a run prints lines and never
    reads them back, and compiling both cost every run's start 0.9 ms (issue 34)."""
    if name not in _PATTERNS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    compiled = globals()[name] = pattern(lenient=_PATTERNS[name])
    return compiled
