"""The settings in effect for a run: schema defaults < config file < command line.

Each layer is validated on its own against the schema, so an error names the file and JSON
path, or the flag, that the bad value came from. The merged result becomes a frozen
Settings with durations parsed to nanoseconds; nothing downstream reads raw JSON.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from runner.config.files import CONFIG_LIMIT, read_bounded
from runner.config.rules import Rule, rules_for
from runner.config.schema import defaults, json_path_in, settings_names, validate
from runner.core import redact
from runner.core.durations import parse_duration
from runner.core.errors import UsageError

# iterations and duration are two ways to say when to stop; a layer that names one
# replaces whichever one a lower layer chose, so `--duration 2h` overrides `iterations: 60`.
_STOP_RULES = ("iterations", "duration")


@dataclass(frozen=True)
class Settings:
    """Every setting of a run, typed, with durations in nanoseconds."""

    qps: float
    concurrency: int
    interval_ns: int
    iterations: int
    duration_ns: int | None
    total_requests: int
    method: str
    headers: dict[str, Any]
    body: str | dict[str, str]
    host: str
    timeout_ns: int
    no_reuse: bool
    compress: bool
    latency_unit: str
    hash_value: int
    hash_sample_rate: float
    no_latency_summary: bool
    report_latencies_csv: str
    thresholds: tuple[Rule, ...]  # run rules, then interval rules (thresholds.py)
    abort_on_threshold: bool
    metric_addr: str  # host:port for /metrics; "" for none
    pushgateway: str  # Pushgateway URL; "" for none
    pushgateway_job: str
    load_model: str
    max_in_flight: int
    precise_pacing: bool
    shards: int
    shard: int | None  # None: from JOB_COMPLETION_INDEX, else 0
    workers: int
    transport: str
    ca_bundle: str  # PEM file of the CAs to verify servers against; "" for certifi's
    insecure: bool  # verify nothing (a warning is printed)
    client_cert: str  # PEM file of the client certificate for mTLS; "" for none
    client_key: str  # its key, when not in client_cert's file
    http2: bool
    linkerd_await: bool  # wait for the Linkerd proxy's /ready before the first send
    linkerd_await_timeout_ns: int
    linkerd_admin: str  # host:port of the proxy's admin server
    linkerd_shutdown: bool  # POST /shutdown to the proxy when the run ends
    mode: str  # soak: paced by the schedule; bench: ab's closed loop, no rate limit
    effective: dict[str, Any]

    @property
    def open_model(self) -> bool:
        """Whether sends go out on schedule whatever is in flight: the open model, in a paced
        soak (a bench has no schedule, so loadModel and maxInFlight do not apply to it)."""
        return self.load_model == "open" and self.mode == "soak"

    @property
    def run_ns(self) -> int | None:
        """How long sending lasts by the clock, or None when only a count or a signal ends it."""
        if self.duration_ns is not None:
            return self.duration_ns
        if self.iterations:
            return self.iterations * self.interval_ns
        return None


def read_config_file(path: str) -> dict[str, Any]:
    """The validated settings in a configuration.json, without the `$schema` hint."""
    if not path.strip():  # `--config "$UNSET"` must not quietly run the defaults (100 req/s for an hour)
        raise UsageError("--config: the file name is empty")
    raw = read_bounded(path, CONFIG_LIMIT, "a configuration file")
    try:
        text = raw.decode("utf-8-sig")  # tolerate a BOM from Windows editors
    except UnicodeDecodeError as e:
        raise UsageError(f"{path}: cannot read: {e}") from None
    shape = _JsonShape.of(text)
    shape.check_bounds(path)  # before parsing: json.loads would fail on these with a traceback
    try:
        data = json.loads(text)
    except json.JSONDecodeError as e:
        raise UsageError(f"{path}: line {e.lineno}, column {e.colno}: {e.msg}") from None
    shape.check_keys(path)  # now that the text is JSON, the scan's keys are its keys
    validate(data, json_path_in(path))
    data.pop("$schema", None)
    return data


# How deep a configuration file may nest: it needs 3 levels (headers.NAME.fromEnv). json.loads
# recurses once per level, so 100,000 `[` were a RecursionError traceback.
MAX_DEPTH = 32
# The most digits a whole number may have: every setting's bound has 20 at most (hashValue).
# Python refuses to convert more than 4,300 (a ValueError traceback, from json.loads too).
MAX_DIGITS = 100

# What the scan looks at: strings (keys when a colon follows), brackets, and numbers.
_JSON_TOKEN = re.compile(r'("[^"\\]*(?:\\.[^"\\]*)*")(\s*:)?|([\[{])|([\]}])|(-?[0-9][0-9.eE+-]*)')


@dataclass
class _JsonShape:
    """What a linear scan of a JSON text finds that json.loads cannot be asked to report.

    Each problem is kept with its offset in the text, to be told as a line and column.
    """

    text: str
    too_deep: int | None = None
    long_number: tuple[int, str] | None = None
    duplicate: tuple[int, int, str] | None = None  # (offset, offset of the first, key)

    @classmethod
    def of(cls, text: str) -> _JsonShape:
        shape = cls(text)
        keys: list[dict[str, int] | None] = []  # per open bracket: an object's keys and offsets; None for a list
        for m in _JSON_TOKEN.finditer(text):
            string, colon, opening, closing, number = m.groups()
            if opening:
                keys.append({} if opening == "{" else None)
                if len(keys) > MAX_DEPTH:
                    shape.too_deep = m.start()
                    return shape  # and stop: the rest could be 100,000 more levels
            elif closing:
                if keys:
                    keys.pop()
            elif number:
                digits = number.lstrip("-")
                if digits.isdigit() and len(digits) > MAX_DIGITS and shape.long_number is None:
                    shape.long_number = (m.start(), digits)
            elif colon and keys and keys[-1] is not None and shape.duplicate is None:
                shape.duplicate = _repeated(keys[-1], string, m.start())
        return shape

    def check_bounds(self, path: str) -> None:
        """Refuse nesting and numbers beyond the bounds, naming where the first one is."""
        if self.too_deep is not None:
            raise UsageError(f"{path}: {self._where(self.too_deep)}: nested more than {MAX_DEPTH} levels deep "
                             "(a configuration needs 3)")
        if self.long_number is not None:
            offset, digits = self.long_number
            raise UsageError(f"{path}: {self._where(offset)}: a number of {len(digits)} digits is not allowed; "
                             f"numbers have at most {MAX_DIGITS}")

    def check_keys(self, path: str) -> None:
        """Refuse a key given twice in one object: JSON parsers keep one of the two, silently."""
        if self.duplicate is not None:
            offset, first, key = self.duplicate
            raise UsageError(f"{path}: {self._where(offset)}: key {json.dumps(key, ensure_ascii=False)} given twice "
                             f"(first at {self._where(first)}); only one of the two values would be used")

    def _where(self, offset: int) -> str:
        """As json.loads tells a place: lines and columns counted from 1."""
        line = self.text.count("\n", 0, offset) + 1
        column = offset - self.text.rfind("\n", 0, offset)
        return f"line {line}, column {column}"


def _repeated(keys: dict[str, int], string: str, offset: int) -> tuple[int, int, str] | None:
    """(offset, first offset, key) if the key `string` (as written, quoted) is already in `keys`; else None."""
    try:
        key = json.loads(string)  # "q\u0070s" is "qps"
    except ValueError:
        return None  # a bad escape: json.loads reports it, with its place
    if key in keys:
        return offset, keys[key], key
    keys[key] = offset
    return None


def merge(*layers: dict[str, Any]) -> dict[str, Any]:
    """Schema defaults overlaid by each layer in turn, later layers winning."""
    merged = defaults()
    for layer in layers:
        if any(rule in layer for rule in _STOP_RULES):
            for rule in _STOP_RULES:
                merged.pop(rule, None)
        for key, value in layer.items():
            # Headers add up across layers: `--header X-Debug:1` keeps the file's headers.
            merged[key] = {**merged[key], **value} if key == "headers" else value
    return merged


def settings_from(merged: dict[str, Any]) -> Settings:
    """Typed Settings from a merged, validated configuration."""
    duration = merged.get("duration")
    # int(): JSON Schema counts 5.0 as an integer, but range(5.0) and list[5.0] fail.
    return Settings(
        qps=float(merged["qps"]),
        concurrency=int(merged["concurrency"]),
        interval_ns=parse_duration(merged["interval"]),
        iterations=int(merged.get("iterations", 0)),
        duration_ns=parse_duration(duration) if duration is not None else None,
        total_requests=int(merged["totalRequests"]),
        method=merged["method"],
        headers=dict(merged["headers"]),
        body=merged["body"],
        host=merged["host"],
        timeout_ns=parse_duration(merged["timeout"]),
        no_reuse=merged["noReuse"],
        compress=merged["compress"],
        latency_unit=merged["latencyUnit"],
        hash_value=int(merged["hashValue"]),
        hash_sample_rate=float(merged["hashSampleRate"]),
        no_latency_summary=merged["noLatencySummary"],
        report_latencies_csv=merged["reportLatenciesCSV"],
        thresholds=rules_for(merged["thresholds"], merged["intervalThresholds"], merged["mode"]),
        abort_on_threshold=merged["abortOnThreshold"],
        metric_addr=merged["metricAddr"],
        pushgateway=merged["pushgateway"],
        pushgateway_job=merged["pushgatewayJob"],
        load_model=merged["loadModel"],
        max_in_flight=int(merged["maxInFlight"]),
        precise_pacing=merged["precisePacing"],
        shards=int(merged["shards"]),
        shard=int(merged["shard"]) if merged.get("shard") is not None else None,
        workers=int(merged["workers"]),
        transport=merged["transport"],
        ca_bundle=merged["caBundle"],
        insecure=merged["insecure"],
        client_cert=merged["clientCert"],
        client_key=merged["clientKey"],
        http2=_http2(merged),
        linkerd_await=merged["linkerdAwait"],
        linkerd_await_timeout_ns=parse_duration(merged["linkerdAwaitTimeout"]),
        linkerd_admin=merged["linkerdAdmin"],
        linkerd_shutdown=merged["linkerdShutdown"],
        mode=merged["mode"],
        effective=_printable(merged),
    )


def _http2(merged: dict[str, Any]) -> bool:
    """http2, refused with the fast transport rather than quietly switching clients.

    The client is part of what a soak measures (httpx adds about a millisecond to every
    latency), so a run never changes it behind the configuration's back.
    """
    if merged["http2"] and merged["transport"] == "fast":
        raise UsageError('http2: true needs "transport": "httpx" (the fast transport speaks HTTP/1.1 only)')
    return bool(merged["http2"])


def _printable(merged: dict[str, Any]) -> dict[str, Any]:
    """The configuration as it may be printed (runner/redact.py): credential header values and
    URL secrets hidden, a long or secret-looking body shown as its size."""
    shown = {name: merged[name] for name in settings_names() if name in merged}
    if isinstance(merged["body"], str):
        shown["body"] = redact.body(merged["body"])
    shown["headers"] = redact.headers(merged["headers"])
    shown["pushgateway"] = redact.url(merged["pushgateway"])
    return shown
