"""The same response bytes through both parsers: the fast transport's and the native one.

`python_transport` drives runner.load.http1.Connection, the protocol the fast transport
runs on every connection, exactly as its raw socket transport does (connection_made, one
data_received per read, connection_lost at the close or reset), on an event loop that is
never run: nothing in it waits, so the answer is the same at any load. Only the socket is
missing, and `Wire` stands in for it: it records what the protocol did to it.

`native_parser` builds the C parser's test binding (runner/load/native) from the sources
into a temporary directory, so a test always runs the code in the tree, however the
package was installed.

`compare` says how the two answers differ, if they do, allowing only for what the
Python transport does by its own choice rather than by the bytes (each allowance says why).
"""

from __future__ import annotations

import asyncio
import importlib.util
import shlex
import sysconfig
import time
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from runner.load import http1
from runner.load.bodyhash import is_gzip
from runner.load.result import Result
from runner.load.transport import MAX_HEAD_BYTES
from tests.support.cbuild import OUTPUT, compiled

REPO = Path(__file__).resolve().parents[2]
# Both sides read this backendHeader (the pallet's) from every response they compare.
BACKEND = "X-Soak-Backend"


class Wire(asyncio.Transport):
    """The socket under a Connection: counts what it writes, notes a close or an abort."""

    def __init__(self) -> None:
        super().__init__()
        self.written = 0
        self.closed = False

    def write(self, data: bytes | bytearray | memoryview) -> None:
        self.written += len(data)

    def close(self) -> None:
        self.closed = True

    def abort(self) -> None:
        self.closed = True

    def is_closing(self) -> bool:
        return self.closed

    def get_write_buffer_size(self) -> int:
        return 0  # every request written at once

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return default


@dataclass
class Outcome:
    """What the fast transport made of the bytes: its Result, and how far it got."""

    result: Result
    done: bool  # the send's Future completed (else it would wait for its timeout)
    fed: int  # chunks handed to data_received before the connection stopped reading
    head_chunks: list[bytes] = field(default_factory=list)  # those read while the head was incomplete


class PythonTransport:
    """Fast-transport Connections on one event loop, which is never run (use it as a context)."""

    def __enter__(self) -> PythonTransport:
        self._loop = asyncio.new_event_loop()
        self._deadlines = http1.Deadlines(self._loop, 3600 * 10**9)
        return self

    def __exit__(self, *exc: object) -> None:
        self._loop.close()

    def keep_alive_responses(self, data: bytes, count: int) -> None:
        """Send `count` requests on one Connection, each answered by `data` in one read (bench/parser_cost.py)."""
        connection = http1.Connection(set(), self._loop, False, self._deadlines)
        connection.connection_made(Wire())
        for _ in range(count):
            result = Result(start_ns=time.monotonic_ns())
            future = connection.send(b"GET / HTTP/1.1\r\n\r\n", result, False, self._loop.time() + 3600, time.monotonic_ns() + 3600 * 10**9, False)
            connection.data_received(data)
            assert future.done() and result.status and connection.reusable, result

    def request(self, method: str) -> tuple[http1.Connection, Wire, Result, asyncio.Future[None]]:
        """A new Connection on a Wire, with one request of `method` sent (its deadline an hour away)."""
        connection = http1.Connection(set(), self._loop, False, self._deadlines, http1.header_pattern(BACKEND))
        wire = Wire()
        connection.connection_made(wire)
        result = Result(start_ns=time.monotonic_ns())
        request = f"{method} / HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".encode()
        future = connection.send(request, result, False, self._loop.time() + 3600, time.monotonic_ns() + 3600 * 10**9, True)
        return connection, wire, result, future

    def outcome(self, method: str, chunks: list[bytes], eof: bool = False, reset: bool = False) -> Outcome:
        """Feed `chunks` to a new Connection as its socket would, then the close (or a reset)."""
        connection, wire, result, future = self.request(method)
        head_chunks: list[bytes] = []
        fed = 0
        for chunk in chunks:
            if future.done() or wire.closed:  # a real socket is no longer read once it is closed
                break
            if not result.headers_ns:
                head_chunks.append(chunk)
            connection.data_received(chunk)
            fed += 1
        if not future.done() and not wire.closed and (eof or reset):
            connection.connection_lost(ConnectionResetError(104, "Connection reset by peer") if reset else None)
        connection.abort()  # its watch on the deadline ends with it
        return Outcome(result, future.done(), fed, head_chunks)


# What a build for a machine without SSE2 (arm64, the other platform the image and wheels are
# built for) differs in that the parser could notice: the portable scans (-DSOAK_PORTABLE) and,
# as arm64's ABI has it, an unsigned plain char. The tests build this beside the native one.
PORTABLE = ("-DSOAK_PORTABLE", "-funsigned-char")


def native_parser(build_dir: Path, defines: tuple[str, ...] = ()) -> ModuleType:
    """runner.load.native._response, compiled from the tree's sources into `build_dir`.

    With the compiler and flags this Python was built with (sysconfig), not through setup.py:
    the test is of the C code, and a setup.py run would need the build system's own
    setuptools (pyproject's build-system), which a test environment need not have.
    `defines` go to the compiler: PORTABLE builds the parser as on a machine without SSE2.
    """
    native_dir = REPO / "runner" / "load" / "native"
    compiler = shlex.split(sysconfig.get_config_var("CC") or "cc")
    flags = ["-shared", "-fPIC", "-O2", *defines, f"-I{sysconfig.get_paths()['include']}", "-o", OUTPUT]
    sources = [str(native_dir / "_response.c"), str(native_dir / "response.c")]
    # Compiled once per test run (tests/support/cbuild.py); `build_dir` keeps a failure's output.
    target, done = compiled([*compiler, *flags, *sources], f"_response{sysconfig.get_config_var('EXT_SUFFIX')}")
    if not target.exists():
        output = f"{done.stdout}{done.stderr}" if done is not None else ""
        (build_dir / "compiler.log").write_text(output)
        pytest.fail("the native parser did not build (it needs a C compiler and the Python headers: "
                    f"apt-get install -y gcc python3-dev):\n{output}")
    spec = importlib.util.spec_from_file_location("runner.load.native._response", target)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def native(parser: ModuleType, method: str, chunks: list[bytes], eof: bool = False) -> dict[str, Any]:
    return parser.parse(method, chunks, MAX_HEAD_BYTES, eof, BACKEND)  # type: ignore[no-any-return]


def compare(method: str, chunks: list[bytes], eof: bool, reset: bool, py: Outcome, c: dict[str, Any]) -> list[str]:
    """How the native parser's answer differs from the fast transport's; [] when they agree."""
    result = py.result
    got: list[str] = []

    def differ(what: str, python: object, ours: object) -> None:
        if python != ours:
            got.append(f"{what}: python {python!r}, native {ours!r}")

    misread = c["head_done"] and _python_final_head(py.head_chunks, chunks, c) is None
    if misread and eof and c["outcome"] in ("done", "failed") and c["kind"] in ("", "closed"):
        # http1._final_head told the heads apart wrongly, and decided from the wrong one
        # whether the close cut the body; see _python_final_head.
        return got
    if reset and c["outcome"] == "pending":
        # A reset is the caller's to name ("reset"), whatever the parser had read.
        differ("kind", result.error, "reset")
        return got
    if not py.done:
        differ("outcome", "pending", c["outcome"])
        differ("phase (a timeout's text)", bool(result.headers_ns), c["head_done"])
        return got
    if result.error:
        differ("outcome", "failed", c["outcome"])
        differ("kind", result.error, c["kind"])
        differ("text", result.error_text, c["text"])
        return got
    differ("outcome", "done", c["outcome"])
    if c["outcome"] != "done":
        return got + [f"native text: {c['text']}"]
    differ("status", result.status, c["status"])
    differ("body bytes", result.bytes_in, c["body_bytes"])
    # The transport counts whole reads: the rest of the read that ended the response (a HEAD
    # response at its head) counts as head too, though it belongs to no response.
    index, offset = c["end_at"]
    rest = len(chunks[index]) - offset if index < len(chunks) else 0
    differ("header bytes", result.header_bytes, c["header_bytes"] + rest)
    if method == "HEAD":
        # The transport closes after a HEAD response (llhttp, not told it was HEAD, would wait
        # for the body its head announces), so it never reports one kept alive.
        differ("kept alive (HEAD)", result.kept_alive, False)
    else:
        differ("kept alive", result.kept_alive, c["keep_alive"])
    head = _python_final_head(py.head_chunks, chunks, c)
    if head is not None:
        # The native parser keeps the first SERVER_MAX bytes of a longer value.
        differ("server", result.server[: len(c["server"])] if c["server_cut"] else result.server, c["server"])
        differ("server cut", len(result.server) > len(c["server"]), c["server_cut"])
        differ("gzip", is_gzip(http1._header(http1._CONTENT_ENCODING, head)), c["gzip"])
        differ("backend", result.backend, c["backend"])
    return got


def _python_final_head(head_chunks: list[bytes], chunks: list[bytes], c: dict[str, Any]) -> bytes | None:
    """The head http1.py reads Server and Content-Encoding from, when it is the final head.

    http1 tells interim heads from the final one by a regex on the bytes (http1._INTERIM);
    a 1xx head it does not recognise (no reason phrase, RTSP/, CRLFs before it, a body)
    makes it read them from the wrong head. Those cases are compared on everything else.
    """
    index, offset = c["head_at"]
    end = sum(len(chunk) for chunk in chunks[:index]) + offset
    data = b"".join(head_chunks)[:end]
    head = http1._final_head(data)
    starts = head.lstrip(b"\r\n").startswith((b"HTTP/", b"RTSP/", b"ICE/"))  # llhttp skips CRLFs before a head
    return head if starts and data.endswith(head + b"\r\n") else None
