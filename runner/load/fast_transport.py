"""The fast transport: HTTP/1.1 on an asyncio Protocol, parsed by httptools (llhttp, in C).

A load tester's client must cost far less than what it measures. httpx spends about a
millisecond of CPU per request and adds that much to every latency it reports; this
transport does the same job in tens of microseconds: each request's bytes are built once
per target, a connection is a Protocol whose callbacks fill in the Result as the bytes
arrive, and the only per-request objects are the Result and one Future.

It speaks HTTP/1.1 only (keep-alive, Content-Length and chunked bodies, TLS through
asyncio's ssl, runner/tls.py's context); the httpx transport remains for HTTP/2 and
anything this one does not do.
"""

from __future__ import annotations

import asyncio
import socket
import ssl
import time
from collections.abc import Callable, Sequence
from urllib.parse import urlsplit

from runner import __version__
from runner.core.durations import format_duration
from runner.load import failures
from runner.load import result as kinds
from runner.load.failures import causes, message, os_failure
from runner.load.http1 import Connection, Deadlines
from runner.load.request import Request, origin
from runner.load.result import Result
from runner.load.tls import client_context
from runner.load.transport import Address, TransportOptions, address_text, resolve

USER_AGENT = f"soak/{__version__}"
_now = time.monotonic_ns


def wire_request(request: Request, keep_alive: bool, compress: bool) -> tuple[bytes, str, int, bool]:
    """The request's bytes on the wire, and where it goes: (bytes, host, port, https).

    Built once per target by each session and reused for every send: a soak sends the same
    request over and over, so there is nothing to format per request.
    """
    url = urlsplit(request.url)
    scheme, host, port = origin(request.url)
    https = scheme == "https"
    target = (url.path or "/") + (f"?{url.query}" if url.query else "")
    names = {name.lower() for name, _ in request.headers}
    default_port = port == (443 if https else 80)
    host_header = host if ":" not in host else f"[{host}]"
    lines = [f"{request.method} {target} HTTP/1.1"]
    if "host" not in names:
        lines.append(f"Host: {host_header}" + ("" if default_port else f":{port}"))
    if "user-agent" not in names:
        lines.append(f"User-Agent: {USER_AGENT}")
    if "accept" not in names:
        lines.append("Accept: */*")
    if compress and "accept-encoding" not in names:
        lines.append("Accept-Encoding: gzip")
    if not keep_alive:
        lines.append("Connection: close")
    lines += [f"{name}: {value}" for name, value in request.headers]
    if request.body or request.method in ("POST", "PUT", "PATCH"):
        if "content-length" not in names:
            lines.append(f"Content-Length: {len(request.body)}")
    head = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")
    return head + request.body, host, port, https


class FastTransport:
    """Makes sessions that share one set of options, one TLS context and one watch over the
    requests' deadlines.

    The TLS context is made at once, so a TLS setting naming a bad file stops the run before
    any load; it offers only HTTP/1.1 in ALPN, the one protocol this client speaks.
    """

    def __init__(self, options: TransportOptions) -> None:
        self._options = options
        self._tls = client_context(options)
        self._tls.set_alpn_protocols(["http/1.1"])
        self._deadlines: Deadlines | None = None

    def tls(self) -> ssl.SSLContext:
        return self._tls

    def session(self) -> FastSession:
        if self._deadlines is None:
            self._deadlines = Deadlines(asyncio.get_running_loop(), self._options.timeout_ns)
        return FastSession(self._options, self.tls, self._deadlines)




class FastSession:
    """One client's connections: idle keep-alive connections are reused, newest first, each
    only for requests to the origin (host, port, scheme) it was opened to: with URLs on
    several servers, a client keeps one connection to each."""

    def __init__(self, options: TransportOptions, tls: Callable[[], ssl.SSLContext], deadlines: Deadlines) -> None:
        self._deadlines = deadlines
        self._keep_alive = not options.no_reuse
        self._compress = options.compress
        self._timeout_s = options.timeout_ns / 1e9
        self._timeout_text = format_duration(options.timeout_ns)
        self._tls = tls
        self._idle: dict[tuple[str, int, bool], list[Connection]] = {}  # by origin
        self._open: set[Connection] = set()
        self._loop = asyncio.get_running_loop()
        # By id(request): no hashing per send. Each holds the request's bytes and its server,
        # (host, port, https), the key of its idle connections, made once, not per send.
        self._wire: dict[int, tuple[Request, bytes, tuple[str, int, bool], int]] = {}
        self._server_reported = False  # the Server header is read from the session's first response only

    async def send(self, request: Request, hash_body: bool) -> Result:
        wire = self._wire.get(id(request))
        if wire is None or wire[0] is not request:
            data, host, port, https = wire_request(request, self._keep_alive, self._compress)
            wire = self._wire[id(request)] = (request, data, (host, port, https), len(request.body))
        _, data, server, body_size = wire
        result = Result()
        result.bytes_out = body_size
        result.start_ns = _now()
        deadline = self._loop.time() + self._timeout_s
        connection = self._reusable(server)
        dial: _Dial | None = None
        try:
            if connection is None:
                dial = _Dial(server[0])
                async with asyncio.timeout_at(deadline):
                    connection = await self._connect(dial, *server)
                result.connected_ns = _now()
            await connection.send(data, result, hash_body, deadline, not self._server_reported)
            if result.connected_ns and result.status:  # a new connection that carried a response
                result.protocol = connection.protocol
        except TimeoutError:
            result.error, result.error_text = kinds.TIMEOUT, self._timeout_message(result, dial)
            if connection is not None:
                connection.abort()
        except asyncio.CancelledError:
            if connection is not None:
                connection.abort()
            raise
        except (OSError, ssl.SSLError) as exc:
            result.error, result.error_text = classify_connect_error(exc)
        if result.status:
            self._server_reported = True
        result.end_ns = result.end_ns or _now()
        if connection is not None and connection.reusable and self._keep_alive:
            self._idle.setdefault(server, []).append(connection)
        return result

    def _timeout_message(self, result: Result, dial: _Dial | None) -> str:
        if dial is not None and dial.phase is not None:
            return failures.timeout_text(dial.phase, self._timeout_text, dial.target)
        phase = failures.BODY_PHASE if result.headers_ns else failures.HEADERS_PHASE
        return failures.timeout_text(phase, self._timeout_text)

    def _reusable(self, server: tuple[str, int, bool]) -> Connection | None:
        idle = self._idle.get(server)
        while idle:
            connection = idle.pop()
            if connection.reusable:
                return connection
        return None

    async def _connect(self, dial: _Dial, host: str, port: int, https: bool) -> Connection:
        """A new connection to host:port: look the name up, connect, shake hands, each phase noted in `dial`.

        Done step by step (rather than by one create_connection with the name and ssl) so that
        a timeout can say which step ran out of time.
        """
        addresses = await resolve(host, port)
        transport, connection = await self._connect_first(dial, addresses)
        if https:
            dial.phase = failures.TLS_PHASE
            try:
                tls = await self._loop.start_tls(transport, connection, self._tls(), server_hostname=host)
            except BaseException:
                connection.drop()
                raise
            assert tls is not None
            connection.secured(tls)
        dial.phase = None
        return connection

    async def _connect_first(self, dial: _Dial, addresses: Sequence[Address]) -> tuple[asyncio.Transport, Connection]:
        """A TCP connection to the first of `addresses` that accepts one; else the first one's error."""
        first_error: OSError | None = None
        for family, address in addresses:
            dial.phase, dial.target = failures.CONNECT_PHASE, address_text(address)
            try:
                transport, connection = await self._loop.create_connection(
                    lambda: Connection(self._open, self._loop, self._compress, self._deadlines),
                    address[0], address[1], family=family,
                )
            except OSError as exc:
                first_error = first_error or exc
                continue
            sock = transport.get_extra_info("socket")
            try:
                # Requests are small and latency is what we measure: send each at once.
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            except (AttributeError, OSError):
                pass  # already lost (reset at accept): the request's send() will say so
            return transport, connection
        raise first_error or OSError(f"no address for {dial.target}")

    async def aclose(self) -> None:
        for connection in list(self._open):
            connection.close()
        self._idle.clear()


class _Dial:
    """How far the making of a new connection got: the phase under way, and on what."""

    __slots__ = ("phase", "target")

    def __init__(self, host: str) -> None:
        self.phase: str | None = failures.DNS_PHASE  # None once the connection is made
        self.target = host  # the name being looked up, then the address being connected to














def classify_connect_error(exc: OSError) -> tuple[str, str]:
    """The error kind and text for a failure to connect."""
    chain = causes(exc)
    return os_failure(chain) or (kinds.CONNECT, f"connect: {message(chain)}")
