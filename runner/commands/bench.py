"""`soak bench`: ab's benchmark, `ab -n N -c C` style, with ab's flags and ab's report."""

from __future__ import annotations

import argparse

from runner.config import abflags
from runner.config.flags import add_source_arguments, settings_of, urls_of

USAGE = ("%(prog)s [-n requests] [-c concurrency] [-t timelimit] [-k] [-H 'NAME: VALUE'] [-p postfile]\n"
         "                  [-T content-type] [-s timeout] [-m method] [--config FILE] [--SETTING VALUE ...] URL")
DESCRIPTION = ("Benchmark one URL like ab -n N -c C: each client sends its next request as soon as the last is "
               "answered, with no rate limit; print ab's report, then the JSON summary. With --workers N the "
               "clients, -n and -t are split over N local processes (up to N cores), and the report is theirs "
               "merged, as one process would print it.")


def arguments(parser: argparse.ArgumentParser) -> None:
    """ab's own flags first (-H among them), then where settings and URLs come from, then the
    settings a bench has a use for (abflags.BENCH_HIDES: the others are taken, not offered)."""
    ab = abflags.add_arguments(parser)
    add_source_arguments(parser, abflags.BENCH_LAYER, hidden=abflags.BENCH_HIDES, placed={"headers": ab})


def main(args: argparse.Namespace) -> int:
    """ab's flags over ab's defaults, the config file and the --<setting> flags."""
    # Here, not above: `--help` builds this command's parser without loading a run's parts.
    from runner.commands.execute import execute

    settings = settings_of(args, abflags.BENCH_LAYER, above=(abflags.layer(args),))
    urls, source = urls_of(args)
    return execute(settings, urls, source)
