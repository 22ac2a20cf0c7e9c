"""The HTTP clients a run can send with, by the name the `transport` setting gives them."""

from __future__ import annotations

from collections.abc import Callable

from runner.load.fast_transport import FastTransport
from runner.load.transport import Transport, TransportOptions


def _httpx_transport(options: TransportOptions) -> Transport:
    """httpx and what it pulls in (anyio, httpcore, h11) load only when asked for."""
    from runner.load.httpx_transport import HttpxTransport

    return HttpxTransport(options)


TRANSPORTS: dict[str, Callable[[TransportOptions], Transport]] = {"fast": FastTransport, "httpx": _httpx_transport}
