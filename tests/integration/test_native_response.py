"""The native response parser (runner/load/native/response.c) on what no hand can list: generated
valid and hostile responses, systematic and seeded random mutations of them, and what the fault
server and a real nginx really send.

No second parser says what those bytes should come to; what is asked of each case needs none:
- however the reads fall, the reading is the same (tests/support/replay.py: `reading`):
  status, head and body bytes, keep-alive, Server, gzip, the backendHeader, failure kind and
  text, or still waiting and in which phase (which a timeout names), and where the head and the
  response ended; whole, in two at every byte, a byte per read, at and after a mutated byte,
  and at seeded random points;
- what follows the end of a response changes nothing of it (a response is decided where it ends);
- the reading breaks none of the rules that hold for any bytes (`broken_rules`: bytes add up,
  the close ends everything, a failure has a known kind, a kept connection has no bytes left over);
- what particular bytes must come to is the contract table's (tests/support/contract.py), which
  the unit tier checks with the parser `pip install -e .` built, and this file with both builds
  (with SSE2 and without); the fault server's answers are rows of that table, byte for byte, and
  what it and nginx send must come to those rows' outcomes as captured.

In the integration tier because it builds the extension (a compiler in a subprocess)
and, for the fault server and nginx, reads real sockets. Nothing depends on speed: a
capture ends when the server closes (or the response is whole), and only a server that
never finishes its answer is read until a second passes with nothing.
"""

from __future__ import annotations

import random
import re
from collections.abc import Iterable, Iterator
from itertools import groupby
from types import ModuleType

import pytest

from tests.conftest import Nginx
from tests.support import contract, responses
from tests.support.capture import Capture, capture
from tests.support.faultserver import FaultServer, reset_at_accept_server
from tests.support.replay import (
    PORTABLE,
    broken_rules,
    differing,
    native,
    native_parser,
    reading,
    same_whatever_the_reads,
)

SHOWN = 10  # problems printed at most
SEED = 33  # the contract's random splits (with each row's name)
RANDOM_SPLITS = 20

Cases = Iterable[tuple[responses.Case, list[bytes]]]


@pytest.fixture(scope="module", params=[(), PORTABLE], ids=["native", "portable"])
def parser(tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest) -> ModuleType:
    """The parser as built here (SSE2 scans on x86-64), and as built where there is no SSE2 (arm64)."""
    return native_parser(tmp_path_factory.mktemp("native"), request.param)


def problems(parser: ModuleType, cases: Cases) -> tuple[int, list[str]]:
    """(feeds read, a line for each problem): `cases` come case by case, each with its chunkings."""
    count, found = 0, []
    for case, group in groupby(cases, key=lambda item: item[0]):
        name = f"{case.name} {case.method} eof={case.eof}"
        whole = reading(parser, case.method, [case.data], case.eof)
        found += [f"{name}: breaks '{rule}': {whole}" for rule in broken_rules(whole, case.method, case.data, case.eof)]
        for _, chunks in group:
            count += 1
            other = reading(parser, case.method, chunks, case.eof)
            if differs := same_whatever_the_reads(whole, other):
                found.append(f"{name} in reads of {[len(c) for c in chunks][:8]}, against whole: {'; '.join(differs)}")
        if whole.outcome == "done" and whole.end_at is not None and not whole.by_close \
                and (whole.end_at < len(case.data) or case.eof):
            alone = reading(parser, case.method, [case.data[:whole.end_at]])
            if differs := differing(whole, alone):
                found.append(f"{name}: up to its end alone, against all of it: {'; '.join(differs)}")
    return count, found


def assert_none(count: int, found: list[str]) -> None:
    assert not found, f"{len(found)} problems in {count} feeds:\n" + "\n".join(found[:SHOWN])


def test_generated_responses_read_the_same_however_cut(parser: ModuleType) -> None:
    count, found = problems(parser, responses.cases())
    assert count > 100_000  # every case, each chunking, every prefix, every mutation
    assert_none(count, found)


def test_random_mutations_read_the_same_however_cut(parser: ModuleType) -> None:
    count, found = problems(parser, responses.random_cases(random.Random(22), 200_000))
    assert_none(count, found)


def test_the_contract_holds_in_each_build(parser: ModuleType) -> None:
    """Every row of the table (the bounds' too), in every feed the unit tier gives it, with this
    build: the unit tier checks only the one `pip install -e .` made, which has the SSE2 scans."""
    read = contract.NativeParser(parser)
    wrong = [f"{case.name}, {how}: {got}" for case in contract.CASES
             for how, reads in contract.feeds(case, SEED, RANDOM_SPLITS)
             if (got := read(case.method, reads, case.closed)) != case.outcome]
    assert not wrong, f"{len(wrong)} feeds otherwise than the table:\n" + "\n".join(wrong[:SHOWN])


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

# The answers no row holds, and what they must come to: /varying's body alternates between two
# lengths, and a reset is no close (the parser still waits; the engine names the reset).
NOT_ROWS: dict[tuple[str, str], set[contract.Outcome]] = {
    ("GET", "/varying"): {contract.Response(200, 3, False), contract.Response(200, 5, False)},
    ("GET", "/varying/404"): {contract.Response(404, 3, False), contract.Response(404, 5, False)},
    ("GET", "/reset-mid-body"): {contract.PENDING},
}
GZIPPED = ("/gzip", "/gzip-lie")  # the paths whose answers say Content-Encoding: gzip
STALLS = ("/stall", "/interim/102-stall")  # never finish their answer: read until a second passes with nothing


def test_every_fault_request_has_its_outcome() -> None:
    """Each path is a row of the contract, an endless one beginning with a row's bytes, or in NOT_ROWS."""
    for request in FAULT_REQUESTS:
        assert (request in contract.FAULT_SERVER) + (request in contract.ENDLESS) + (request in NOT_ROWS) == 1, request


def expected(method: str, path: str) -> set[contract.Outcome]:
    """What the capture of `path`, as read, must come to (see test_every_fault_request_has_its_outcome)."""
    if (method, path) in NOT_ROWS:
        return NOT_ROWS[method, path]
    name = contract.FAULT_SERVER.get((method, path)) or contract.ENDLESS[method, path]
    return {contract.row(name).outcome}


def replays(method: str, name: str, got: Capture) -> Iterator[tuple[responses.Case, list[bytes]]]:
    """A capture whole, as it was read, and (where small enough) a byte per read; one that ended in
    the close also as if the server had kept the connection."""
    data = b"".join(got.chunks)
    variants = [[data], got.chunks] + ([[bytes([b]) for b in data]] if len(data) <= 8192 else [])
    for eof in [False, True] if got.ending == "eof" else [False]:
        case = responses.Case(name if eof or got.ending != "eof" else name + " (kept open)", method, data, eof)
        for chunks in variants:
            yield case, chunks


@pytest.mark.parametrize(("method", "path"), FAULT_REQUESTS, ids=[f"{m} {p}" for m, p in FAULT_REQUESTS])
def test_fault_server_responses(parser: ModuleType, fault_server: FaultServer, method: str, path: str) -> None:
    got = capture(fault_server.port, path, method, limit=3 << 20, quiet=1.0 if path in STALLS else 30.0)
    assert_none(*problems(parser, replays(method, path, got)))
    outcome = contract.NativeParser(parser)(method, got.chunks, got.ending == "eof")
    assert outcome in expected(method, path), (got.ending, b"".join(got.chunks)[:200])
    said = native(parser, method, got.chunks, got.ending == "eof")
    assert (said["gzip"], said["server"], said["backend"]) == (path in GZIPPED and said["head_done"], "", "")


@pytest.mark.parametrize(("method", "path"), [*contract.FAULT_SERVER, *contract.ENDLESS],
                         ids=[f"{m} {p}" for m, p in [*contract.FAULT_SERVER, *contract.ENDLESS]])
def test_the_fault_server_sends_the_contracts_rows(fault_server: FaultServer, method: str, path: str) -> None:
    """What the fault server sends is the unit tier's table (tests/support/contract.py): its
    answer is the bytes of the row named after it, closed where the row is (an endless answer
    begins with its row's)."""
    endless = (method, path) in contract.ENDLESS
    row = contract.row(contract.ENDLESS[method, path] if endless else contract.FAULT_SERVER[method, path])
    got = capture(fault_server.port, path, method, limit=3 << 20, quiet=1.0 if path in STALLS else 30.0)
    data = b"".join(got.chunks)
    if endless:
        assert data.startswith(row.data) and len(data) > len(row.data), data[:200]
        return
    assert data == row.data, data[:200]
    assert got.ending == ("eof" if row.closed else "quiet")


def test_servers_that_never_answer(parser: ModuleType) -> None:
    silent = FaultServer(on_accept="silent").start()
    try:
        got = capture(silent.port, "/ok", quiet=0.5)
    finally:
        silent.stop()
    assert got == Capture([], "quiet")
    assert_none(*problems(parser, replays("GET", "silent", got)))
    assert contract.NativeParser(parser)("GET", got.chunks, False) == contract.PENDING
    with reset_at_accept_server() as port:
        got = capture(port, "/ok")
    assert got.ending == "reset"
    assert_none(*problems(parser, replays("GET", "reset at accept", got)))
    # A reset is no close: the parser still waits, and the engine names the reset.
    assert contract.NativeParser(parser)("GET", got.chunks, False) == contract.PENDING


def nginx_says(head: bytes, body: bytes) -> tuple[int, int]:
    """(status, body bytes) read off nginx's head by a regex, and its chunks' sizes if it chunks:
    a reading of its own, for the parser's to come to."""
    status = int(head.split(b" ", 2)[1])
    length = re.search(rb"\r\nContent-Length: (\d+)\r\n", head)
    if length:
        return status, int(length[1])
    assert re.search(rb"\r\nTransfer-Encoding: chunked\r\n", head), head
    total, at = 0, 0
    while (size := int(body[at:body.index(b"\r\n", at)], 16)) > 0:
        total += size
        at = body.index(b"\r\n", at) + 2 + size + 2
    return status, total


@pytest.mark.parametrize(("method", "path", "headers"), [
    ("GET", "/", ""), ("HEAD", "/", ""), ("GET", "/", "Accept-Encoding: gzip\r\n"), ("GET", "/teapot", ""),
    ("GET", "/fail", ""), ("GET", "/echo", ""), ("GET", "/nosuch", ""),
])
def test_nginx_responses(parser: ModuleType, nginx: Nginx, method: str, path: str, headers: str) -> None:
    port = int(nginx.url.rsplit(":", 1)[1].strip("/"))
    # nginx keeps the connection open: the capture stops where the parser says the response
    # ended; that it ended there is asked of every other reading of the same bytes.
    got = capture(port, path, method, close=False, headers=headers,
                  until=lambda chunks: native(parser, method, chunks)["outcome"] != "pending")
    assert_none(*problems(parser, replays(method, path, got)))
    data = b"".join(got.chunks)
    head, _, body = data.partition(b"\r\n\r\n")
    status, length = nginx_says(head + b"\r\n", body)
    # nginx keeps the connection: a response to GET leaves it for the next request, HEAD never does.
    outcome = contract.NativeParser(parser)(method, got.chunks, got.ending == "eof")
    assert outcome == contract.Response(status, 0 if method == "HEAD" else length, method != "HEAD"), data[:300]
    said = native(parser, method, got.chunks)
    server = re.search(rb"\r\nServer: ([^\r]*)\r\n", head + b"\r\n")
    assert server and server[1].startswith(b"nginx/"), head
    assert (said["server"], said["gzip"]) == (server[1].decode(), bool(headers)), said
