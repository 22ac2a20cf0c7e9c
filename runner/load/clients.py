"""The HTTP clients a run can send with, by the name the `transport` setting gives them.

Each loads only when asked for: a run the native engine sends needs neither (the fast transport
with http1, httptools and rawsocket, or httpx with anyio, httpcore and h11).
"""

from __future__ import annotations

import ssl
from typing import Protocol

from runner.load.transport import Transport, TransportOptions


class Factory(Protocol):
    def __call__(self, options: TransportOptions, tls: ssl.SSLContext | None = None) -> Transport:
        """The client for `options`, on the run's TLS context (tls.run_context) if it has one."""
        ...


def _fast_transport(options: TransportOptions, tls: ssl.SSLContext | None = None) -> Transport:
    from runner.load.fast_transport import FastTransport

    return FastTransport(options, tls)


def _httpx_transport(options: TransportOptions, tls: ssl.SSLContext | None = None) -> Transport:
    from runner.load.httpx_transport import HttpxTransport

    return HttpxTransport(options, tls)


TRANSPORTS: dict[str, Factory] = {"fast": _fast_transport, "httpx": _httpx_transport}
