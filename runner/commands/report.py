"""`soak report`: a finished run, or a range of runs, as one HTML page a person opens; and, with
--junit, its verdict as JUnit XML for CI.

The page is self-contained (runner.report.htmlreport says what it shows and why it fetches
nothing); the runs are read as `soak compare` and `soak plot` read them, from whatever the user
kept. Where runs come from is decided in one place, runs_of(): today each input is a file (a
saved log or a JSON summary; several make a range, shown oldest first with the trend across
them); a results store's location or a time range is one more kind of input there.
"""

from __future__ import annotations

import argparse
import os
from typing import TYPE_CHECKING

from runner.commands.readfiles import add_assume_unit, load_usable, print_notes
from runner.config.files import STDIN, check_output, open_output
from runner.core.errors import EXIT_OK, UsageError

if TYPE_CHECKING:
    from runner.readback.results import LoadedRun

DESCRIPTION = ("Write finished runs as one self-contained HTML page to open in a browser (offline, on a phone, "
               "on paper): the verdict first, then intervals, the latency distribution, per-URL, per-phase and "
               "backends tables; for several runs, the trend of p99 and goal% across them. --junit writes the "
               "verdict as JUnit XML.")


def arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("inputs", nargs="+", metavar="RUN",
                        help="a run's saved log (kubectl logs as it is, slow_cooker's) or JSON summary; - for "
                             "stdin. Several: a range of runs, shown oldest first")
    parser.add_argument("-o", "--output", required=True, metavar="OUT.html", help="the HTML page to write")
    parser.add_argument("--junit", metavar="FILE", default="",
                        help="also write the runs' verdicts to FILE as JUnit XML, for CI: a test suite per run")
    parser.add_argument("--title", default=None, help="the page's title. Default: the file's name, or "
                                                      "\"N runs\" for a range")
    add_assume_unit(parser)


def runs_of(inputs: list[str], assumed_unit: str) -> list[LoadedRun]:
    """The runs the inputs name, oldest first when every one says when it started (else as given).

    The one place where what the user named becomes runs: each input is a file today.
    """
    if inputs.count(STDIN) > 1:
        raise UsageError("report: stdin (-) can be read only once")
    runs = [load_usable(path, assumed_unit) for path in inputs]
    starts = [_start(run) for run in runs]
    if all(starts):
        runs = [run for _, run in sorted(zip(starts, runs, strict=True), key=lambda pair: pair[0])]
    return runs


def _start(run: LoadedRun) -> str:
    start = (run.summary or {}).get("start")
    return start if isinstance(start, str) else ""


def main(args: argparse.Namespace) -> int:
    from runner.readback.reportview import junit_suite, run_view
    from runner.report.htmlreport import page
    from runner.report.junit import junit_xml

    check_output(args.output, "--output")  # before reading: a path that cannot be written is said first
    if args.junit:
        check_output(args.junit, "--junit")
    runs = runs_of(args.inputs, args.assumeUnit)
    views = [run_view(run) for run in runs]
    title = args.title or (os.path.basename(runs[0].source) if len(runs) == 1 else f"{len(runs)} runs")
    _write(args.output, "--output", page(views, title))
    if args.junit:
        _write(args.junit, "--junit", junit_xml(*(junit_suite(run, view) for run, view in zip(runs, views,
                                                                                               strict=True))))
    print_notes(runs)
    return EXIT_OK


def _write(path: str, name: str, text: str) -> None:
    """Write a whole output file; one line naming it when that fails."""
    try:
        with open_output(path, name) as file:
            file.write(text)
    except OSError as e:
        raise UsageError(f"{name}: {path}: {e.strerror or e}") from None
