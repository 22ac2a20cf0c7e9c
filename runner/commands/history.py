"""`soak history`: the runs a resultsStore holds, one line each, oldest first."""

from __future__ import annotations

import argparse
import sys

from runner.core.errors import EXIT_OK

DESCRIPTION = ("List the runs a resultsStore holds, one line each, oldest first: start, job, run, verdict and exit "
               "code, p99 and goal%.")


def arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("store", metavar="STORE",
                        help="the store: file:///DIR or s3://BUCKET/PREFIX, as in resultsStore (a ?query narrows it: "
                             "docs/results-store.md)")
    parser.add_argument("--since", metavar="AGE", default=None,
                        help="only runs that started this long ago or later: a number and m, h, d or w, like 7d")
    parser.add_argument("--job", metavar="JOB", default=None, help="only the runs of this job (pushgatewayJob)")


def main(args: argparse.Namespace) -> int:
    # Here, not above: `soak --help` lists this command without loading the store's code.
    from runner.store.backends import StoreError
    from runner.store.runs import entries, history_line, open_selection, reading

    store, wanted = open_selection(args.store, since=args.since, job=args.job)
    notes: list[str] = []
    try:
        found = entries(store, wanted, notes)
    except StoreError as e:
        raise reading(e, wanted.url) from None
    for note in notes:
        print(f"soak history: {note}", file=sys.stderr)
    for entry in found:
        print(history_line(entry))
    return EXIT_OK
