"""The HTML report (`soak report`): one self-contained page for a run or a range of runs.

A person opens it from a CI artifact, a mail or a laptop, perhaps offline, perhaps on a phone:
so the page is one file that fetches nothing (no script, font, style sheet or image from
anywhere: its charts are inline SVG, runner.report.svgchart), holds nothing that runs (a
Content-Security-Policy that allows no script and no load says so to the browser too), reads
on a phone's width (its tables scroll sideways inside their box; the charts scale) and prints
(print CSS: no page break inside a chart or a table row).

What it shows, in that order: the verdict first (passed, broken, inconclusive, or the run
went wrong, with each rule and its measured value), then the run's facts, the interval chart
(latency percentiles on a log axis, rate and goal%, errors), the latency distribution from the
summary's exact HDR histogram, and the per-URL, per-phase, responses and backends tables. A
range of runs starts with the range's verdict and the trend of p99 and goal% across its runs,
then each run as above.

Everything shown comes from logs, and a log is anyone's text: every string is escaped here
with html.escape (quotes too) at the one place it is written into the page. This module only
formats; what to show of a run read back is runner.readback.reportview's, writing the file the
command's. Pure.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from html import escape

from runner.core.columns import LINE_PERCENTILES
from runner.core.errors import EXIT_INCONCLUSIVE, EXIT_OK, EXIT_THRESHOLDS, exit_code
from runner.core.lazymethods import dataclass
from runner.core.units import time_text
from runner.report.junit import RunError, broken_intervals, measured_text
from runner.report.svgchart import PALETTE, Line, Panel, linear_ticks, svg
from runner.report.verdict import Outcome

LATENCY_LINES = (*LINE_PERCENTILES, "max")  # an interval row's latency columns but min, each a line of the chart


@dataclass(frozen=True)
class Table:
    """A table as shown: a caption, a header row and rows of text; `numeric` columns align right."""

    title: str
    header: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]
    note: str = ""
    numeric_from: int = 1  # columns from this one on are figures


@dataclass(frozen=True)
class Judgement:
    """A run's verdict as read: each rule's outcome, what made the run go wrong, and its exit code.

    `code` is None when nothing tells it (a log cut before its summary, slow_cooker's log)."""

    code: int | None
    outcomes: tuple[Outcome, ...] = ()
    errors: tuple[RunError, ...] = ()
    unreadable: tuple[str, ...] = ()  # threshold records that could not be read, said as they were
    stopped_early: str | None = None

    @property
    def word(self) -> str:
        """passed, broken, inconclusive, error, or unknown."""
        if self.code is None:
            return "unknown"
        if self.errors or self.unreadable:
            return "error"
        return {EXIT_OK: "passed", EXIT_THRESHOLDS: "broken", EXIT_INCONCLUSIVE: "inconclusive"}.get(self.code,
                                                                                                        "error")


@dataclass(frozen=True)
class IntervalPoint:
    """One interval for the charts: its end in seconds since the start; latencies in ns."""

    x: float
    label: str  # its end as printed, and its number
    latencies: dict[str, float | None]  # LATENCY_LINES; None where it had no response (or slow_cooker's p999)
    goal_percent: float | None
    rate: float | None  # sends finished per second
    errors: int  # bad + failed


@dataclass(frozen=True)
class RunView:
    """Everything the page shows of one run."""

    source: str
    start: str | None
    judgement: Judgement
    facts: tuple[tuple[str, str], ...]
    intervals: tuple[IntervalPoint, ...]
    distribution: tuple[tuple[float, float], ...]  # (percentile 0-100, latency ns), from the HDR histogram
    distribution_note: str
    tables: tuple[Table, ...]
    notes: tuple[str, ...]
    p99_ns: float | None
    goal_percent: float | None
    target_rate: float | None = None


# --- The page -------------------------------------------------------------------------------


def page(runs: Sequence[RunView], title: str) -> str:
    """The whole HTML document: one run's report, or a range's (several runs, oldest first)."""
    if len(runs) == 1:
        body = _run_section(runs[0], heading="h1", with_title=title)
    else:
        body = _range_head(runs, title) + "".join(
            f'<details class="run" open><summary>Run {i}: {escape(run.source)}</summary>'
            f"{_run_section(run, heading='h2')}</details>" for i, run in enumerate(runs, 1))
    return (
        "<!DOCTYPE html>\n"
        '<html lang="en"><head><meta charset="utf-8">'
        "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'; "
        "img-src data:; base-uri 'none'; form-action 'none'\">"
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        '<meta name="referrer" content="no-referrer">'
        f"<title>{escape(title)}</title><style>{CSS}</style></head>"
        f"<body><main>{body}</main>"
        '<footer>Made by <code>soak report</code>: one file, nothing fetched.</footer></body></html>\n'
    )


def _run_section(run: RunView, heading: str, with_title: str = "") -> str:
    top = f"<{heading}>{escape(with_title or run.source)}</{heading}>"
    sub = f'<p class="sub">{escape(run.source)}' + (f", started {escape(run.start)}" if run.start else "") + "</p>"
    return (top + sub + _verdict(run.judgement) + _facts(run.facts) + _interval_charts(run)
            + _distribution(run) + "".join(_table(t) for t in run.tables) + _notes(run.notes))


_WORDS = {
    "passed": "Passed",
    "broken": "Thresholds broken",
    "inconclusive": "Inconclusive",
    "error": "The run went wrong",
    "unknown": "No verdict in the file",
}
_EXPLAINED = {
    "passed": "The run went to its end and kept its thresholds, if it had any.",
    "broken": "At least one threshold is broken: the service did not keep it.",
    "inconclusive": ("Thresholds broke only where the client's own delay may have changed their figures: this says "
                     "nothing of the service."),
    "error": "Something apart from the thresholds went wrong with the run itself.",
    "unknown": "The file has no JSON summary to tell the verdict (cut off, or slow_cooker's log).",
}


def _verdict(judgement: Judgement) -> str:
    word = judgement.word
    code = "" if judgement.code is None else f' <span class="code">exit code {judgement.code}</span>'
    parts = [f'<section class="verdict {word}"><p class="word">{_WORDS[word]}{code}</p>'
             f"<p>{_EXPLAINED[word]}</p>"]
    parts += [f'<p class="reason">exit code {e.code}: {escape(e.reason)}</p>' for e in judgement.errors]
    parts += [f'<p class="reason">{escape(text)}</p>' for text in judgement.unreadable]
    if judgement.stopped_early:
        parts.append(f'<p class="reason">stopped early: {escape(judgement.stopped_early)}</p>')
    if judgement.outcomes:
        rows = tuple((o.verdict, o.rule.scope, o.rule.text, measured_text(o) + broken_intervals(o))
                     for o in judgement.outcomes)
        parts.append(_table(Table("Thresholds", ("verdict", "scope", "rule", "measured"), rows, numeric_from=99),
                            row_class=lambda row: row[0].lower()))
    elif judgement.code is not None:
        parts.append("<p>No thresholds were set.</p>")
    parts.append("</section>")
    return "".join(parts)


def _facts(facts: Sequence[tuple[str, str]]) -> str:
    items = "".join(f"<div><dt>{escape(k)}</dt><dd>{escape(v)}</dd></div>" for k, v in facts)
    return f'<section><h3>The run</h3><dl class="facts">{items}</dl></section>'


def _interval_charts(run: RunView) -> str:
    points = run.intervals
    if not points:
        return "<section><h3>Intervals</h3><p>No interval lines or intervalStats in the file.</p></section>"
    xs = [p.x for p in points]
    ticks = time_ticks(xs)
    tips = [p.label for p in points]
    lines = [Line(key, [p.latencies.get(key) for p in points], PALETTE[i]) for i, key in enumerate(LATENCY_LINES)
             if any(p.latencies.get(key) is not None for p in points)]
    latency = Panel("Latency per interval (log scale)", xs, lines, y_text=time_text, log=True, x_ticks=ticks,
                    tips=tips, x_label="time since the start")
    rate_lines = [Line("achieved", [p.rate for p in points], PALETTE[0])]
    if run.target_rate is not None:  # under the achieved line, which it hides where they are equal
        rate_lines.insert(0, Line("target", [run.target_rate] * len(points), "#8c959f", dashed=True))
    rate = Panel("Rate (req/s)", xs, rate_lines, y_text=_number, y_floor=0.0, x_ticks=ticks, tips=tips)
    goal = Panel("goal% per interval", xs, [Line("goal%", [p.goal_percent for p in points], PALETTE[1])],
                 y_text=lambda y: f"{_number(y)}%", y_floor=0.0, y_ceiling=100.0, x_ticks=ticks, tips=tips)
    errors = Panel("Errors per interval (bad + failed)", xs, bars=[float(p.errors) for p in points],
                   bar_name="errors", y_text=_number, y_floor=0.0, x_ticks=ticks, tips=tips)
    charts = "".join(f"<figure>{svg(panel)}</figure>" for panel in (latency, rate, goal, errors))
    return f'<section><h3>Intervals</h3><div class="charts">{charts}</div></section>'


def _distribution(run: RunView) -> str:
    if not run.distribution:
        return f"<section><h3>Latency distribution</h3><p>{escape(run.distribution_note)}</p></section>"
    xs = [_nines(q) for q, _ in run.distribution]
    panel = Panel("Latency by percentile", xs, [Line("latency", [v for _, v in run.distribution], PALETTE[2])],
                  y_text=time_text, log=True, x_ticks=nines_ticks(max(xs)),
                  tips=[f"p{_number(q)}" for q, _ in run.distribution], x_label="percentile")
    return (f'<section><h3>Latency distribution</h3><div class="charts"><figure>{svg(panel)}</figure></div>'
            f'<p class="note">{escape(run.distribution_note)}</p></section>')


def _nines(percentile: float) -> float:
    """Where a percentile goes on the distribution's x axis: its count of nines (90% at 1, 99.9% at 3)."""
    remaining = 1 - percentile / 100
    return -math.log10(remaining) if remaining > 0 else math.inf


def nines_ticks(last: float) -> list[tuple[float, str]]:
    """0%, 90%, 99%, 99.9% ... up to the last point's nines."""
    labels = ["0%", "90%", "99%", "99.9%", "99.99%", "99.999%", "99.9999%", "99.99999%"]
    return [(float(i), text) for i, text in enumerate(labels) if i <= math.ceil(last)]


def time_ticks(xs: Sequence[float]) -> list[tuple[float, str]]:
    """Round times since the start for the x axis: `0s`, `30s`, `1m`, `1h30m`."""
    return [(t, duration_text(t)) for t in linear_ticks(0.0, max(xs)) if t <= max(xs) * 1.0001]


def duration_text(seconds: float) -> str:
    """`45s`, `1m30s`, `2h`: a tick's time since the start."""
    if seconds < 60:
        return f"{_number(seconds)}s"
    minutes, secs = divmod(round(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    text = (f"{hours}h" if hours else "") + (f"{minutes}m" if minutes else "") + (f"{secs}s" if secs else "")
    return text or "0s"


def _table(table: Table, row_class: object = None) -> str:
    if not table.rows:
        return ""
    head = "".join(f'<th scope="col"{_num(i, table)}>{escape(h)}</th>' for i, h in enumerate(table.header))
    rows = []
    for row in table.rows:
        cls = f' class="{escape(row_class(row))}"' if callable(row_class) else ""
        cells = "".join(f"<td{_num(i, table)}>{escape(cell)}</td>" for i, cell in enumerate(row))
        rows.append(f"<tr{cls}>{cells}</tr>")
    note = f'<p class="note">{escape(table.note)}</p>' if table.note else ""
    return (f'<section><h3>{escape(table.title)}</h3><div class="scroll"><table><thead><tr>{head}</tr></thead>'
            f"<tbody>{''.join(rows)}</tbody></table></div>{note}</section>")


def _num(column: int, table: Table) -> str:
    return ' class="num"' if column >= table.numeric_from else ""


def _notes(notes: Sequence[str]) -> str:
    if not notes:
        return ""
    items = "".join(f"<li>{escape(n)}</li>" for n in notes)
    return f'<section><h3>Reading the file</h3><ul class="notes">{items}</ul></section>'


# --- A range of runs ------------------------------------------------------------------------


def range_code(runs: Sequence[RunView]) -> int | None:
    """The range's exit code: the one that says most of the service among its runs' (errors.PRECEDENCE)."""
    codes = [r.judgement.code for r in runs if r.judgement.code is not None]
    return exit_code(codes) if codes else None


def _range_head(runs: Sequence[RunView], title: str) -> str:
    words = [r.judgement.word for r in runs]
    counts = ", ".join(f"{words.count(w)} {w}" for w in ("passed", "broken", "inconclusive", "error", "unknown")
                       if w in words)
    code = range_code(runs)
    worst = next((w for w in ("error", "broken", "inconclusive", "unknown", "passed") if w in words), "unknown")
    shown = "" if code is None else f' <span class="code">worst exit code {code}</span>'
    head = (f"<h1>{escape(title)}</h1><p class=\"sub\">{len(runs)} runs, "
            f"{escape(runs[0].start or runs[0].source)} to {escape(runs[-1].start or runs[-1].source)}</p>"
            f'<section class="verdict {worst}"><p class="word">{len(runs)} runs: {escape(counts)}{shown}</p>'
            f"<p>{_EXPLAINED[worst] if worst != 'passed' else 'Every run went to its end and kept its thresholds.'}"
            "</p></section>")
    xs = [float(i) for i in range(1, len(runs) + 1)]
    labels = [r.start[:16].replace("T", " ") if r.start else r.source for r in runs]
    every = max(1, math.ceil(len(runs) / 6))
    ticks = [(x, short) for x, short in zip(xs, run_ticks(runs), strict=True)][::every]
    tips = [f"run {i}, {label}" for i, label in enumerate(labels, 1)]
    p99 = Panel("p99 per run (log scale)", xs, [Line("p99", [r.p99_ns for r in runs], PALETTE[2])],
                y_text=time_text, log=True, x_ticks=ticks, tips=tips)
    goal = Panel("goal% per run", xs, [Line("goal%", [r.goal_percent for r in runs], PALETTE[1])],
                 y_text=lambda y: f"{_number(y)}%", y_floor=0.0, y_ceiling=100.0, x_ticks=ticks, tips=tips)
    trend = f'<section><h2>Trend</h2><div class="charts"><figure>{svg(p99)}</figure><figure>{svg(goal)}</figure></div>'
    rows = tuple((str(i), label, r.judgement.word, _code(r.judgement.code),
                  "-" if r.p99_ns is None else time_text(r.p99_ns),
                  "-" if r.goal_percent is None else f"{_number(r.goal_percent)}%")
                 for i, (label, r) in enumerate(zip(labels, runs, strict=True), 1))
    table = _table(Table("Runs", ("#", "start", "verdict", "exit code", "p99", "goal%"), rows, numeric_from=3),
                   row_class=lambda row: row[2])
    return head + trend + table + "</section>"


def run_ticks(runs: Sequence[RunView]) -> list[str]:
    """Each run's x label on the trend: its day (`12-01`) when the runs span days, its time (`10:00`)
    within one day, its number when a run does not say when it started."""
    starts = [r.start for r in runs]
    if not all(s and len(s) >= 16 for s in starts):
        return [f"#{i}" for i in range(1, len(runs) + 1)]
    days = {s[:10] for s in starts if s}
    if len(days) > 1:
        return [s[5:10] if s else "" for s in starts]
    return [s[11:16] if s else "" for s in starts]


def _code(code: int | None) -> str:
    return "-" if code is None else str(code)


def _number(value: float) -> str:
    text = f"{value:.3f}".rstrip("0").rstrip(".")
    return "0" if text == "-0" else text


CSS = """
:root{--fg:#1b1f23;--muted:#57606a;--line:#d0d7de;--bg:#fff;--ok:#1a7f37;--bad:#cf222e;--warn:#9a6700;--err:#8250df}
*{box-sizing:border-box}
body{margin:0;font:15px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;color:var(--fg);background:var(--bg)}
main{max-width:1100px;margin:0 auto;padding:16px}
h1{font-size:1.5em;margin:.2em 0;overflow-wrap:anywhere}h2{font-size:1.25em;margin:1em 0 .3em;overflow-wrap:anywhere}
h3{font-size:1.05em;margin:1.2em 0 .4em}
.sub,.note,footer{color:var(--muted);font-size:.9em;overflow-wrap:anywhere}
footer{max-width:1100px;margin:0 auto;padding:8px 16px 24px}
.verdict{border-left:8px solid var(--muted);background:#f6f8fa;padding:10px 14px;margin:12px 0;border-radius:4px}
.verdict .word{font-size:1.35em;font-weight:700;margin:0 0 .2em}
.verdict .code{font-size:.7em;font-weight:400;color:var(--muted);margin-left:.5em}
.verdict p{margin:.3em 0;overflow-wrap:anywhere}
.verdict.passed{border-color:var(--ok)}.verdict.passed .word{color:var(--ok)}
.verdict.broken{border-color:var(--bad)}.verdict.broken .word{color:var(--bad)}
.verdict.inconclusive{border-color:var(--warn)}.verdict.inconclusive .word{color:var(--warn)}
.verdict.error{border-color:var(--err)}.verdict.error .word{color:var(--err)}
.reason{font-family:ui-monospace,SFMono-Regular,Menlo,monospace;font-size:.88em}
.facts{display:grid;grid-template-columns:repeat(auto-fill,minmax(150px,1fr));gap:6px 14px;margin:0}
.facts div{border-bottom:1px solid var(--line);padding:2px 0}.facts dt{color:var(--muted);font-size:.8em}
.facts dd{margin:0;font-weight:600;overflow-wrap:anywhere}
.charts{display:grid;grid-template-columns:repeat(auto-fill,minmax(440px,1fr));gap:12px}
figure{margin:0;border:1px solid var(--line);border-radius:4px;padding:4px;break-inside:avoid;page-break-inside:avoid}
svg.chart{display:block;width:100%;height:auto;font:11px system-ui,sans-serif}
svg.chart .title{font-weight:600;font-size:12px}
svg.chart .axis line{stroke:#e5e8eb}svg.chart .axis .tick{stroke:var(--muted)}
svg.chart .axis text,svg.chart .legend text{fill:var(--muted)}svg.chart .empty{fill:var(--muted)}
.scroll{overflow-x:auto;-webkit-overflow-scrolling:touch;border:1px solid var(--line);border-radius:4px}
table{border-collapse:collapse;width:100%;font-size:.9em}
th,td{padding:4px 8px;border-bottom:1px solid var(--line);text-align:left;vertical-align:top}
th{background:#f6f8fa;white-space:nowrap}td{overflow-wrap:break-word}
.num{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}
tr.broken td:first-child{color:var(--bad);font-weight:700}tr.ok td:first-child{color:var(--ok)}
tr.inconclusive td:first-child{color:var(--warn);font-weight:700}
tr.error td:nth-child(3){color:var(--err);font-weight:700}tr.passed td:nth-child(3){color:var(--ok)}
details.run{border-top:2px solid var(--line);margin-top:18px}
details.run>summary{cursor:pointer;font-size:1.1em;font-weight:600;padding:8px 0;overflow-wrap:anywhere}
.notes{font-size:.88em;color:var(--muted)}.notes li{overflow-wrap:anywhere}
@media (max-width:600px){body{font-size:14px}main{padding:10px}.charts{grid-template-columns:1fr}
.facts{grid-template-columns:repeat(2,minmax(0,1fr))}th,td{padding:3px 5px}
svg.chart{font-size:15px}svg.chart .title{font-size:16px}}
@media print{body{font-size:11pt}main{max-width:none;padding:0}.charts{grid-template-columns:1fr 1fr}
.scroll{overflow:visible;border:none}section,tr{break-inside:avoid;page-break-inside:avoid}
h1,h2,h3{break-after:avoid;page-break-after:avoid}footer{display:none}
*{-webkit-print-color-adjust:exact;print-color-adjust:exact}@page{margin:14mm}}
"""
