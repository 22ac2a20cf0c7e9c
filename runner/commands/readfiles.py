"""What the report commands (`soak compare`, `soak plot`) share: reading the files they are
given, the unit of logs that do not say theirs, and telling the user what loading assumed.

Kept apart from runner.readback.results, which is pure and never prints, so that loading can be
used (and tested) without a command line.
"""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

from runner.core.errors import UsageError
from runner.core.units import UNIT_NS

if TYPE_CHECKING:  # loading is imported when a command reads (load_usable), not by its --help
    from collections.abc import Sequence

    from runner.readback.results import LoadedRun


def add_assume_unit(parser: argparse.ArgumentParser) -> None:
    """--assumeUnit: slow_cooker's logs never say their unit, nor do ours cut off before the summary."""
    parser.add_argument("--assumeUnit", choices=tuple(UNIT_NS), default="ms",
                        help="latency unit of a log that does not state it (slow_cooker's, or one cut off "
                             "before its JSON summary). Default: ms.")


def load_usable(path: str, assumed_unit: str) -> LoadedRun:
    """The run in a file, or a UsageError when the file holds nothing of one; or the run (or runs,
    added up) that a store's URL asks for (runner.store.runs)."""
    from runner.config.storeurl import is_store_url

    if is_store_url(path):
        from runner.store.backends import StoreError
        from runner.store.runs import load_selection, open_selection, reading

        store, wanted = open_selection(path)
        try:
            return load_selection(store, wanted, assumed_unit)
        except StoreError as e:
            raise reading(e, wanted.url) from None
    from runner.readback.results import read_run

    run = read_run(path, assumed_unit)
    if not run.usable:
        raise UsageError(f"{path}: no soak or slow_cooker output in it (no interval lines, no JSON summary)")
    return run


def print_notes(runs: Sequence[LoadedRun]) -> None:
    """What loading skipped or assumed, one line each on stderr, so stdout is only the report."""
    for run in runs:
        for note in run.notes:
            print(f"{run.source}: {note}", file=sys.stderr)
