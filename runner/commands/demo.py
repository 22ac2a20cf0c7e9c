"""`soak demo`: a few seconds of the default shape against a built-in target on loopback."""

from __future__ import annotations

import argparse

from runner.config.flags import add_setting_arguments, settings_of

USAGE = "%(prog)s [--SETTING VALUE ...]"
DESCRIPTION = "Start a built-in HTTP target on a free loopback port and run a short soak against it."

# The demo's own defaults, under any flag: the default rate and clients, for five 1 s intervals.
DEMO_LAYER = {"qps": 100, "concurrency": 5, "interval": "1s", "iterations": 5}


def arguments(parser: argparse.ArgumentParser) -> None:
    add_setting_arguments(parser, DEMO_LAYER)


def main(args: argparse.Namespace) -> int:
    # Here, not above: `--help` builds this command's parser without loading a run's parts.
    from runner.commands.execute import execute
    from runner.run.demo_target import start_target, stop_target

    settings = settings_of(args, DEMO_LAYER)
    child, url = start_target()
    try:
        return execute(settings, [url], None)
    finally:
        stop_target(child)
