"""The HTTP/1.1 response contract: one table of (request method, bytes in, outcome), for every
parser the project has, fed those bytes as a socket would feed them.

h11 tests itself this way: a protocol is bytes in and events out, so its cases are data and
need no server. Each row (`Case`) is what a server sends for a request of some method, whether
it then closes the connection, and what must come of it: a `Response` (status, body bytes, and
whether the connection may carry another request), a `Failure` (kind and text, as a run counts
and prints them) or `PENDING` (nothing ends it but the request's timeout).
tests/unit/test_response_contract.py feeds every row to every parser whole, in two at every
byte, a byte per read, and in seeded random splits (`feeds`): however the reads fall, the
outcome is the row's. A row with `reads` is fed in exactly those reads: its outcome is about
a bound the parser checks after each read, so where a read ends decides.

The rows are written by hand, each outcome the rule it stands for (llhttp's grammar, strict,
and the native engine's rules on top: response.h says which); no parser's answer is the
reference for another's. The parsers, each a `Parser` (method, reads, closed -> outcome):

- `NativeParser`: runner/load/native/response.c through its test binding
  runner.load.native._response, as `pip install -e .` builds it in place (`native_module`),
  with the native engine's rule for keeping a connection applied to what the parser says;
  every row must come out exactly as written;
- `H11Parser`: h11 as httpx runs it, runner.load.httpx_transport's session (httpcore's pool and
  connection, the transport's naming of failures) over scripted connections (_Scripted), no
  socket; where it reads a row otherwise is one table, H11_DIFFERS (at the end), each
  difference checked to be still true.

What needs a socket (timeouts, resets, slow bytes, what a real server sends) stays with the
fault servers (tests/support/faultserver.py) and tests/integration/test_native_response.py,
which checks that the fault server's answers are the bytes of the rows FAULT_SERVER names, and
that what it and a real nginx send comes to the outcomes of those rows.
"""

from __future__ import annotations

import asyncio
import gzip
import importlib
import random
import ssl
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

import httpcore

from runner.load import failures
from runner.load.request import Request
from runner.load.transport import MAX_HEAD_BYTES, Resolver, TransportOptions
from tests.support.faultserver import CHUNKS, GZIP_LIE, GZIP_PLAIN, OK_BODY, RESET_DECLARED, RESET_SENT
from tests.support.replay import REPO

NATIVE_SOURCES = REPO / "runner" / "load" / "native"


@dataclass(frozen=True)
class Response:
    """A whole response: its status, its body's bytes, and whether the connection may carry another request."""

    status: int
    body: int
    reusable: bool


@dataclass(frozen=True)
class Failure:
    """No response: the failure's kind and text, as a run counts and prints them."""

    kind: str
    text: str


@dataclass(frozen=True)
class Pending:
    """Still waiting for bytes: only the request's timeout ends it."""


PENDING = Pending()
Outcome = Response | Failure | Pending


@dataclass(frozen=True)
class Case:
    """One row: what a server sends for a request of `method` (then its close, or silence), and what comes of it."""

    name: str
    data: bytes
    outcome: Outcome
    method: str = "GET"
    closed: bool = False  # the server closes the connection after `data`; else it keeps it, and says no more
    reads: tuple[int, ...] = ()  # fed in reads of these sizes only (the last one repeated to the end)


Parser = Callable[[str, Sequence[bytes], bool], Outcome]


# --- the parsers --------------------------------------------------------------------------------


class _Silence(Exception):
    """The scripted server has no more to say and keeps the connection open: the response is pending."""


class _Scripted(httpcore.AsyncNetworkStream):
    """A connection whose server sends `reads`, one per read, then closes it or falls silent."""

    def __init__(self, reads: Sequence[bytes], closed: bool) -> None:
        self._reads = list(reads)
        self._closed = closed

    async def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        if self._reads:
            data = self._reads.pop(0)
            if len(data) > max_bytes:  # as a socket hands over no more than asked
                self._reads.insert(0, data[max_bytes:])
                data = data[:max_bytes]
            return data
        if self._closed:
            return b""
        raise _Silence

    async def write(self, buffer: bytes, timeout: float | None = None) -> None:
        pass

    async def aclose(self) -> None:
        pass

    def get_extra_info(self, info: str) -> object:
        # httpcore drops an idle connection its socket says is readable: bytes or the close wait.
        return bool(self._reads) or self._closed if info == "is_readable" else None


class _ScriptedBackend(httpcore.AsyncNetworkBackend):
    """Every connection httpcore makes is the next script's (H11Parser)."""

    def __init__(self) -> None:
        self.script: _Scripted | None = None

    async def connect_tcp(self, host: str, port: int, timeout: float | None = None, local_address: str | None = None,
                          socket_options: object = None) -> httpcore.AsyncNetworkStream:
        assert self.script is not None
        return self.script

    async def sleep(self, seconds: float) -> None:
        pass


class H11Parser:
    """h11 as httpx runs it: runner.load.httpx_transport's session (httpcore's pool and its h11
    connection, and the transport's own naming of failures), its connections scripted by
    _Scripted, on an event loop of its own; use it as a context. A connection is kept (reusable)
    when the pool holds it idle after the response, with nothing more to read."""

    name = "h11"

    def __enter__(self) -> H11Parser:
        from runner.load.httpx_transport import HttpxSession

        self._loop = asyncio.new_event_loop()
        options = TransportOptions(timeout_ns=3600 * 10**9, no_reuse=False, compress=False, max_connections=1,
                                   https=False)
        self._backend = _ScriptedBackend()

        async def session() -> HttpxSession:
            made = HttpxSession(options, ssl.create_default_context(), Resolver())
            made._pool._network_backend = self._backend
            return made

        self._session = self._loop.run_until_complete(session())
        return self

    def __exit__(self, *exc: object) -> None:
        self._loop.run_until_complete(self._session.aclose())
        self._loop.close()

    def __call__(self, method: str, reads: Sequence[bytes], closed: bool) -> Outcome:
        return self._loop.run_until_complete(self._send(method, reads, closed))

    async def _send(self, method: str, reads: Sequence[bytes], closed: bool) -> Outcome:
        pool = self._session._pool
        self._backend.script = _Scripted(reads, closed)
        try:
            result = await self._session.send(Request(method, "http://127.0.0.1/", (), b""), False)
        except _Silence:
            return PENDING
        finally:
            kept = [connection for connection in pool.connections if connection.is_idle() and not connection.has_expired()]
            for connection in list(pool.connections):
                await connection.aclose()
        if result.error:
            return Failure(str(result.error), result.error_text)
        return Response(result.status, result.bytes_in, bool(kept))


def native_module() -> ModuleType | None:
    """runner.load.native._response as `pip install -e .` built it beside its sources; None where it
    was not built (no compiler). The unit tier starts no compiler: the integration tier builds
    its own copies (tests/support/replay.py: native_parser)."""
    try:
        return importlib.import_module("runner.load.native._response")
    except ImportError:
        return None


def stale(module: ModuleType) -> str | None:
    """Why the binding is not the tree's parser (a source changed after it was built), or None.

    (In a session that also ran the integration tier, the module may be a copy that
    tests/support/replay.py built from the sources: a single-phase extension module puts
    itself in sys.modules under its name wherever it was loaded from.)
    """
    built = Path(module.__file__ or "")
    newer = [name for name in ("response.c", "response.h", "_response.c")
             if (NATIVE_SOURCES / name).stat().st_mtime > built.stat().st_mtime]
    if not newer:
        return None
    return f"{built.name} is older than {' and '.join(newer)}: rebuild it (pip install -e .)"


class NativeParser:
    """response.c through its binding, and the native engine's rule for keeping the connection."""

    name = "native"

    def __init__(self, module: ModuleType) -> None:
        self._module = module

    def __call__(self, method: str, reads: Sequence[bytes], closed: bool) -> Outcome:
        said = self._module.parse(method, list(reads), MAX_HEAD_BYTES, closed)
        if said["outcome"] == "pending":
            return PENDING
        if said["outcome"] == "failed":
            return Failure(said["kind"], said["text"])
        # core.c keeps a connection its server keeps (keep_alive) unless the request was HEAD or
        # bytes came after the response: in the read that ended it (`parsed`'s leftover), or later,
        # or the close, while the connection waits idle (it is then released).
        index, offset = said["end_at"]
        after = sum(map(len, reads[index + 1:])) + (len(reads[index]) - offset if index < len(reads) else 0)
        reusable = said["keep_alive"] and method != "HEAD" and not after and not closed
        return Response(said["status"], said["body_bytes"], reusable)


# --- how a row is fed ---------------------------------------------------------------------------

SPLIT_EVERY_BYTE = 4096  # rows up to this long are split at every byte; longer ones only at random


def feeds(case: Case, seed: int, random_splits: int) -> Iterator[tuple[str, list[bytes]]]:
    """The ways a row is read, each named: whole, in two at every byte, a byte per read, and at
    `random_splits` sets of seeded random points (the seed and the row's name pick them)."""
    data = case.data
    if case.reads:
        yield f"in reads of {case.reads}", fixed_reads(data, case.reads)
        return
    if not data:
        yield "nothing", []
        return
    yield "whole", [data]
    if len(data) <= SPLIT_EVERY_BYTE:
        for at in range(1, len(data)):
            yield f"split at {at}", [data[:at], data[at:]]
        yield "a byte per read", [data[i:i + 1] for i in range(len(data))]
    rng = random.Random(f"{seed}/{case.name}")
    for _ in range(random_splits if len(data) > 2 else 0):
        cuts = sorted(rng.sample(range(1, len(data)), rng.randint(1, min(8, len(data) - 1))))
        yield f"split at {cuts}", [data[a:b] for a, b in zip([0, *cuts], [*cuts, len(data)], strict=True)]


def fixed_reads(data: bytes, sizes: Sequence[int]) -> list[bytes]:
    """`data` in reads of `sizes`, the last size repeated to the end."""
    reads: list[bytes] = []
    at = 0
    while at < len(data):
        size = sizes[min(len(reads), len(sizes) - 1)]
        reads.append(data[at:at + size])
        at += size
    return reads


# --- the table ----------------------------------------------------------------------------------

OK = b"HTTP/1.1 200 OK"
TE = b"Transfer-Encoding: chunked"


def head(status: bytes, *headers: bytes) -> bytes:
    return status + b"\r\n" + b"".join(h + b"\r\n" for h in headers) + b"\r\n"


def chunked(*pieces: bytes, trailers: bytes = b"", ext: bytes = b"") -> bytes:
    return b"".join(b"%x%s\r\n%s\r\n" % (len(p), ext, p) for p in pieces) + b"0\r\n" + trailers + b"\r\n"


def invalid(reason: str) -> Failure:
    """llhttp refused the bytes, for `reason` (its own words)."""
    return Failure("protocol", f"protocol: invalid response: {reason}")


def cut(received: int, expected: int | None = None) -> Failure:
    """The server closed inside a body whose end is marked (a length, or chunks)."""
    of = f"expected {expected}" if expected is not None else "of a body of unknown length"
    return Failure("closed", "closed: peer closed connection without sending complete message body "
                             f"(received {received} bytes, {of})")


def kept(status: int, body: int) -> Response:
    return Response(status, body, True)


def ended(status: int, body: int) -> Response:
    """A response after which the connection may not carry another request."""
    return Response(status, body, False)


NO_RESPONSE = Failure("closed", "closed: Server disconnected without sending a response.")
SWITCHED = Failure("protocol", failures.SWITCHED_PROTOCOLS)
HEAD_TOO_LARGE = Failure("protocol", failures.head_too_large(MAX_HEAD_BYTES))
FRAMING_TOO_LARGE = Failure("protocol", failures.framing_too_large(MAX_HEAD_BYTES))

LENGTH_2 = head(OK, b"Content-Length: 2") + b"ok"
HELLO = head(OK, b"Content-Length: 5") + b"hello"
GZIPPED = gzip.compress(GZIP_PLAIN, mtime=0)  # the fault server's /gzip body
UNTIL_CLOSE = head(OK) + b"until the close"  # no length, not chunked: the body ends with the connection
FILLER = b"X-Filler: " + b"f" * 1000 + b"\r\n"  # a header line of 1 KiB, for the bounds
_START = OK + b"\r\nX-A: "


def _at_bound(extra: int) -> bytes:
    """A head `extra` bytes longer than the bound, not yet ended."""
    return _START + b"a" * (MAX_HEAD_BYTES - len(_START) + extra)


def _status(code: str) -> bytes:
    """What the fault server's /raw-status/CODE sends: that status code, verbatim."""
    return f"HTTP/1.1 {code} Whatever\r\nContent-Length: {len(OK_BODY)}\r\n\r\n".encode() + OK_BODY


CASES: tuple[Case, ...] = (
    # --- bodies framed by a length: the length may lie either way
    Case("length", HELLO, kept(200, 5)),
    Case("length, then the close", HELLO, ended(200, 5), closed=True),
    Case("length 0", head(OK, b"Content-Length: 0"), kept(200, 0)),
    Case("length with leading zeros and blanks after", head(OK, b"Content-Length: 0005 \t") + b"hello", kept(200, 5)),
    Case("length longer than the body", head(OK, b"Content-Length: 10") + b"hello", PENDING),
    Case("length longer than the body, then the close", head(OK, b"Content-Length: 10") + b"hello", cut(5, 10),
         closed=True),
    Case("length shorter than the body: the rest is after the response", head(OK, b"Content-Length: 2") + b"hello",
         ended(200, 2)),
    Case("length of 2^64-1", head(OK, b"Content-Length: 18446744073709551615") + b"a few bytes", PENDING),
    Case("length past 2^64-1", head(OK, b"Content-Length: 18446744073709551616"), invalid("Content-Length overflow")),
    Case("length of letters", head(OK, b"Content-Length: abc"), invalid("Invalid character in Content-Length")),
    Case("length with a sign", head(OK, b"Content-Length: +5"), invalid("Invalid character in Content-Length")),
    Case("length of two numbers", head(OK, b"Content-Length: 1 2"), invalid("Invalid character in Content-Length")),
    Case("length listed twice in one line", head(OK, b"Content-Length: 5, 5"),
         invalid("Invalid character in Content-Length")),
    Case("length empty", head(OK, b"Content-Length:  \t"), invalid("Empty Content-Length")),
    Case("length twice", head(OK, b"Content-Length: 5", b"Content-Length: 5") + b"hello",
         invalid("Duplicate Content-Length")),
    Case("length, then chunked", head(OK, b"Content-Length: 5", TE) + chunked(b"hello"),
         invalid("Transfer-Encoding can't be present with Content-Length")),
    Case("chunked, then a length", head(OK, TE, b"Content-Length: 5") + b"hello",
         invalid("Content-Length can't be present with Transfer-Encoding")),
    # --- chunked bodies: sizes, extensions, trailers
    Case("chunked", head(OK, TE) + chunked(b"a" * 10, b"b", b"c" * 300), kept(200, 311)),
    Case("chunked, then the close", head(OK, TE) + chunked(b"hello"), ended(200, 5), closed=True),
    Case("chunk sizes in upper case, the last of four zeros", head(OK, TE) + b"A\r\n" + b"z" * 10 + b"\r\n0000\r\n\r\n",
         kept(200, 10)),
    Case("chunk extensions", head(OK, TE) + chunked(b"hello", ext=b';a=b;c;d="q \\" t";e=""'), kept(200, 5)),
    Case("trailers", head(OK, TE) + chunked(b"hello", trailers=b"X-Sum: 1\r\nServer: trailing\r\n"), kept(200, 5)),
    Case("a trailer that says close", head(OK, TE) + chunked(b"hello", trailers=b"Connection: close\r\n"),
         ended(200, 5)),
    Case("a trailer with a length", head(OK, TE) + chunked(b"hello", trailers=b"Content-Length: 5\r\n"),
         invalid("Content-Length can't be present with Transfer-Encoding")),
    Case("gzip, then chunked", head(OK, b"Transfer-Encoding: gzip, chunked") + chunked(b"hello"), kept(200, 5)),
    Case("chunked in any case, blanks after", head(OK, b"Transfer-Encoding: CHUNKED  ") + chunked(b"hello"),
         kept(200, 5)),
    Case("chunked, unfinished", head(OK, TE) + b"5\r\nhello\r\n", PENDING),
    Case("chunked, cut by the close", head(OK, TE) + b"5\r\nhello\r\n", cut(5), closed=True),
    Case("chunk size of 2^64-1", head(OK, TE) + b"ffffffffffffffff\r\nsome", PENDING),
    Case("chunk size past 2^64-1", head(OK, TE) + b"10000000000000000\r\n", invalid("Chunk size overflow")),
    Case("chunk size not hexadecimal", head(OK, TE) + b"zz\r\nhello\r\n0\r\n\r\n",
         invalid("Invalid character in chunk size")),
    Case("chunk size negative", head(OK, TE) + b"-5\r\n", invalid("Invalid character in chunk size")),
    Case("chunk size with a blank after", head(OK, TE) + b"5 \r\nhello\r\n0\r\n\r\n",
         invalid("Invalid character in chunk size")),
    Case("chunk size empty", head(OK, TE) + b"\r\nhello\r\n0\r\n\r\n", invalid("Invalid character in chunk size")),
    Case("chunk size ended by LF alone", head(OK, TE) + b"5\nhello\r\n0\r\n\r\n",
         invalid("Missing expected CR after chunk size")),
    Case("chunk extension after a blank", head(OK, TE) + b"5; a=b\r\nhello\r\n0\r\n\r\n",
         invalid("Invalid character in chunk extensions")),
    Case("chunk extension name of a bad byte", head(OK, TE) + b"5;a(\r\nhello\r\n0\r\n\r\n",
         invalid("Invalid character in chunk extensions name")),
    Case("chunk extension quote left open", head(OK, TE) + b'5;a="b\r\nhello\r\n0\r\n\r\n',
         invalid("Invalid character in chunk extensions quoted value")),
    Case("chunk longer than its size", head(OK, TE) + b"5\r\nhelloX\r\n0\r\n\r\n", invalid("Expected LF after chunk data")),
    Case("chunk ended by LF alone", head(OK, TE) + b"5\r\nhello\n0\r\n\r\n",
         invalid("Missing expected CR after chunk data")),
    Case("a folded trailer", head(OK, TE) + b"0\r\nX: a\r\n b\r\n\r\n", invalid("Unexpected whitespace after header value")),
    # --- interim 1xx heads are skipped; 101 is no interim head
    Case("100 Continue, then the response", head(b"HTTP/1.1 100 Continue") + LENGTH_2, kept(200, 2)),
    Case("102 and 103, then the response",
         head(b"HTTP/1.1 102 Processing") + head(b"HTTP/1.1 103 Early Hints", b"Link: </a>") + LENGTH_2, kept(200, 2)),
    Case("a 1xx with a body (counted)", head(b"HTTP/1.1 150 Odd", b"Content-Length: 3") + b"abc" + LENGTH_2,
         kept(200, 5)),
    Case("a 1xx with no reason phrase", head(b"HTTP/1.1 100") + LENGTH_2, kept(200, 2)),
    Case("blank lines after a 1xx", head(b"HTTP/1.1 100 Continue") + b"\r\n\r\n" + LENGTH_2, kept(200, 2)),
    Case("a lone 102", head(b"HTTP/1.1 102 Processing"), PENDING),
    Case("a lone 102, then the close", head(b"HTTP/1.1 102 Processing"), NO_RESPONSE, closed=True),
    Case("a 1xx in HTTP/1.0, which closes", head(b"HTTP/1.0 100 Continue") + LENGTH_2,
         invalid("Data after `Connection: close`")),
    Case("101 Switching Protocols",
         head(b"HTTP/1.1 101 Switching Protocols", b"Upgrade: websocket", b"Connection: Upgrade") + b"\x00\x01",
         SWITCHED),
    Case("101 without an upgrade", head(b"HTTP/1.1 101 Switching Protocols"), SWITCHED),
    Case("100 Continue, then the response to HEAD", head(b"HTTP/1.1 100 Continue") + HELLO, ended(200, 0),
         method="HEAD"),
    # --- bodies that end with the connection
    Case("a body to the close", UNTIL_CLOSE, ended(200, 15), closed=True),
    Case("a body to the close, not closed yet", UNTIL_CLOSE, PENDING),
    Case("an empty body to the close", head(OK), ended(200, 0), closed=True),
    Case("Transfer-Encoding identity: to the close", head(OK, b"Transfer-Encoding: identity") + b"until the close",
         ended(200, 15), closed=True),
    Case("a status past 599, to the close", head(b"HTTP/1.1 600 Whatever") + b"until the close", ended(600, 15),
         closed=True),
    # --- responses with no body, whatever their head says
    Case("HEAD, with a length", HELLO[:-5], ended(200, 0), method="HEAD"),
    Case("HEAD, chunked", head(OK, TE), ended(200, 0), method="HEAD"),
    Case("HEAD, no length", head(OK), ended(200, 0), method="HEAD"),
    Case("HEAD answered with a body too", HELLO, ended(200, 0), method="HEAD"),
    Case("204, no length", head(b"HTTP/1.1 204 No Content"), kept(204, 0)),
    Case("204 with a length", head(b"HTTP/1.1 204 No Content", b"Content-Length: 5"), kept(204, 0)),
    Case("204, chunked", head(b"HTTP/1.1 204 No Content", TE), kept(204, 0)),
    Case("304, no length", head(b"HTTP/1.1 304 Not Modified"), kept(304, 0)),
    Case("304 with a length", head(b"HTTP/1.1 304 Not Modified", b"Content-Length: 612", b'ETag: "x"'), kept(304, 0)),
    Case("304, Transfer-Encoding gzip", head(b"HTTP/1.1 304 Not Modified", b"Transfer-Encoding: gzip"), kept(304, 0)),
    # --- status lines
    Case("not HTTP", b"SSH-2.0-OpenSSH_9.6 this is not HTTP\r\n\r\n", invalid("Expected HTTP/, RTSP/ or ICE/")),
    Case("http in lower case", b"http/1.1 200 OK\r\n\r\n", invalid("Expected HTTP/, RTSP/ or ICE/")),
    Case("HTTP/1.2", head(b"HTTP/1.2 200 OK"), invalid("Invalid HTTP version")),
    Case("HTTP/11.1", head(b"HTTP/11.1 200 OK"), invalid("Expected dot")),
    Case("no space after the version", head(b"HTTP/1.1200 OK"), invalid("Expected space after version")),
    Case("two spaces after the version", head(b"HTTP/1.1  200 OK"), invalid("Invalid status code")),
    Case("a status of two digits", head(b"HTTP/1.1 20 OK"), invalid("Invalid status code")),
    Case("a status of four digits", head(b"HTTP/1.1 2000 OK"), invalid("Invalid response status")),
    Case("a status of letters", head(b"HTTP/1.1 2x0 OK"), invalid("Invalid status code")),
    Case("status 000", _status("000"), invalid("status code 000 is below 100")),
    Case("status 099", _status("099"), invalid("status code 099 is below 100")),
    Case("status 99", _status("99"), invalid("Invalid status code")),
    Case("status 0999", _status("0999"), invalid("Invalid response status")),
    Case("status 1000", _status("1000"), invalid("Invalid response status")),
    Case("status abc", _status("abc"), invalid("Invalid status code")),
    Case("status 600", _status("600"), kept(600, len(OK_BODY))),
    Case("status 999", head(b"HTTP/1.1 999 Whatever", b"Content-Length: 2") + b"ok", kept(999, 2)),
    Case("no reason phrase", head(b"HTTP/1.1 404", b"Content-Length: 2") + b"no", kept(404, 2)),
    Case("an empty reason phrase", head(b"HTTP/1.1 500 ", b"Content-Length: 2") + b"no", kept(500, 2)),
    Case("any bytes in the reason phrase", head(b"HTTP/1.1 200 \x01\x7f\xff ok", b"Content-Length: 2") + b"ok",
         kept(200, 2)),
    Case("blank lines before the status line", b"\r\n\n\r\n" + LENGTH_2, kept(200, 2)),
    Case("a status line ended by LF alone", b"HTTP/1.1 200 OK\nContent-Length: 0\r\n\r\n",
         invalid("Missing expected CR after response line")),
    Case("RTSP/1.0", head(b"RTSP/1.0 200 OK", b"Content-Length: 2") + b"ok", ended(200, 2)),
    # --- header lines
    Case("header names and values of every byte allowed",
         head(OK, b"!#$%&'*+-.^_`|~09AZaz: v", b"X-Empty:", b"X-Blank: \t ", b"X-High: \x80\xff",
              b'X-Quote: "a,b"', b"Content-Length: 2") + b"ok", kept(200, 2)),
    Case("a folded header line", head(OK, b"X-Folded: a", b" b", b"Content-Length: 0"),
         invalid("Unexpected whitespace after header value")),
    Case("a blank before the first header", b"HTTP/1.1 200 OK\r\n X: y\r\n\r\n",
         invalid("Unexpected space after start line")),
    Case("a blank before the colon of Content-Length", head(OK, b"Content-Length : 0"),
         invalid("Invalid header field char")),
    Case("a blank before a colon", head(OK, b"X-A : 0"), invalid("Invalid header token")),
    Case("a blank in a name", head(OK, b"X A: 0"), invalid("Invalid header token")),
    Case("an empty name", head(OK, b": 0"), invalid("Invalid header token")),
    Case("no colon", head(OK, b"Content-Length"), invalid("Invalid header token")),
    Case("a control byte in a value", head(OK, b"X-A: a\x01b"), invalid("Invalid header value char")),
    Case("a header line ended by LF alone", b"HTTP/1.1 200 OK\r\nContent-Length: 0\n\r\n",
         invalid("Missing expected CR after header value")),
    Case("the head ended by LF alone", b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\n", invalid("Invalid header field char")),
    Case("the head ended by CR and a byte", b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\rX",
         invalid("Expected LF after headers")),
    # --- whether the server keeps the connection
    Case("Connection: close", head(OK, b"Content-Length: 2", b"Connection: close") + b"ok", ended(200, 2)),
    Case("close among Connection's tokens", head(OK, b"Content-Length: 2", b"Connection: keep-alive, CLOSE, upgrade")
         + b"ok", ended(200, 2)),
    Case("close after a comma", head(OK, b"Content-Length: 2", b"Connection: x,close") + b"ok", ended(200, 2)),
    Case("Connection: closed is no close", head(OK, b"Content-Length: 2", b"Connection: closed") + b"ok", kept(200, 2)),
    Case("Connection: close x is no close", head(OK, b"Content-Length: 2", b"Connection: close x") + b"ok", kept(200, 2)),
    Case("Proxy-Connection: close", head(OK, b"Content-Length: 2", b"Proxy-Connection: close") + b"ok", ended(200, 2)),
    Case("HTTP/1.0", head(b"HTTP/1.0 200 OK", b"Content-Length: 2") + b"ok", ended(200, 2)),
    Case("HTTP/1.0 with keep-alive", head(b"HTTP/1.0 200 OK", b"Content-Length: 2", b"Connection: Keep-Alive") + b"ok",
         kept(200, 2)),
    Case("HTTP/1.0 with keep-alivex", head(b"HTTP/1.0 200 OK", b"Content-Length: 2", b"Connection: keep-alivex")
         + b"ok", ended(200, 2)),
    # --- bytes after a response belong to no request: the connection is out of step
    Case("bytes after a response", LENGTH_2 + b"junk", ended(200, 2)),
    Case("a byte after a response", LENGTH_2 + b"H", ended(200, 2)),
    Case("a status line after a response", LENGTH_2 + b"HTTP/1.1 200 OK\r\n", ended(200, 2)),
    Case("a second response after the first", LENGTH_2 + LENGTH_2, ended(200, 2)),
    Case("bytes after a response that closes", head(OK, b"Content-Length: 2", b"Connection: close") + b"okjunk",
         ended(200, 2)),
    # Even blank lines: no request asked for them, in the read that ends the response or later.
    Case("a blank line after a response", LENGTH_2 + b"\r\n", ended(200, 2)),
    # --- the bounds on heads and on runs of framing, checked after each read
    Case("a head of exactly the bound", _at_bound(0), PENDING, reads=(MAX_HEAD_BYTES,)),
    Case("a head a byte under the bound", _at_bound(-1), PENDING, reads=(MAX_HEAD_BYTES - 1,)),
    Case("a head a byte over the bound", _at_bound(1), HEAD_TOO_LARGE, reads=(MAX_HEAD_BYTES + 1,)),
    Case("endless headers, in reads of 4 KiB", OK + b"\r\n" + FILLER * 200, HEAD_TOO_LARGE, reads=(4096,)),
    Case("endless headers, in reads of 1000", OK + b"\r\n" + FILLER * 200, HEAD_TOO_LARGE, reads=(1000,)),
    Case("endless headers, in reads of 64 KiB", OK + b"\r\n" + FILLER * 200, HEAD_TOO_LARGE, reads=(65536,)),
    Case("a head over the bound, in reads of 1000", OK + b"\r\n" + FILLER * 110 + LENGTH_2[len(OK) + 2:],
         HEAD_TOO_LARGE, reads=(1000,)),
    Case("a head over the bound whose last read ends it", OK + b"\r\n" + FILLER * 110 + LENGTH_2[len(OK) + 2:],
         kept(200, 2), reads=(65536,)),
    Case("endless 1xx heads", head(b"HTTP/1.1 100 Continue") * 8192, HEAD_TOO_LARGE, reads=(65536,)),
    Case("an endless chunk-size line", head(OK, TE) + b"0" * (200 << 10), FRAMING_TOO_LARGE,
         reads=(len(head(OK, TE)), 1024)),
    Case("endless trailers", head(OK, TE) + b"5\r\nhello\r\n0\r\n" + FILLER * 200, FRAMING_TOO_LARGE, reads=(8192,)),
    Case("framing past the bound with body in every read", head(OK, TE) + b"5\r\nhello\r\n" * 30_000, PENDING,
         reads=(len(head(OK, TE)), 10)),
    Case("a body of 3 MiB", head(OK, b"Content-Length: %d" % (3 << 20)) + b"b" * (3 << 20), kept(200, 3 << 20),
         reads=(65536,)),
    Case("chunks of 1 MiB", head(OK, TE) + chunked(b"c" * (1 << 20), b"d" * 70_000), kept(200, (1 << 20) + 70_000),
         reads=(65536,)),
    Case("2 MiB to the close", head(OK) + b"e" * (2 << 20), ended(200, 2 << 20), closed=True, reads=(65536,)),
    # --- what the fault server answers (FAULT_SERVER), requested with Connection: close
    Case("fault server: GET /ok", head(OK, b"Content-Length: 3") + OK_BODY, ended(200, 3), closed=True),
    Case("fault server: HEAD /ok", head(OK, b"Content-Length: 3") + OK_BODY, ended(200, 0), method="HEAD",
         closed=True),
    Case("fault server: GET /status/204", head(b"HTTP/1.1 204 Whatever", b"Content-Length: 0"), ended(204, 0),
         closed=True),
    Case("fault server: GET /status/100", head(b"HTTP/1.1 100 Whatever", b"Content-Length: 0"), NO_RESPONSE,
         closed=True),
    Case("fault server: GET /status/101", head(b"HTTP/1.1 101 Whatever", b"Content-Length: 0"), SWITCHED, closed=True),
    Case("fault server: GET /status/99", head(b"HTTP/1.1 99 Whatever", b"Content-Length: 0"),
         invalid("Invalid status code"), closed=True),
    Case("fault server: GET /big/2000000", head(OK, b"Content-Length: 2000000") + b"z" * 2_000_000,
         ended(200, 2_000_000), closed=True),
    Case("fault server: GET /chunked", head(OK, TE) + chunked(*CHUNKS), ended(200, sum(map(len, CHUNKS))),
         closed=True),
    Case("fault server: GET /until-close", head(OK, b"Connection: close") + OK_BODY * 3, ended(200, 9), closed=True),
    Case("fault server: GET /garbage", b"SSH-2.0-OpenSSH_9.6 this is not HTTP\r\n\r\n",
         invalid("Expected HTTP/, RTSP/ or ICE/"), closed=True),
    Case("fault server: GET /switch", head(b"HTTP/1.1 101 Switching Protocols", b"Upgrade: soak-test",
                                           b"Connection: Upgrade") + b"\x00\x01 not HTTP any more", SWITCHED,
         closed=True),
    Case("fault server: GET /bad-chunking", head(OK, TE) + b"5\r\nhello\r\nzz\r\nthis is no chunk\r\n0\r\n\r\n",
         invalid("Invalid character in chunk size"), closed=True),
    Case("fault server: GET /close-mid-body", head(OK, b"Content-Length: %d" % RESET_DECLARED) + b"r" * RESET_SENT,
         cut(RESET_SENT, RESET_DECLARED), closed=True),
    Case("fault server: GET /interim/100", head(b"HTTP/1.1 100 Continue") + head(OK, b"Content-Length: 3") + OK_BODY,
         ended(200, 3), closed=True),
    Case("fault server: GET /interim/102-close", head(b"HTTP/1.1 102 Processing"), NO_RESPONSE, closed=True),
    Case("fault server: GET /status/200", head(OK, b"Content-Length: 11") + b"status 200\n", ended(200, 11),
         closed=True),
    Case("fault server: GET /status/301", head(b"HTTP/1.1 301 Moved Permanently", b"Content-Length: 11",
                                               b"Location: /ok") + b"status 301\n", ended(301, 11), closed=True),
    Case("fault server: GET /status/304", head(b"HTTP/1.1 304 Whatever", b"Content-Length: 0", b"Location: /ok"),
         ended(304, 0), closed=True),
    *(Case(f"fault server: GET /status/{code}", head(b"HTTP/1.1 %d %s" % (code, reason), b"Content-Length: 11")
           + b"status %d\n" % code, ended(code, 11), closed=True)
      for code, reason in ((404, b"Not Found"), (418, b"I'm a teapot"), (500, b"Internal Server Error"),
                           (503, b"Service Unavailable"), (600, b"Whatever"), (999, b"Whatever"))),
    Case("fault server: GET /status/0", head(b"HTTP/1.1 0 Whatever", b"Content-Length: 0"),
         invalid("Invalid status code"), closed=True),
    Case("fault server: GET /slow/10", head(OK, b"Content-Length: 3") + OK_BODY, ended(200, 3), closed=True),
    Case("fault server: GET /nosuch", head(b"HTTP/1.1 404 Not Found", b"Content-Length: 14") + b"no such fault\n",
         ended(404, 14), closed=True),
    Case("fault server: HEAD /big/2000000", head(OK, b"Content-Length: 2000000") + b"z" * 2_000_000, ended(200, 0),
         method="HEAD", closed=True),
    Case("fault server: HEAD /chunked", head(OK, TE) + chunked(*CHUNKS), ended(200, 0), method="HEAD", closed=True),
    Case("fault server: HEAD /interim/100", head(b"HTTP/1.1 100 Continue") + head(OK, b"Content-Length: 3") + OK_BODY,
         ended(200, 0), method="HEAD", closed=True),
    Case("fault server: HEAD /until-close", head(OK, b"Connection: close") + OK_BODY * 3, ended(200, 0), method="HEAD",
         closed=True),
    Case("fault server: GET /slow-body/300", head(OK, b"Content-Length: 20000") + b"s" * 20_000, ended(200, 20_000),
         closed=True),
    Case("fault server: GET /trickle/5/20", head(OK, b"Content-Length: 5") + b"ttttt", ended(200, 5), closed=True),
    Case("fault server: GET /gzip", head(OK, b"Content-Length: %d" % len(GZIPPED), b"Content-Encoding: gzip") + GZIPPED,
         ended(200, len(GZIPPED)), closed=True),
    Case("fault server: GET /gzip-lie", head(OK, b"Content-Length: %d" % len(GZIP_LIE), b"Content-Encoding: gzip")
         + GZIP_LIE, ended(200, len(GZIP_LIE)), closed=True),
    Case("fault server: GET /interim/102-stall", head(b"HTTP/1.1 102 Processing"), PENDING),
    Case("fault server: GET /close", b"", NO_RESPONSE, closed=True),
    Case("fault server: GET /stall", b"", PENDING),
)

# The rows that are the fault server's answers, by (method, path): test_native_response.py checks
# that the server really sends them, and that its captures come to their outcomes. Its endless
# answers begin with their rows' bytes.
FAULT_SERVER: dict[tuple[str, str], str] = {
    (case.name.split()[2], case.name.split()[3]): case.name for case in CASES if case.name.startswith("fault server: ")
}
ENDLESS = {("GET", "/endless-headers"): "endless headers, in reads of 64 KiB",
           ("GET", "/endless-chunk-line"): "an endless chunk-size line"}


def row(name: str) -> Case:
    """The row named `name`."""
    return next(case for case in CASES if case.name == name)


# Where h11, as httpx runs it (H11Parser), reads a row otherwise than the table says: every outcome it
# gives for some feed of the row, most feeds first (2026-12-03; issue 34). Most are texts (h11 says
# `illegal status line: bytearray(...)` where llhttp and response.c name the rule broken); some are
# more: h11 waits (PENDING) for a length or status it does not refuse, reads a response the others
# refuse (a duplicated length, a blank in a chunk size, a line ended by LF alone), refuses a
# Transfer-Encoding other than chunked, and keeps a connection the others end (after HEAD, a
# trailer or Proxy-Connection that says close) or ends one they keep (HTTP/1.0 keep-alive).
H11_DIFFERS: dict[str, tuple[Outcome, ...]] = {
    'length past 2^64-1': (PENDING,),
    'length of letters': (Failure('protocol', 'protocol: bad Content-Length'),),
    'length with a sign': (Failure('protocol', 'protocol: bad Content-Length'),),
    'length of two numbers': (Failure('protocol', 'protocol: bad Content-Length'),),
    'length listed twice in one line': (PENDING,),
    'length empty': (Failure('protocol', 'protocol: bad Content-Length'),),
    'length twice': (Response(200, 5, True),),
    'length, then chunked': (Response(200, 5, True),),
    'chunked, then a length': (PENDING,),
    'a trailer that says close': (Response(200, 5, True),),
    'a trailer with a length': (Response(200, 5, True),),
    'gzip, then chunked': (Failure('protocol', 'protocol: Only Transfer-Encoding: chunked is supported'),),
    'chunked, cut by the close': (
        Failure('closed', 'closed: peer closed connection without sending complete message body (incomplete chunked read)'),  # noqa: E501
    ),
    'chunk size past 2^64-1': (PENDING,),
    'chunk size not hexadecimal': (Failure('protocol', "protocol: illegal chunk header: bytearray(b'zz\\r\\n')"),),
    'chunk size negative': (Failure('protocol', "protocol: illegal chunk header: bytearray(b'-5\\r\\n')"),),
    'chunk size with a blank after': (Response(200, 5, True),),
    'chunk size empty': (Failure('protocol', "protocol: illegal chunk header: bytearray(b'\\r\\n')"),),
    'chunk size ended by LF alone': (
        Failure('protocol', "protocol: illegal chunk header: bytearray(b'5\\nhello\\r\\n')"),
    ),
    'chunk extension after a blank': (Response(200, 5, True),),
    'chunk extension name of a bad byte': (Response(200, 5, True),),
    'chunk extension quote left open': (Response(200, 5, True),),
    'chunk longer than its size': (
        Failure('protocol', "protocol: malformed chunk footer: bytearray(b'X\\r') (expected b'\\r\\n')"),
        Failure('protocol', "protocol: malformed chunk footer: bytearray(b'X') (expected b'\\r\\n')"),
    ),
    'chunk ended by LF alone': (
        Failure('protocol', "protocol: malformed chunk footer: bytearray(b'\\n0') (expected b'\\r\\n')"),
        Failure('protocol', "protocol: malformed chunk footer: bytearray(b'\\n') (expected b'\\r\\n')"),
    ),
    'a folded trailer': (Response(200, 0, True),),
    'a 1xx with a body (counted)': (
        Failure('protocol', "protocol: illegal status line: bytearray(b'abcHTTP/1.1 200 OK')"),
    ),
    'blank lines after a 1xx': (
        Failure('protocol', 'protocol: no response line received'),
        Failure('protocol', 'protocol: illegal request line'),
    ),
    'a 1xx in HTTP/1.0, which closes': (Response(200, 2, True),),
    'Transfer-Encoding identity: to the close': (
        Failure('protocol', 'protocol: Only Transfer-Encoding: chunked is supported'),
    ),
    'HEAD, with a length': (Response(200, 0, True),),
    'HEAD, chunked': (Response(200, 0, True),),
    'HEAD, no length': (Response(200, 0, True),),
    '304, Transfer-Encoding gzip': (Failure('protocol', 'protocol: Only Transfer-Encoding: chunked is supported'),),
    'not HTTP': (
        Failure('protocol', "protocol: illegal status line: bytearray(b'SSH-2.0-OpenSSH_9.6 this is not HTTP')"),
    ),
    'http in lower case': (Failure('protocol', "protocol: illegal status line: bytearray(b'http/1.1 200 OK')"),),
    'HTTP/1.2': (PENDING,),
    'HTTP/11.1': (Failure('protocol', "protocol: illegal status line: bytearray(b'HTTP/11.1 200 OK')"),),
    'no space after the version': (Failure('protocol', "protocol: illegal status line: bytearray(b'HTTP/1.1200 OK')"),),
    'two spaces after the version': (
        Failure('protocol', "protocol: illegal status line: bytearray(b'HTTP/1.1  200 OK')"),
    ),
    'a status of two digits': (Failure('protocol', "protocol: illegal status line: bytearray(b'HTTP/1.1 20 OK')"),),
    'a status of four digits': (Failure('protocol', "protocol: illegal status line: bytearray(b'HTTP/1.1 2000 OK')"),),
    'a status of letters': (Failure('protocol', "protocol: illegal status line: bytearray(b'HTTP/1.1 2x0 OK')"),),
    'status 000': (
        Failure('protocol', 'protocol: InformationalResponse status_code should be in range [100, 200), not 0'),
    ),
    'status 099': (
        Failure('protocol', 'protocol: InformationalResponse status_code should be in range [100, 200), not 99'),
    ),
    'status 99': (Failure('protocol', "protocol: illegal status line: bytearray(b'HTTP/1.1 99 Whatever')"),),
    'status 0999': (Failure('protocol', "protocol: illegal status line: bytearray(b'HTTP/1.1 0999 Whatever')"),),
    'status 1000': (Failure('protocol', "protocol: illegal status line: bytearray(b'HTTP/1.1 1000 Whatever')"),),
    'status abc': (Failure('protocol', "protocol: illegal status line: bytearray(b'HTTP/1.1 abc Whatever')"),),
    'blank lines before the status line': (
        Failure('protocol', 'protocol: no response line received'),
        Failure('protocol', 'protocol: illegal request line'),
    ),
    'a status line ended by LF alone': (Response(200, 0, True),),
    'RTSP/1.0': (Failure('protocol', "protocol: illegal status line: bytearray(b'RTSP/1.0 200 OK')"),),
    'a folded header line': (Response(200, 0, True),),
    'a blank before the first header': (Failure('protocol', 'protocol: continuation line at start of headers'),),
    'a blank before the colon of Content-Length': (
        Failure('protocol', "protocol: illegal header line: bytearray(b'Content-Length : 0')"),
    ),
    'a blank before a colon': (Failure('protocol', "protocol: illegal header line: bytearray(b'X-A : 0')"),),
    'a blank in a name': (Failure('protocol', "protocol: illegal header line: bytearray(b'X A: 0')"),),
    'an empty name': (Failure('protocol', "protocol: illegal header line: bytearray(b': 0')"),),
    'no colon': (Failure('protocol', "protocol: illegal header line: bytearray(b'Content-Length')"),),
    'a control byte in a value': (PENDING,),
    'a header line ended by LF alone': (Response(200, 0, True),),
    'the head ended by LF alone': (Response(200, 0, True),),
    'the head ended by CR and a byte': (PENDING,),
    'Proxy-Connection: close': (Response(200, 2, True),),
    'HTTP/1.0 with keep-alive': (Response(200, 2, False),),
    'endless 1xx heads': (PENDING,),
    'fault server: GET /status/99': (
        Failure('protocol', "protocol: illegal status line: bytearray(b'HTTP/1.1 99 Whatever')"),
    ),
    'fault server: GET /garbage': (
        Failure('protocol', "protocol: illegal status line: bytearray(b'SSH-2.0-OpenSSH_9.6 this is not HTTP')"),
    ),
    'fault server: GET /status/0': (
        Failure('protocol', "protocol: illegal status line: bytearray(b'HTTP/1.1 0 Whatever')"),
    ),
    'fault server: GET /bad-chunking': (Failure('protocol', "protocol: illegal chunk header: bytearray(b'zz\\r\\n')"),),
}
