"""`soak bench`: ab's benchmark, `ab -n N -c C` style, with ab's flags and ab's report."""

from __future__ import annotations

import argparse

from runner.commands.execute import execute
from runner.config import abflags
from runner.config.flags import add_source_arguments, settings_of, urls_of

DESCRIPTION = ("Benchmark one URL like ab -n N -c C: each client sends its next request as soon as the last is "
               "answered, with no rate limit; print ab's report, then the JSON summary. With --workers N the "
               "clients, -n and -t are split over N local processes (up to N cores), and the report is theirs "
               "merged, as one process would print it.")


def arguments(parser: argparse.ArgumentParser) -> None:
    """ab's own flags first, then where settings and URLs come from, then every setting."""
    abflags.add_arguments(parser)
    add_source_arguments(parser)


def main(args: argparse.Namespace) -> int:
    """ab's flags over ab's defaults, the config file and the --<setting> flags."""
    settings = settings_of(args, abflags.BENCH_LAYER, above=(abflags.layer(args),))
    urls, source = urls_of(args)
    return execute(settings, urls, source)
