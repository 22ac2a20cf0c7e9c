"""One HTTP/1.1 connection of the fast transport: an asyncio Protocol whose llhttp parser
callbacks (httptools) fill in the current Result as the response's bytes arrive.

The fast transport (runner.load.fast_transport) opens these, sends a request on one and
awaits the Future it returns; everything about reading the response, interim 1xx heads,
bodies framed or not, a body to hash, the bounds on what a server may make us keep, and
how the connection failed, is here. Requests that outlive the timeout are ended by one
periodic check for all connections (Deadlines), not a timer per request.
"""

from __future__ import annotations

import asyncio
import re
import time
from typing import Protocol

import httptools

from runner.load import failures
from runner.load.bodyhash import BodyError, BodyHash, is_gzip
from runner.load.failures import causes, os_failure
from runner.load.rawsocket import RawTransport
from runner.load.result import BACKEND_CHARS, ErrorKind, Result
from runner.load.transport import MAX_HEAD_BYTES

_now = time.monotonic_ns
_wall = time.time_ns
_CLOCK_PAIR_NS = 20_000  # the most two monotonic readings around a wall clock reading may differ by


class Watched(Protocol):
    """What Deadlines watches: a connection's current request, or a dial in progress."""

    deadline: float  # loop time

    def time_out(self) -> None: ...


class Deadlines:
    """Times out the requests that outlive the timeout, with one periodic check for them all.

    A timer per request (scheduled, then cancelled when the response comes) costs about a
    microsecond each time; at tens of thousands of requests a second that is several
    percent of the client. Checking every 1/20 of the timeout (at most 100 ms, at least
    1 ms) instead ends a stuck request at most 5% late, and costs nothing per request but
    two set operations. A response that completes between its deadline and the next check
    is no answer in time either: the connection compares its arrival with the deadline
    itself (Connection._finish), so the check's slack only delays giving up, never the verdict.
    """

    def __init__(self, loop: asyncio.AbstractEventLoop, timeout_ns: int) -> None:
        self._loop = loop
        self._period = min(max(timeout_ns / 20e9, 0.001), 0.1)
        self._busy: set[Watched] = set()
        self._handle: asyncio.TimerHandle | None = None

    def watch(self, connection: Watched) -> None:
        self._busy.add(connection)
        if self._handle is None:
            self._handle = self._loop.call_later(self._period, self._check)

    def release(self, connection: Watched) -> None:
        self._busy.discard(connection)

    def _check(self) -> None:
        now = self._loop.time()
        for connection in [c for c in self._busy if c.deadline <= now]:
            connection.time_out()
        self._handle = self._loop.call_later(self._period, self._check) if self._busy else None


class ParseFailure(Exception):
    """Raised in a parser callback to stop parsing: the response fails with this kind and text."""

    def __init__(self, kind: ErrorKind, text: str) -> None:
        super().__init__(text)
        self.kind, self.text = kind, text


class Connection(asyncio.Protocol):
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
        self, registry: set[Connection], loop: asyncio.AbstractEventLoop, compress: bool, deadlines: Deadlines,
        backend: re.Pattern[bytes] | None = None,
    ) -> None:
        self._registry = registry
        self._backend = backend  # finds the backendHeader in a head (header_pattern); None when the run names none
        self._loop = loop
        self._compress = compress
        self._deadlines = deadlines
        self.deadline = 0.0  # loop time by which the current request must be done (for Deadlines' check)
        self._deadline_ns = 0  # the same on the monotonic clock, exact: what a response's arrival is held to
        self._transport: asyncio.Transport | None = None
        self._raw: RawTransport | None = None  # the transport, when it is one that stamps what it reads
        self._parser = httptools.HttpResponseParser(self)
        self._result: Result | None = None
        self._waiter: asyncio.Future[None] | None = None
        self._hash_body = False
        self._hasher: BodyHash | None = None
        self._hashing = False  # inflating and hashing in steps, reading paused meanwhile (_hash_step)
        self._completed = False  # the response ended while it was still being hashed
        self._keep = False  # whether the server keeps the connection, read when the response ended
        self._read_paused = False  # reading is paused while a body is hashed
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
        # The session's, for the connection's lifetime (transport.Lifetime): requests written
        # on it, and when it was ready for its first (monotonic ns).
        self.served = 0
        self.opened_ns = 0

    # --- used by the session ---------------------------------------------------------

    def send(
        self, data: bytes, result: Result, hash_body: bool, deadline: float, deadline_ns: int, want_server: bool
    ) -> asyncio.Future[None]:
        """Write one request; the returned Future completes when its response has, or raises
        TimeoutError if the response completed after `deadline_ns` (loop time `deadline`).

        The connection may have been lost between its making and this first request (a
        server that resets right after accept): the request then fails with how it was
        lost, rather than being written to a transport that is gone.
        """
        assert self._transport is not None
        self.reusable = False
        self._result = result
        self._hash_body = hash_body
        self._hasher = None
        self._hashing = self._completed = False
        self._wire = self._no_body_run = 0
        self._head = []
        self._interim = False
        self._head_request = data.startswith(b"HEAD ")
        self._want_server = want_server
        self._waiter = waiter = self._loop.create_future()
        self.deadline, self._deadline_ns = deadline, deadline_ns
        self._deadlines.watch(self)
        if self._lost:
            self._report_loss(self._lost_exc)
        elif not self._transport.is_closing():  # closing: connection_lost is on its way and says why
            # Read before the write: the server may read the request, and start on it, before write() returns.
            result.written_ns = _now()
            if not result.connected_ns:  # on a reused connection the request starts here, at the write
                result.start_ns = result.written_ns
            self._transport.write(data)
        return waiter

    def _arrived_ns(self, result: Result) -> int:
        """When the bytes being parsed arrived, on the monotonic clock: the kernel's stamp where
        there is one, else now (the loop's earliest reading).

        The kernel stamps with CLOCK_REALTIME. The offset to the monotonic clock is measured
        afresh each time, from a wall clock reading between two monotonic ones, so none is
        kept and none can drift, and a step of the wall clock misleads only the responses
        stamped before it and read after it. The two monotonic readings must be close: on a
        busy machine the process can be preempted between two readings, and a 5 ms pause
        there once dated an answer 5 ms before the server sent it. A stamp that reads before
        the request started (a step, or one left from an earlier read) is not used.
        """
        now = _now()
        raw = self._raw
        if raw is not None and raw.stamp_ns:
            wall = _wall()
            after = _now()
            if after - now < _CLOCK_PAIR_NS:
                arrived = raw.stamp_ns - wall + (now + after) // 2
                if result.start_ns <= arrived <= now:
                    result.kernel_clock = True
                    return arrived
        return now

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
        self._raw = transport if isinstance(transport, RawTransport) else None
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
            self._fail(ErrorKind.PROTOCOL, failures.SWITCHED_PROTOCOLS)
        except httptools.HttpParserError as exc:
            failure = exc.__context__
            if isinstance(failure, ParseFailure):
                self._fail(failure.kind, failure.text)
            else:
                self._fail(ErrorKind.PROTOCOL, f"protocol: invalid response: {exc}")
        if self._result is result:  # the response is not complete yet: hold what it may keep to the bound
            self._check_bounds(result, in_head, len(data), result.bytes_in > body_before)

    def _check_bounds(self, result: Result, in_head: bool, size: int, had_body: bool) -> None:
        if not result.headers_ns:
            if self._wire > MAX_HEAD_BYTES:
                self._fail(ErrorKind.PROTOCOL, failures.head_too_large(MAX_HEAD_BYTES))
        elif not in_head:
            self._no_body_run = 0 if had_body else self._no_body_run + size
            if self._no_body_run > MAX_HEAD_BYTES:
                self._fail(ErrorKind.PROTOCOL, failures.framing_too_large(MAX_HEAD_BYTES))

    def connection_lost(self, exc: Exception | None) -> None:
        self._registry.discard(self)
        self.reusable = False
        self._lost, self._lost_exc = True, exc
        if self._result is not None:
            self._report_loss(exc)
        # The parser holds this protocol for its callbacks: a reference cycle that only the
        # cyclic GC would free. Without keep-alive there is one per request, and collecting
        # them was 5% of the client's CPU; a fresh parser without callbacks breaks it.
        self._parser = _SPENT

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
            self._fail(ErrorKind.CLOSED, "closed: Server disconnected without sending a response.")
        else:
            length, framed = _framing(b"".join(self._head))
            if exc is None and not framed:
                self.on_message_complete()  # the body ran until the server closed: it is complete
                return
            expected = f"expected {length}" if length is not None else "of a body of unknown length"
            self._fail(ErrorKind.CLOSED, "closed: peer closed connection without sending complete message body "
                                     f"(received {result.bytes_in} bytes, {expected})")

    # --- httptools callbacks -----------------------------------------------------------

    def on_message_begin(self) -> None:
        if self._result is None:
            # A response begins in the read that ended the one asked for (a read that starts
            # after it is refused in data_received): the server answered twice, or sent bytes
            # after the body, and whatever the next request read first would not be its answer.
            # llhttp passes over CR and LF between responses without this call; any other byte
            # begins a response.
            raise ParseFailure(ErrorKind.PROTOCOL, "protocol: a response nobody asked for")

    def on_headers_complete(self) -> None:
        result = self._result
        assert result is not None  # on_message_begin refused a response nobody asked for
        status = self._parser.get_status_code()
        if status < 100:
            # llhttp takes any three digits, `000` and `099` too; no such status exists, and
            # taken for an interim head it would wait for a final one until the timeout.
            raise ParseFailure(ErrorKind.PROTOCOL, f"protocol: invalid response: status code {status:03d} is below 100")
        if status < 200:
            # An interim response (100 Continue, 102 Processing, 103 Early Hints): the final
            # one follows on the same connection, and it is the one measured. 101 is not
            # interim: what follows is no longer HTTP.
            if status == 101:
                raise ParseFailure(ErrorKind.PROTOCOL, failures.SWITCHED_PROTOCOLS)
            self._interim = True
            return
        result.headers_ns = self._arrived_ns(result)
        result.status = status
        inflate = self._hash_body and self._compress  # a gzipped body is hashed inflated
        backend = self._backend
        head = _final_head(b"".join(self._head)) if self._want_server or inflate or backend is not None else b""
        if self._want_server:
            result.server = _header(_SERVER, head)
        if backend is not None:
            result.backend = _header(backend, head)[:BACKEND_CHARS]
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
        hasher = self._hasher
        if hasher is not None:
            hasher.update(body)
            if hasher.pending and not self._hashing:
                # A gzipped body is inflated and hashed a step at a time, the loop running in
                # between (a timeout included); reading waits, so what is kept stays one read.
                self._hashing = True
                self._pause_reading(True)
                self._loop.call_soon(self._hash_step, result)

    def _hash_step(self, result: Result) -> None:
        """One bounded step of inflating and hashing the current body; the next one, or the end."""
        hasher = self._hasher
        if self._result is not result or hasher is None:
            return  # the request ended meanwhile: it timed out, failed or was abandoned
        try:
            hasher.step()
        except BodyError as exc:
            self._fail(ErrorKind.PROTOCOL, str(exc))
            return
        if hasher.pending:
            self._loop.call_soon(self._hash_step, result)
            return
        self._hashing = False
        if self._completed:
            self._complete()
        else:
            self._pause_reading(False)

    def _pause_reading(self, pause: bool) -> None:
        """Pause reading from the transport, or resume it if it was paused here."""
        transport = self._transport
        if transport is None or pause == self._read_paused or transport.is_closing():
            return
        self._read_paused = pause
        if pause:
            transport.pause_reading()
        else:
            transport.resume_reading()

    def on_message_complete(self) -> None:
        if self._interim:
            self._interim = False  # the 1xx ended; its final response is still to come
            return
        self._keep = self._parser.should_keep_alive()
        if self._hashing:
            self._completed = True  # ended by _hash_step, once the body is hashed
            return
        self._complete()

    def _complete(self) -> None:
        """The response is whole, its body hashed if sampled: finish it, and keep the connection or not."""
        result = self._result
        assert result is not None
        if self._hasher is not None:
            try:
                result.body_hash = self._hasher.value()
            except BodyError as exc:
                self._fail(ErrorKind.PROTOCOL, str(exc))
                return
        # The head, any interim heads before it, and any chunk framing.
        result.header_bytes = self._wire - result.bytes_in
        result.kept_alive = keep = self._keep
        self._finish()
        # A response that came before its request was all written (a large body the server
        # answered early) leaves the connection out of step: whether the server reads the
        # rest or takes it for the next request is its own. Not reused, as curl does.
        self.reusable = keep = keep and not self._unwritten()
        if not keep:
            self.close()
        else:
            self._pause_reading(False)  # the next response is read as it comes

    def _unwritten(self) -> int:
        """Bytes of the request not yet handed to the kernel (the transport's write buffer)."""
        transport = self._transport
        return transport.get_write_buffer_size() if transport is not None and not transport.is_closing() else 0

    # --- endings -----------------------------------------------------------------------

    def time_out(self) -> None:
        """The current request ran out of time: its send() raises TimeoutError (and aborts)."""
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_exception(TimeoutError())

    def _fail(self, kind: ErrorKind, text: str) -> None:
        """Fail the current request, if any, and drop the connection: it is no longer in step."""
        result = self._result
        if result is not None:
            result.error, result.error_text = kind, text
            self._finish()
        self.reusable = False
        if self._transport is not None:
            self._transport.abort()

    def _finish(self) -> None:
        """The current request is over: its Result is complete, and its waiter told.

        An ending that came after the deadline is a timeout, whatever it was: the periodic
        check (Deadlines) may not have looked yet. A head that came after the deadline too is
        forgotten, so the timeout says no response headers came in time, as httpx's does.
        """
        result, waiter = self._result, self._waiter
        self._result = self._waiter = None
        self._head = []
        self._deadlines.release(self)
        late = False
        if result is not None:
            result.end_ns = self._arrived_ns(result) if result.headers_ns else _now()
            late = result.end_ns > self._deadline_ns
            if result.headers_ns > self._deadline_ns:
                result.headers_ns = result.status = 0
        if waiter is not None and not waiter.done():
            if late:
                waiter.set_exception(TimeoutError())
            else:
                waiter.set_result(None)


_SPENT = httptools.HttpResponseParser(object())  # a lost connection's parser: no callbacks, no cycle


def header_pattern(name: str) -> re.Pattern[bytes]:
    """What finds the header `name` (a token: the schema allows no other) in a response head, for _header."""
    return re.compile(rb"\r\n" + re.escape(name.encode("ascii")) + rb":[ \t]*([^\r\n]*)", re.IGNORECASE)


_SERVER = header_pattern("server")


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
