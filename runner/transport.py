"""The engine's view of an HTTP client: open a session, send one request, get one Result.

A session is one client's connection(s): the engine opens one per client, so keep-alive
reuse means one connection per client, as in slow_cooker. Implementations measure the
timings the Result asks for themselves, because only they see the socket. The httpx
transport is the first implementation; a faster one can sit behind the same two methods.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from runner.result import Result
from runner.targets import Request


@dataclass(frozen=True)
class TransportOptions:
    """How requests are sent, whatever the client library."""

    timeout_ns: int  # whole-request limit, from sending to the end of the body
    no_reuse: bool  # a new connection for every request
    compress: bool  # ask for gzip and read the decompressed body
    max_connections: int  # per session; more than 1 only when requests overlap (open model)
    ca_bundle: str = ""  # PEM file of the CAs that servers are verified against; "" for certifi's
    insecure: bool = False  # verify no certificate and no name
    client_cert: str = ""  # PEM file of the client certificate for mTLS; "" for none
    client_key: str = ""  # its private key, when not in client_cert's file
    http2: bool = False  # HTTP/2 on every connection (httpx only)
    origins: int = 1  # distinct (scheme, host, port) among the URLs: a session keeps connections to each


class Session(Protocol):
    async def send(self, request: Request, hash_body: bool) -> Result:
        """Send `request` and return its Result; never raises for anything the target does."""
        ...

    async def aclose(self) -> None:
        """Close the session's connections."""
        ...


class Transport(Protocol):
    def session(self) -> Session:
        """A new session: one client's own connection(s)."""
        ...
