"""Where the Python engine on httpx counts or names a run differently from the native engine: the one table.

tests/integration/test_native_differential.py sends each scenario through `--engine native` and
through `--engine python --transport httpx` and compares what each counted (its summary's requests,
good, bad, failed, status codes, errors by kind, connections opened and closed, bodies hashed).
Every failure of every fault server is named with the same kind by both; what is counted
differs in four scenarios, each a row here: the scenario (as the test names it), the summary
keys that differ, and why. The test compares the other keys, and checks that a row's keys do
differ, so a row that stops being true fails until it is taken out. docs/development.md shows
the table (test_docs checks it is there, row by row).

Where httpx names a failure in other words than the native engine, that is a row too, its key
ERROR_TEXT (the failure's text, as the error lines say it). Since issue 34 retired the Python fast
transport (llhttp's words, which response.c keeps), a malformed response is named by the parser
that refused it: h11 says which line it could not read where llhttp says which rule it broke
(two of tests/integration/test_native_engine.py's 13 faults, whose kinds it compares, and checks
that the texts still differ). And one TLS fault of tests/integration/test_tls_faults.py differs
in kind too, a close in the handshake: that test checks what it counts, and that the kinds and
texts httpx gives are the row's. The last row is a clock's: httpx times by its loop, the native
engine by the kernel (tests/integration/test_client_limit.py reads it when a stop lands so).

Measured on 2026-12-03 (load average 7-9 on 2 cores): every other scenario of the differential
test (75 of 79) counted the same, number for number. A fifth difference was a failure named by
httpx alone, and is gone: it reused a kept-alive connection that had sent bytes after a
response, and failed the next send on it as `protocol: illegal status line: bytearray(b'x...')`;
it now closes such a connection as the native engine does (httpx_transport._unasked).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Differs:
    """What differs (summary keys) and why: the native engine's count first, then httpx's."""

    keys: tuple[str, ...]
    why: str


_HANDSHAKE = ("connectionsOpened", "connectionsClosed")
ERROR_TEXT = "error text"  # not a summary key: the failure's text in the error lines (kinds are the same)

HTTPX_DIFFERS: dict[str, Differs] = {
    "TLS handshake never answered": Differs(
        _HANDSHAKE,
        "native: a connection is opened once its handshake is done, so none here; httpx: the TCP connection "
        "under the handshake is opened and closed, one per send (the failures are `timeout` in both)"),
    "TLS not verified": Differs(
        _HANDSHAKE,
        "native: no connection opened (the handshake failed); httpx: one opened and closed per send "
        "(the failures are `tls` in both)"),
    "an answer before the body is written": Differs(
        ("connectionsClosed",),
        "native: each connection's close counted (2 of 2); httpx: 1 of 2 (both responses good, "
        "each on a connection of its own in both)"),
    "bytes after a response": Differs(
        ("bench.totalTransferred",),
        "native: the bytes a server sends after a response's body, in the same read, are bytes transferred, "
        "as ab counts them; httpx: only the response's own (h11 does not say what it threw away). "
        "Neither reuses such a connection, so every send is good in both"),
    "not HTTP at all (/garbage)": Differs(
        (ERROR_TEXT,),
        "native: `protocol: invalid response: Expected HTTP/, RTSP/ or ICE/` (llhttp's words for the rule broken); "
        "httpx: `protocol: illegal status line: bytearray(b'SSH-2.0-OpenSSH_9.6 this is not HTTP')` (h11 "
        "quotes the line). `protocol` in both, every send"),
    "a chunk size that is not hex (/bad-chunking)": Differs(
        (ERROR_TEXT,),
        "native: `protocol: invalid response: Invalid character in chunk size`; httpx: `protocol: illegal "
        "chunk header: bytearray(b'zz\\r\\n')`. `protocol` in both, every send"),
    "closed in the handshake": Differs(
        ("errors", ERROR_TEXT),
        "native: `reset`, `connection reset by peer` (what asyncio's TLS called a connection lost in the "
        "handshake, for the fast transport; the native engine kept its name); httpx: `tls`, `tls: unexpected eof "
        "while reading` (OpenSSL's reason: the server closed, it did not reset). Every send failed in both "
        "(tests/integration/test_tls_faults.py)"),
    "a client stopped while its answer arrives": Differs(
        ("client.latenessMs", "max"),
        "native: the answer is dated by the kernel's receive stamp, so the stop is the client's: the sends due "
        "meanwhile leave late (lateness of hundreds of ms); httpx: dated when the loop read it, after the "
        "stop, so the stop is that response's latency (stopped before its headers were read) or its body phase "
        "(stopped after them), and the next send, which waited for that response, is not late (latencyClock "
        "`loop`). Only when the stop lands with a request in flight; the counts are the same. Measured: a 600 ms "
        "stop 50 ms into a 200 ms request, 4 req/s: native lateness 354 ms, max latency 207 ms; httpx 0.7 ms and "
        "609 ms; a stop between a response's headers and its body's end: httpx lateness 0.2 ms, body phase "
        "601 ms, one send skipped (tests/integration/test_client_limit.py)"),
}
