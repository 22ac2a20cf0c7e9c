"""The httpx transport: one `httpx.AsyncClient` per session, bodies streamed and discarded.

One client per session (not one shared pool) because httpcore's pool does work in
proportion to its size on every request; with a single connection per client it stays
cheap. Timings come from httpcore's trace events, which fire at the moment the
connection is ready and the response headers are parsed, not when our code gets around
to looking. The whole request is bounded by one deadline, like Go's Client.Timeout.
"""

from __future__ import annotations

import asyncio
import ssl
import time
from collections.abc import AsyncIterable, AsyncIterator, Iterable, Sequence
from contextvars import ContextVar
from typing import Any

# httpcore imports anyio's asyncio backend on the first request: about 15 ms that would land
# in the latencies of the run's first sends. Import it now instead.
import anyio._backends._asyncio  # noqa: F401
import anyio.streams.tls  # noqa: F401
import httpcore
import httpx

from runner import __version__
from runner.core.durations import format_duration
from runner.load import failures
from runner.load.bodyhash import BodyError, BodyHash, is_gzip
from runner.load.failures import causes, message, os_failure
from runner.load.request import Request
from runner.load.result import BACKEND_CHARS, ErrorKind, Result
from runner.load.tls import run_context
from runner.load.transport import (
    MAX_HEAD_BYTES,
    Address,
    Lifetime,
    Resolver,
    TransportOptions,
    address_text,
    numeric,
)

USER_AGENT = f"soak/{__version__}"

_CONNECTED_EVENTS = {"connection.connect_tcp.complete", "connection.start_tls.complete"}
# What the connection does next, from these events on: the phase a timeout then names.
_PHASE_EVENTS = {
    "connection.connect_tcp.complete": failures.HEADERS_PHASE,
    "connection.start_tls.started": failures.TLS_PHASE,
    "connection.start_tls.complete": failures.HEADERS_PHASE,
}
_HEADERS_EVENTS = {"http11.receive_response_headers.complete", "http2.receive_response_headers.complete"}
# The request is written when its body is (httpcore sends an empty body too, so this fires for a
# GET); the headers event covers a transport that skips the body phase.
_WRITTEN_EVENTS = {
    "http11.send_request_headers.complete", "http11.send_request_body.complete",
    "http2.send_request_headers.complete", "http2.send_request_body.complete",
}


class HttpxTransport:
    """Makes httpx sessions that share one set of options."""

    def __init__(self, options: TransportOptions, tls: ssl.SSLContext | None = None) -> None:
        self._options = options
        # One TLS context for all sessions: building one reads the CA bundle (tens of ms),
        # which per client would delay the first sends of a run. The run's (tls.run_context,
        # made before any load), or made now. httpx takes one whether or not a URL is https: a
        # run with none (and no TLS file named) gets one that trusts nothing, made without
        # reading any bundle, which none of its connections uses (redirects are not followed).
        self._tls = tls if tls is not None else run_context(options) or ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        self._resolver = Resolver()  # one for all sessions: a name's addresses are dialled in turn across them

    def session(self) -> HttpxSession:
        return HttpxSession(self._options, self._tls, self._resolver)


class _Trace:
    """httpcore's trace hook: notes when the connection was ready, the request written, the headers in,
    and which protocol the server chose in the TLS handshake (ALPN)."""

    __slots__ = ("resolved_ns", "tcp_ns", "connected_ns", "written_ns", "headers_ns", "alpn", "phase", "target")

    def __init__(self) -> None:
        self.resolved_ns = 0  # when _Backend's name lookup ended (0: none, or a numeric host)
        self.tcp_ns = 0  # when the TCP connect completed (before any TLS handshake)
        self.connected_ns = 0
        self.written_ns = 0
        self.headers_ns = 0
        self.alpn: str | None = None  # None: no TLS handshake in this send
        # Where the send is until the response headers: a reused connection starts waiting for
        # them; a new one goes through DNS and connect (noted by _Backend) and TLS first.
        self.phase = failures.HEADERS_PHASE
        self.target = ""  # the name being looked up, or the address connected to

    async def __call__(self, event: str, info: dict[str, Any]) -> None:
        if event in _HEADERS_EVENTS:
            self.headers_ns = time.monotonic_ns()
        elif event in _WRITTEN_EVENTS:
            self.written_ns = time.monotonic_ns()  # headers, then body: the last one wins
        elif event in _CONNECTED_EVENTS:
            self.connected_ns = time.monotonic_ns()
            if event == "connection.connect_tcp.complete":
                self.tcp_ns = self.connected_ns
            if event == "connection.start_tls.complete":
                tls = info["return_value"].get_extra_info("ssl_object")
                self.alpn = (tls.selected_alpn_protocol() if tls is not None else None) or ""
        self.phase = _PHASE_EVENTS.get(event, self.phase)


# The current send's trace, for the network backend: httpcore calls it from the sending task
# without the request, so this is how it learns whose DNS lookup and connect it is timing.
_current_trace: ContextVar[_Trace | None] = ContextVar("soak_httpx_trace", default=None)


class _Backend(httpcore.AsyncNetworkBackend):
    """httpcore's anyio backend, with two changes.

    The name is looked up first (by the transport's Resolver, as the native engine's are) and
    the addresses then connected to in turn, so a timeout can say whether the lookup or the
    connect took the time. And its streams answer get_extra_info with None once uvloop has
    dropped the socket under them: anyio then asks the socket None for its peer name, and
    the AttributeError used to escape a send to a server that resets right after accept;
    now the read or write that follows fails as the connection did (reset, closed).
    """

    def __init__(self, resolver: Resolver) -> None:
        self._inner = httpcore.AnyIOBackend()
        self._resolver = resolver

    async def connect_tcp(
        self, host: str, port: int, timeout: float | None = None, local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        trace = _current_trace.get() or _Trace()
        trace.phase, trace.target = failures.DNS_PHASE, host
        addresses: Sequence[Address] | None = numeric(host, port)
        if addresses is None:
            try:
                addresses = await self._resolver.resolve(host, port)
            except OSError as exc:
                raise httpcore.ConnectError(str(exc)) from exc
            trace.resolved_ns = time.monotonic_ns()
        first_error: httpcore.ConnectError | None = None
        for _, address in addresses:
            trace.phase, trace.target = failures.CONNECT_PHASE, address_text(address)
            try:
                stream = await self._inner.connect_tcp(address[0], port, timeout, local_address, socket_options)
            except httpcore.ConnectError as exc:
                first_error = first_error or exc
                continue
            return _Stream(stream)
        raise first_error or httpcore.ConnectError(f"no address for {host}")

    async def connect_unix_socket(
        self, path: str, timeout: float | None = None, socket_options: Iterable[Any] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        return _Stream(await self._inner.connect_unix_socket(path, timeout, socket_options))

    async def sleep(self, seconds: float) -> None:
        await self._inner.sleep(seconds)


class _Stream(httpcore.AsyncNetworkStream):
    """An anyio stream whose get_extra_info survives the loss of its socket (see _Backend)."""

    def __init__(self, inner: httpcore.AsyncNetworkStream) -> None:
        self._inner = inner

    async def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        return await self._inner.read(max_bytes, timeout)

    async def write(self, buffer: bytes, timeout: float | None = None) -> None:
        await self._inner.write(buffer, timeout)

    async def aclose(self) -> None:
        await self._inner.aclose()

    async def start_tls(
        self, ssl_context: ssl.SSLContext, server_hostname: str | None = None, timeout: float | None = None,
    ) -> httpcore.AsyncNetworkStream:
        return _Stream(await self._inner.start_tls(ssl_context, server_hostname, timeout))

    def get_extra_info(self, info: str) -> Any:
        try:
            return self._inner.get_extra_info(info)
        except AttributeError:  # anyio asked uvloop's dropped socket (None) for its peer name
            return None


class _Lived(httpcore.AsyncConnectionInterface):
    """One of the pool's connections, held to a Lifetime (runner.load.transport) as the native
    engine holds its own: httpcore has no limit on a connection's requests or age.

    The pool asks each connection whether it is available and whether it has expired; this
    wrapper counts the requests handed to its connection and sends the last with
    `Connection: close`, after which h11 closes the connection once the response is read,
    and the pool drops it. HTTP/2 has no such header (RFC 9113 forbids connection-specific
    ones): there the last request retires the connection instead, which then takes no new
    streams and is closed by the pool once its streams are done: once every request handed to
    it has been answered and its response closed, counted here, for httpcore's HTTP/2
    connection says it is idle while a request that has begun has no stream yet (and closing
    it then failed that request).
    """

    def __init__(self, inner: httpcore.AsyncConnectionInterface, lifetime: Lifetime, http2: bool) -> None:
        self._inner = inner
        self._lifetime = lifetime
        self._http2 = http2
        self._served = 0  # requests handed to the connection
        self._opened_ns = 0  # when it was ready for its first (connected, and the TLS handshake done)
        self._retired = False  # its last request has been sent
        self._busy = 0  # HTTP/2: requests handed to it whose responses are not closed yet

    async def handle_async_request(self, request: httpcore.Request) -> httpcore.Response:
        if self._retired:
            raise httpcore.ConnectionNotAvailable()  # the pool tries another connection, or a new one
        now = time.monotonic_ns()
        last = self._lifetime.last(self._served, self._opened_ns or now, now)
        self._retired = last  # at once: HTTP/2 requests that overlap this one go elsewhere
        if last and not self._http2:
            # In place of httpx's own `Connection: keep-alive`: a server reads the first one.
            headers = [(name, value) for name, value in request.headers if name.lower() != b"connection"]
            headers.append((b"Connection", b"close"))
            request = httpcore.Request(request.method, request.url, headers=headers, content=request.stream,
                                       extensions=request.extensions)
        self._served += 1
        self._busy += 1
        try:
            response = await self._inner.handle_async_request(request)
        except httpcore.ConnectionNotAvailable:  # nothing was sent on it: it does not count
            self._served -= 1
            if last:
                self._retired = False
            self._busy -= 1
            raise
        except BaseException:
            self._busy -= 1
            raise
        finally:
            if not self._opened_ns:
                trace = _current_trace.get()
                self._opened_ns = (trace.connected_ns if trace is not None else 0) or time.monotonic_ns()
        if not self._http2:
            self._busy -= 1  # HTTP/1.1 carries one request at a time: its own idle state is true
            return response
        return httpcore.Response(response.status, headers=response.headers, content=_Closing(response.stream, self),
                                 extensions=response.extensions)

    def answered(self) -> None:
        """A response handed out is closed (read to its end, or given up)."""
        self._busy -= 1

    def is_available(self) -> bool:
        return not self._retired and self._inner.is_available()

    def has_expired(self) -> bool:
        return self._inner.has_expired() or (self._retired and not self._busy and self._inner.is_idle())

    def can_handle_request(self, origin: httpcore.Origin) -> bool:
        return self._inner.can_handle_request(origin)

    def is_idle(self) -> bool:
        return self._inner.is_idle()

    def is_closed(self) -> bool:
        return self._inner.is_closed()

    def info(self) -> str:
        return self._inner.info()

    async def aclose(self) -> None:
        await self._inner.aclose()


class _Closing:
    """A response's body that tells its connection (_Lived) when it is closed."""

    def __init__(self, inner: Iterable[bytes] | AsyncIterable[bytes], connection: _Lived) -> None:
        assert isinstance(inner, AsyncIterable)
        self._inner = inner
        self._connection: _Lived | None = connection

    async def __aiter__(self) -> AsyncIterator[bytes]:
        async for part in self._inner:
            yield part

    async def aclose(self) -> None:
        try:
            close = getattr(self._inner, "aclose", None)
            if close is not None:
                await close()
        finally:
            if self._connection is not None:
                self._connection.answered()
                self._connection = None


class HttpxSession:
    """One client's httpx.AsyncClient.

    With HTTP/2 the client keeps one connection to each server and multiplexes over it the
    requests that overlap (open model), as an HTTP/2 client does; without, one connection
    per request in flight. HTTP/2 alone is spoken (http1=False): over TLS after ALPN, over cleartext
    with prior knowledge, so a run that asks for HTTP/2 never measures HTTP/1.1 instead.
    """

    def __init__(self, options: TransportOptions, tls: ssl.SSLContext, resolver: Resolver) -> None:
        self._compress = options.compress
        self._http2 = options.http2
        self._timeout_s = options.timeout_ns / 1e9
        self._timeout_text = format_duration(options.timeout_ns)
        # httpx's limits are for the whole pool, whatever the origin: per origin, times the origins.
        # HTTP/2 multiplexes on one connection; but one retired by the lifetime still drains its
        # streams, and were it the only one allowed, every request meanwhile would wait for it
        # to close, and a run at a high rate timed out. The pool opens another only when no
        # connection takes new requests, so at most one per origin does at a time.
        lived = options.lifetime.limited and not options.no_reuse
        connections = (1 if options.http2 and not lived else options.max_connections) * options.origins
        keepalive = 0 if options.no_reuse else connections
        transport = httpx.AsyncHTTPTransport(
            verify=tls,
            http1=not options.http2,
            http2=options.http2,
            limits=httpx.Limits(max_connections=connections, max_keepalive_connections=keepalive),
        )
        # httpx 0.28 (pinned) takes no network backend; its pool (httpcore 1.0) does, here.
        pool = self._pool = transport._pool
        pool._network_backend = _Backend(resolver)
        lifetime = options.lifetime
        if lifetime.limited and not options.no_reuse:  # with noReuse every request is a connection's last already
            make = pool.create_connection
            pool.create_connection = (  # type: ignore[method-assign]  # the pool's own factory, wrapped
                lambda origin: _Lived(make(origin), lifetime, options.http2))
        self._client = httpx.AsyncClient(
            transport=transport,
            timeout=None,  # the whole-request deadline below is the only limit
            follow_redirects=False,  # a 3xx is an answer to count, not a hop to make
            trust_env=False,  # measure the service, not a proxy from the environment
            headers={"User-Agent": USER_AGENT},
        )
        if options.compress:
            self._client.headers["Accept-Encoding"] = "gzip"
        else:
            del self._client.headers["Accept-Encoding"]
        if options.no_reuse and not options.http2:  # HTTP/2 forbids the header; no keep-alive closes it
            self._client.headers["Connection"] = "close"
        else:  # httpx adds `Connection: keep-alive`, which HTTP/1.1 means anyway: sent as the native engine sends
            del self._client.headers["Connection"]
        self._server_reported = False  # the Server header is read from the session's first response only
        self._urls: dict[str, httpx.URL] = {}  # parsed once: httpx would parse the text on every send (~7 us)
        self._backend_header = options.backend_header
        self._opened = 0  # connections this session's sends opened
        self._closed = 0  # ... and of those, how many have been seen closed (_closed_now)
        self._protocols: dict[tuple[str, str, int], str] = {}  # what the last connection to each origin spoke

    async def send(self, request: Request, hash_body: bool) -> Result:
        result = Result(bytes_out=len(request.body))
        trace = _Trace()
        url = self._urls.get(request.url)
        if url is None:
            url = self._urls[request.url] = httpx.URL(request.url)
        token = _current_trace.set(trace)
        result.start_ns = time.monotonic_ns()
        try:
            async with asyncio.timeout(self._timeout_s):
                async with self._client.stream(
                    request.method,
                    url,
                    headers=request.headers,
                    content=request.body or None,
                    extensions={"trace": trace},
                ) as response:
                    result.headers_ns = trace.headers_ns or time.monotonic_ns()
                    result.status = response.status_code
                    result.header_bytes = head_size(response)
                    result.kept_alive = kept_alive(response)
                    if trace.connected_ns:
                        result.protocol = self._protocols[_origin(url)] = protocol(response)
                    if not self._server_reported:
                        result.server = response.headers.get("server", "")
                        self._server_reported = True
                    if self._backend_header:
                        result.backend = response.headers.get(self._backend_header, "")[:BACKEND_CHARS]
                    await self._read_body(response, result, hash_body)
        except TimeoutError:
            phase = failures.BODY_PHASE if result.headers_ns else trace.phase
            result.error, result.error_text = ErrorKind.TIMEOUT, failures.timeout_text(phase, self._timeout_text,
                                                                                    trace.target)
        except (httpx.HTTPError, OSError, ssl.SSLError) as exc:
            result.error, result.error_text = classify(exc, bool(result.headers_ns))
        except BodyError as exc:
            result.error, result.error_text = ErrorKind.PROTOCOL, str(exc)
        finally:
            _current_trace.reset(token)
        if result.error and self._http2 and trace.alpn not in (None, "h2"):
            result.error = ErrorKind.PROTOCOL
            result.error_text = f"protocol: the server did not agree to HTTP/2 (ALPN: {trace.alpn or 'none'})"
        result.connected_ns = trace.connected_ns
        if trace.connected_ns:
            result.resolved_ns, result.tcp_ns = trace.resolved_ns, trace.tcp_ns
        result.written_ns = trace.written_ns
        result.end_ns = time.monotonic_ns()
        if result.connected_ns:
            self._opened += 1
        if not self._http2:
            await self._drop_unasked()
        result.connections_closed = self._closed_now()
        return result

    async def _drop_unasked(self) -> None:
        """Close each idle connection that holds bytes no request asked for (_unasked), as the
        native engine does: h11 would read them as the next response's status line, and that
        send would fail as `protocol` for what the server sent after the last response."""
        for connection in self._pool.connections:
            if _unasked(connection):
                await connection.aclose()

    def _closed_now(self) -> int:
        """How many more of the session's connections have closed since the last send said.

        httpcore closes connections inside its pool (h11 after a `Connection: close`, the pool
        those the server closed while idle, at the next request), and says nothing: what is
        closed is what was opened less what the pool still holds open. Sends that overlap (the
        open model) may hold a connection that is open but not yet counted as opened, so the
        count only ever goes up, never past what was opened: a close is counted late, never twice.
        """
        still_open = sum(1 for connection in self._pool.connections if _is_open(connection))
        closed = max(self._closed, self._opened - still_open)
        more, self._closed = closed - self._closed, closed
        return more

    async def _read_body(self, response: httpx.Response, result: Result, hash_body: bool) -> None:
        """Count (and hash, when sampled) the body chunk by chunk; nothing is kept.

        Read raw, as it came: bodies are inflated for the hash only, by runner.load.bodyhash,
        as in the native engine (httpx would inflate without a bound on the output).
        """
        hasher = None
        if hash_body:
            hasher = BodyHash(gzip=self._compress and is_gzip(response.headers.get("content-encoding", "")))
        try:
            async for chunk in response.aiter_raw():
                if hasher is not None:
                    hasher.update(chunk)
                    while hasher.pending:  # a gzipped body: inflated and hashed a bounded step at a time,
                        hasher.step()
                        await asyncio.sleep(0)  # the loop (and the timeout) running in between
        finally:
            result.bytes_in = response.num_bytes_downloaded  # what arrived, even if cut short
        if hasher is not None:
            result.body_hash = hasher.value()

    async def aclose(self) -> None:
        await self._client.aclose()

    def held(self) -> list[str]:
        """The pool's open connections' protocols, each as the session's last connection to its origin spoke."""
        found = []
        for connection in self._pool.connections:
            if _is_open(connection):
                inner = connection._inner if isinstance(connection, _Lived) else connection
                origin = inner._origin  # type: ignore[attr-defined]  # httpcore 1.0's (pinned) AsyncHTTPConnection
                key = (origin.scheme.decode("ascii"), origin.host.decode("ascii"), origin.port)
                found.append(self._protocols.get(key, ""))
        return found


def _origin(url: httpx.URL) -> tuple[str, str, int]:
    """A URL's origin as httpcore keys its connections: scheme, host, port (the scheme's own when not given)."""
    return url.scheme, url.host, url.port or (443 if url.scheme == "https" else 80)


def _is_open(connection: httpcore.AsyncConnectionInterface) -> bool:
    """Whether one of the pool's connections is connected and not closed (a _Lived one: its own).

    httpcore 1.0 (pinned) says a connection not yet connected is not closed either; its
    `_connection` is None until the dial is done."""
    inner = connection._inner if isinstance(connection, _Lived) else connection
    if isinstance(inner, httpcore.AsyncHTTPConnection):
        return inner._connection is not None and not inner.is_closed()
    return not inner.is_closed()


def _unasked(connection: httpcore.AsyncConnectionInterface) -> bool:
    """Whether one of the pool's HTTP/1.1 connections is idle with bytes already received: sent
    after its last response, in the same read, so that h11 holds them (httpcore 1.0's, pinned).

    httpcore drops an idle connection whose socket is readable (has_expired), but not one whose
    extra bytes came with the response and sit in h11's buffer."""
    inner = connection._inner if isinstance(connection, _Lived) else connection
    http11 = getattr(inner, "_connection", None)
    if not isinstance(http11, httpcore.AsyncHTTP11Connection) or not http11.is_idle():
        return False
    return bool(http11._h11_state.trailing_data[0])


def head_size(response: httpx.Response) -> int:
    """Bytes of the response head as it came on the wire: status line, header lines, blank line.

    Rebuilt from what h11 parsed (names as sent, values trimmed), assuming the usual one
    space after each colon, so it is exact for servers that write heads that way (nginx,
    Apache, Go, ...). ab counts these bytes in "Total transferred".
    """
    extensions = response.extensions
    # "HTTP/1.1" SP "200" SP reason CRLF, then the blank line's CRLF.
    size = len(extensions.get("http_version", b"HTTP/1.1")) + len(extensions.get("reason_phrase", b"")) + 9
    for name, value in response.headers.raw:
        size += len(name) + len(value) + 4  # name ": " value CRLF
    return size


def protocol(response: httpx.Response) -> str:
    """What the response's connection speaks: the HTTP version, and the TLS version if any."""
    stream = response.extensions.get("network_stream")
    tls = stream.get_extra_info("ssl_object") if stream is not None else None
    return f"{response.http_version} {tls.version()}" if tls is not None else response.http_version


def kept_alive(response: httpx.Response) -> bool:
    """Whether the server leaves the connection open after this response (HTTP/1.1 keep-alive)."""
    connection = response.headers.get("connection", "").lower()
    if response.http_version == "HTTP/1.0":
        return "keep-alive" in connection
    return "close" not in connection


# h11's texts for two failures named as the native engine names them: a head or chunk line over
# the limit, and a 101 (which h11 refuses, since no request of ours ever proposes a switch).
_RECEIVE_BUFFER_TOO_LONG = "Receive buffer too long"
_SWITCHED = "Received server _SWITCH_UPGRADE event"


def classify(exc: BaseException, headers_seen: bool = False) -> tuple[ErrorKind, str]:
    """The error kind and a short text for a failed send, from the exception and its causes.

    `headers_seen`: the response head had arrived, so h11's buffer limit was hit by a
    chunk-size line or trailers rather than by the head.
    """
    chain = causes(exc)
    found = os_failure(chain)
    if found is not None:
        return found
    text = message(chain)
    if isinstance(exc, httpx.RemoteProtocolError) and text == _RECEIVE_BUFFER_TOO_LONG:
        too_large = failures.framing_too_large if headers_seen else failures.head_too_large
        return ErrorKind.PROTOCOL, too_large(MAX_HEAD_BYTES)
    if isinstance(exc, httpx.RemoteProtocolError) and text.startswith(_SWITCHED):
        return ErrorKind.PROTOCOL, failures.SWITCHED_PROTOCOLS
    if isinstance(exc, httpx.TimeoutException):
        return ErrorKind.TIMEOUT, f"timeout: {text}"
    if isinstance(exc, httpx.ConnectError):
        return ErrorKind.CONNECT, f"connect: {text}"
    if isinstance(exc, httpx.RemoteProtocolError):
        if "disconnected" in text or "closed" in text:
            return ErrorKind.CLOSED, f"closed: {text}"
        return ErrorKind.PROTOCOL, f"protocol: {text}"
    if isinstance(exc, (httpx.DecodingError, httpx.LocalProtocolError)):
        return ErrorKind.PROTOCOL, f"protocol: {text}"
    if isinstance(exc, (httpx.ReadError, httpx.WriteError)):
        return ErrorKind.CLOSED, f"closed: {text}"
    return ErrorKind.OTHER, f"{type(exc).__name__}: {text}"
