"""An OTLP/HTTP metrics receiver on a free loopback port, decoding what it is sent with opentelemetry-proto.

Debian has no OpenTelemetry Collector; this stands in for its otlp receiver's HTTP side: POST
/v1/metrics with a protobuf ExportMetricsServiceRequest, answered 200 with an (empty)
ExportMetricsServiceResponse, as the Collector answers. Each request is decoded with the
OpenTelemetry project's own generated messages (not the runner's encoder) and kept, so a test
reads back exactly what arrived. `status` makes it answer every request with another status
instead (and decode nothing), as a failing collector does.
"""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import (
    ExportMetricsServiceRequest,
    ExportMetricsServiceResponse,
)


class OtlpReceiver:
    """The receiver, serving on 127.0.0.1 from a thread of its own until stop()."""

    def __init__(self, status: int = 200) -> None:
        self.requests: list[ExportMetricsServiceRequest] = []
        self.headers: list[dict[str, str]] = []
        self.status = status
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 (http.server's name)
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                receiver.headers.append(dict(self.headers))
                if self.path != "/v1/metrics" or receiver.status != 200:
                    self.send_response(404 if self.path != "/v1/metrics" else receiver.status)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                request = ExportMetricsServiceRequest()
                request.ParseFromString(body)
                receiver.requests.append(request)
                answer = ExportMetricsServiceResponse().SerializeToString()
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

            def log_message(self, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self._server.server_port}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)

    def points(self) -> list[tuple[dict[str, str], str, Any]]:
        """Every data point received, in order: (resource attributes, metric name, point)."""
        found = []
        for request in self.requests:
            for resource in request.resource_metrics:
                attributes = {kv.key: kv.value.string_value for kv in resource.resource.attributes}
                for scope in resource.scope_metrics:
                    for metric in scope.metrics:
                        kind = metric.WhichOneof("data")
                        for point in getattr(metric, kind).data_points:
                            found.append((attributes, metric.name, point))
        return found

    def moments(self) -> list[int]:
        """The moments written (each snapshot's time, as its soak_intervals point carries it), in
        order. Snapshots that fall due while a write is out go together in the next request
        (runner.metrics.export), so a busy machine makes fewer requests, never fewer moments."""
        return sorted({point.time_unix_nano for _, name, point in self.points() if name == "soak_intervals"})


def attributes(point: Any) -> dict[str, str]:
    return {kv.key: kv.value.string_value for kv in point.attributes}
