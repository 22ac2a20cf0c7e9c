"""Every setting as a flag: the arguments argparse is given, and the config layer its answers make.

Each setting in the schema is a flag of the same name (`--qps`, `--loadModel`), typed and
explained from the schema, so the command line and configuration.json cannot drift apart.
Flags are one more layer over the schema's defaults and the config file, validated alone so
that an error names the flag.
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Collection, Mapping
from typing import TYPE_CHECKING, Any

from runner.config.schema import schema, settings_names, validate
from runner.core.errors import UsageError
from runner.core.numbers import decimal_number, whole_number

if TYPE_CHECKING:
    from argparse import _ArgumentGroup as ArgumentGroup  # what add_argument_group() returns

    from jsonschema import ValidationError

    from runner.config.settings import Settings
    from runner.config.targets import Targets


# How `--help` lists the settings: the few most runs set first, then the rest by what they are
# about. Every setting is in exactly one group (tests/unit/test_flags.py), so a new one cannot
# be left out of the help; docs/configuration.md has each in full, in the schema's order.
COMMON_SETTINGS = ("qps", "concurrency", "interval", "iterations", "duration", "method", "headers", "body",
                   "timeout", "thresholds")
SETTING_GROUPS = (
    ("rate and schedule", ("mode", "stages", "warmup", "totalRequests", "loadModel", "maxInFlight", "precisePacing")),
    ("requests and responses", ("host", "compress", "backendHeader", "hashValue", "hashSampleRate")),
    ("connections and client", ("noReuse", "maxRequestsPerConnection", "maxConnectionAge", "engine", "transport",
                                "http2")),
    ("TLS", ("caBundle", "insecure", "clientCert", "clientKey")),
    ("thresholds", ("intervalThresholds", "abortOnThreshold", "stopAtBrokenRule")),
    ("output", ("latencyUnit", "noLatencySummary", "reportLatenciesCSV", "junit", "terminationMessagePath")),
    ("Prometheus metrics", ("metricAddr", "pushgateway", "pushgatewayJob", "remoteWrite", "remoteWriteHeaders",
                            "remoteWriteBearerTokenFile", "otlp", "otlpHeaders")),
    ("run records", ("resultsStore", "resultsRun", "resultsMergeWait")),
    ("splitting a run over processes or pods", ("workers", "shards", "shard")),
    ("Linkerd", ("linkerdAwait", "linkerdAwaitTimeout", "linkerdAdmin", "linkerdShutdown")),
)


def add_source_arguments(parser: argparse.ArgumentParser, defaults: dict[str, Any] | None = None,
                         hidden: Collection[str] = (), placed: Mapping[str, ArgumentGroup] | None = None) -> None:
    """Where settings and URLs come from, then every setting as a flag (add_setting_arguments)."""
    parser.add_argument("--config", metavar="FILE", help="configuration.json to read settings from")
    parser.add_argument("--urls", metavar="FILE", help="URL list: plain, one per line, or the ConfigMap YAML")
    parser.add_argument("url", nargs="*", metavar="URL", help="target URL, or @FILE for a URL list")
    add_setting_arguments(parser, defaults, hidden, placed)


def add_setting_arguments(parser: argparse.ArgumentParser, defaults: dict[str, Any] | None = None,
                          hidden: Collection[str] = (), placed: Mapping[str, ArgumentGroup] | None = None) -> None:
    """One flag per schema setting, named as in configuration.json; `defaults` where a command has its own.

    `--help` lists them by COMMON_SETTINGS, then SETTING_GROUPS, except those `placed` in a group
    of the command's own and those `hidden`: settings the command has no use for (a bench's qps),
    which it still takes, as a config file may hold them, but does not offer.
    """
    props = schema()["properties"]
    groups: dict[str, ArgumentGroup] = dict(placed or {})
    for title, names in (("common settings (each overrides the config file)", COMMON_SETTINGS), *SETTING_GROUPS):
        shown = [name for name in names if name not in groups and name not in hidden]
        if shown:
            group = parser.add_argument_group(title)
            groups |= {name: group for name in shown}
    for name in settings_names():
        default = (defaults or {}).get(name, props[name].get("default"))
        _add_setting(groups.get(name, parser), name, props[name], default, shown=name in groups)


def _add_setting(group: argparse.ArgumentParser | ArgumentGroup, name: str, spec: dict[str, Any], default: Any,
                 shown: bool) -> None:
    """The flag (or flags) of one setting, its help made from the schema; none shown unless `shown`."""
    help_text = spec["description"] + (f" Default: {_default_text(default)}." if "default" in spec else "")
    help_text = help_text.replace("%", "%%")

    def helped(text: str) -> str:
        return text if shown else argparse.SUPPRESS

    if name == "headers":
        group.add_argument("-H", "--header", action="append", default=argparse.SUPPRESS, metavar="'NAME: VALUE'",
                           help=helped("A request header; repeat for more."))
        group.add_argument("--headerFromEnv", action="append", default=argparse.SUPPRESS, metavar="NAME=VAR",
                           help=helped("A header whose value is the environment variable VAR (never printed)."))
    elif name in ("remoteWriteHeaders", "otlpHeaders"):
        repeatable = spec["description"].replace("%", "%%") + " Repeatable."
        group.add_argument(f"--{name[:-1]}", dest=name, action="append", default=argparse.SUPPRESS,
                           metavar="'NAME: VALUE'", help=helped(repeatable))
    elif name == "body":
        group.add_argument("--body", "--data", dest="body", default=argparse.SUPPRESS, metavar="TEXT|@FILE",
                           help=helped("The request body: the text itself, or @FILE for a file's contents."))
    elif name == "stages":
        group.add_argument("--stages", type=_stages, default=argparse.SUPPRESS, metavar="DURATION:QPS[,...]",
                           help=helped(help_text))
    elif spec.get("type") == "boolean":
        group.add_argument(f"--{name}", action=argparse.BooleanOptionalAction, default=argparse.SUPPRESS,
                           help=helped(help_text))
    elif spec.get("type") == "array":  # repeatable, and comma-separated: --thresholds 'p99 < 50ms, goal% >= 99'
        group.add_argument(f"--{name}", action="extend", type=_items, default=argparse.SUPPRESS,
                           metavar="'RULE[, RULE ...]'" if spec["items"].get("format") == "threshold"
                           else "'ITEM[, ITEM ...]'", help=helped(help_text))
    else:
        group.add_argument(f"--{name}", type=_typed(name, spec), default=argparse.SUPPRESS, metavar=_metavar(spec),
                           help=helped(help_text))


def settings_of(args: argparse.Namespace, *below: dict[str, Any], above: tuple[dict[str, Any], ...] = ()) -> Settings:
    """The settings: schema defaults < `below` < the config file (--config) < the flags < `above`."""
    # Here, not above: a command's --help builds its flags from the schema without loading these.
    from runner.config.settings import merge, settings_from

    config = getattr(args, "config", None)
    file_layer = _config_file(config) if config is not None else {}
    return settings_from(merge(*below, file_layer, flags_layer(args), *above))


def _config_file(path: str) -> dict[str, Any]:
    """--config's layer (runner.config.jsonfile, loaded only for a run given one)."""
    from runner.config.jsonfile import read_config_file

    return read_config_file(path)


def urls_of(args: argparse.Namespace) -> tuple[Targets, str | None]:
    """The URL list (with its weights) and the file it came from, from --urls or the arguments."""
    from runner.config.urls import load_targets, targets_from_arguments

    if args.urls and args.url:
        raise UsageError("give URLs either as arguments or with --urls, not both")
    if args.urls:
        return load_targets(args.urls), args.urls
    if not args.url:
        raise UsageError("no URL: give one or more as arguments, @FILE for a list, or --urls FILE")
    sources = [a[1:] for a in args.url if a.startswith("@")]
    return targets_from_arguments(args.url), (sources[0] if len(sources) == 1 and len(args.url) == 1 else None)


def flags_layer(args: argparse.Namespace) -> dict[str, Any]:
    """The settings given as flags, validated, as a config layer."""
    given = vars(args)
    layer = {name: given[name] for name in settings_names() if name in given}
    headers = {**_headers(given.get("header", [])), **_env_headers(given.get("headerFromEnv", []))}
    if headers:
        layer["headers"] = headers
    for name in ("remoteWriteHeaders", "otlpHeaders"):
        if name in layer:
            layer[name] = _headers(layer[name], f"--{name[:-1]}")
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
    return {"headers": "--header", "body": "--body", "remoteWriteHeaders": "--remoteWriteHeader",
            "otlpHeaders": "--otlpHeader"}.get(str(error.path[0]), f"--{error.path[0]}")


def _headers(values: list[str], flag: str = "--header") -> dict[str, str]:
    headers = {}
    for value in values:
        name, colon, text = value.partition(":")
        if not colon or not name.strip():
            raise UsageError(f'{flag}: "{value}" is not allowed; must be "Name: value"')
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


def _typed(name: str, spec: dict[str, Any]) -> Any:
    """Convert a flag's text to the schema's type where it can; the schema judges the rest.

    Numbers are ASCII digits only, as in JSON: `1_000` and `١٠` (which int() reads) are refused
    with a line saying how to write them.
    """
    kind = spec.get("type")

    def convert(text: str) -> Any:
        if kind not in ("integer", "number"):
            return text
        number = whole_number(text) if kind == "integer" else decimal_number(text)
        if number is None and _python_reads(text, kind):
            raise UsageError(f'--{name}: "{text}" is not allowed; write a number in ASCII digits, without "_" or '
                             f'spaces, like {"1000" if kind == "integer" else "1000 or 0.5"}')
        return text if number is None else number

    return convert


def _python_reads(text: str, kind: str) -> bool:
    """Whether int() (for an integer) or float() would take `text` for a number: non-ASCII digits, `_`,
    spaces around it."""
    try:
        return math.isfinite(int(text) if kind == "integer" else float(text))
    except ValueError:
        return False


def _items(text: str) -> list[str]:
    """A list flag's value: its comma-separated items; '' for an empty list."""
    return [item.strip() for item in text.split(",") if item.strip()]


def _stages(text: str) -> list[dict[str, Any]]:
    """--stages 2m:100,55m:100,2m:0: each stage as configuration.json writes it (the schema judges the values)."""
    stages = []
    for item in _items(text):
        duration, colon, qps = item.partition(":")
        if not colon or not duration.strip() or not qps.strip():
            raise UsageError(f'--stages: "{item}" is not allowed; each stage must be DURATION:QPS, like '
                             f'2m:100,55m:100,2m:0')
        number = decimal_number(qps.strip())
        stages.append({"duration": duration.strip(), "qps": qps.strip() if number is None else number})
    if not stages:
        raise UsageError("--stages: no stage given; each stage must be DURATION:QPS, like 2m:100,55m:100,2m:0")
    return stages


def _metavar(spec: dict[str, Any]) -> str:
    if "enum" in spec:
        return "{" + ",".join(spec["enum"]) + "}"
    if spec.get("format") in ("positive-duration", "duration"):
        return "DURATION"
    return {"integer": "N", "number": "X"}.get(spec.get("type", ""), "TEXT")


def _default_text(value: Any) -> str:
    return repr(value) if value == "" else str(value).lower() if isinstance(value, bool) else str(value)
