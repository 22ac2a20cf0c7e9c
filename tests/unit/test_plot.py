"""`soak plot`: the figure built from a run (inspected), and the image written (read back)."""

from __future__ import annotations

import math
from datetime import datetime
from pathlib import Path

import matplotlib.image
import pytest

from runner.commands.plot import (
    DEFAULT_HEIGHT,
    DEFAULT_WIDTH,
    FLOOR,
    build_figure,
    latency_ticks,
    save_figure,
)
from runner.readback.results import load_run, read_run
from tests.conftest import GOLDEN
from tests.support.runlogs import latency_lines


def test_a_slow_cooker_log_plots_over_time() -> None:
    run = read_run(str(GOLDEN / "faults-timeout-1s.log"))
    figure = build_figure(run)
    top, _, errors = figure.axes
    xs = list(top.get_lines()[0].get_xdata())
    assert all(isinstance(x, datetime) for x in xs) and len(xs) == 4
    assert xs[0].isoformat() == "2026-11-30T01:10:42+00:00"
    assert [bar.get_height() for bar in errors.patches] == [10, 14, 10, 13]
    assert latency_lines(run)["max"] == [2, FLOOR, 1, 1]
    assert figure.get_suptitle().endswith("50 req/s target, 25.375 req/s achieved, 4 intervals, slow_cooker")


def test_the_seed_log_plots_its_hour() -> None:
    run = read_run(str(GOLDEN / "seed-pallet.log"))
    lines = latency_lines(run)
    assert all(len(values) == 60 for values in lines.values())
    assert max(lines["max"]) == 26




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
