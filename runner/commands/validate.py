"""`soak validate`: check the configuration and the URL list, and say what the run would do."""

from __future__ import annotations

import argparse
import os

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
    return EXIT_OK
