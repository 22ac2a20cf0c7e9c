"""`soak validate`: check the configuration and the URL list, and say what the run would do."""

from __future__ import annotations

import argparse
import os
import threading

from runner.config.flags import add_source_arguments, settings_of, urls_of
from runner.core.errors import EXIT_OK

USAGE = "%(prog)s [--config FILE] [--urls FILE] [--SETTING VALUE ...] [URL | @FILE ...]"
DESCRIPTION = "Check the configuration and URL list and print what the run would do, without sending anything."


def arguments(parser: argparse.ArgumentParser) -> None:
    add_source_arguments(parser)


def main(args: argparse.Namespace) -> int:
    # Here, not above: `--help` builds this command's parser without loading a run's parts.
    from runner.report.plan import describe, memory_line
    from runner.run.build import build
    from runner.run.memory import memory_limit

    settings = settings_of(args)
    urls, source = urls_of(args)
    parts = build(settings, urls, source)  # what a run would refuse before sending, validate refuses too
    if args.config:
        print(f"{args.config}: valid")
    if source:
        print(f"{source}: {len(urls)} URL{'s' if len(urls) != 1 else ''}")
    for line in describe(settings, urls, os.environ, parts.shard):
        print(line)
    memory = memory_line(settings.split.workers, memory_limit())  # against the limit validate runs under
    if memory is not None:
        print(memory)
    if settings.results.store:
        problem = _store_problem(settings.results.store)
        if problem:
            print(f"warning: resultsStore {settings.results.store}: {problem}: a run would still run, and say on "
                  "stderr and in its summary that its record was not stored")
    return EXIT_OK


def _store_problem(url: str) -> str:
    """What keeps the store from taking a record now (a bucket that does not exist, no answer), or "".

    A warning, not an error: the store may be made, or come back, before the run ends. An s3://
    store without its client is the run's error, as it would be the run's (exit code 2).
    """
    from runner.config.storeurl import STORE_WAIT_S, parse_store_url
    from runner.store.backends import open_store

    store = open_store(parse_store_url(url))
    found: list[str] = []
    thread = threading.Thread(target=lambda: found.append(store.check()), name="results-store", daemon=True)
    thread.start()
    thread.join(STORE_WAIT_S)
    return found[0] if found else f"no answer within {STORE_WAIT_S:g}s"
