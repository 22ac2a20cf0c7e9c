"""The fast transport: HTTP/1.1 on an asyncio Protocol, parsed by httptools (llhttp, in C).

A load tester's client must cost far less than what it measures. httpx spends about a
millisecond of CPU per request and adds that much to every latency it reports; this
transport does the same job in tens of microseconds: each request's bytes are built once
per target, a connection is a Protocol whose callbacks fill in the Result as the bytes
arrive, and the only per-request objects are the Result and one Future.

It speaks HTTP/1.1 only (keep-alive, Content-Length and chunked bodies, TLS through
asyncio's ssl, runner/load/tls.py's context); the httpx transport remains for HTTP/2 and
anything this one does not do.
"""

from __future__ import annotations

import asyncio
import ssl
import time
from collections.abc import Callable, Sequence
from typing import Any

from runner.core.durations import format_duration
from runner.load import failures
from runner.load.http1 import Connection, Deadlines, header_pattern
from runner.load.rawsocket import AVAILABLE as RAW_SOCKETS
from runner.load.rawsocket import Pump, RawTransport
from runner.load.request import Request
from runner.load.result import ErrorKind, Result
from runner.load.tls import client_context, run_context
from runner.load.transport import Address, Resolver, TransportOptions, address_text, numeric
from runner.load.wire import classify_connect_error, wire_request

_now = time.monotonic_ns


class FastTransport:
    """Makes sessions that share one set of options, one TLS context and one watch over the
    requests' deadlines.

    The TLS context is the run's (tls.run_context, made by runner.run.build before any load,
    or here when not given); it offers only HTTP/1.1 in ALPN, the one protocol this client speaks.
    """

    def __init__(self, options: TransportOptions, tls: ssl.SSLContext | None = None) -> None:
        self._options = options
        self._tls = tls if tls is not None else run_context(options)
        if self._tls is not None:
            self._tls.set_alpn_protocols(["http/1.1"])
        self._deadlines: Deadlines | None = None
        self._pump: Pump | None = None
        self._resolver = Resolver()  # one for all sessions: a name's addresses are dialled in turn across them

    def tls(self) -> ssl.SSLContext:
        """The run's one TLS context, made the first time it is asked for."""
        if self._tls is None:
            self._tls = client_context(self._options)
            self._tls.set_alpn_protocols(["http/1.1"])
        return self._tls

    def session(self) -> FastSession:
        if self._deadlines is None:
            self._deadlines = Deadlines(asyncio.get_running_loop(), self._options.timeout_ns)
            self._pump = Pump(asyncio.get_running_loop()) if RAW_SOCKETS else None
        return FastSession(self._options, self.tls, self._deadlines, self._pump, self._resolver)




class FastSession:
    """One client's connections: idle keep-alive connections are reused, newest first, each
    only for requests to the origin (host, port, scheme) it was opened to: with URLs on
    several servers, a client keeps one connection to each. A connection's last request
    (options.lifetime, transport.Lifetime) goes out with `Connection: close`, and the
    connection is closed after its response."""

    def __init__(
        self, options: TransportOptions, tls: Callable[[], ssl.SSLContext], deadlines: Deadlines, pump: Pump | None,
        resolver: Resolver,
    ) -> None:
        self._deadlines = deadlines
        self._pump = pump  # plain TCP on sockets of our own (rawsocket), where the platform has them
        self._resolver = resolver
        self._keep_alive = not options.no_reuse
        self._lifetime = options.lifetime if options.lifetime.limited and self._keep_alive else None
        self._compress = options.compress
        self._timeout_s = options.timeout_ns / 1e9
        self._timeout_ns = options.timeout_ns
        self._timeout_text = format_duration(options.timeout_ns)
        self._tls = tls
        self._backend = header_pattern(options.backend_header) if options.backend_header else None
        self._idle: dict[tuple[str, int, bool], list[Connection]] = {}  # by origin
        self._open: set[Connection] = set()
        self._loop = asyncio.get_running_loop()
        # By id(request): no hashing per send. Each holds the request's bytes and its server,
        # (host, port, https), the key of its idle connections, its body's size, and its bytes
        # as a connection's last request (with Connection: close), made once, not per send.
        self._wire: dict[int, tuple[Request, bytes, tuple[str, int, bool], int, bytes]] = {}
        self._server_reported = False  # the Server header is read from the session's first response only

    async def send(self, request: Request, hash_body: bool) -> Result:
        wire = self._wire.get(id(request))
        if wire is None or wire[0] is not request:
            data, host, port, https = wire_request(request, self._keep_alive, self._compress)
            last_data = data if not self._keep_alive else wire_request(request, False, self._compress)[0]
            wire = self._wire[id(request)] = (request, data, (host, port, https), len(request.body), last_data)
        _, data, server, body_size, last_data = wire
        result = Result()
        result.bytes_out = body_size
        result.start_ns = _now()
        deadline = self._loop.time() + self._timeout_s
        connection = self._reusable(server, result)
        dial: _Dial | None = None
        last = False
        try:
            if connection is None:
                dial = _Dial(server[0], deadline)
                connection = await self._dial(dial, server)
                connection.opened_ns = result.connected_ns = _now()
                result.resolved_ns = dial.resolved_ns
                result.tcp_ns = dial.tcp_ns or result.connected_ns  # plain HTTP: no TLS
            if self._lifetime is not None:
                last = self._lifetime.last(connection.served, connection.opened_ns, _now())
                if last:
                    data = last_data
            connection.served += 1
            await connection.send(data, result, hash_body, deadline, result.start_ns + self._timeout_ns,
                                  not self._server_reported)
            if result.connected_ns and result.status:  # a new connection that carried a response
                result.protocol = connection.protocol
        except TimeoutError:
            result.error, result.error_text = ErrorKind.TIMEOUT, self._timeout_message(result, dial)
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
        if connection is not None:
            if not last and connection.reusable and self._keep_alive:
                self._idle.setdefault(server, []).append(connection)
            else:  # its last (whatever the server said: it was told), closed by the server, or failed
                connection.close()
                result.connections_closed += 1
        return result

    def _timeout_message(self, result: Result, dial: _Dial | None) -> str:
        if dial is not None and dial.phase is not None:
            return failures.timeout_text(dial.phase, self._timeout_text, dial.target)
        phase = failures.BODY_PHASE if result.headers_ns else failures.HEADERS_PHASE
        return failures.timeout_text(phase, self._timeout_text)

    def _reusable(self, server: tuple[str, int, bool], result: Result) -> Connection | None:
        """The newest idle connection to `server` still open; those the server closed meanwhile
        are counted as closed in `result`, the send that found them so."""
        idle = self._idle.get(server)
        while idle:
            connection = idle.pop()
            if connection.reusable:
                return connection
            result.connections_closed += 1
        return None

    async def _dial(self, dial: _Dial, server: tuple[str, int, bool]) -> Connection:
        """A new connection to `server`, or TimeoutError once the request's deadline passes.

        The deadline is kept by the same periodic check as the requests' (Deadlines), not by
        asyncio.timeout_at: without keep-alive every request connects, and a Timeout object,
        its timer and its cancellation cost more than the rest of the dial's Python code.
        """
        task = asyncio.current_task(self._loop)  # given the loop, it does not look it up (a getpid() in 3.11)
        assert task is not None
        dial.task = task
        self._deadlines.watch(dial)
        try:
            return await self._connect(dial, *server)
        except asyncio.CancelledError:
            if dial.timed_out and task.uncancel() == 0:
                raise TimeoutError from None
            raise
        finally:
            self._deadlines.release(dial)

    async def _connect(self, dial: _Dial, host: str, port: int, https: bool) -> Connection:
        """A new connection to host:port: look the name up, connect, shake hands, each phase noted in `dial`.

        Done step by step (rather than by one create_connection with the name and ssl) so that
        a timeout can say which step ran out of time.
        """
        addresses: Sequence[Address] | None = numeric(host, port)
        if addresses is None:
            addresses = await self._resolver.resolve(host, port)
            dial.resolved_ns = _now()
        transport, connection = await self._connect_first(dial, addresses, raw=not https and self._pump is not None)
        if https:
            dial.tcp_ns = _now()
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

    async def _connect_first(
        self, dial: _Dial, addresses: Sequence[Address], raw: bool
    ) -> tuple[asyncio.Transport, Connection]:
        """A TCP connection to the first of `addresses` that accepts one; else the first one's error.

        No TCP_NODELAY here: both uvloop and asyncio set it on every TCP transport they make
        (a setsockopt here was a second syscall per connection for nothing).
        """
        first_error: OSError | None = None
        for family, address in addresses:
            dial.phase, dial.address = failures.CONNECT_PHASE, address
            try:
                if raw:
                    assert self._pump is not None
                    sock = await self._pump.connect(family, address, self._keep_alive)
                    connection = self._new_connection()
                    return RawTransport(self._pump, sock, connection), connection
                transport, connection = await self._loop.create_connection(
                    self._new_connection, address[0], address[1], family=family,
                )
            except OSError as exc:
                first_error = first_error or exc
                continue
            return transport, connection
        raise first_error or OSError(f"no address for {dial.target}")

    def _new_connection(self) -> Connection:
        return Connection(self._open, self._loop, self._compress, self._deadlines, self._backend)

    async def aclose(self) -> None:
        for connection in list(self._open):
            connection.close()
        self._idle.clear()

    def held(self) -> list[str]:
        """Its idle connections' protocols: those the server closed meanwhile too, as the next send
        that finds them so counts their close (_reusable)."""
        return [connection.protocol for idle in self._idle.values() for connection in idle]


class _Dial:
    """How far the making of a new connection got: the phase under way, and on what.

    Watched by Deadlines like a Connection: at the deadline, time_out() cancels the task
    that dials, and the dial raises TimeoutError.
    """

    __slots__ = ("phase", "host", "address", "deadline", "task", "timed_out", "resolved_ns", "tcp_ns")

    def __init__(self, host: str, deadline: float) -> None:
        self.phase: str | None = failures.DNS_PHASE  # None once the connection is made
        self.host = host  # the name being looked up ...
        self.address: tuple[Any, ...] | None = None  # ... then the address being connected to
        self.deadline = deadline
        self.task: asyncio.Task[Any] | None = None
        self.timed_out = False
        self.resolved_ns = 0  # when the name lookup ended (Result.resolved_ns; 0: a numeric host)
        self.tcp_ns = 0  # when the TCP connect completed before a TLS handshake (Result.tcp_ns; 0: plain HTTP)

    @property
    def target(self) -> str:
        """What the phase under way works on, as a reader writes it (formatted only when needed)."""
        return self.host if self.address is None else address_text(self.address)

    def time_out(self) -> None:
        if not self.timed_out and self.task is not None:
            self.timed_out = True
            self.task.cancel()

