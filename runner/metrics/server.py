"""The /metrics endpoint (metricAddr, slow_cooker's -metric-addr), served while the run lasts.

prometheus_client's own HTTP server, on a thread of its own, with the run's collector as
its registry. It is opened before the first send, so a port already taken stops the run
with one line and exit code 2 before any load is sent, and closed when the run has ended.
A scrape of a CronJob's pod can miss a short run entirely: the Pushgateway is the
dependable path there (pushgateway.py).
"""

from __future__ import annotations

import errno
import threading
from wsgiref.simple_server import WSGIServer

from prometheus_client import CollectorRegistry, start_http_server

from runner.core.errors import UsageError


def parse_addr(text: str) -> tuple[str, int]:
    """(host, port) of `:9090`, `127.0.0.1:9090`, `[::1]:9090` or `localhost:9090`; host "" for every interface."""
    host, _, port = text.rpartition(":")
    return host.removeprefix("[").removesuffix("]"), int(port)


class MetricServer:
    """GET /metrics on `addr` (already validated by the schema), until close()."""

    def __init__(self, addr: str, registry: CollectorRegistry) -> None:
        host, port = parse_addr(addr)
        try:
            self._server, self._thread = _listen(host, port, registry)
        except OSError as e:
            raise UsageError(f"metricAddr: {addr}: cannot listen: {e.strerror or e}") from None
        self.port: int = self._server.server_port
        self._open = True

    def close(self) -> None:
        if not self._open:
            return
        self._open = False
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)


def _listen(host: str, port: int, registry: CollectorRegistry) -> tuple[WSGIServer, threading.Thread]:
    """Listen on `host`, or with no host on every interface: IPv6 and IPv4 where the node has both."""
    if host:
        return start_http_server(port, host, registry)
    try:
        return start_http_server(port, "::", registry)
    except OSError as e:
        if e.errno == errno.EADDRINUSE:
            raise
        return start_http_server(port, "0.0.0.0", registry)  # a node without IPv6
