"""`soak plot`: the figure built from a run (inspected), and the image written (read back)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import matplotlib.image
import pytest

from runner.commands.plot import (
    FLOOR,
    INSTALL_HINT,
    build_figure,
)
from runner.readback.results import load_run, read_run
from tests.conftest import GOLDEN, REPO, run_soak
from tests.support.runlogs import error_bars, latency_lines, split_log


def test_the_figure_has_a_point_per_interval_on_every_line(ours: str) -> None:
    run = load_run(ours, "soak-now.log")
    figure = build_figure(run)
    top, bottom, _ = figure.axes
    n = len(run.intervals)
    assert n == 4
    assert top.get_yscale() == "log"
    assert sorted(line.get_label() for line in top.get_lines()) == ["max", "p50", "p95", "p99"]
    for line in top.get_lines():
        assert len(line.get_xdata()) == len(line.get_ydata()) == n
        assert list(line.get_ydata()) == [getattr(i, line.get_label()) or FLOOR for i in run.intervals]
    # 500 ms intervals share their whole-second timestamps: the x axis is the time since the start.
    assert list(top.get_lines()[0].get_xdata()) == [0.5, 1.0, 1.5, 2.0]
    assert bottom.get_xlabel() == "interval end, seconds since the start"
    (goal,) = bottom.get_lines()
    assert list(goal.get_ydata()) == [i.goal_percent for i in run.intervals]
    assert error_bars(figure) == [i.bad + i.failed for i in run.intervals]
    assert all(height > 0 for height in error_bars(figure))
    assert top.get_shared_x_axes().joined(top, bottom)
    # achieved is what the run reached (a busy machine may skip sends): its summary says it
    lines = ours.splitlines()
    achieved = json.loads("\n".join(lines[lines.index("{"):]))["rate"]["achieved"]
    assert figure.get_suptitle() == f"soak-now.log\n60 req/s target, {achieved:g} req/s achieved, 4 intervals"


def test_a_cut_off_log_plots_the_intervals_it_has(ours: str) -> None:
    head = split_log(ours)[0]
    # Inside iter 2's line: the third line that starts with a timestamp. Searching the text for
    # " 2 " found a note line instead when a busy machine made the run print `# iter 0: 2 sends left late`.
    third = [m.start() for m in re.finditer(r"^\d{4}-", head, re.MULTILINE)][2]
    cut = head[: head.index("] ", third)]
    run = load_run(cut, "cut.log")
    assert len(run.intervals) == 2
    assert all(len(values) == 2 for values in latency_lines(run).values())


def test_soak_plot_reads_kubectl_logs_as_they_are(tmp_path: Path, ours: str) -> None:
    log = tmp_path / "soak-now.log"
    log.write_text(ours)
    out = tmp_path / "soak.png"
    run = run_soak("plot", str(log), "-o", str(out), "--width", "640", "--height", "480")
    assert run.returncode == 0, run.stderr
    assert run.stdout == ""
    assert matplotlib.image.imread(out).shape == (480, 640, 4)


def test_soak_plot_writes_svg_and_says_its_notes(tmp_path: Path) -> None:
    out = tmp_path / "faults.svg"
    log = GOLDEN / "faults-timeout-1s.log"
    run = run_soak("plot", str(log), "-o", str(out))
    assert run.returncode == 0, run.stderr
    svg = out.read_text()
    assert svg.startswith("<?xml") and '<svg xmlns:xlink="http://www.w3.org/1999/xlink" width="864pt" height="504pt"' \
        in svg  # 1200 x 700 pixels at 100 dpi, in points
    assert run.stderr.splitlines() == [f"{log}: {note}" for note in read_run(str(log)).notes]


def test_soak_plot_without_matplotlib_says_how_to_install_it(tmp_path: Path) -> None:
    code = ("import sys; sys.modules['matplotlib'] = None; from runner.cli import main; "
            f"sys.exit(main(['plot', {str(GOLDEN / '100qps-ms.log')!r}, '-o', {str(tmp_path / 'x.png')!r}]))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=60)
    assert done.returncode == 2
    assert done.stderr.splitlines() == [f"soak: {INSTALL_HINT}"]
    assert not (tmp_path / "x.png").exists()


@pytest.mark.parametrize(("arguments", "message"), [
    (["/no/such.log", "-o", "{out}"], "soak: /no/such.log: no such file"),
    (["{empty}", "-o", "{out}"], "soak: {empty}: no soak or slow_cooker output in it (no interval lines, no JSON summary)"),
    (["{summary}", "-o", "{out}"], "soak: {summary}: no interval figures to plot (no interval lines, no intervalStats)"),
    (["{log}", "-o", "{tmp}/x.jpg"],
     'soak: --output: "{tmp}/x.jpg" is not allowed; must end in .png or .svg (or have no suffix for PNG)'),
    (["{log}", "-o", "/no/such/dir/x.png"], "soak: --output: /no/such/dir/x.png: No such file or directory"),
    (["{log}", "-o", "{out}", "--width", "10"], "soak: --width: 10 is not allowed; must be from 200 to 10000 pixels"),
    (["{log}", "-o", "{out}", "--height", "tall"],
     "soak: argument --height: invalid int value: 'tall' (see soak plot --help)"),
    (["{log}", "-o", "{out}", "--width", "\u0661\u0662\u0660\u0660"],  # Arabic-Indic digits, which int() reads
     "soak: argument --width: invalid int value: '\u0661\u0662\u0660\u0660' (see soak plot --help)"),
    (["{log}"], "soak: the following arguments are required: -o/--output (see soak plot --help)"),
])
def test_soak_plot_says_what_is_wrong_in_one_line(tmp_path: Path, arguments: list[str], message: str) -> None:
    (tmp_path / "empty.log").write_text("no run here\n")
    (tmp_path / "summary.json").write_text(split_log((GOLDEN / "100qps-ms.log").read_text() + "\n")[1])
    names = {"out": str(tmp_path / "out.png"), "tmp": str(tmp_path), "empty": str(tmp_path / "empty.log"),
             "summary": str(tmp_path / "summary.json"), "log": str(GOLDEN / "100qps-ms.log")}
    run = run_soak("plot", *(a.format(**names) for a in arguments))
    assert run.returncode == 2
    assert run.stderr.splitlines() == [message.format(**names)]
    assert not (tmp_path / "out.png").exists()


def test_a_latency_no_run_measures_is_one_line_not_a_traceback(tmp_path: Path) -> None:
    """A 21-digit max (a damaged or made-up log) made matplotlib fail as it drew: a traceback, exit 1.
    Beyond 64 bits a row is left out as it is read (test_results_of_a_run); within them, a latency of
    more than a day is still none a run measured, and plot refuses it."""
    log = tmp_path / "big.log"
    log.write_text("2026-12-01T10:20:43Z    0    100/0/0 100 100% 1s   0 [  0   0   2    2 ]    "
                   "1234567890123456789      0 +\n"
                   "2026-12-01T10:20:44Z    1    100/0/0 100 100% 1s   0 [  0   0   0    0 ]    0      0 \n")
    out = tmp_path / "big.png"
    run = run_soak("plot", str(log), "-o", str(out))
    assert run.returncode == 2, run.stderr
    assert run.stderr.splitlines()[-1] == (
        f"soak: {log}: interval 0's max is 1234567890123456789ms: longer than a day, which no run measures "
        "(a damaged log?); nothing drawn")
    assert "Traceback" not in run.stderr and not out.exists()
