"""The settings in effect for a run: schema defaults < config file < command line.

Each layer is validated on its own against the schema, so an error names the file and JSON
path, or the flag, that the bad value came from. The merged result becomes a frozen
Settings with durations parsed to nanoseconds; nothing downstream reads raw JSON.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from runner.durations import parse_duration
from runner.errors import UsageError
from runner.schema import defaults, json_path_in, settings_names, validate
from runner.thresholds import Rule, rules_for

# iterations and duration are two ways to say when to stop; a layer that names one
# replaces whichever one a lower layer chose, so `--duration 2h` overrides `iterations: 60`.
_STOP_RULES = ("iterations", "duration")

# Header names that carry credentials (Authorization, Cookie, X-Api-Key, X-Auth-Token, ...):
# their literal values are printed as hidden, like fromEnv values.
_CREDENTIAL_WORDS = ("auth", "cookie", "token", "key", "secret", "password", "session")

# A literal body longer than this is printed as its size: the summary is read in logs.
_SHOWN_BODY_CHARS = 200


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
    try:
        with open(path, encoding="utf-8-sig") as f:  # tolerate a BOM from Windows editors
            text = f.read()
    except FileNotFoundError:
        raise UsageError(f"{path}: no such file") from None
    except (OSError, UnicodeDecodeError) as e:
        raise UsageError(f"{path}: cannot read: {getattr(e, 'strerror', None) or e}") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as e:
        raise UsageError(f"{path}: line {e.lineno}, column {e.colno}: {e.msg}") from None
    validate(data, json_path_in(path))
    data.pop("$schema", None)
    return data


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
    """The configuration as it may be printed: credential header values hidden, a long body elided."""
    shown = {name: merged[name] for name in settings_names() if name in merged}
    body = merged["body"]
    if isinstance(body, str) and len(body) > _SHOWN_BODY_CHARS:
        shown["body"] = f"<{len(body.encode())} bytes>"
    shown["headers"] = {
        name: ("<hidden>" if isinstance(value, str) and any(w in name.lower() for w in _CREDENTIAL_WORDS) else value)
        for name, value in merged["headers"].items()
    }
    return shown
