"""slow_cooker's text output: the startup line, the header, one line per interval.

The layout is slow_cooker's own Go format strings, so existing log readers and eyes keep
working; see shared/reference/slow_cooker-output.md. The interval line's columns, and its
header, are runner.core.columns'. Differences are deliberate: the rate
printed is the total, `t` is exact, p999 is a true 99.9th percentile, and failures are
reported once per group of alike errors per interval, with a count, on stderr (see error_lines).
"""

from __future__ import annotations

import math
from collections import deque
from decimal import Decimal
from typing import TextIO

from runner.core.columns import CHANGE_PERCENTILE, Line, header_line, interval_line
from runner.core.durations import format_duration
from runner.core.redact import printable
from runner.core.units import in_unit, rfc3339
from runner.report.base import Reporter
from runner.report.clientnotes import backend_note, drain_note, interval_note, run_note
from runner.stats.figures import Figures
from runner.stats.recorder import OTHER_TEXTS, ErrorGroup, Interval, Tally
from runner.stats.runinfo import RunInfo, RunSummary

_CHANGE_WINDOW = 5
MAX_ERROR_LINES = 10  # failure lines per interval on stderr; the rest are summed up in one more


def format_rate(qps: float) -> str:
    """A rate as an integer when whole, else with the fewest decimals that show it exactly."""
    if qps == int(qps):
        return str(int(qps))
    return format(Decimal(repr(qps)), "f")


def rate_text(qps: float, method: str, stages: int = 0) -> str:
    """What a run sends: `100 GET req/s`, or with `stages` (their number) `up to 100 GET req/s in 3
    stages`, `qps` being their peak: the startup line's words and validate's."""
    if not stages:
        return f"{format_rate(qps)} {method} req/s"
    return f"up to {format_rate(qps)} {method} req/s in {stages} stage{'s' if stages != 1 else ''}"


def startup_line(qps: float, method: str, concurrency: int, urls: list[str], url_source: str | None,
                 stages: int = 0) -> str:
    """`# sending 100 GET req/s with concurrency=5 to http://... ...`; with stages, `# sending up to
    100 GET req/s in 3 stages with ...` (a ramp's peak is no rate it keeps).

    One URL is named even when it came from a list file (as in the pallet's logs); a list
    of several is named by its file, as slow_cooker does for `@file`.
    """
    if len(urls) > 1 and url_source:
        target = f"using url list {url_source}"
    else:
        target = "to " + ", ".join(urls)
    return f"# sending {rate_text(qps, method, stages)} with concurrency={concurrency} {target} ...\n"


def line_of(info: RunInfo, interval: Interval, window: ChangeWindow) -> Line:
    """An interval's figures as its line's columns (and the change marker, which remembers its p99)."""
    f, unit = interval.figures, info.settings.report.latency_unit
    return Line(
        timestamp=rfc3339(info.wall(interval.end_ns)),
        iteration=interval.index,
        good=f.good,
        bad=f.bad,
        failed=f.failed,
        target=rounded_goal(f.due or 0.0),
        goal_percent=shown_percent(f.goal_percent),
        interval=format_duration(to_ms(interval.span_ns)),
        latencies=tuple(in_unit(ns, unit) for ns in f.latency.in_line().values()),
        bhash=f.bhash,
        change=window.push(in_unit(f.latency.percentiles[CHANGE_PERCENTILE], unit)),
    )


def rounded_goal(target: float) -> int:
    """The goal `t` as the line prints it: to the nearest whole send, halves up, as Go's
    math.Round does (Python's round() takes halves to even: 2.5 sends would print as 2)."""
    return math.floor(target + 0.5)


def shown_percent(percent: float | None) -> int:
    """goal% as the line prints it: truncated to a whole percent (a span with no schedule reads 100%)."""
    return 100 if percent is None else int(percent)


def change_indicator(history: list[int], p99: int) -> str:
    """slow_cooker's change column: p99 against the integer mean of the previous p99s.

    `+` per power of ten above the mean, `-` per power of ten below, at most three.
    slow_cooker computes int(log10(p99) - log10(mean)); this counts the powers of ten
    with integers, which is the same number without floating-point slips at exact ratios.
    """
    mean = sum(history) // len(history) if history else 0
    if p99 == mean == 0:
        return ""
    if mean == 0:
        return "+"
    if p99 == 0:
        return "-"
    steps = 0
    if p99 >= mean:
        while steps < 3 and p99 >= mean * 10 ** (steps + 1):
            steps += 1
        return "+" * steps
    while steps < 3 and mean >= p99 * 10 ** (steps + 1):
        steps += 1
    return "-" * steps


class ChangeWindow:
    """The last five intervals' p99s, starting as zeros, as slow_cooker keeps them."""

    def __init__(self) -> None:
        self._p99s: deque[int] = deque([0] * _CHANGE_WINDOW, maxlen=_CHANGE_WINDOW)

    def push(self, p99: int) -> str:
        """The change marker for this p99, then remember it."""
        marker = change_indicator(list(self._p99s), p99)
        self._p99s.append(p99)
        return marker


def error_lines(method: str, urls: list[str], tally: Tally) -> list[str]:
    """The interval's failures on stderr: one line per group of alike failures, with how often.

    slow_cooker's `GET "url": text (3 times)` for a group on one URL; `GET 3 URLs, e.g. "url":`
    for one on several. Texts that differed in their numbers are one group, printed with one of
    them as the example. At most MAX_ERROR_LINES groups, the most frequent, then one line for the
    rest: a run against 100,000 refused URLs, or a server that puts a new number in every
    answer, prints a few lines per interval, not one per failure.
    """
    groups = sorted(tally.error_groups.items(), key=lambda item: (-item[1].count, item[1].url, item[0]))
    shown = sorted(groups[:MAX_ERROR_LINES], key=lambda item: (item[1].url, item[1].text))
    lines = [error_line(method, urls, pattern, group) for (_, pattern), group in shown]
    rest = groups[MAX_ERROR_LINES:]
    if rest:
        lines.append(f"... and {len(rest)} more errors ({_times(sum(group.count for _, group in rest))})\n")
    return lines


def drain_error_lines(summary: RunSummary) -> str:
    """The failures that came after the last interval (the drain), as an interval's: nothing counted goes unsaid."""
    drain, info = summary.drain, summary.info
    return "" if drain is None else "".join(error_lines(info.settings.request.method, info.urls, drain))


def error_line(method: str, urls: list[str], pattern: str, group: ErrorGroup) -> str:
    """One group's line; its text escaped here too, as it may come from a log read back (`soak merge`)."""
    url = f'"{urls[group.url]}"'
    if group.more_urls:
        url = f"more than {len(group.urls)} URLs, e.g. {url}"
    elif len(group.urls) > 1:
        url = f"{len(group.urls)} URLs, e.g. {url}"
    varied = (" (texts vary)" if pattern == OTHER_TEXTS else " (numbers vary)") if group.varied else ""
    return f"{method} {url}: {printable(group.text)}{varied} ({_times(group.count)})\n"


def _times(count: int) -> str:
    return f"{count} time" if count == 1 else f"{count} times"


class SlowCookerReporter(Reporter):
    """Writes the startup line, header and interval lines to `out`, failures to `err`."""

    def __init__(self, out: TextIO, err: TextIO) -> None:
        self._out = out
        self._err = err
        self._window = ChangeWindow()
        self._warmup_window = ChangeWindow()  # the warm-up's p99s are no baseline for the run's
        self._before: Figures | None = None  # the last interval's figures, with a backendHeader

    def start(self, info: RunInfo) -> None:
        s = info.settings
        stages = len(s.pace.stages)
        if info.shard.alone:
            line = startup_line(s.pace.qps, s.request.method, s.pace.concurrency, info.urls, info.url_source, stages)
        else:  # a shard's own share, rounded for the eye (its exact share is qps / shards)
            line = startup_line(round(info.qps, 3), s.request.method, info.concurrency, info.urls, info.url_source,
                                stages)
            line = line.replace(" ...\n", f" ({info.shard.label()}) ...\n")
        self._write(self._out, line)
        self._write(self._out, header_line(rfc3339(info.wall_start), format_duration(s.pace.interval_ns),
                                           s.report.latency_unit))

    def interval(self, info: RunInfo, interval: Interval) -> None:
        s = info.settings
        self._write(self._err, "".join(error_lines(s.request.method, info.urls, interval.tally)))
        line = interval_line(line_of(info, interval, self._window), s.report.latency_unit)
        self._write(self._out, line + interval_note(interval, self._before))
        if s.report.backend_header:
            self._before = interval.figures

    def warmup(self, info: RunInfo, interval: Interval) -> None:
        """A warm-up interval: its line and failures marked WARMUP_MARK, so no log reader takes them for the run's."""
        s = info.settings
        errors = error_lines(s.request.method, info.urls, interval.tally)
        self._write(self._err, "".join(WARMUP_MARK + line for line in errors))
        line = interval_line(line_of(info, interval, self._warmup_window), s.report.latency_unit)
        self._write(self._out, WARMUP_MARK + line)

    def finish(self, summary: RunSummary) -> None:
        self._write(self._err, drain_error_lines(summary))
        self._write(self._out, count_line(summary) + drain_note(summary) + run_note(summary)
                    + backend_note(summary))

    @staticmethod
    def _write(stream: TextIO, text: str) -> None:
        if text:
            stream.write(text)
            stream.flush()


COUNT_REACHED = "# totalRequests reached"
# Before each line of a warm-up (and its failures on stderr): `#` keeps slow_cooker-style log
# readers, `soak merge` and `soak compare` from taking it for one of the run's intervals.
WARMUP_MARK = "# warmup "


def count_line(summary: RunSummary) -> str:
    """After the last line of a run that sent its whole totalRequests, a comment saying so.

    The last line of such a run is short (`50/0/0 54 92% 540ms`) and may fall under 100%:
    its goal `t` counts the sends due in it, and skipped sends (a note above says how many, and
    whose delay they may be) were due but do not use up the count (the run goes on to send it
    all). This line says the count was sent in full, and what the shortfall in goal% is, so the
    end is not read as a cut-off run or a lost share of requests. `#` keeps log readers from taking it for a line.
    """
    if summary.stop_reason != "totalRequests":
        return ""
    info = summary.info
    count = info.shard.share(info.settings.pace.total_requests)
    line = f"{COUNT_REACHED}: {summary.tally.requests} of {count} sent"
    if summary.tally.skipped:
        line += f"; goal% counts the {summary.tally.skipped} due sends skipped, which do not use up the count"
    return line + "\n"


def to_ms(ns: int) -> int:
    """A partial interval's length to the millisecond: `1.234s`, not `1.234567891s`."""
    return round(ns / 1_000_000) * 1_000_000
