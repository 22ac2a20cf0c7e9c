"""The native response parser (runner/load/native/response.c) against the fast transport's.

The same reads go to both: to the C parser through its test binding, and to
runner.load.http1.Connection exactly as its raw socket transport hands them over
(tests/support/replay.py). Every case must come out the same: status, head and body
bytes, keep-alive, Server, gzip, and failure kind and text, or both still waiting (and
for the same phase, which a timeout names). The cases are generated valid and hostile
responses and systematic mutations of them (tests/support/responses.py), seeded random
mutations, the bounds, and what the fault server and a real nginx really send. What a case
must come to is the unit tier's table (tests/support/contract.py), whose rows hold the fault
server's answers: checked here against what it really sends.

In the integration tier because it builds the extension (a compiler in a subprocess)
and, for the fault server and nginx, reads real sockets. Nothing depends on speed: a
capture ends when the server closes (or the response is whole), and only a server that
never finishes its answer is read until a second passes with nothing; however a slow
machine cuts the reads, both parsers get the same ones.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from types import ModuleType

import pytest

from runner.load.transport import MAX_HEAD_BYTES
from tests.conftest import Nginx
from tests.support import contract, responses
from tests.support.capture import Capture, capture
from tests.support.faultserver import FaultServer, reset_at_accept_server
from tests.support.replay import PORTABLE, PythonTransport, compare, native, native_parser

SHOWN = 10  # differing cases printed at most


@pytest.fixture(scope="module", params=[(), PORTABLE], ids=["native", "portable"])
def parser(tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest) -> ModuleType:
    """The parser as built here (SSE2 scans on x86-64), and as built where there is no SSE2 (arm64)."""
    return native_parser(tmp_path_factory.mktemp("native"), request.param)


@pytest.fixture
def python() -> Iterator[PythonTransport]:
    with PythonTransport() as transport:
        yield transport


def differences(parser: ModuleType, python: PythonTransport,
                cases: Iterator[tuple[responses.Case, list[bytes]]], reset: bool = False) -> tuple[int, list[str]]:
    """(cases run, a line for each that differs)."""
    count, found = 0, []
    for case, chunks in cases:
        count += 1
        ours = native(parser, case.method, chunks, case.eof)
        got = compare(case.method, chunks, case.eof, reset, python.outcome(case.method, chunks, case.eof, reset), ours)
        if got:
            found.append(f"{case.name} {case.method} eof={case.eof} reads={[len(c) for c in chunks][:6]}: {got}")
    return count, found


def assert_same(count: int, found: list[str]) -> None:
    assert not found, f"{len(found)} of {count} cases differ:\n" + "\n".join(found[:SHOWN])


def test_generated_responses_agree(parser: ModuleType, python: PythonTransport) -> None:
    count, found = differences(parser, python, responses.cases())
    assert count > 100_000  # every case, each chunking, every prefix, every mutation
    assert_same(count, found)


def test_random_mutations_agree(parser: ModuleType, python: PythonTransport) -> None:
    count, found = differences(parser, python, responses.random_cases(random.Random(22), 200_000))
    assert_same(count, found)


def test_bounds_agree(parser: ModuleType, python: PythonTransport) -> None:
    """Both agree on heads and runs of framing around the bound, in reads of the sizes that
    matter; what each comes to is in the contract's table (tests/support/contract.py)."""
    for case, chunks in responses.bound_cases(MAX_HEAD_BYTES):
        ours = native(parser, case.method, chunks, case.eof)
        assert not compare(case.method, chunks, case.eof, False, python.outcome(case.method, chunks, case.eof), ours), case


# Every path of the fault server (tests/support/faultserver.py), as (method, path).
FAULT_REQUESTS = [
    ("GET", "/ok"), ("HEAD", "/ok"), ("GET", "/status/200"), ("GET", "/status/204"), ("GET", "/status/301"),
    ("GET", "/status/304"), ("GET", "/status/404"), ("GET", "/status/418"), ("GET", "/status/500"),
    ("GET", "/status/503"), ("GET", "/status/600"), ("GET", "/status/999"), ("GET", "/status/100"),
    ("GET", "/status/101"), ("GET", "/status/99"), ("GET", "/status/0"), ("GET", "/slow/10"), ("GET", "/stall"),
    ("GET", "/close"), ("GET", "/reset-mid-body"), ("GET", "/close-mid-body"), ("GET", "/slow-body/300"),
    ("GET", "/garbage"), ("GET", "/big/2000000"), ("HEAD", "/big/2000000"), ("GET", "/chunked"),
    ("HEAD", "/chunked"), ("GET", "/varying"), ("GET", "/varying/404"), ("GET", "/interim/100"),
    ("HEAD", "/interim/100"), ("GET", "/interim/102-close"), ("GET", "/interim/102-stall"), ("GET", "/switch"),
    ("GET", "/endless-headers"), ("GET", "/endless-chunk-line"), ("GET", "/bad-chunking"), ("GET", "/trickle/5/20"),
    ("GET", "/gzip"), ("GET", "/gzip-lie"), ("GET", "/until-close"), ("HEAD", "/until-close"), ("GET", "/nosuch"),
]


STALLS = ("/stall", "/interim/102-stall")  # never finish their answer: read until a second passes with nothing


def replays(method: str, name: str, got: Capture) -> Iterator[tuple[responses.Case, list[bytes]]]:
    """A capture as it was read, then (where small enough) in one read and a byte per read,
    and a capture that ended in the close also as if the server had kept the connection."""
    eof = got.ending == "eof"
    data = b"".join(got.chunks)
    variants = [got.chunks, [data]] + ([[bytes([b]) for b in data]] if len(data) <= 8192 else [])
    for chunks in variants:
        yield responses.Case(name, method, data, eof), chunks
        if eof:
            yield responses.Case(name + " (kept open)", method, data, False), chunks


@pytest.mark.parametrize(("method", "path"), FAULT_REQUESTS, ids=[f"{m} {p}" for m, p in FAULT_REQUESTS])
def test_fault_server_responses_agree(parser: ModuleType, python: PythonTransport, fault_server: FaultServer,
                                      method: str, path: str) -> None:
    got = capture(fault_server.port, path, method, limit=3 << 20, quiet=1.0 if path in STALLS else 30.0)
    assert_same(*differences(parser, python, replays(method, path, got), reset=got.ending == "reset"))


@pytest.mark.parametrize(("method", "path"), [*contract.FAULT_SERVER, *contract.ENDLESS],
                         ids=[f"{m} {p}" for m, p in [*contract.FAULT_SERVER, *contract.ENDLESS]])
def test_the_fault_server_sends_the_contracts_rows(fault_server: FaultServer, method: str, path: str) -> None:
    """What the differential test compares is real, and the unit tier's table of outcomes
    (tests/support/contract.py) holds what the fault server sends: its answer is the bytes of
    the row named after it, closed where the row is (an endless answer begins with its row's)."""
    endless = (method, path) in contract.ENDLESS
    row = contract.row(contract.ENDLESS[method, path] if endless else contract.FAULT_SERVER[method, path])
    got = capture(fault_server.port, path, method, limit=3 << 20, quiet=1.0 if path in STALLS else 30.0)
    data = b"".join(got.chunks)
    if endless:
        assert data.startswith(row.data) and len(data) > len(row.data), data[:200]
        return
    assert data == row.data, data[:200]
    assert got.ending == ("eof" if row.closed else "quiet")


def test_servers_that_never_answer_agree(parser: ModuleType, python: PythonTransport) -> None:
    silent = FaultServer(on_accept="silent").start()
    try:
        got = capture(silent.port, "/ok", quiet=0.5)
    finally:
        silent.stop()
    assert got == Capture([], "quiet")
    assert_same(*differences(parser, python, replays("GET", "silent", got)))
    with reset_at_accept_server() as port:
        got = capture(port, "/ok")
    assert got.ending == "reset"
    assert_same(*differences(parser, python, replays("GET", "reset at accept", got), reset=True))


@pytest.mark.parametrize(("method", "path", "headers"), [
    ("GET", "/", ""), ("HEAD", "/", ""), ("GET", "/", "Accept-Encoding: gzip\r\n"), ("GET", "/teapot", ""),
    ("GET", "/fail", ""), ("GET", "/echo", ""), ("GET", "/nosuch", ""),
])
def test_nginx_responses_agree(parser: ModuleType, python: PythonTransport, nginx: Nginx, method: str, path: str,
                               headers: str) -> None:
    port = int(nginx.url.rsplit(":", 1)[1].strip("/"))
    # nginx keeps the connection open: the capture stops where the native parser says the
    # response ended, and the Python transport, fed the same reads, must agree that it did.
    got = capture(port, path, method, close=False, headers=headers,
                  until=lambda chunks: native(parser, method, chunks)["outcome"] != "pending")
    ours = native(parser, method, got.chunks, got.ending == "eof")
    assert ours["outcome"] == "done" and ours["server"].startswith("nginx"), ours
    assert_same(*differences(parser, python, replays(method, path, got)))
