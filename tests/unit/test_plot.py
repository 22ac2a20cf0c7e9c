"""`soak plot`: the figure built from a run (inspected), and the image written (read back)."""

from __future__ import annotations

import math
import re
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING

import matplotlib.image
import pytest

from runner.commands.plot import (
    DEFAULT_HEIGHT,
    DEFAULT_WIDTH,
    FLOOR,
    build_figure,
    check_drawable,
    latency_ticks,
    save_figure,
    time_axis,
)
from runner.core.columns import Line, interval_line
from runner.core.errors import UsageError
from runner.readback.results import LoadedRun, load_run, read_run
from runner.report.slowcooker import ChangeWindow
from tests.conftest import GOLDEN
from tests.support.runlogs import error_bars, latency_lines, latency_lines_of

if TYPE_CHECKING:
    from matplotlib.figure import Figure


def tick_labels(figure: Figure) -> list[str]:
    """The x axis's tick labels as drawn (the shared axis labels the bottom panel)."""
    figure.canvas.draw()
    axes = figure.axes[1]
    return [label.get_text() for label in axes.get_xticklabels() if label.get_text()]


def assert_every_line_shows(figure: Figure) -> None:
    """Where two latency lines share a value, the one drawn above is narrower, with a smaller marker,
    so the one under it still shows around it; lines that never meet may be drawn any way."""
    lines = sorted(figure.axes[0].get_lines(), key=lambda line: line.get_zorder())
    for i, under in enumerate(lines):
        for over in lines[i + 1:]:
            if any(a == b for a, b in zip(under.get_ydata(), over.get_ydata(), strict=True)):
                assert over.get_linewidth() < under.get_linewidth(), (under.get_label(), over.get_label())
                assert over.get_markersize() < under.get_markersize(), (under.get_label(), over.get_label())


def twenty_per_interval(intervals: int, seconds: int = 1) -> LoadedRun:
    """A run of 20 requests an interval: its p99 is its slowest response, so p99 = max every time."""
    window = ChangeWindow()
    lines = ["# sending 20 GET req/s with concurrency=2 to http://127.0.0.1:8080/ ...\n"]
    for i in range(intervals):
        slowest = (3, 9, 4)[i % 3]
        end = datetime(2026, 11, 30, 10, 0, tzinfo=UTC) + timedelta(seconds=(i + 1) * seconds)
        lines.append(interval_line(Line(end.isoformat().replace("+00:00", "Z"), i, 20 * seconds, 0, 0, 20 * seconds, 100,
                                        f"{seconds}s" if seconds < 60 else f"{seconds // 60}m0s",
                                        (0, 1, 2, slowest, slowest, slowest), 0, window.push(slowest))))
    return load_run("".join(lines), "twenty.log")


def test_p99_equal_to_max_is_drawn_inside_it_and_said() -> None:
    figure = build_figure(twenty_per_interval(12))
    lines = latency_lines_of(figure)
    assert lines["p99"] == lines["max"] == [3, 9, 4] * 4
    assert_every_line_shows(figure)
    assert figure.axes[0].get_title(loc="right") == "drawn one inside the other where equal: p99 = max in all 12 intervals"
    assert [text.get_text() for text in figure.axes[0].get_legend().get_texts()] == ["p50", "p95", "p99", "max"]


def test_a_short_run_is_in_seconds_since_its_start_with_plain_ticks() -> None:
    figure = build_figure(twenty_per_interval(12))
    assert list(figure.axes[0].get_lines()[0].get_xdata()) == list(range(1, 13))
    assert figure.axes[1].get_xlabel() == "interval end, seconds since the start"
    labels = tick_labels(figure)
    assert labels and all(re.fullmatch(r"\d+", label) for label in labels), labels
    assert figure.axes[1].xaxis.get_offset_text().get_text() == ""


def test_a_run_of_minutes_is_in_minutes() -> None:
    figure = build_figure(twenty_per_interval(10, 60))
    assert list(figure.axes[0].get_lines()[0].get_xdata()) == list(range(1, 11))
    assert figure.axes[1].get_xlabel() == "interval end, minutes since the start"
    assert all(re.fullmatch(r"\d+", label) for label in tick_labels(figure))


def test_sub_second_intervals_count_in_seconds_though_their_timestamps_collide() -> None:
    text = "".join(interval_line(Line(f"2026-01-01T00:00:0{(i + 1) // 2}Z", i, 10, 0, 0, 10, 100, "500ms",
                                      (1, 2, 3, 4, 4, 4), 0, "")) for i in range(4))
    figure = build_figure(load_run(text, "half.log"))
    assert list(figure.axes[0].get_lines()[0].get_xdata()) == [0.5, 1.0, 1.5, 2.0]
    labels = tick_labels(figure)
    assert all(re.fullmatch(r"\d+(\.\d)?", label) for label in labels), labels


def test_a_slow_cooker_log_plots_over_time() -> None:
    run = read_run(str(GOLDEN / "faults-timeout-1s.log"))
    figure = build_figure(run)
    top = figure.axes[0]
    assert list(top.get_lines()[0].get_xdata()) == [2, 4, 6, 8]  # 2 s intervals: seconds since the start
    assert error_bars(figure) == [10, 14, 10, 13]
    assert latency_lines(run)["max"] == [2, FLOOR, 1, 1]
    assert figure.get_suptitle().endswith("50 req/s target, 25.375 req/s achieved, 4 intervals, slow_cooker")


def test_the_error_bars_are_one_artist_however_many_intervals() -> None:
    """A bar patch per interval made a 10,000-interval plot take 6 s of its 6.5 (and most of its
    memory); one collection draws the same rectangles, each an interval's width wide."""
    run = twenty_per_interval(3_000)
    figure = build_figure(run)
    errors = figure.axes[2]
    assert len(errors.patches) == 0 and len(errors.collections) == 1
    assert error_bars(figure) == [0.0] * 3_000
    (bars,) = errors.collections
    width = time_axis(run.intervals).bar_width  # 0.8 s of each 1 s interval, in days on the clock axis
    assert all(math.isclose(p.vertices[:, 0].max() - p.vertices[:, 0].min(), width, rel_tol=1e-6)
               for p in bars.get_paths())


def test_the_seed_log_plots_its_hour_by_the_clock_with_every_line_showing() -> None:
    run = read_run(str(GOLDEN / "seed-pallet.log"))
    figure = build_figure(run)
    lines = latency_lines_of(figure)
    assert all(len(values) == 60 for values in lines.values())
    assert max(lines["max"]) == 26
    assert lines["p50"] == lines["p95"], "the seed's p50 lies under its p95 in every interval"
    assert_every_line_shows(figure)
    assert figure.axes[0].get_title(loc="right") == "drawn one inside the other where equal: p50 = p95 in all 60 intervals"
    xs = list(figure.axes[0].get_lines()[0].get_xdata())
    assert xs[0] == datetime(2024, 3, 21, 19, 1, 1, tzinfo=UTC) and len(xs) == 60
    assert figure.axes[1].get_xlabel() == "interval end, time of day (UTC)"
    labels = tick_labels(figure)
    assert labels == ["19:00", "19:10", "19:20", "19:30", "19:40", "19:50", "20:00"], labels


def test_an_interval_with_no_response_leaves_a_gap() -> None:
    text = ("2026-01-01T00:00:01Z    0      0/0/10 10   0% 1s   0 [  0   0   0    0 ]    0      0 \n"
            "2026-01-01T00:00:02Z    1     10/0/0 10 100% 1s   3 [  4   5   6    7 ]    8      0 +\n")
    lines = latency_lines(load_run(text, "gap"))
    assert math.isnan(lines["p50"][0]) and lines["p50"][1] == 4


@pytest.mark.parametrize(("lowest", "highest", "ticks"), [
    (0, 2, [FLOOR, 1, 2]), (0, 0, [FLOOR, 1]), (1, 26, [1, 2, 5, 10, 20]), (135, 2121, [100, 200, 500, 1000, 2000]),
    (3, 3_000_000, [1, 10, 100, 1000, 10_000, 100_000, 1_000_000]), (5, 5, [5]),
])
def test_latency_ticks_are_round_and_few(lowest: int, highest: int, ticks: list[float]) -> None:
    assert latency_ticks(lowest, highest) == ticks


def test_the_png_has_the_pixel_size_asked_for(tmp_path: Path) -> None:
    run = read_run(str(GOLDEN / "100qps-ms.log"))
    path = tmp_path / "default.png"
    save_figure(build_figure(run), str(path))
    assert matplotlib.image.imread(path).shape == (DEFAULT_HEIGHT, DEFAULT_WIDTH, 4)
    odd = tmp_path / "odd.png"
    save_figure(build_figure(run, 1001, 333), str(odd))
    assert matplotlib.image.imread(odd).shape == (333, 1001, 4)


# --- the command -------------------------------------------------------------------------------










def test_sub_unit_latencies_from_a_summary_get_their_own_ticks() -> None:
    """intervalStats keep fractions of the unit: 0.05 ms is drawn at 0.05, labelled as such."""
    assert latency_ticks(0.047, 2.1) == [0.02, 0.05, 0.1, 0.2, 0.5, 1, 2]
    assert latency_ticks(0.3, 0.9) == [0.2, 0.5]  # 0.5 is a value here, not the "<1" floor


@pytest.mark.parametrize(("unit", "longest"), [("ms", 86_400_000), ("us", 86_400_000_000), ("ns", 86_400_000_000_000)])
def test_a_latency_longer_than_a_day_is_refused_before_drawing(unit: str, longest: int) -> None:
    """No run measures a latency over a day (slow_cooker's histograms end there, soak's at an hour):
    such a log is damaged, and a 21-digit one drew a matplotlib traceback."""
    def run_with(p99: int) -> LoadedRun:
        text = (f"# sending 10 GET req/s with concurrency=1 to http://h/ ...\n"
                f"2026-12-01T10:20:43Z    0     10/0/0 10 100% 1s   0 [  0   0 {p99}    {p99} ]    {p99}      0 +\n")
        return load_run(text, "x.log", unit)

    check_drawable(run_with(longest))
    build_figure(run_with(longest)).canvas.draw()
    with pytest.raises(UsageError) as refused:
        check_drawable(run_with(longest + 1))
    assert str(refused.value) == (f"x.log: interval 0's max is {longest + 1}{unit}: longer than a day, which no run "
                                  "measures (a damaged log?); nothing drawn")
    assert run_with(10**39).intervals == ()  # beyond 64 bits: left out as the log is read, with a note
