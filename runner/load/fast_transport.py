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
import re
import socket
import ssl
import time
from collections.abc import Callable, Sequence
from urllib.parse import urlsplit

import httptools

from runner import __version__
from runner.core.durations import format_duration
from runner.load import failures
from runner.load import result as kinds
from runner.load.bodyhash import BodyError, BodyHash, is_gzip
from runner.load.failures import causes, message, os_failure
from runner.load.request import Request, origin
from runner.load.result import Result
from runner.load.tls import client_context
from runner.load.transport import MAX_HEAD_BYTES, Address, TransportOptions, address_text, resolve

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
        self._deadlines: _Deadlines | None = None

    def tls(self) -> ssl.SSLContext:
        return self._tls

    def session(self) -> FastSession:
        if self._deadlines is None:
            self._deadlines = _Deadlines(asyncio.get_running_loop(), self._options.timeout_ns)
        return FastSession(self._options, self.tls, self._deadlines)


class _Deadlines:
    """Times out the requests that outlive the timeout, with one periodic check for them all.

    A timer per request (scheduled, then cancelled when the response comes) costs about a
    microsecond each time; at tens of thousands of requests a second that is several
    percent of the client. Checking every 1/20 of the timeout (at most 100 ms, at least
    1 ms) instead ends a stuck request at most 5% late, and costs nothing per request but
    two set operations.
    """

    def __init__(self, loop: asyncio.AbstractEventLoop, timeout_ns: int) -> None:
        self._loop = loop
        self._period = min(max(timeout_ns / 20e9, 0.001), 0.1)
        self._busy: set[_Connection] = set()
        self._handle: asyncio.TimerHandle | None = None

    def watch(self, connection: _Connection) -> None:
        self._busy.add(connection)
        if self._handle is None:
            self._handle = self._loop.call_later(self._period, self._check)

    def release(self, connection: _Connection) -> None:
        self._busy.discard(connection)

    def _check(self) -> None:
        now = self._loop.time()
        for connection in [c for c in self._busy if c.deadline <= now]:
            connection.time_out()
        self._handle = self._loop.call_later(self._period, self._check) if self._busy else None


class FastSession:
    """One client's connections: idle keep-alive connections are reused, newest first, each
    only for requests to the origin (host, port, scheme) it was opened to: with URLs on
    several servers, a client keeps one connection to each."""

    def __init__(self, options: TransportOptions, tls: Callable[[], ssl.SSLContext], deadlines: _Deadlines) -> None:
        self._deadlines = deadlines
        self._keep_alive = not options.no_reuse
        self._compress = options.compress
        self._timeout_s = options.timeout_ns / 1e9
        self._timeout_text = format_duration(options.timeout_ns)
        self._tls = tls
        self._idle: dict[tuple[str, int, bool], list[_Connection]] = {}  # by origin
        self._open: set[_Connection] = set()
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

    def _reusable(self, server: tuple[str, int, bool]) -> _Connection | None:
        idle = self._idle.get(server)
        while idle:
            connection = idle.pop()
            if connection.reusable:
                return connection
        return None

    async def _connect(self, dial: _Dial, host: str, port: int, https: bool) -> _Connection:
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

    async def _connect_first(self, dial: _Dial, addresses: Sequence[Address]) -> tuple[asyncio.Transport, _Connection]:
        """A TCP connection to the first of `addresses` that accepts one; else the first one's error."""
        first_error: OSError | None = None
        for family, address in addresses:
            dial.phase, dial.target = failures.CONNECT_PHASE, address_text(address)
            try:
                transport, connection = await self._loop.create_connection(
                    lambda: _Connection(self._open, self._loop, self._compress, self._deadlines),
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


class _Failure(Exception):
    """Raised in a parser callback to stop parsing: the response fails with this kind and text."""

    def __init__(self, kind: str, text: str) -> None:
        super().__init__(text)
        self.kind, self.text = kind, text


class _Connection(asyncio.Protocol):
    """One HTTP/1.1 connection; the parser's callbacks fill in the current Result.

    There is deliberately no per-header callback: at tens of thousands of responses a
    second, one Python call per header line would cost more than everything else the
    parser does. What the head says is read from its bytes only when it is needed: the
    Server header of a session's first response, the Content-Encoding of a body to hash,
    and the framing of a body that was cut.

    llhttp keeps nothing of what it parses; the only bytes kept are those of a response
    head not yet complete, held to MAX_HEAD_BYTES (interim 1xx heads before it included).
    After the head, a run of bytes with no body in them (a chunk-size line, trailers) is
    held to the same bound, as h11 holds them in the httpx transport, although nothing of
    it is kept here: a server streaming either forever fails the same way in both.
    """

    def __init__(
        self, registry: set[_Connection], loop: asyncio.AbstractEventLoop, compress: bool, deadlines: _Deadlines
    ) -> None:
        self._registry = registry
        self._loop = loop
        self._compress = compress
        self._deadlines = deadlines
        self.deadline = 0.0  # loop time by which the current request must be done
        self._transport: asyncio.Transport | None = None
        self._parser = httptools.HttpResponseParser(self)
        self._result: Result | None = None
        self._waiter: asyncio.Future[None] | None = None
        self._hash_body = False
        self._hasher: BodyHash | None = None
        self._wire = 0  # bytes of this response received so far: head, framing and body
        self._head: list[bytes] = []  # the chunks that held the response head (references only)
        self._interim = False  # the parser is inside a 1xx interim response, which is skipped
        self._no_body_run = 0  # bytes received after the head since the last body byte
        self._head_request = False  # a response to HEAD has no body, whatever its headers say
        self._want_server = False
        self._lost = False  # the connection is gone (connection_lost was called) ...
        self._lost_exc: Exception | None = None  # ... and why
        self.reusable = False
        self.protocol = "HTTP/1.1"  # and the TLS version, once connected over TLS

    # --- used by the session ---------------------------------------------------------

    def send(
        self, data: bytes, result: Result, hash_body: bool, deadline: float, want_server: bool
    ) -> asyncio.Future[None]:
        """Write one request; the returned Future completes when its response has.

        The connection may have been lost between its making and this first request (a
        server that resets right after accept): the request then fails with how it was
        lost, rather than being written to a transport that is gone.
        """
        assert self._transport is not None
        self.reusable = False
        self._result = result
        self._hash_body = hash_body
        self._hasher = None
        self._wire = self._no_body_run = 0
        self._head = []
        self._interim = False
        self._head_request = data.startswith(b"HEAD ")
        self._want_server = want_server
        self._waiter = waiter = self._loop.create_future()
        self.deadline = deadline
        self._deadlines.watch(self)
        if self._lost:
            self._report_loss(self._lost_exc)
        elif not self._transport.is_closing():  # closing: connection_lost is on its way and says why
            self._transport.write(data)
            result.written_ns = _now()
        return waiter

    def abort(self) -> None:
        """Give the connection up (timed out or cancelled): drop it, and forget its request."""
        self._result = self._waiter = None
        self._head = []
        self._deadlines.release(self)
        self.reusable = False
        if self._transport is not None:
            self._transport.abort()

    def close(self) -> None:
        self.reusable = False
        if self._transport is not None:
            self._transport.close()

    def secured(self, transport: asyncio.Transport) -> None:
        """The TLS handshake is done: speak through `transport`, the TLS layer, from now on."""
        self._transport = transport
        tls = transport.get_extra_info("ssl_object")
        if tls is not None:
            self.protocol = f"HTTP/1.1 {tls.version()}"

    def drop(self) -> None:
        """Abort a connection that never carried a request (its TLS handshake failed)."""
        self._registry.discard(self)
        self.abort()

    # --- asyncio.Protocol --------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = transport  # type: ignore[assignment]  # TCP; secured() puts TLS over it
        self._registry.add(self)

    def data_received(self, data: bytes) -> None:
        result = self._result
        if result is None:
            self.abort()  # bytes nobody asked for: the connection is out of step
            return
        self._wire += len(data)
        in_head = not result.headers_ns
        if in_head:
            self._head.append(data)
        body_before = result.bytes_in
        try:
            self._parser.feed_data(data)
        except httptools.HttpParserUpgrade:
            self._fail(kinds.PROTOCOL, failures.SWITCHED_PROTOCOLS)
        except httptools.HttpParserError as exc:
            failure = exc.__context__
            if isinstance(failure, _Failure):
                self._fail(failure.kind, failure.text)
            else:
                self._fail(kinds.PROTOCOL, f"protocol: invalid response: {exc}")
        if self._result is result:  # the response is not complete yet: hold what it may keep to the bound
            self._check_bounds(result, in_head, len(data), result.bytes_in > body_before)

    def _check_bounds(self, result: Result, in_head: bool, size: int, had_body: bool) -> None:
        if not result.headers_ns:
            if self._wire > MAX_HEAD_BYTES:
                self._fail(kinds.PROTOCOL, failures.head_too_large(MAX_HEAD_BYTES))
        elif not in_head:
            self._no_body_run = 0 if had_body else self._no_body_run + size
            if self._no_body_run > MAX_HEAD_BYTES:
                self._fail(kinds.PROTOCOL, failures.framing_too_large(MAX_HEAD_BYTES))

    def connection_lost(self, exc: Exception | None) -> None:
        self._registry.discard(self)
        self.reusable = False
        self._lost, self._lost_exc = True, exc
        if self._result is not None:
            self._report_loss(exc)

    def _report_loss(self, exc: Exception | None) -> None:
        """The connection went away during the current request: fail it, or end a body that runs to the close."""
        result = self._result
        assert result is not None
        # A reset, or a TLS alert: in TLS 1.3 a server refuses a client certificate (or the
        # lack of one) only after the handshake, when the client has started talking.
        failure = os_failure(causes(exc)) if exc is not None else None
        if failure is not None:
            self._fail(*failure)
        elif not result.headers_ns:
            self._fail(kinds.CLOSED, "closed: Server disconnected without sending a response.")
        else:
            length, framed = _framing(b"".join(self._head))
            if exc is None and not framed:
                self.on_message_complete()  # the body ran until the server closed: it is complete
                return
            expected = f"expected {length}" if length is not None else "of a body of unknown length"
            self._fail(kinds.CLOSED, "closed: peer closed connection without sending complete message body "
                                     f"(received {result.bytes_in} bytes, {expected})")

    # --- httptools callbacks -----------------------------------------------------------

    def on_headers_complete(self) -> None:
        result = self._result
        if result is None:
            raise _Failure(kinds.PROTOCOL, "protocol: a response nobody asked for")
        status = self._parser.get_status_code()
        if status < 200:
            # An interim response (100 Continue, 102 Processing, 103 Early Hints): the final
            # one follows on the same connection, and it is the one measured. 101 is not
            # interim: what follows is no longer HTTP.
            if status == 101:
                raise _Failure(kinds.PROTOCOL, failures.SWITCHED_PROTOCOLS)
            self._interim = True
            return
        result.headers_ns = _now()
        result.status = status
        inflate = self._hash_body and self._compress  # a gzipped body is hashed inflated
        head = _final_head(b"".join(self._head)) if self._want_server or inflate else b""
        if self._want_server:
            result.server = _header(_SERVER, head)
        if self._hash_body:
            self._hasher = BodyHash(gzip=inflate and is_gzip(_header(_CONTENT_ENCODING, head)))
        if self._head_request:
            # llhttp would wait for the body the headers announce; there is none. The
            # parser's state is then wrong for a next response, so the connection ends here.
            result.header_bytes = self._wire
            self._finish()
            self.close()

    def on_body(self, body: bytes) -> None:
        result = self._result
        assert result is not None
        result.bytes_in += len(body)
        if self._hasher is not None:
            try:
                self._hasher.update(body)
            except BodyError as exc:
                raise _Failure(kinds.PROTOCOL, str(exc)) from None

    def on_message_complete(self) -> None:
        if self._interim:
            self._interim = False  # the 1xx ended; its final response is still to come
            return
        result = self._result
        assert result is not None
        if self._hasher is not None:
            try:
                result.body_hash = self._hasher.value()
            except BodyError as exc:
                self._fail(kinds.PROTOCOL, str(exc))
                return
        # The head, any interim heads before it, and any chunk framing.
        result.header_bytes = self._wire - result.bytes_in
        result.kept_alive = keep = self._parser.should_keep_alive()
        self._finish()
        self.reusable = keep
        if not keep:
            self.close()

    # --- endings -----------------------------------------------------------------------

    def time_out(self) -> None:
        """The current request ran out of time: its send() raises TimeoutError (and aborts)."""
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_exception(TimeoutError())

    def _fail(self, kind: str, text: str) -> None:
        """Fail the current request, if any, and drop the connection: it is no longer in step."""
        result = self._result
        if result is not None:
            result.error, result.error_text = kind, text
            self._finish()
        self.reusable = False
        if self._transport is not None:
            self._transport.abort()

    def _finish(self) -> None:
        result, waiter = self._result, self._waiter
        self._result = self._waiter = None
        self._head = []
        self._deadlines.release(self)
        if result is not None:
            result.end_ns = _now()
        if waiter is not None and not waiter.done():
            waiter.set_result(None)


_SERVER = re.compile(rb"\r\nserver:[ \t]*([^\r\n]*)", re.IGNORECASE)
_CONTENT_ENCODING = re.compile(rb"\r\ncontent-encoding:[ \t]*([^\r\n]*)", re.IGNORECASE)
_CONTENT_LENGTH = re.compile(rb"\r\ncontent-length:[ \t]*(\d+)", re.IGNORECASE)
_CHUNKED = re.compile(rb"\r\ntransfer-encoding:[^\r\n]*chunked", re.IGNORECASE)
_NO_BODY_STATUS = re.compile(rb"^HTTP/\d\.\d (1\d\d|204|304) ")
_INTERIM = re.compile(rb"HTTP/\d\.\d 1(?!01)\d\d ")  # 1xx but 101, which is final; used with match()


def _final_head(data: bytes) -> bytes:
    """The final response head in `data` (interim 1xx heads before it skipped), up to its blank line."""
    start = 0
    while True:
        end = data.find(b"\r\n\r\n", start)
        if end < 0:
            return data[start:]
        if not _INTERIM.match(data, start):
            return data[start: end + 2]
        start = end + 4


def _header(pattern: re.Pattern[bytes], head: bytes) -> str:
    """The value of the header `pattern` finds in a response head ("" without one)."""
    found = pattern.search(head)
    return found.group(1).decode("latin-1").strip() if found else ""


def _framing(data: bytes) -> tuple[int | None, bool]:
    """A response head's Content-Length, and whether its body's end is marked (not the close)."""
    head = _final_head(data)
    length = _CONTENT_LENGTH.search(head)
    framed = length is not None or _CHUNKED.search(head) is not None or _NO_BODY_STATUS.match(head) is not None
    return (int(length.group(1)) if length else None), framed


def classify_connect_error(exc: OSError) -> tuple[str, str]:
    """The error kind and text for a failure to connect."""
    chain = causes(exc)
    return os_failure(chain) or (kinds.CONNECT, f"connect: {message(chain)}")
