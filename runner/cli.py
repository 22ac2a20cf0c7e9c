"""The command line: parse arguments, wire the parts together, map failures to exit codes.

    soak [run] [--config FILE] [--urls FILE] [--<setting> VALUE ...] [URL | @FILE ...]
    soak demo [--<setting> VALUE ...]
    soak validate [--config FILE] [--urls FILE] [--<setting> VALUE ...] [URL | @FILE ...]
    soak bench [-n N] [-c C] [-t SECONDS] [-k] [-H 'Name: value'] [-p FILE] [-T TYPE] [-s SECONDS]
               [-m METHOD] [--config FILE] [--<setting> VALUE ...] URL
    soak compare [--latencyUnit UNIT] [--assumeUnit UNIT] FILE FILE [FILE ...]
    soak plot FILE -o OUT.png|OUT.svg [--width PIXELS] [--height PIXELS] [--assumeUnit UNIT]

Every setting in the schema is a flag of the same name; flags win over the config file.
Nothing here measures or formats: it only chooses parts and connects them.
"""

from __future__ import annotations

import argparse
import difflib
import importlib
import os
import sys
import textwrap
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TextIO

from runner import __version__
from runner.commands.outputs import Outputs
from runner.config import abflags
from runner.config.jsonfile import read_config_file
from runner.config.schema import ValidationError, schema, settings_names, validate
from runner.config.settings import Settings, merge, settings_from
from runner.config.urls import load_url_file, urls_from_arguments
from runner.core.errors import EXIT_OK, EXIT_PROXY_NOT_READY, EXIT_USAGE, EXIT_WORKER_FAILED, UsageError
from runner.load.request import build_requests
from runner.load.shards import Shard, check_split, shard_of
from runner.load.tls import INSECURE_WARNING
from runner.readback.podlogs import read_pods
from runner.report.abreport import AbReporter
from runner.report.abreport import report as ab_report
from runner.report.base import Reporter
from runner.report.csvreport import CsvReporter, check_csv_path, open_csv
from runner.report.plan import describe
from runner.report.slowcooker import SlowCookerReporter
from runner.report.summary import JsonSummaryReporter
from runner.report.verdict import Verdict
from runner.run import launch, workers
from runner.run.demo_target import start_target, stop_target
from runner.run.linkerd import proxy_lifecycle
from runner.stats.merge import merge_shards

if TYPE_CHECKING:
    from runner.metrics.collector import Metrics

PROG = "soak"
OUTPUTS = Outputs()  # stdout, stderr and their failures, for the whole process (see outputs.py)

# `soak demo` runs a few seconds of the default shape against the built-in target.
DEMO_LAYER = {"qps": 100, "concurrency": 5, "interval": "1s", "iterations": 5}

@dataclass(frozen=True)
class Command:
    """A subcommand: what it does (for --help), its arguments, and the function that runs it."""

    description: str
    arguments: Callable[[argparse.ArgumentParser], None]
    main: Callable[[argparse.Namespace], int]


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of `soak` and `python -m runner`; returns the exit code."""
    OUTPUTS.install()  # first: fds 0-2 open, and every write failure handled by one policy
    argv = list(sys.argv[1:] if argv is None else argv)
    name = argv.pop(0) if argv and argv[0] in COMMANDS else "run"
    command = COMMANDS[name]
    _line_buffered(sys.stdout)
    try:
        args = _parser(name, command).parse_args(argv)
        code = command.main(args)
    except UsageError as e:
        print(f"{PROG}: {e}", file=sys.stderr)
        code = EXIT_USAGE
    except KeyboardInterrupt:
        code = 130
    sys.stdout.flush()  # what is still buffered is written now, so a failure counts in the exit code
    return OUTPUTS.exit_code(code)


def _run(args: argparse.Namespace) -> int:
    settings = _settings(args)
    urls, source = _urls(args)
    return _soak(settings, urls, source)


def _demo(args: argparse.Namespace) -> int:
    settings = settings_from(merge(DEMO_LAYER, _flags_layer(args)))
    child, url = start_target()
    try:
        return _soak(settings, [url], None)
    finally:
        stop_target(child)


def _validate(args: argparse.Namespace) -> int:
    settings = _settings(args)
    urls, source = _urls(args)
    _checked(settings, urls)  # what a run would refuse before sending, validate refuses too
    if args.config:
        print(f"{args.config}: valid")
    if source:
        print(f"{source}: {len(urls)} URL{'s' if len(urls) != 1 else ''}")
    for line in describe(settings, urls, os.environ):
        print(line)
    return EXIT_OK


def _bench(args: argparse.Namespace) -> int:
    """`soak bench`: ab's flags over ab's defaults, then the config file and --<setting> flags."""
    file_layer = read_config_file(args.config) if args.config is not None else {}
    settings = settings_from(merge(abflags.BENCH_LAYER, file_layer, _flags_layer(args), abflags.layer(args)))
    if settings.pace.total_requests and settings.pace.concurrency > settings.pace.total_requests:
        raise UsageError(f"-c: {settings.pace.concurrency} is not allowed; must be at most the number of requests "
                         f"(-n {settings.pace.total_requests}), as in ab")
    urls, source = _urls(args)
    return _soak(settings, urls, source)


def _checked(settings: Settings, urls: list[str]) -> Shard:
    """Everything a run refuses before it sends anything (and so `validate` too); this process's part."""
    _check_bench_urls(settings, urls)
    build_requests(settings, urls)  # bad headers or body files stop here, before any process starts
    shard = shard_of(settings.split.shards, settings.split.shard, settings.split.workers)
    check_split(shard, settings.pace.concurrency, settings.pace.total_requests,
                settings.pace.max_in_flight if settings.pace.open_model else None,
                settings.report.no_latency_summary)
    if settings.pace.bench and not shard.alone:
        raise UsageError("mode: bench runs in one process; shards and workers split soaks only")
    launch.transport_for(settings)  # TLS files that cannot be used stop here too
    if settings.report.report_latencies_csv:
        check_csv_path(settings.report.report_latencies_csv)  # opened (and emptied) only by a run, later
    return shard


def _soak(settings: Settings, urls: list[str], source: str | None) -> int:
    """Run one soak (or bench) with the standard reporters; exit 0 when it ran to its end.

    Split over local worker processes when `workers` asks for it; as one shard of a run
    split over pods when `shards` does.
    """
    shard = _checked(settings, urls)
    if settings.client.insecure:
        _say(INSECURE_WARNING)
    verdict = Verdict.for_settings(settings, sys.stdout)  # thresholds: judged as the run goes; exit code 3
    reporters = [OUTPUTS.watch(), *_reporters(settings, verdict)]  # the watch first: stdout's reader may leave at once
    metrics = _metrics(settings, urls, verdict)  # metricAddr is listening before any load is sent
    if metrics is not None:
        reporters.append(metrics.reporter)
    with proxy_lifecycle(settings, _say) as proxy_ready:  # linkerdAwait, linkerdShutdown
        if not proxy_ready:
            return EXIT_PROXY_NOT_READY
        if settings.split.workers > 1:
            summary = workers.run(settings, urls, source, reporters, shard.pod(), metrics.workers if metrics else None)
            if summary.failed_workers:
                return EXIT_WORKER_FAILED
        else:
            launch.run(settings, urls, source, reporters, shard, tap=metrics.tap if metrics else None)
    return verdict.exit_code if verdict is not None else EXIT_OK


def _metrics(settings: Settings, urls: list[str], verdict: Verdict | None) -> Metrics | None:
    """The run's Prometheus metrics, when the settings ask for them (prometheus_client loads only then)."""
    if not (settings.metrics.addr or settings.metrics.pushgateway):
        return None
    from runner.metrics.collector import Metrics

    return Metrics(settings, urls, verdict, sys.stderr)


def _say(line: str) -> None:
    """A line about the run itself, on stderr beside the failures, prefixed like an error line."""
    print(f"{PROG}: {line}", file=sys.stderr)


def _merge(args: argparse.Namespace) -> int:
    """`soak merge`: the shards' logs in, one run's output out, as if one process had run it all."""
    found = read_pods((path, _read_text(path)) for path in args.files or ["-"])
    for note in found.notes:
        print(f"{PROG} merge: {note}", file=sys.stderr)
    if not found.shards:
        raise UsageError("merge: no shard's summary found in the input: nothing to merge")
    merged = merge_shards(found.shards, found.expected, found.incomplete)
    for note in merged.notes:
        print(f"{PROG} merge: {note}", file=sys.stderr)
    verdict = Verdict.for_settings(merged.info.settings, sys.stdout)  # the run's thresholds, on the whole run
    reporters = _reporters(merged.info.settings, verdict)
    for reporter in reporters:
        reporter.start(merged.info)
    for interval in merged.intervals:
        for reporter in reporters:
            reporter.interval(merged.info, interval)
    for reporter in reporters:
        reporter.finish(merged.summary)
    return verdict.exit_code if verdict is not None else EXIT_OK


def _merge_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("files", nargs="*", metavar="FILE",
                        help="shards' logs (kubectl logs --prefix output, or one file per shard); none or - for stdin")


def _read_text(path: str) -> str:
    try:
        if path == "-":
            return sys.stdin.buffer.read().decode("utf-8", errors="replace")
        with open(path, encoding="utf-8", errors="replace") as f:
            return f.read()
    except OSError as e:
        raise UsageError(f"{path}: {e.strerror or e}") from None


def _reporters(settings: Settings, verdict: Verdict | None = None) -> list[Reporter]:
    """A soak prints slow_cooker's lines, a bench ab's; then the thresholds' verdict; both end with the JSON summary."""
    reporters: list[Reporter]
    judged: list[Reporter] = [verdict] if verdict is not None else []
    sections = [verdict.section] if verdict is not None else []
    if settings.pace.bench:
        reporters = [
            AbReporter(sys.stdout, sys.stderr, settings.pace.total_requests),
            *judged,
            JsonSummaryReporter(sys.stdout, before=ab_report, with_json=not settings.report.no_latency_summary,
                                sections=sections),
        ]
    else:
        reporters = [SlowCookerReporter(sys.stdout, sys.stderr), *judged]
        if not settings.report.no_latency_summary:
            reporters.append(JsonSummaryReporter(sys.stdout, sections=sections))
    if settings.report.report_latencies_csv:
        path = settings.report.report_latencies_csv
        reporters.append(CsvReporter(open_csv(path), f"reportLatenciesCSV: {path}", OUTPUTS.failure))
    return reporters


def _check_bench_urls(settings: Settings, urls: list[str]) -> None:
    """A bench measures one URL, as ab does: its report has one document to describe."""
    if settings.pace.bench and len(urls) != 1:
        raise UsageError(f"bench mode takes exactly one URL, as ab does; got {len(urls)}")


def _settings(args: argparse.Namespace) -> Settings:
    file_layer = read_config_file(args.config) if args.config is not None else {}
    return settings_from(merge(file_layer, _flags_layer(args)))


def _urls(args: argparse.Namespace) -> tuple[list[str], str | None]:
    """The URL list and the file it came from, from --urls or the arguments."""
    if args.urls and args.url:
        raise UsageError("give URLs either as arguments or with --urls, not both")
    if args.urls:
        return load_url_file(args.urls), args.urls
    if not args.url:
        raise UsageError("no URL: give one or more as arguments, @FILE for a list, or --urls FILE")
    sources = [a[1:] for a in args.url if a.startswith("@")]
    return urls_from_arguments(args.url), (sources[0] if len(sources) == 1 and len(args.url) == 1 else None)


def _flags_layer(args: argparse.Namespace) -> dict[str, Any]:
    """The settings given as flags, validated, as a config layer."""
    given = vars(args)
    layer = {name: given[name] for name in settings_names() if name in given}
    headers = {**_headers(given.get("header", [])), **_env_headers(given.get("headerFromEnv", []))}
    if headers:
        layer["headers"] = headers
    if isinstance(layer.get("body"), str) and layer["body"].startswith("@"):
        layer["body"] = {"file": layer["body"][1:]}
    validate(layer, _flag_for)
    return layer


def _flag_for(error: ValidationError) -> str:
    """The flag a bad value came from."""
    if not error.path:
        given = error.instance if isinstance(error.instance, dict) else {}
        names = [n for n in ("iterations", "duration") if n in given]
        return " and ".join(f"--{n}" for n in names) or "flags"
    if error.path[0] == "headers" and len(error.path) > 2:  # headers.NAME.fromEnv: from --headerFromEnv
        return "--headerFromEnv"
    return {"headers": "--header", "body": "--body"}.get(str(error.path[0]), f"--{error.path[0]}")


def _headers(values: list[str]) -> dict[str, str]:
    headers = {}
    for value in values:
        name, colon, text = value.partition(":")
        if not colon or not name.strip():
            raise UsageError(f'--header: "{value}" is not allowed; must be "Name: value"')
        headers[name.strip()] = text.strip()
    return headers


def _env_headers(values: list[str]) -> dict[str, dict[str, str]]:
    headers = {}
    for value in values:
        name, equals, var = value.partition("=")
        if not equals or not name or not var:
            raise UsageError(f'--headerFromEnv: "{value}" is not allowed; must be "Name=VARIABLE"')
        headers[name] = {"fromEnv": var}
    return headers


class _Parser(argparse.ArgumentParser):
    """argparse, but a usage error is one line and exit code 2, like every other error."""

    def error(self, message: str) -> Any:
        raise UsageError(f"{message}{self._suggestion(message)} (see {self.prog} --help)")

    def _suggestion(self, message: str) -> str:
        """For a mistyped flag, the flag it most likely meant."""
        if not message.startswith("unrecognized arguments:"):
            return ""
        flags = [f for action in self._actions for f in action.option_strings if f.startswith("--")]
        for word in message.split(":", 1)[1].split():
            close = difflib.get_close_matches(word.split("=")[0], flags, n=1, cutoff=0.7)
            if close:
                return f" (did you mean {close[0]}?)"
        return ""


def _parser(name: str, command: Command) -> argparse.ArgumentParser:
    prog = PROG if name == "run" else f"{PROG} {name}"
    # No abbreviations: `--conf` must not quietly mean --config in a manifest or a script.
    parser = _Parser(prog=prog, description=textwrap.fill(command.description, 79), allow_abbrev=False,
                     epilog=_other_commands() if name == "run" else None,
                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action="version", version=f"{PROG} {__version__}")
    command.arguments(parser)
    return parser


def _other_commands() -> str:
    """`soak --help`'s list of the other commands, each with the first sentence of what it does."""
    lines = ["other commands (each has --help):"]
    for name, command in COMMANDS.items():
        if name != "run":
            lines.append(f"  {PROG} {name:<9} {command.description.split(': ')[0].split('. ')[0].rstrip('.')}")
    return "\n".join(lines)


def _soak_arguments(parser: argparse.ArgumentParser) -> None:
    """Where settings and URLs come from, then every setting as a flag."""
    parser.add_argument("--config", metavar="FILE", help="configuration.json to read settings from")
    parser.add_argument("--urls", metavar="FILE", help="URL list: plain, one per line, or the ConfigMap YAML")
    parser.add_argument("url", nargs="*", metavar="URL", help="target URL, or @FILE for a URL list")
    _setting_arguments(parser)


def _bench_arguments(parser: argparse.ArgumentParser) -> None:
    """ab's own flags first, then where settings and URLs come from, then every setting."""
    abflags.add_arguments(parser)
    _soak_arguments(parser)


def _setting_arguments(parser: argparse.ArgumentParser) -> None:
    """One flag per schema setting, named as in configuration.json."""
    group = parser.add_argument_group("settings (each overrides the config file)")
    props = schema()["properties"]
    for name in settings_names():
        spec = props[name]
        help_text = spec["description"] + (f" Default: {_default_text(spec['default'])}." if "default" in spec else "")
        help_text = help_text.replace("%", "%%")
        if name == "headers":
            group.add_argument("-H", "--header", action="append", default=argparse.SUPPRESS, metavar="'NAME: VALUE'",
                               help=help_text)
            group.add_argument("--headerFromEnv", action="append", default=argparse.SUPPRESS, metavar="NAME=VAR",
                               help="A header whose value is the environment variable VAR (never printed).")
        elif name == "body":
            group.add_argument("--body", "--data", dest="body", default=argparse.SUPPRESS, metavar="TEXT|@FILE",
                               help=help_text)
        elif spec.get("type") == "boolean":
            group.add_argument(f"--{name}", action=argparse.BooleanOptionalAction, default=argparse.SUPPRESS,
                               help=help_text)
        elif spec.get("type") == "array":  # repeatable, and comma-separated: --thresholds 'p99 < 50ms, goal% >= 99'
            group.add_argument(f"--{name}", action="extend", type=_items, default=argparse.SUPPRESS,
                               metavar="'RULE[, RULE ...]'" if spec["items"].get("format") == "threshold"
                               else "'ITEM[, ITEM ...]'", help=help_text)
        else:
            group.add_argument(f"--{name}", type=_typed(spec), default=argparse.SUPPRESS, metavar=_metavar(spec),
                               help=help_text)


def _typed(spec: dict[str, Any]) -> Any:
    """Convert a flag's text to the schema's type where it can; the schema judges the rest."""
    kind = spec.get("type")

    def convert(text: str) -> Any:
        try:
            if kind == "integer":
                return int(text)
            if kind == "number":
                return float(text) if any(c in text for c in ".eE") or text.lower() in ("inf", "nan") else int(text)
        except ValueError:
            pass
        return text

    return convert


def _items(text: str) -> list[str]:
    """A list flag's value: its comma-separated items; '' for an empty list."""
    return [item.strip() for item in text.split(",") if item.strip()]


def _metavar(spec: dict[str, Any]) -> str:
    if "enum" in spec:
        return "{" + ",".join(spec["enum"]) + "}"
    if spec.get("format") == "positive-duration":
        return "DURATION"
    return {"integer": "N", "number": "X"}.get(spec.get("type", ""), "TEXT")


def _default_text(value: Any) -> str:
    return repr(value) if value == "" else str(value).lower() if isinstance(value, bool) else str(value)


def _deferred(module: str, name: str) -> Callable[..., Any]:
    """A command's function, imported when the command runs: a soak need not load the reports."""

    def call(*args: Any) -> Any:
        return getattr(importlib.import_module(module), name)(*args)

    return call


COMMANDS: dict[str, Command] = {
    "run": Command(
        "Run a soak: send a steady rate of HTTP requests, print slow_cooker-style lines per interval, "
        "then a JSON summary.",
        _soak_arguments,
        _run,
    ),
    "demo": Command(
        "Start a built-in HTTP target on a free loopback port and run a short soak against it.",
        _setting_arguments,
        _demo,
    ),
    "validate": Command(
        "Check the configuration and URL list and print what the run would do, without sending anything.",
        _soak_arguments,
        _validate,
    ),
    "bench": Command(
        "Benchmark one URL like ab -n N -c C: each client sends its next request as soon as the last is "
        "answered, with no rate limit; print ab's report, then the JSON summary.",
        _bench_arguments,
        _bench,
    ),
    "merge": Command(
        "Merge the logs of a run's shards (pods of an Indexed Job, or processes) into one output: "
        "the same interval lines and JSON summary as one process, counts added, histograms merged.",
        _merge_arguments,
        _merge,
    ),
    "compare": Command(
        "Compare finished runs side by side, each file a column, with its change in percent against the first: "
        "JSON summaries, kubectl logs as saved, or slow_cooker logs.",
        _deferred("runner.commands.compare", "arguments"),
        _deferred("runner.commands.compare", "main"),
    ),
    "plot": Command(
        "Draw a run over time as a PNG or SVG: latency percentiles per interval above, goal% and errors below.",
        _deferred("runner.commands.plot", "arguments"),
        _deferred("runner.commands.plot", "main"),
    ),
}


def _line_buffered(stream: TextIO) -> None:
    """Each line reaches `kubectl logs -f` as it is printed, not when a buffer fills."""
    reconfigure = getattr(stream, "reconfigure", None)
    if reconfigure is not None:
        reconfigure(line_buffering=True)


