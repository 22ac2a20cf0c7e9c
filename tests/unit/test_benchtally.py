"""`soak bench`, ab's mode: exact counts, connections, time limit, bodies, failures, all checked
against what the server saw; and the parts behind it (phases, the bench section, the engine loop).
"""

from __future__ import annotations

import httpx

from runner.load.httpx_transport import head_size
from runner.load.result import ErrorKind, Result
from runner.report.summary import AB_FAILURES
from runner.stats.recorder import BenchTally


def test_phases_are_abs() -> None:
    """connect = ready - start, waiting = headers - written, total = end - start, processing = total - connect."""
    bench = BenchTally()
    bench.add(response(0, connected=2 * MS, written=3 * MS, headers=7 * MS, end=10 * MS, server="nginx"))
    bench.add(response(100 * MS, written=101 * MS, headers=104 * MS, end=105 * MS, kept_alive=True))
    phases = {name: (h.min, h.max, h.count) for name, h in bench.phases().items()}
    assert phases == {
        "connect": (0, 2 * MS, 2),
        "processing": (5 * MS, 8 * MS, 2),
        "waiting": (3 * MS, 4 * MS, 2),
        "total": (5 * MS, 10 * MS, 2),
    }
    assert (bench.kept_alive, bench.server, bench.last_end_ns, bench.header_bytes) == (1, "nginx", 105 * MS, 460)


def test_document_length_is_the_first_responses_and_others_are_checked_against_it() -> None:
    bench = BenchTally()
    for size in (612, 612, 100, 612, 0):
        bench.add(response(0, end=1, size=size))
    assert (bench.document_length, bench.length_mismatches) == (612, 2)


def test_failures_are_not_timed_but_their_bytes_and_end_count() -> None:
    bench = BenchTally()
    bench.add(Result(start_ns=0, end_ns=9 * MS, status=200, header_bytes=100, bytes_in=10, error="reset",
                     server="nginx"))
    assert bench.total.count == 0 and bench.document_length is None
    assert (bench.header_bytes, bench.last_end_ns) == (100, 9 * MS)
    bench.add(response(10 * MS, end=11 * MS))
    assert bench.server == "nginx", "the Server of the first response head, even one cut short, as ab"


def test_every_error_kind_is_one_of_abs_failures() -> None:
    grouped = [kind for group in AB_FAILURES.values() for kind in group]
    assert sorted(grouped) == sorted(ErrorKind)


def test_head_size_counts_status_line_headers_and_blank_line() -> None:
    headers = [(b"Server", b"nginx/1.22.1"), (b"Content-Length", b"612"), (b"Connection", b"close")]
    wire = b"HTTP/1.1 200 OK\r\n" + b"".join(k + b": " + v + b"\r\n" for k, v in headers) + b"\r\n"
    r = httpx.Response(200, headers=headers, extensions={"http_version": b"HTTP/1.1", "reason_phrase": b"OK"})
    assert head_size(r) == len(wire)


MS = 1_000_000


def response(start: int, *, connected: int = 0, written: int = 0, headers: int = 0, end: int = 0,
             status: int = 200, size: int = 612, head: int = 230, server: str = "", kept_alive: bool = False) -> Result:
    return Result(start_ns=start, connected_ns=connected, written_ns=written, headers_ns=headers, end_ns=end,
                  status=status, bytes_in=size, header_bytes=head, server=server, kept_alive=kept_alive)
