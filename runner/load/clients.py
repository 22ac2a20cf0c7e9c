"""The HTTP client the Python engine sends with, by the name the `transport` setting gives it.

Both names take httpx (with anyio, httpcore and h11), loaded only when asked for: a run the
native engine sends needs none. "fast", the default, means HTTP/1.1 by the native engine's
own client where the native engine sends, and httpx where the Python engine does (issue 34
retired the Python fast transport once the native engine sent every HTTP/1.1 run on Linux);
"httpx" means the Python engine on httpx always (the native engine refuses it), HTTP/2 too.
"""

from __future__ import annotations

import ssl
from typing import Protocol

from runner.load.transport import Transport, TransportOptions


class Factory(Protocol):
    def __call__(self, options: TransportOptions, tls: ssl.SSLContext | None = None) -> Transport:
        """The client for `options`, on the run's TLS context (tls.run_context) if it has one."""
        ...


def _httpx_transport(options: TransportOptions, tls: ssl.SSLContext | None = None) -> Transport:
    from runner.load.httpx_transport import HttpxTransport

    return HttpxTransport(options, tls)


TRANSPORTS: dict[str, Factory] = {"fast": _httpx_transport, "httpx": _httpx_transport}
