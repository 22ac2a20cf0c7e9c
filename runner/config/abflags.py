"""ab's command line for `soak bench`: its flags, its defaults, and the config layer they make.

`soak bench -n 100000 -c 100 -k URL` should read like the ab command in the seed, so the
flags are ab's own; each becomes a setting of the same schema as everything else, and a bad
value is refused in one line naming the ab flag it came from.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

from runner.config.files import BODY_LIMIT, read_bounded
from runner.config.schema import validate
from runner.core.errors import UsageError
from runner.core.numbers import decimal_number, whole_number

# `soak bench` starts from ab's defaults: one request from one client, a new connection per
# request (until -k), a 30 s timeout, no time limit. There are no interval lines to print, so
# the summary's intervalStats come every second, a throughput curve of the run.
BENCH_LAYER = {"mode": "bench", "totalRequests": 1, "concurrency": 1, "iterations": 0, "interval": "1s",
               "timeout": "30s", "noReuse": True}
AB_TIME_LIMIT_REQUESTS = 50_000  # ab's -n when -t is given without it
# The setting each of ab's flags sets, to name the flag when its value is refused.
AB_FLAGS = {"totalRequests": "-n", "concurrency": "-c", "duration": "-t", "noReuse": "-k", "body": "-p",
            "headers": "-T", "timeout": "-s", "method": "-m"}
# Settings `soak bench --help` does not offer: those ab's flags set (headers stay, as -H is ab's
# too), those a bench has no use for (no rate to pace, ramp, warm up or search: mode is its own),
# and the split over pods, which a bench refuses (local workers split it). It still takes them,
# as a config file may hold them: a bench ignores those with no use, and refuses the rest in one line.
BENCH_HIDES = frozenset({*AB_FLAGS.keys() - {"headers"}, "mode", "qps", "stages", "warmup", "loadModel",
                         "maxInFlight", "precisePacing", "stopAtBrokenRule", "shards", "shard",
                         "resultsMergeWait"})


def layer(args: argparse.Namespace) -> dict[str, Any]:
    """ab's flags as a config layer, validated, so a bad value is one line naming the ab flag."""
    layer: dict[str, Any] = {"mode": "bench"}
    if args.ab_t is not None:
        layer["duration"] = args.ab_t
        layer["totalRequests"] = AB_TIME_LIMIT_REQUESTS
    if args.ab_n is not None:
        layer["totalRequests"] = args.ab_n
    if args.ab_c is not None:
        layer["concurrency"] = args.ab_c
    if args.ab_k:
        layer["noReuse"] = False
    if args.ab_s is not None:
        layer["timeout"] = args.ab_s
    if args.ab_p is not None:
        _check_readable(args.ab_p)
        layer["body"] = {"file": args.ab_p}
        layer["method"] = "POST"
    if args.ab_m is not None:
        layer["method"] = args.ab_m
    content_type = args.ab_T or ("text/plain" if args.ab_p is not None else None)  # ab's default for -p
    given = {value.partition(":")[0].strip().lower() for value in getattr(args, "header", [])}
    if content_type and (args.ab_T or "content-type" not in given):
        layer["headers"] = {"Content-Type": content_type}
    validate(layer, lambda error: AB_FLAGS.get(str(error.path[0]), "flags") if error.path else "flags")
    return layer


def _check_readable(path: str) -> None:
    """-p's file must be readable now (a file that ends, within the body's bound), so the error
    names -p and nothing is sent."""
    try:
        read_bounded(path, BODY_LIMIT, "a body file")
    except UsageError as e:
        raise UsageError(f"-p: {e}") from None


def add_arguments(parser: argparse.ArgumentParser) -> Any:
    """ab's own flags, so `soak bench -n 1000 -c 10 -k URL` reads as ab does; their group, for -H to join."""
    ab = parser.add_argument_group("ab's options")
    ab.add_argument("-n", dest="ab_n", type=_positive(whole_number, "-n", "a whole number"), metavar="requests",
                    help="Number of requests to perform (totalRequests). Default: 1, or 50000 with -t.")
    ab.add_argument("-c", dest="ab_c", type=_integer, metavar="concurrency",
                    help="Number of multiple requests to make at a time (concurrency). Default: 1.")
    ab.add_argument("-t", dest="ab_t", type=_seconds("-t"), metavar="timelimit",
                    help="Seconds to max. spend on benchmarking (duration); implies -n 50000.")
    ab.add_argument("-k", dest="ab_k", action="store_true",
                    help="Use HTTP KeepAlive: one connection per client. Without it, a new connection per request.")
    ab.add_argument("-p", dest="ab_p", metavar="postfile", help="File containing data to POST (body); implies POST.")
    ab.add_argument("-T", dest="ab_T", metavar="content-type",
                    help="Content-Type header for the body. Default with -p: text/plain.")
    ab.add_argument("-s", dest="ab_s", type=_seconds("-s"), metavar="timeout",
                    help="Seconds to wait for each response (timeout). Default: 30.")
    ab.add_argument("-m", dest="ab_m", metavar="method", help="HTTP method (method).")
    return ab


def _positive(kind: Callable[[str], Any], flag: str, words: str) -> Callable[[str], Any]:
    """An argparse type: a number of `kind` greater than 0, refused in the schema errors' words."""

    def convert(text: str) -> Any:
        value = kind(text)
        if value is None:
            raise UsageError(f'{flag}: "{text}" is not allowed; must be {words} greater than 0')
        if not value > 0:
            raise UsageError(f"{flag}: {text} is not allowed; must be {words} greater than 0")
        return value

    return convert


def _seconds(flag: str) -> Callable[[str], str]:
    """ab's seconds (-t, -s) as a duration setting: `2` becomes `2s`."""

    def convert(text: str) -> str:
        seconds = float(_positive(decimal_number, flag, "a number of seconds")(text))
        return f"{seconds:.9f}".rstrip("0").rstrip(".") + "s"

    return convert


def _integer(text: str) -> int | str:
    """A whole number where the text is one (in ASCII digits); otherwise the text, for the schema to refuse in its
    words."""
    number = whole_number(text)
    return text if number is None else number
