"""OTLP/HTTP metrics: a snapshot's figures as an ExportMetricsServiceRequest (opentelemetry-proto).

The same figures as the Prometheus families, in OTLP's types: counters (and slow_cooker's
untyped requests and successes, which count) as cumulative monotonic sums, gauges as gauges,
and the latency by URL and by phase as exponential histograms (runner.metrics.native: OTLP's
scale is Prometheus' schema, its bucket j Prometheus' j + 1). The classic histograms are left
out: their figures are the exponential ones', in fixed buckets kept for Prometheus' dashboards.
Names are Prometheus' (without a counter's _total, which OTLP's Prometheus translation adds
back), so the same queries work on either path. Every data point is cumulative from the run's
start; the resource says which run of which job, and which pod of it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import (
    ExportMetricsServiceRequest,
    ExportMetricsServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, InstrumentationScope, KeyValue
from opentelemetry.proto.metrics.v1.metrics_pb2 import (
    AggregationTemporality,
    ExponentialHistogramDataPoint,
    Metric,
    NumberDataPoint,
    ResourceMetrics,
    ScopeMetrics,
)
from opentelemetry.proto.resource.v1.resource_pb2 import Resource

from runner import __version__
from runner.metrics.export import Answer
from runner.metrics.native import SCHEMA, ZERO_THRESHOLD_S, dense

if TYPE_CHECKING:
    from prometheus_client.core import Metric as Family

    from runner.metrics.export import Moment

CUMULATIVE = AggregationTemporality.AGGREGATION_TEMPORALITY_CUMULATIVE
COUNTS = ("counter", "unknown")  # families whose samples count up: sums


def request(snapshot: Moment, labels: dict[str, str], start_s: float) -> bytes:
    """The encoded request: one resource (job, pod index, run), one scope (soak), every metric."""
    at_ns, start_ns = round(snapshot.at_s * 1e9), round(start_s * 1e9)
    metrics = [m for family in snapshot.families() if (m := _metric(family, start_ns, at_ns)) is not None]
    for native in snapshot.native_histograms():
        metric = Metric(name=native.name, description=native.help, unit="s")
        metric.exponential_histogram.aggregation_temporality = CUMULATIVE
        for series_labels, h in native.series:
            offset, counts = dense(h.positive())
            point = ExponentialHistogramDataPoint(
                attributes=_attributes(series_labels), start_time_unix_nano=start_ns, time_unix_nano=at_ns,
                count=h.count, sum=h.sum_s, scale=SCHEMA, zero_count=h.zero_count, zero_threshold=ZERO_THRESHOLD_S)
            point.positive.offset = offset
            point.positive.bucket_counts.extend(counts)
            metric.exponential_histogram.data_points.append(point)
        metrics.append(metric)
    resource = Resource(attributes=_attributes({
        "service.name": labels["job"], "service.version": __version__, "soak.pod_index": labels["pod_index"],
        "soak.run": labels["run"]}))
    scope = ScopeMetrics(scope=InstrumentationScope(name="soak", version=__version__), metrics=metrics)
    message = ExportMetricsServiceRequest(resource_metrics=[ResourceMetrics(resource=resource, scope_metrics=[scope])])
    return message.SerializeToString()


def _metric(family: Family, start_ns: int, at_ns: int) -> Metric | None:
    """A sum or a gauge from a Prometheus family; None for a classic histogram."""
    if family.type == "histogram":
        return None
    metric = Metric(name=family.name, description=family.documentation, unit="s" if family.name.endswith("_seconds")
                    else "")
    if family.type in COUNTS:
        metric.sum.aggregation_temporality = CUMULATIVE
        metric.sum.is_monotonic = True
        points = metric.sum.data_points
    else:
        points = metric.gauge.data_points
    for sample in family.samples:
        if sample.name.endswith("_created"):
            continue
        points.append(NumberDataPoint(attributes=_attributes(sample.labels), start_time_unix_nano=start_ns,
                                      time_unix_nano=at_ns, as_double=float(sample.value)))
    return metric


def _attributes(labels: dict[str, str]) -> list[KeyValue]:
    return [KeyValue(key=key, value=AnyValue(string_value=value)) for key, value in labels.items()]


def rejected(answer: Answer) -> str:
    """What an accepted request's partial success says the receiver rejected; "" for nothing."""
    if not 200 <= answer.status < 300 or not answer.body:
        return ""
    response = ExportMetricsServiceResponse()
    try:
        response.ParseFromString(answer.body)
    except Exception:  # not a response of ours (a proxy's page): nothing to tell
        return ""
    partial = response.partial_success
    if not partial.rejected_data_points and not partial.error_message:
        return ""
    return (f"the receiver rejected {partial.rejected_data_points} data points"
            + (f": {partial.error_message}" if partial.error_message else ""))


def status_message(body: bytes, content_type: str) -> str:
    """A failed request's answer in words: OTLP/HTTP answers a google.rpc.Status in protobuf (its message,
    field 2, read here by hand: the message lives in googleapis-common-protos), or text."""
    if "protobuf" not in content_type:
        return " ".join(body.decode("utf-8", "replace").split())[:200]
    position = 0
    while position < len(body):
        key, position = _varint(body, position)
        field, wire = key >> 3, key & 7
        if wire == 0:
            _, position = _varint(body, position)
        elif wire == 2:
            length, position = _varint(body, position)
            if field == 2:
                return " ".join(body[position:position + length].decode("utf-8", "replace").split())[:200]
            position += length
        else:
            break
    return ""


def _varint(data: bytes, position: int) -> tuple[int, int]:
    value = shift = 0
    while position < len(data):
        byte = data[position]
        position += 1
        value |= (byte & 0x7F) << shift
        shift += 7
        if not byte & 0x80:
            break
    return value, position
