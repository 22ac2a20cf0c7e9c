"""`soak merge`: the shards' logs in, one run's output out, as if one process had run it all."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

from runner.config.files import read_log
from runner.core.errors import EXIT_SHARD_MISSING, UsageError
from runner.core.redact import printable

if TYPE_CHECKING:
    from runner.readback.podlogs import PodLogs

DESCRIPTION = ("Merge the logs of a run's shards (pods of an Indexed Job, or processes) into one output: "
               "the same interval lines and JSON summary as one process, counts added, histograms merged.")


def arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("files", nargs="*", metavar="FILE",
                        help="shards' logs (kubectl logs --prefix output, or one file per shard); none or - for stdin; "
                             "or the run's shard records in a resultsStore: STORE?run=NAME[&job=JOB]")
    parser.add_argument("--junit", metavar="FILE", default="",
                        help="also write the merged run's verdict to FILE as JUnit XML, for CI (as a run's junit "
                             "setting does)")


def main(args: argparse.Namespace) -> int:
    # Here, not above: `--help` builds this command's parser without loading a run's parts.
    from runner.commands.execute import PROG, junit_reporter, reporters_for
    from runner.commands.outputs import OUTPUTS
    from runner.config.files import check_output
    from runner.config.storeurl import is_store_url
    from runner.readback.podlogs import read_pods
    from runner.report.outcome import ExitCode
    from runner.report.verdict import Verdict
    from runner.stats.merge import merge_shards

    if args.junit:
        check_output(args.junit, "junit")  # before reading the logs: a bad path is said first, in one line
    stores = [path for path in args.files if is_store_url(path)]
    if stores and len(args.files) > 1:
        raise UsageError("merge: a store's run is merged alone: soak merge STORE?run=NAME, without files")
    found = _stored(stores[0]) if stores else read_pods((path, _read_text(path)) for path in args.files or ["-"])
    for note in found.notes:  # they quote the logs (pods' names, sources), which anyone may have written
        print(f"{PROG} merge: {printable(note)}", file=sys.stderr)
    if not found.shards:
        raise UsageError("merge: no shard's summary found in the input: nothing to merge")
    merged = merge_shards(found.shards, found.expected, found.incomplete)
    for note in merged.notes:
        print(f"{PROG} merge: {printable(note)}", file=sys.stderr)
    verdict = Verdict.for_settings(merged.info.settings, sys.stdout)  # the run's thresholds, on the whole run
    if verdict is not None:  # a stop it asks for (abortOnThreshold, stopAtBrokenRule) has nothing to stop:
        verdict.bind_stop(_finished)  # the shards stopped themselves; by default it would SIGTERM this process
    # Last, as in a run: the merged run's exit code (a shard stopped by a signal, no response, ...) and its
    # line; a shard's share unaccounted for fails it too (its line said so), as no verdict can pass it.
    missing = [] if merged.complete else [EXIT_SHARD_MISSING]
    outcome = ExitCode(lambda line: print(f"{PROG} merge: {line}", file=sys.stderr), verdict, also=missing,
                       output_lost=lambda: OUTPUTS.failed)
    reporters = [*reporters_for(merged.info.settings, merged.info.model, verdict), outcome]
    junit = junit_reporter(args.junit, verdict, outcome)
    if junit is not None:
        reporters.append(junit)  # after the exit code: its file says which codes applied
    for reporter in reporters:
        reporter.start(merged.info)
    for interval in merged.intervals:  # merged one at a time, as the reporters take them
        for reporter in reporters:
            reporter.interval(merged.info, interval)
    summary = merged.summary()
    for reporter in reporters:
        reporter.finish(summary)
    return outcome.code


def _finished(reason: str) -> None:
    """The merged run's stop: it has ended already, each shard where its own verdict stopped it."""


def _stored(text: str) -> PodLogs:
    """The shards' records of the run a store's URL names (?run=, and ?job= unless it is soak), as read_pods
    reads logs."""
    from runner.config.schema import defaults
    from runner.store.backends import StoreError
    from runner.store.merging import read_shards
    from runner.store.runs import open_selection, reading

    store, wanted = open_selection(text)
    if wanted.run is None:
        raise UsageError(f"merge: {text}: name the run whose shards to merge: ?run=NAME (and &job=JOB unless it is "
                         "soak)")
    try:
        return read_shards(store, wanted.job or str(defaults()["pushgatewayJob"]), wanted.run)
    except StoreError as e:
        raise reading(e, wanted.url) from None


def _read_text(path: str) -> str:
    return read_log(path).decode("utf-8", errors="replace")  # a device or a FIFO is refused, in one line
