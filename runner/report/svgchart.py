"""Charts as inline SVG, drawn here: lines and bars on one panel, with axes, ticks and a legend.

The HTML report (runner.report.htmlreport) must open with no network at all and hold nothing
that runs, so its charts are plain SVG elements written into the page: no script, no font, no
image to fetch. A charting library would bring a script (or a renderer's whole runtime) for
what is here a few hundred lines of arithmetic; matplotlib (soak plot's) draws SVG too, but it
is an optional extra and its SVG is ten times the size. Each panel is one <svg> with a viewBox,
so it scales to the page's width on a phone and on paper alike.

Everything a caller passes (names, tick labels, tooltips) is escaped here. Pure.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import field
from html import escape

from runner.core.lazymethods import dataclass

WIDTH, HEIGHT = 560, 220
LEFT, RIGHT, TOP, BOTTOM = 62, 24, 30, 30
MARKED_POINTS = 120  # up to this many points a line has a marker (with its tooltip) at each one
# Colour-blind safe (Okabe and Ito), one per series in order; errors are drawn in the last.
PALETTE = ("#0072b2", "#009e73", "#e69f00", "#cc79a7", "#d55e00", "#56b4e9", "#000000")


@dataclass(frozen=True)
class Line:
    """A series: its values at the panel's xs (None: a gap), drawn as a line with markers."""

    name: str
    values: Sequence[float | None]
    color: str = PALETTE[0]
    dashed: bool = False


@dataclass(frozen=True)
class Panel:
    """One chart: lines (and bars) over shared xs, with how to write the axes' values.

    `log`: a log y axis (latencies span decades; values <= 0 are gaps on it). `x_ticks`: where
    to put the x labels and what they say; `tips`: a tooltip per x (`interval 3, 10:04:05`).
    """

    title: str
    xs: Sequence[float]
    lines: Sequence[Line] = ()
    bars: Sequence[float] | None = None  # one bar per x, from 0
    bar_name: str = ""
    y_text: Callable[[float], str] = lambda y: f"{y:g}"
    log: bool = False
    y_floor: float | None = None  # the y axis starts here at the lowest (0 for counts and percentages)
    y_ceiling: float | None = None  # ... and ends here at the highest (100 for goal%)
    x_ticks: Sequence[tuple[float, str]] = ()
    tips: Sequence[str] = ()
    x_label: str = ""
    label: str = field(default="")  # the <svg>'s accessible name; the title by default


def svg(panel: Panel) -> str:
    """The panel as one <svg> element: an empty one saying so when there is nothing to draw."""
    values = [v for line in panel.lines for v in line.values if v is not None and _drawable(v, panel.log)]
    values += list(panel.bars or ())
    aria = escape(panel.label or panel.title)
    head = (f'<svg class="chart" viewBox="0 0 {WIDTH} {HEIGHT}" role="img" aria-label="{aria}" '
            f'xmlns="http://www.w3.org/2000/svg">')
    parts = [head, f'<text class="title" x="{LEFT}" y="14">{escape(panel.title)}</text>']
    if not panel.xs or not values:
        parts.append(f'<text class="empty" x="{WIDTH / 2}" y="{HEIGHT / 2}" text-anchor="middle">'
                     "nothing to draw</text></svg>")
        return "".join(parts)
    x_scale = _x_scale(panel.xs)
    y_scale, y_ticks = _y_axis(values, panel)
    parts += _frame(panel, x_scale, y_scale, y_ticks)
    if panel.bars is not None:
        parts += _bars(panel, x_scale, y_scale)
    for line in panel.lines:
        parts += _line(panel, line, x_scale, y_scale)
    parts += _legend(panel)
    parts.append("</svg>")
    return "".join(parts)


# --- Scales and ticks -----------------------------------------------------------------------


Scale = Callable[[float], float]


def _x_scale(xs: Sequence[float]) -> Scale:
    low, high = min(xs), max(xs)
    if high == low:
        low, high = low - 1, high + 1
    span = WIDTH - LEFT - RIGHT
    return lambda x: LEFT + (x - low) / (high - low) * span


def _y_axis(values: Sequence[float], panel: Panel) -> tuple[Scale, list[float]]:
    low = min(values) if panel.y_floor is None else min(panel.y_floor, min(values))
    high = max(values) if panel.y_ceiling is None else max(panel.y_ceiling, max(values))
    if panel.log:
        ticks = log_ticks(low, high)
        a, b = math.log10(ticks[0]), math.log10(ticks[-1])
        if a == b:
            a, b = a - 1, b + 1
        return (lambda y: _at(math.log10(y), a, b)), ticks
    ticks = linear_ticks(low, high)
    return (lambda y: _at(y, ticks[0], ticks[-1])), ticks


def _at(value: float, low: float, high: float) -> float:
    span = HEIGHT - TOP - BOTTOM
    return HEIGHT - BOTTOM - (value - low) / ((high - low) or 1) * span


def linear_ticks(low: float, high: float, most: int = 5) -> list[float]:
    """Round values from at or below `low` to at or above `high`, 1, 2 or 5 times a power of ten apart."""
    if high <= low:
        high = low + 1
    raw = (high - low) / most
    power = 10 ** math.floor(math.log10(raw))
    step = next(m * power for m in (1, 2, 5, 10) if m * power >= raw)
    first = math.floor(low / step) * step
    count = math.ceil((high - first) / step - 1e-9)
    return [round(first + i * step, 12) for i in range(count + 1)]


def log_ticks(low: float, high: float) -> list[float]:
    """Powers of ten around the values (with 2 and 5 between them over two decades or fewer)."""
    first = math.floor(math.log10(low))
    last = math.ceil(math.log10(high))
    if last == first:
        last += 1
    steps = (1, 2, 5) if last - first <= 2 else (1,)
    ticks = [m * 10.0**k for k in range(first, last + 1) for m in steps]
    inside = [t for t in ticks if low <= t <= high]
    below = [t for t in ticks if t < low][-1:] or [10.0**first]
    above = [t for t in ticks if t > high][:1]
    return sorted(set(below + inside + above))


def _drawable(value: float | None, log: bool) -> bool:
    return value is not None and math.isfinite(value) and (value > 0 or not log)


# --- What is drawn --------------------------------------------------------------------------


def _frame(panel: Panel, x_scale: Scale, y_scale: Scale, y_ticks: Sequence[float]) -> list[str]:
    """The axes' grid lines and labels."""
    parts = ['<g class="axis">']
    for tick in y_ticks:
        y = y_scale(tick)
        parts.append(f'<line x1="{LEFT}" x2="{WIDTH - RIGHT}" y1="{y:.1f}" y2="{y:.1f}"/>'
                     f'<text x="{LEFT - 4}" y="{y + 4:.1f}" text-anchor="end">{escape(panel.y_text(tick))}</text>')
    for x, text in panel.x_ticks:
        px = x_scale(x)
        parts.append(f'<line class="tick" x1="{px:.1f}" x2="{px:.1f}" y1="{HEIGHT - BOTTOM}" '
                     f'y2="{HEIGHT - BOTTOM + 4}"/><text x="{px:.1f}" y="{HEIGHT - BOTTOM + 16}" '
                     f'text-anchor="middle">{escape(text)}</text>')
    if panel.x_label:
        parts.append(f'<text x="{WIDTH - RIGHT}" y="{HEIGHT - 2}" text-anchor="end">{escape(panel.x_label)}</text>')
    parts.append("</g>")
    return parts


def _line(panel: Panel, line: Line, x_scale: Scale, y_scale: Scale) -> list[str]:
    """The line in pieces between gaps, and a marker with a tooltip at each point (when not too many)."""
    pieces: list[list[str]] = [[]]
    markers = []
    marked = len(panel.xs) <= MARKED_POINTS
    for i, (x, value) in enumerate(zip(panel.xs, line.values, strict=True)):
        if not _drawable(value, panel.log):
            pieces.append([])
            continue
        assert value is not None
        px, py = x_scale(x), y_scale(value)
        pieces[-1].append(f"{px:.1f},{py:.1f}")
        if marked:
            tip = f"{panel.tips[i]}: " if i < len(panel.tips) else ""
            markers.append(f'<circle cx="{px:.1f}" cy="{py:.1f}" r="2.2"><title>{escape(tip + line.name)} '
                           f"{escape(panel.y_text(value))}</title></circle>")
    dash = ' stroke-dasharray="5 3"' if line.dashed else ""
    parts = [f'<g class="series" stroke="{line.color}" fill="{line.color}">']
    for piece in pieces:
        if len(piece) > 1:
            parts.append(f'<polyline fill="none" stroke-width="1.6"{dash} points="{" ".join(piece)}"/>')
    parts += markers
    parts.append("</g>")
    return parts


def _bars(panel: Panel, x_scale: Scale, y_scale: Scale) -> list[str]:
    assert panel.bars is not None
    xs = [x_scale(x) for x in panel.xs]
    gaps = [b - a for a, b in zip(xs, xs[1:], strict=False)]
    width = max(min(gaps) * 0.8 if gaps else 20.0, 0.5)
    base = y_scale(0.0) if not panel.log else HEIGHT - BOTTOM
    parts = [f'<g class="bars" fill="{PALETTE[4]}">']
    for i, (px, value) in enumerate(zip(xs, panel.bars, strict=True)):
        if not value:
            continue
        top = y_scale(value)
        tip = f"{panel.tips[i]}: " if i < len(panel.tips) else ""
        parts.append(f'<rect x="{px - width / 2:.1f}" y="{top:.1f}" width="{width:.1f}" height="{base - top:.1f}">'
                     f"<title>{escape(tip + panel.bar_name)} {escape(panel.y_text(value))}</title></rect>")
    parts.append("</g>")
    return parts


def _legend(panel: Panel) -> list[str]:
    """The series' names in a row above the plot, each after a square of its colour."""
    entries = [(line.name, line.color) for line in panel.lines]
    if panel.bars is not None and panel.bar_name:
        entries.append((panel.bar_name, PALETTE[4]))
    if len(entries) < 2 and not panel.bars:
        return []
    parts = ['<g class="legend">']
    x = float(LEFT)
    for name, color in entries:
        parts.append(f'<rect x="{x:.1f}" y="19" width="8" height="8" fill="{color}"/>'
                     f'<text x="{x + 11:.1f}" y="27">{escape(name)}</text>')
        x += 22 + 8 * len(name)  # room for the name at a phone's larger type too
    parts.append("</g>")
    return parts
