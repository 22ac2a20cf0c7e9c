"""The settings in effect for a run: schema defaults < config file < command line.

Each layer is validated on its own against the schema, so an error names the file and JSON
path, or the flag, that the bad value came from. The merged result becomes a frozen
Settings with durations parsed to nanoseconds; nothing downstream reads raw JSON.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal

from runner.config.schema import defaults, settings_names
from runner.core import redact
from runner.core.durations import format_duration, parse_duration
from runner.core.errors import UsageError
from runner.core.lazymethods import dataclass

if TYPE_CHECKING:  # a run without thresholds does not load the rules' parser (_rules)
    from runner.config.rules import Rule

# iterations and duration are two ways to say when to stop; a layer that names one
# replaces whichever one a lower layer chose, so `--duration 2h` overrides `iterations: 60`.
_STOP_RULES = ("iterations", "duration")
_HEADERS = ("headers", "remoteWriteHeaders", "otlpHeaders")  # settings whose layers add up


Mode = Literal["soak", "bench"]  # soak: paced by the schedule; bench: ab's closed loop, no rate limit
LoadModel = Literal["closed", "open"]
TransportName = Literal["fast", "httpx"]
EngineName = Literal["auto", "native", "python"]
LatencyUnit = Literal["ms", "us", "ns"]


@dataclass(frozen=True)
class Pacing:
    """When sends are due and when sending ends: what the schedule and the engine need."""

    mode: Mode
    qps: float
    concurrency: int
    interval_ns: int
    iterations: int
    duration_ns: int | None
    total_requests: int
    load_model: LoadModel
    max_in_flight: int
    precise: bool  # precisePacing: yield until each due time instead of sleeping to it (costs a core)
    # stages: (duration ns, target req/s) each, ramped linearly from the one before (the first
    # from 0); () for the constant qps. With stages, qps is their peak (runner.load.model.ramp_of).
    stages: tuple[tuple[int, float], ...] = ()
    warmup_ns: int = 0  # warmup: how long to send before the measured run; 0 for none

    @property
    def run_ns(self) -> int | None:
        """How long sending lasts by the clock, or None when only a count or a signal ends it."""
        if self.stages:
            return sum(duration for duration, _ in self.stages)
        if self.duration_ns is not None:
            return self.duration_ns
        if self.iterations:
            return self.iterations * self.interval_ns
        return None


@dataclass(frozen=True)
class RequestSpec:
    """What every send is (runner.load.request resolves it once per URL)."""

    method: str
    headers: dict[str, Any]  # name: a literal value, or {"fromEnv": VARIABLE}
    body: str | dict[str, str]  # the text, or {"file": PATH}
    host: str  # a Host header; "" for the URL's own


@dataclass(frozen=True)
class ClientSpec:
    """Which HTTP client sends, and how (runner.load.transport.TransportOptions is made from it)."""

    transport: TransportName
    engine: EngineName  # auto: native where it can, else python (runner.run.build.engine_for)
    timeout_ns: int
    no_reuse: bool
    max_requests_per_connection: int  # 0: no limit (runner.load.transport.Lifetime)
    max_connection_age_ns: int  # 0: no limit
    compress: bool
    ca_bundle: str  # PEM file of the CAs to verify servers against; "" for certifi's
    insecure: bool  # verify nothing (a warning is printed)
    client_cert: str  # PEM file of the client certificate for mTLS; "" for none
    client_key: str  # its key, when not in client_cert's file
    http2: bool


@dataclass(frozen=True)
class ReportSpec:
    """What is measured beyond the timings, and how it is shown."""

    latency_unit: LatencyUnit
    hash_value: int  # the body hash every sampled response is checked against
    hash_sample_rate: float  # the share of responses whose body is hashed
    no_latency_summary: bool  # no JSON summary
    report_latencies_csv: str  # a CSV of the latency histogram; "" for none
    junit: str  # the verdict as JUnit XML, for CI; "" for none
    termination_message_path: str  # the verdict in a few lines, for Kubernetes; "" for none
    backend_header: str  # the response header naming the server that answered; "" for none


@dataclass(frozen=True)
class ThresholdSpec:
    """What a healthy run is, and whether to stop once it cannot be one."""

    rules: tuple[Rule, ...]  # run rules, then interval rules (runner.config.rules)
    abort: bool  # abortOnThreshold
    stop_at_broken: bool = False  # stopAtBrokenRule: the capacity search's stop at the first broken interval rule


@dataclass(frozen=True)
class MetricsSpec:
    """Prometheus and OTLP: where /metrics is served and where pushes and writes go."""

    addr: str  # host:port for /metrics; "" for none
    pushgateway: str  # Pushgateway URL; "" for none
    job: str  # the job label of every push and write (pushgatewayJob)
    remote_write: str = ""  # a remote write receiver's URL; "" for none
    remote_write_headers: tuple[tuple[str, str], ...] = ()  # (name, value) of each write's extra headers
    remote_write_token_file: str = ""  # a bearer token's file, read before each write; "" for none
    otlp: str = ""  # an OTLP/HTTP metrics receiver's URL; "" for none
    otlp_headers: tuple[tuple[str, str], ...] = ()

    @property
    def wanted(self) -> bool:
        return bool(self.addr or self.pushgateway or self.written)

    @property
    def written(self) -> bool:
        """Whether the metrics are written to a receiver (remote write, OTLP): their native histograms are kept then."""
        return bool(self.remote_write or self.otlp)


@dataclass(frozen=True)
class ResultsSpec:
    """Where the run's record goes (runner.store), and what the store knows the run by."""

    store: str  # file:///DIR or s3://BUCKET/PREFIX; "" for none
    run: str  # the run's name there, the same in every shard; "" for one made from its start
    job: str  # the name the runs of one soak share (pushgatewayJob, as in Prometheus)
    merge_wait_ns: int  # how long a finished shard waits for the others' records, to merge them

    @property
    def wanted(self) -> bool:
        return bool(self.store)


@dataclass(frozen=True)
class SplitSpec:
    """How a run is split: over pods (shards) and over local processes (workers)."""

    shards: int
    shard: int | None  # None: from JOB_COMPLETION_INDEX, else 0
    workers: int


@dataclass(frozen=True)
class LinkerdSpec:
    """The Linkerd proxy beside the runner in a meshed pod."""

    wait: bool  # linkerdAwait: wait for the proxy's /ready before the first send
    wait_timeout_ns: int
    admin: str  # host:port of the proxy's admin server
    shutdown: bool  # POST /shutdown to the proxy when the run ends


@dataclass(frozen=True)
class Settings:
    """Every setting of a run, typed, durations in nanoseconds, grouped by the part that uses
    them: each part is handed its group, not the whole."""

    pace: Pacing
    request: RequestSpec
    client: ClientSpec
    report: ReportSpec
    thresholds: ThresholdSpec
    metrics: MetricsSpec
    split: SplitSpec
    linkerd: LinkerdSpec
    effective: dict[str, Any]  # the configuration as it may be printed (secrets hidden)
    results: ResultsSpec = ResultsSpec("", "", "soak", 0)


def merge(*layers: dict[str, Any]) -> dict[str, Any]:
    """Schema defaults overlaid by each layer in turn, later layers winning."""
    merged = defaults()
    for layer in layers:
        if "stages" in layer or any(rule in layer for rule in _STOP_RULES):  # stages say when to stop too
            for rule in _STOP_RULES:
                merged.pop(rule, None)
        for key, value in layer.items():
            # Headers add up across layers: `--header X-Debug:1` keeps the file's headers.
            merged[key] = {**merged[key], **value} if key in _HEADERS else value
    return merged


def settings_from(merged: dict[str, Any]) -> Settings:
    """Typed Settings from a merged, validated configuration."""
    duration = merged.get("duration")
    stages = _stages(merged)
    _check_warmup(merged, stages)
    if merged["resultsStore"] and int(merged["shards"]) > 1 and not merged["resultsRun"]:
        raise UsageError(f"resultsRun: a run split over {merged['shards']} shards needs a name for the resultsStore, "
                         "the same in every shard, so that their records meet and are merged (the pallet's results "
                         "components pass the Job's name: --resultsRun=$(SOAK_JOB))")
    if merged["stopAtBrokenRule"] and not merged["intervalThresholds"]:
        raise UsageError("stopAtBrokenRule: true needs intervalThresholds, the rules whose first break stops the run")
    # int(): JSON Schema counts 5.0 as an integer, but range(5.0) and list[5.0] fail.
    return Settings(
        pace=Pacing(
            mode=merged["mode"],
            qps=max(q for _, q in stages) if stages else float(merged["qps"]),
            concurrency=int(merged["concurrency"]),
            interval_ns=parse_duration(merged["interval"]),
            iterations=int(merged.get("iterations", 0)),
            duration_ns=parse_duration(duration) if duration is not None else None,
            total_requests=int(merged["totalRequests"]),
            load_model=merged["loadModel"],
            max_in_flight=int(merged["maxInFlight"]),
            precise=merged["precisePacing"],
            stages=stages,
            warmup_ns=parse_duration(merged["warmup"]),
        ),
        request=RequestSpec(method=merged["method"], headers=dict(merged["headers"]), body=merged["body"],
                            host=merged["host"]),
        client=ClientSpec(
            transport=merged["transport"],
            engine=merged["engine"],
            timeout_ns=parse_duration(merged["timeout"]),
            no_reuse=merged["noReuse"],
            max_requests_per_connection=int(merged["maxRequestsPerConnection"]),
            max_connection_age_ns=parse_duration(merged["maxConnectionAge"]),
            compress=merged["compress"],
            ca_bundle=merged["caBundle"],
            insecure=merged["insecure"],
            client_cert=merged["clientCert"],
            client_key=merged["clientKey"],
            http2=bool(merged["http2"]),
        ),
        report=ReportSpec(
            latency_unit=merged["latencyUnit"],
            hash_value=int(merged["hashValue"]),
            hash_sample_rate=float(merged["hashSampleRate"]),
            no_latency_summary=merged["noLatencySummary"],
            report_latencies_csv=merged["reportLatenciesCSV"],
            junit=merged["junit"],
            termination_message_path=merged["terminationMessagePath"],
            backend_header=merged["backendHeader"],
        ),
        thresholds=ThresholdSpec(_rules(merged),
                                 merged["abortOnThreshold"], merged["stopAtBrokenRule"]),
        metrics=MetricsSpec(merged["metricAddr"], merged["pushgateway"], merged["pushgatewayJob"],
                            merged["remoteWrite"], tuple(merged["remoteWriteHeaders"].items()),
                            merged["remoteWriteBearerTokenFile"], merged["otlp"], tuple(merged["otlpHeaders"].items())),
        split=SplitSpec(int(merged["shards"]), int(merged["shard"]) if merged.get("shard") is not None else None,
                        int(merged["workers"])),
        linkerd=LinkerdSpec(merged["linkerdAwait"], parse_duration(merged["linkerdAwaitTimeout"]),
                            merged["linkerdAdmin"], merged["linkerdShutdown"]),
        effective=_printable(merged),
        results=ResultsSpec(merged["resultsStore"], merged["resultsRun"], merged["pushgatewayJob"],
                            parse_duration(merged["resultsMergeWait"])),
    )


def _rules(merged: dict[str, Any]) -> tuple[Rule, ...]:
    """The thresholds' rules, run rules first; their parser loads only for a run that states some."""
    if not merged["thresholds"] and not merged["intervalThresholds"]:
        return ()
    from runner.config.rules import rules_for

    return rules_for(merged["thresholds"], merged["intervalThresholds"], merged["mode"], merged["backendHeader"])


def _stages(merged: dict[str, Any]) -> tuple[tuple[int, float], ...]:
    """The stages as (duration ns, qps), checked against what else says how long the run is.

    The run lasts the stages' sum; iterations (times the interval) or a duration given beside
    them must say the same, or the run would have two ends. A bench has no rate to ramp.
    """
    given = merged.get("stages")
    if not given:
        return ()
    if merged["mode"] == "bench":
        raise UsageError("stages: not allowed with mode bench (a bench sends as fast as it can: no rate to ramp)")
    stages = tuple((parse_duration(stage["duration"]), float(stage["qps"])) for stage in given)
    if not any(qps > 0 for _, qps in stages):
        raise UsageError("stages: every stage's qps is 0; at least one must be above 0, or nothing is sent")
    total = sum(duration for duration, _ in stages)
    iterations, interval = int(merged.get("iterations", 0)), parse_duration(merged["interval"])
    if merged.get("duration") is not None and parse_duration(merged["duration"]) != total:
        raise UsageError(f"stages and duration: the stages last {format_duration(total)} in all, duration says "
                         f"{merged['duration']}; give one of them, or make them agree")
    if iterations and iterations * interval != total:
        made = format_duration(iterations * interval)
        raise UsageError(f"stages and iterations: the stages last {format_duration(total)} in all, iterations "
                         f"{iterations} of interval {merged['interval']} make {made}; give one of them, or make "
                         f"them agree")
    return stages


def _check_warmup(merged: dict[str, Any], stages: tuple[tuple[int, float], ...]) -> None:
    """A warm-up sends at the run's rate: a bench has none, nor a ramp that starts with a stage to 0."""
    if not parse_duration(merged["warmup"]):
        return
    if merged["mode"] == "bench":
        raise UsageError(f"warmup: {merged['warmup']} is not allowed with mode bench (a bench has no rate to warm up)")
    if stages and stages[0][1] == 0:
        raise UsageError(f"warmup: {merged['warmup']} is not allowed when the first stage's qps is 0: the warm-up "
                         f"sends at the first stage's target")


def _printable(merged: dict[str, Any]) -> dict[str, Any]:
    """The configuration as it may be printed (runner/core/redact.py): credential header values and
    URL secrets hidden, a long or secret-looking body shown as its size."""
    shown = {name: merged[name] for name in settings_names() if name in merged}
    if isinstance(merged["body"], str):
        shown["body"] = redact.body(merged["body"])
    shown["headers"] = redact.headers(merged["headers"])
    for name in ("pushgateway", "remoteWrite", "otlp"):
        shown[name] = redact.url(merged[name])
    for name in ("remoteWriteHeaders", "otlpHeaders"):
        shown[name] = redact.headers(merged[name])
    return shown
