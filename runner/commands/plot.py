"""`soak plot`: a soak over time, as one picture.

Interval lines are read one at a time; a picture shows the whole hour at once: whether
latency crept up or spiked, when errors came, whether the rate was kept. The top panel has
each interval's p50, p95, p99 and max on a log axis (latency spans decades); the bottom
one, on the same time axis, goal% and the errors (bad + failed) of each interval as bars.

build_figure() makes the Figure from a loaded run and touches neither a display nor a file,
so tests can inspect it; save_figure() writes it. matplotlib is an optional extra: the
runner in the image never needs it, so only this command imports it, and pyplot (with its
global state and display backends) is never used: the figure is drawn by Agg.
"""

from __future__ import annotations

import argparse
import math
import os
from collections.abc import Sequence
from datetime import datetime
from itertools import accumulate, pairwise
from typing import TYPE_CHECKING, Any

from runner.commands.readfiles import add_assume_unit, load_usable, print_notes
from runner.core.errors import EXIT_OK, UsageError
from runner.core.lazymethods import dataclass
from runner.core.numbers import whole_number
from runner.core.units import NS_PER_HOUR, UNIT_NS

if TYPE_CHECKING:  # loading is imported by main() (load_usable), not by --help
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

    from runner.readback.results import IntervalRow, LoadedRun

DEFAULT_WIDTH, DEFAULT_HEIGHT, DPI = 1200, 700, 100
MIN_PIXELS, MAX_PIXELS = 200, 10_000
# Drawn in this order, max first and widest, p50 last and narrowest, so that equal values show
# as one line inside another (LINE_STYLES: line width and marker size, in the same order).
LATENCY_LINES = (("max", "tab:red"), ("p99", "tab:orange"), ("p95", "tab:green"), ("p50", "tab:blue"))
LINE_STYLES = ((6.0, 11.0), (3.6, 7.5), (2.2, 5.0), (0.9, 2.5))
MARKERS = ("o", "D", "s", "^")
CLOCK_FROM_S = 15 * 60  # a run this long is read by the clock; a shorter one by time since its start
MINUTES_FROM_S = 5 * 60  # elapsed time in minutes from here, in seconds below
CLOCK_STEPS_MIN = (1, 2, 5, 10, 15, 30, 60, 120, 180, 360, 720, 1440)
MAX_TICKS = 8
FLOOR = 0.5  # where a latency printed as 0 (under one unit) is drawn: a log axis has no 0
INSTALL_HINT = "soak plot needs matplotlib: pip install 'soak-pallet[plot]' (in the repository: pip install '.[plot]')"
FORMATS = {".png": "png", ".svg": "svg"}
# The longest latency a log can hold that a run measured: slow_cooker's histograms go up to a day
# (soak's to an hour). A longer one is a damaged or made-up log, and a 21-digit one made
# matplotlib fail on its draw with a traceback: it is refused in one line (check_drawable()).
LONGEST_NS = 24 * NS_PER_HOUR


def check_drawable(run: LoadedRun) -> None:
    """A UsageError naming the first latency no run could have printed, a damaged log's: more than a
    day (LONGEST_NS). Figures beyond 64 bits, which no float arithmetic takes, never get here: reading
    the log leaves their rows out (runner.readback.results)."""
    longest = LONGEST_NS / UNIT_NS.get(run.latency_unit, 1)
    for row in run.intervals:
        for key, _ in LATENCY_LINES:
            value = getattr(row, key)
            if value is not None and not 0 <= value <= longest:
                raise UsageError(f"{run.source}: interval {row.iter}'s {key} is {_number(value)}{run.latency_unit}: "
                                 "longer than a day, which no run measures (a damaged log?); nothing drawn")


def _number(value: float) -> str:
    """A figure as a log has it: `86400001`, `0.05`."""
    return f"{value:g}" if isinstance(value, float) else str(value)


def build_figure(run: LoadedRun, width: int = DEFAULT_WIDTH, height: int = DEFAULT_HEIGHT, dpi: int = DPI) -> Figure:
    """The run's picture, `width` x `height` pixels at `dpi`; the run must have intervals, drawable ones."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    figure = Figure(figsize=(width / dpi, height / dpi), dpi=dpi, layout="constrained")
    FigureCanvasAgg(figure)
    top, bottom = figure.subplots(2, 1, sharex=True, gridspec_kw={"height_ratios": [2, 1]})
    axis = time_axis(run.intervals)
    _latency_panel(top, axis.x, run)
    _goal_panel(bottom, axis.x, axis.bar_width, run.intervals)
    _label_time(bottom, axis)
    figure.suptitle(title(run))
    return figure


def save_figure(figure: Figure, path: str, dpi: int = DPI) -> None:
    """Write the figure: SVG when the path ends in .svg, else PNG."""
    figure.savefig(path, format=image_format(path) or "png", dpi=dpi)


def image_format(path: str) -> str | None:
    """png or svg, from the path's suffix (png when it has none); None for any other suffix."""
    suffix = os.path.splitext(path)[1].lower()
    return FORMATS.get(suffix) if suffix else "png"


@dataclass(frozen=True)
class TimeAxis:
    """Where each interval's end goes on the x axis, and how the axis reads.

    Always time, named the same way: clock time (HH:MM) for a long run, whose reader
    matches it with other graphs and incidents; time since the start, in seconds or
    minutes, for a short one, where the clock says little. Only intervals whose length is
    unknown fall back to their numbers.
    """

    x: list[Any]  # datetimes (clock), or numbers in `unit` since the start
    bar_width: float  # in the axis's units (days, for datetimes)
    unit: str  # "clock", "s", "min" or "interval"
    label: str


def time_axis(intervals: Sequence[IntervalRow]) -> TimeAxis:
    """Clock time when the timestamps tell the intervals apart and the run is long; else elapsed time."""
    seconds = [i.seconds for i in intervals]
    if None in seconds:
        return TimeAxis([i.iter for i in intervals], 0.8, "interval", "interval number")
    lengths = [s for s in seconds if s is not None]
    typical = sorted(lengths)[len(lengths) // 2]
    ends = list(accumulate(lengths))
    times = _timestamps(intervals)
    if times and ends[-1] >= CLOCK_FROM_S:
        zone = times[0].tzname() or "UTC"
        return TimeAxis(times, typical * 0.8 / 86_400, "clock", f"interval end, time of day ({zone})")
    unit, scale = ("s", 1) if ends[-1] < MINUTES_FROM_S else ("min", 60)
    words = "seconds" if unit == "s" else "minutes"
    return TimeAxis([e / scale for e in ends], typical * 0.8 / scale, unit, f"interval end, {words} since the start")


def _timestamps(intervals: Sequence[IntervalRow]) -> list[datetime]:
    """The intervals' end times, if they read as times and tell every interval apart (they are to
    the second, so sub-second intervals share them); else none."""
    try:
        times = [datetime.fromisoformat(i.timestamp) for i in intervals]
    except ValueError:
        return []
    return times if all(a < b for a, b in pairwise(times)) and times[0].tzinfo is not None else []


def _label_time(axes: Axes, axis: TimeAxis) -> None:
    """Ticks people read: HH:MM on round minutes or hours, or round seconds/minutes; no offset text."""
    from matplotlib.dates import DateFormatter, HourLocator, MinuteLocator
    from matplotlib.ticker import FuncFormatter, MaxNLocator

    axes.set_xlabel(axis.label)
    if axis.unit == "clock":
        span_min = (axis.x[-1] - axis.x[0]).total_seconds() / 60
        step = next((m for m in CLOCK_STEPS_MIN if span_min / m <= MAX_TICKS), CLOCK_STEPS_MIN[-1])
        zone = axis.x[0].tzinfo
        locator = (MinuteLocator(byminute=range(0, 60, step), tz=zone) if step < 60
                   else HourLocator(interval=step // 60, tz=zone))
        axes.xaxis.set_major_locator(locator)
        axes.xaxis.set_major_formatter(DateFormatter("%H:%M" if span_min < 24 * 60 else "%m-%d %H:%M", tz=zone))
        return
    integer = axis.unit == "interval"
    axes.xaxis.set_major_locator(MaxNLocator(nbins=MAX_TICKS, steps=[1, 2, 2.5, 5, 10], integer=integer))
    axes.xaxis.set_major_formatter(FuncFormatter(lambda value, _: f"{round(value, 6):g}"))


def title(run: LoadedRun) -> str:
    """The file's name, and the rate it was run at: what someone looking at the picture asks first."""
    f = run.figures
    parts = []
    if f.rate_target is not None:
        parts.append(f"{f.rate_target:g} req/s target")
    if f.rate_achieved is not None:
        parts.append(f"{f.rate_achieved:g} req/s achieved")
    n = len(run.intervals)
    parts.append(f"{n} interval{'s' if n != 1 else ''}")
    if run.slow_cooker:
        parts.append("slow_cooker")
    return f"{run.source}\n{', '.join(parts)}"


def _latency_panel(axes: Axes, x: list[Any], run: LoadedRun) -> None:
    """p50, p95, p99 and max per interval; a gap where an interval had no response to measure.

    Percentiles often coincide (p99 is max at 20 responses an interval; p50 is p95 when most
    responses take the same whole millisecond), and a line drawn over another hides it. So
    each is drawn inside the one above it, narrower and with a smaller marker (max widest,
    at the bottom; p50 narrowest, on top), and a note above the panel says which coincide.
    """
    unit = run.latency_unit
    drawn = {key: [_drawn(getattr(i, key)) if i.responses else math.nan for i in run.intervals]
             for key, _ in LATENCY_LINES}
    for order, (key, color) in enumerate(LATENCY_LINES):
        width, size = LINE_STYLES[order]
        axes.plot(x, drawn[key], label=key, color=color, marker=MARKERS[order], markersize=size, linewidth=width,
                  zorder=2 + order)
    measured = [getattr(i, key) for i in run.intervals if i.responses for key, _ in LATENCY_LINES] or [0]
    ticks = latency_ticks(min(measured), max(measured))
    zeros = min(measured) == 0  # then ticks[0] is FLOOR, which stands for "under one unit"
    axes.set_yscale("log")
    axes.set_yticks(ticks, [f"<1 ({unit})" if zeros and i == 0 else f"{t:g}" for i, t in enumerate(ticks)])
    axes.minorticks_off()
    axes.set_ylim(ticks[0] / 1.3, max(ticks[-1], *measured) * 1.3)
    axes.set_ylabel(f"latency ({unit}), log scale")
    axes.grid(True, alpha=0.3)
    handles = axes.get_lines()[::-1]  # p50 to max, as people list them
    axes.legend(handles=handles, loc="lower left", bbox_to_anchor=(0, 1), ncols=len(LATENCY_LINES),
                fontsize="small", frameon=False)
    axes.set_title(coincidence_note(drawn), loc="right", fontsize="small")


def coincidence_note(drawn: dict[str, list[float]]) -> str:
    """Which neighbouring lines share their values, in how many intervals: `p99 = max in all 20 intervals`."""
    keys = [key for key, _ in reversed(LATENCY_LINES)]
    measured = sum(1 for v in drawn[keys[0]] if not math.isnan(v))
    parts = []
    for low, high in pairwise(keys):
        same = sum(1 for a, b in zip(drawn[low], drawn[high], strict=True) if a == b)
        if same:
            parts.append(f"{low} = {high} in {'all ' if same == measured else ''}{same}"
                         f"{'' if same == measured else f' of {measured}'} interval{'s' if measured != 1 else ''}")
    return "drawn one inside the other where equal: " + "; ".join(parts) if parts else ""


def _drawn(latency: float) -> float:
    """Where a latency goes on the log axis: 0 (under one unit) at FLOOR, as a log axis has no 0."""
    return FLOOR if latency == 0 else latency


def latency_ticks(lowest: float, highest: float) -> list[float]:
    """Round values for a log axis from `lowest` to `highest`.

    1, 2 and 5 per decade over a few decades, only the powers of ten over many, so labels
    never crowd. Whole units as lines print them, or finer (a summary's intervalStats keep
    fractions of the unit); FLOOR first when there are zeros (under one unit, from lines).
    """
    low = lowest if lowest > 0 else 1
    high = max(highest, low)
    first = math.floor(math.log10(low))
    last = math.ceil(math.log10(high))
    steps = (1, 2, 5) if last - first <= 4 else (1,)
    ticks = [round(m * 10**k, 12) for k in range(first, last + 1) for m in steps]
    start = max([t for t in ticks if t <= low], default=ticks[0])
    ticks = [t for t in ticks if start <= t <= high]
    return [FLOOR, *ticks] if lowest == 0 else ticks


def _error_bars(axes: Axes, x: list[Any], width: float, heights: list[int]) -> None:
    """One bar per interval, centred on its x, drawn as one collection of rectangles.

    axes.bar() makes a patch per bar, and a long run's thousands of patches took most of a
    plot's time and memory (10,000 intervals: 6 s of its 6.5); one collection draws the same
    rectangles at once. The x axis already has its units (numbers or dates) from the lines.
    """
    from matplotlib.collections import PolyCollection

    centres = axes.convert_xunits(x)
    half = width / 2
    bars = PolyCollection([((c - half, 0), (c - half, h), (c + half, h), (c + half, 0))
                           for c, h in zip(centres, heights, strict=True)],
                          facecolors="tab:red", edgecolors="none", alpha=0.4, label="errors (bad + failed)")
    axes.add_collection(bars)
    axes.autoscale_view()


def _goal_panel(axes: Axes, x: list[Any], bar_width: float, intervals: Sequence[IntervalRow]) -> None:
    """goal% as a line on the left axis; errors (bad + failed) as bars on the right one."""
    from matplotlib.ticker import MaxNLocator

    errors = axes.twinx()
    _error_bars(errors, x, bar_width, [i.bad + i.failed for i in intervals])
    errors.set_ylabel("errors per interval")
    errors.set_ylim(0, max(1, *(i.bad + i.failed for i in intervals)) * 1.1)
    errors.yaxis.set_major_locator(MaxNLocator(integer=True))
    goals = [math.nan if i.goal_percent is None else i.goal_percent for i in intervals]
    axes.plot(x, goals, color="tab:purple", marker=".", linewidth=1.2, label="goal%")
    axes.set_ylim(0, 105)
    axes.set_ylabel("goal%")
    axes.set_zorder(errors.get_zorder() + 1)  # the goal line over the bars
    axes.patch.set_visible(False)
    axes.grid(True, alpha=0.3)
    handles = axes.get_legend_handles_labels()[0] + errors.get_legend_handles_labels()[0]
    axes.legend(handles=handles, loc="lower left", fontsize="small")


# --- The command ----------------------------------------------------------------------------


DESCRIPTION = ("Draw a run over time as a PNG or SVG: latency percentiles per interval above, goal% and errors "
               "below.")


def arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("file", metavar="FILE",
                        help="a run's saved log (kubectl logs as it is, slow_cooker's) or JSON summary; - for stdin")
    parser.add_argument("-o", "--output", required=True, metavar="OUT",
                        help="the picture to write: SVG when it ends in .svg, else PNG")
    parser.add_argument("--width", type=_pixels, default=DEFAULT_WIDTH, metavar="PIXELS",
                        help=f"width in pixels. Default: {DEFAULT_WIDTH}.")
    parser.add_argument("--height", type=_pixels, default=DEFAULT_HEIGHT, metavar="PIXELS",
                        help=f"height in pixels. Default: {DEFAULT_HEIGHT}.")
    add_assume_unit(parser)


def _pixels(text: str) -> int:
    """A whole number in ASCII digits, as int() alone is not (it reads `1_200` and `١٢٠٠`)."""
    number = whole_number(text)
    if number is None:
        raise argparse.ArgumentTypeError(f"invalid int value: {text!r}")
    return number


def main(args: argparse.Namespace) -> int:
    _check_arguments(args)
    try:
        import matplotlib  # noqa: F401 - only to tell its absence in one line, before any work
    except ImportError:
        raise UsageError(INSTALL_HINT) from None
    run = load_usable(args.file, args.assumeUnit)
    if not run.intervals:
        raise UsageError(f"{args.file}: no interval figures to plot (no interval lines, no intervalStats)")
    check_drawable(run)
    figure = build_figure(run, args.width, args.height)
    try:
        save_figure(figure, args.output)
    except OSError as e:
        raise UsageError(f"--output: {args.output}: {e.strerror or e}") from None
    print_notes([run])
    return EXIT_OK


def _check_arguments(args: argparse.Namespace) -> None:
    for name in ("width", "height"):
        value = getattr(args, name)
        if not MIN_PIXELS <= value <= MAX_PIXELS:
            raise UsageError(f"--{name}: {value} is not allowed; must be from {MIN_PIXELS} to {MAX_PIXELS} pixels")
    if image_format(args.output) is None:
        raise UsageError(f'--output: "{args.output}" is not allowed; must end in .png or .svg (or have no suffix '
                         "for PNG)")
