"""A fake Linkerd proxy admin server on loopback, with the real endpoints' paths and answers.

Like linkerd2-proxy's admin server (linkerd/app/admin/src/server.rs): GET /ready answers
503 "not ready" until the proxy is ready, then 200 "ready"; POST /shutdown answers 200
"shutdown" (any other method 405), or, as Linkerd 2.16 and later do unless the endpoint is
enabled, 404 "shutdown endpoint is not enabled". It also serves /target (200 "ok") so that a
test can aim the soak itself at it and read, from one ordered log of real requests, that
no request was sent before the proxy was ready and that the shutdown came after the last.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


@dataclass
class FakeProxy:
    not_ready_answers: int = 3  # /ready answers 503 this many times, then 200 (-1: never ready)
    shutdown_enabled: bool = True
    events: list[tuple[float, str, str, int]] = field(default_factory=list)  # (time, method, path, status)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def start(self) -> FakeProxy:
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_GET(self) -> None:
                proxy._answer(self, "GET")

            def do_POST(self) -> None:
                proxy._answer(self, "POST")

            def log_message(self, *args: object) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self.port = self._server.server_address[1]
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    @property
    def admin(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def target(self) -> str:
        return f"http://127.0.0.1:{self.port}/target"

    def calls(self, method: str, path: str) -> list[tuple[float, int]]:
        with self._lock:
            return [(t, status) for t, m, p, status in self.events if (m, p) == (method, path)]

    def _answer(self, request: BaseHTTPRequestHandler, method: str) -> None:
        status, body = self._route(method, request.path)
        with self._lock:
            self.events.append((time.monotonic(), method, request.path, status))
        data = body.encode()
        request.send_response(status)
        request.send_header("Content-Type", "text/plain")
        request.send_header("Content-Length", str(len(data)))
        request.end_headers()
        request.wfile.write(data)

    def _route(self, method: str, path: str) -> tuple[int, str]:
        if path == "/ready":
            with self._lock:
                probes = sum(1 for _, m, p, _ in self.events if p == "/ready")
            ready = self.not_ready_answers >= 0 and probes >= self.not_ready_answers
            return (200, "ready\n") if ready else (503, "not ready\n")
        if path == "/shutdown":
            if method != "POST":
                return 405, ""
            return (200, "shutdown\n") if self.shutdown_enabled else (404, "shutdown endpoint is not enabled\n")
        if path == "/target":
            return 200, "ok\n"
        return 404, ""
