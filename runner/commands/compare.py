"""`soak compare`: finished runs side by side, each against the first.

After a change (nginx with 1 replica, then 10; without Linkerd, then with it; last week,
then today) the question is what moved, and by how much: with a backendHeader, how many
of the Service's pods answered, too. So: one column per run, and
beside every run after the first its change in percent against the first, the baseline.
Plain text aligned with spaces, so the table reads the same in a terminal, in an issue
and in a code block. Latencies are shown in one unit whatever each run was measured in.

compare_text() is pure; main() reads the files and prints.
"""

from __future__ import annotations

import argparse
import functools
import os
import sys
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from runner.commands.readfiles import add_assume_unit, load_usable, print_notes
from runner.core.errors import EXIT_OK, UsageError
from runner.core.lazymethods import dataclass
from runner.core.units import UNIT_NS

if TYPE_CHECKING:
    from runner.readback.figures import RunFigures
    from runner.readback.results import LoadedRun

UNKNOWN = "-"
ESTIMATED = "~"


@dataclass(frozen=True)
class Row:
    """One line of the table: its label and how to read its figure from a run."""

    label: str
    value: Callable[[RunFigures], float | None]
    decimals: int = 3  # at most; a row shows as many as its values need
    latency: str | None = None  # the latency key, for rows converted to the table's unit


def _latency_row(key: str) -> Row:
    return Row(key, lambda f: f.latency_ns.get(key), latency=key)


def _phase_row(phase: str, key: str) -> Row:
    """A phase's latency (the summary's phases section): `ttfb p50`."""
    return Row(f"{phase} {key}", lambda f: f.phases_ns.get(phase, {}).get(key), latency=f"{phase}.{key}")


@functools.cache
def table_rows() -> tuple[Row, ...]:
    """Every row a table may have, in order: made when the first table is, so that `soak --help`,
    which lists this command, loads none of the figures they read."""
    from runner.readback.figures import LATENCY_KEYS
    from runner.stats.figures import PHASE_PERCENTILES
    from runner.stats.phases import PHASES

    phase_rows = (*PHASE_PERCENTILES, "mean")  # each phase's, from the summary's phases section
    return (
        Row("requests", lambda f: f.requests),
        Row("rate achieved (req/s)", lambda f: f.rate_achieved),
        Row("bench (req/s)", lambda f: f.bench_rps),
        Row("goal%", lambda f: f.goal_percent),
        Row("good", lambda f: f.good),
        Row("bad", lambda f: f.bad),
        Row("failed", lambda f: f.failed),
        Row("failed %", lambda f: f.failed_percent, decimals=2),
        Row("backends reached", lambda f: f.backends_reached),
        Row("connections opened", lambda f: f.connections_opened),
        Row("connections closed", lambda f: f.connections_closed),
        *(_latency_row(key) for key in LATENCY_KEYS),  # the summary's percentiles, then min, mean and max
        *(_phase_row(phase, key) for phase in PHASES for key in phase_rows),
        Row("duration (s)", lambda f: f.duration_seconds),
    )


URL_ROWS = ("requests", "failed", "p50", "p99", "max")  # of each URL's part of the run (the summary's perUrl)


def _url_row(label: str, key: str) -> Row:
    """A URL's figure: `http://a/ p99`, the URL as the summary's perUrl labels it."""
    from runner.readback.figures import URL_COUNTS

    return Row(f"{label} {key}", lambda f: f.urls.get(label, {}).get(key),
               latency=f"{label}.{key}" if key not in URL_COUNTS else None)


def rows_for(runs: Sequence[LoadedRun]) -> list[Row]:
    """The table's rows: table_rows(), with before the duration each URL's that any run has (in the order first met)."""
    labels = list(dict.fromkeys(label for run in runs for label in run.figures.urls))
    rows = table_rows()
    return [*rows[:-1], *(_url_row(label, key) for label in labels for key in URL_ROWS), rows[-1]]


def compare_text(runs: Sequence[LoadedRun], unit: str | None = None) -> str:
    """The table: a row per figure any run has, a column per run, a change column after each but the first.

    `unit` is the latency unit to show; by default the first run's.
    """
    unit = unit or runs[0].latency_unit
    table = [["", *_header(column_names([r.source for r in runs]))]]
    estimated_shown = unknown_shown = False
    for row in rows_for(runs):
        values = [_value(row, r.figures, unit) for r in runs]
        if all(v is None for v in values):
            continue
        label = f"{row.label} ({unit})" if row.latency else row.label
        marks = [ESTIMATED if row.latency in r.figures.estimated else "" for r in runs]
        table.append([label, *_cells(values, marks, row.decimals)])
        estimated_shown = estimated_shown or any(m and v is not None for m, v in zip(marks, values, strict=True))
        unknown_shown = unknown_shown or None in values
    lines = _aligned(table)
    if estimated_shown:
        lines.append(f"{ESTIMATED} estimated from the interval lines' percentiles")
    if unknown_shown:
        lines.append(f"{UNKNOWN} not in the file")
    return "\n".join(lines) + "\n"


def column_names(sources: Sequence[str]) -> list[str]:
    """Each file's name without its directory, unless two would then read the same."""
    names = [os.path.basename(s) or s for s in sources]
    if len(set(names)) < len(names):
        names = list(sources)
    if len(set(names)) < len(names):
        names = [f"{name} (#{i})" for i, name in enumerate(names, 1)]
    return names


def _header(names: list[str]) -> list[str]:
    return [names[0], *(cell for name in names[1:] for cell in (name, "change"))]


def _value(row: Row, figures: RunFigures, unit: str) -> float | None:
    value = row.value(figures)
    if value is None or row.latency is None:
        return value
    return value / UNIT_NS[unit]


def _cells(values: list[float | None], marks: list[str], most_decimals: int) -> list[str]:
    """The row's values with as many decimals as they need (the same for all), each change after the first."""
    decimals = max((_decimals_needed(v, most_decimals) for v in values if v is not None), default=0)
    shown = [UNKNOWN if v is None else mark + f"{v:.{decimals}f}" for v, mark in zip(values, marks, strict=True)]
    cells = [shown[0]]
    for value, text in zip(values[1:], shown[1:], strict=True):
        cells += [text, change(values[0], value)]
    return cells


def _decimals_needed(value: float, most: int) -> int:
    text = f"{value:.{most}f}".rstrip("0")
    return len(text.partition(".")[2])


def change(baseline: float | None, value: float | None) -> str:
    """`+12.3%` from the baseline to value; empty when either is unknown, `n/a` from a zero baseline."""
    if baseline is None or value is None:
        return ""
    if baseline == 0:
        return "0.0%" if value == 0 else "n/a"
    percent = (value - baseline) / abs(baseline) * 100
    return "0.0%" if round(percent, 1) == 0 else f"{percent:+.1f}%"


def _aligned(table: list[list[str]]) -> list[str]:
    """Labels to the left, figures to the right, two spaces between columns."""
    widths = [max(len(row[i]) for row in table) for i in range(len(table[0]))]
    return [
        "  ".join([row[0].ljust(widths[0]), *(cell.rjust(w) for cell, w in zip(row[1:], widths[1:], strict=True))])
        .rstrip()
        for row in table
    ]


# --- The command ----------------------------------------------------------------------------


DESCRIPTION = ("Compare finished runs side by side, each file a column, with its change in percent against the "
               "first: JSON summaries, kubectl logs as saved, or slow_cooker logs.")


def arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("files", nargs="+", metavar="FILE",
                        help="a run's JSON summary or saved log (kubectl logs, slow_cooker); the first is the baseline")
    parser.add_argument("--latencyUnit", choices=tuple(UNIT_NS), default=None,
                        help="unit of the latencies shown. Default: the first file's.")
    add_assume_unit(parser)


def main(args: argparse.Namespace) -> int:
    if len(args.files) < 2:
        raise UsageError("compare needs two files or more: the first is the baseline")
    runs = [load_usable(path, args.assumeUnit) for path in args.files]
    print_notes(runs)
    sys.stdout.write(compare_text(runs, args.latencyUnit))
    return EXIT_OK
