"""`soak [run]`: a soak from configuration.json, the URL list and flags."""

from __future__ import annotations

import argparse

from runner.config.flags import add_source_arguments, settings_of, urls_of

USAGE = "%(prog)s [run] [--config FILE] [--urls FILE] [--SETTING VALUE ...] [URL | @FILE ...]"
DESCRIPTION = ("Run a soak: send a steady rate of HTTP requests, print slow_cooker-style lines per interval, "
               "then a JSON summary.")


def arguments(parser: argparse.ArgumentParser) -> None:
    add_source_arguments(parser)


def main(args: argparse.Namespace) -> int:
    # Here, not above: `--help` builds this command's parser without loading a run's parts.
    from runner.commands.execute import execute

    urls, source = urls_of(args)
    return execute(settings_of(args), urls, source)
