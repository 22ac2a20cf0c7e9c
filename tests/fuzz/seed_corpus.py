"""Write the seed corpora of the response parser's fuzzer (tests/fuzz/corpus/response/) and of the
TLS read path's (tests/fuzz/corpus/tls/).

    python tests/fuzz/seed_corpus.py

Seeds are the native parser's test responses (tests/support/responses.py: every framing,
every refusal) and what each path of the fault server (tests/support/faultserver.py) really
sends, each in fuzz_response.c's input format: a control byte (HEAD, close, small bound), a
byte that picks the cuts into reads, then the bytes. The seeds written here are named seed-*;
the other files are left alone: found-* (what long fuzz runs reached, merged with libFuzzer's
-merge=1 so that each adds coverage) and regression-* (inputs that once crashed it).

The TLS seeds are exchanges in fuzz_tls.c's input format: a control byte (TLS 1.2, insecure, raw
bytes instead of a server, a name to check), then its operations (OPS below).
"""

from __future__ import annotations

import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from tests.support.capture import capture  # noqa: E402
from tests.support.faultserver import FaultServer  # noqa: E402
from tests.support.responses import HOSTILE, VALID  # noqa: E402

CORPUS = REPO / "tests" / "fuzz" / "corpus" / "response"
TLS_CORPUS = REPO / "tests" / "fuzz" / "corpus" / "tls"
TLS12, INSECURE, RAW, NAMED = 1, 2, 4, 8  # fuzz_tls.c's control bits
# fuzz_tls.c's operations: the server writes, part of its bytes reach the client, bytes put in, close_notify,
# renegotiation (or key update), the client's request, a byte flipped, everything reaches the client.
WRITE, DELIVER, INJECT, NOTIFY, RENEGOTIATE, REQUEST, FLIP, ALL = range(8)
OK = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"
HEAD, CLOSE, SMALL_BOUND, BACKEND = 1, 2, 4, 8  # fuzz_response.c's control bits
MOST = 4096  # bytes of a seed at most: longer bodies teach the fuzzer nothing more

# The fault server's paths, as tests/integration/test_native_response.py replays them.
FAULT_PATHS = ("/ok", "/status/204", "/status/304", "/status/404", "/status/100", "/status/101", "/status/0",
               "/reset-mid-body", "/close-mid-body", "/garbage", "/big/5000", "/chunked", "/varying",
               "/interim/100", "/interim/102-close", "/switch", "/endless-headers", "/endless-chunk-line",
               "/bad-chunking", "/trickle/5/1", "/gzip", "/gzip-lie", "/until-close", "/nosuch")


def seed(name: str, control: int, cuts: int, data: bytes) -> None:
    (CORPUS / f"seed-{name}").write_bytes(bytes([control, cuts]) + data[:MOST])


# Responses that carry the backendHeader (X-Soak-Backend), in every form the parser keeps a value from:
# any case, blanks (NEL and NBSP too) at either end, cut at 64, empty, twice, in a 1xx head
# or in trailers (neither counts), and names that only start like it.
_OK = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n"
BACKEND_RESPONSES = {
    "plain": _OK + b"X-Soak-Backend: web-7d9f-abcde\r\n\r\nok",
    "case": _OK + b"x-SOAK-backend:\tpod-1 \r\n\r\nok",
    "blanks": _OK + b"X-Soak-Backend: \x85\xa0pod-2\xa0 \t\r\n\r\nok",
    "long": _OK + b"X-Soak-Backend: " + b"p" * 63 + b" tail-past-64\r\n\r\nok",
    "empty": _OK + b"X-Soak-Backend:\r\n\r\nok",
    "twice": _OK + b"X-Soak-Backend: first\r\nX-Soak-Backend: second\r\n\r\nok",
    "prefix": _OK + b"X-Soak-Backends: no\r\nX-Soak-Backen: no\r\nX-Soak-Backend: yes\r\n\r\nok",
    "interim": b"HTTP/1.1 100 Continue\r\nX-Soak-Backend: early\r\n\r\n" + _OK + b"\r\nok",
    "trailer": b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n"
               b"X-Soak-Backend: trailer\r\n\r\n",
    "none": _OK + b"Server: nginx\r\n\r\nok",
}


def backend_seeds() -> None:
    """The backendHeader's seeds: each response whole, cut at random, and a byte per read."""
    for i, (name, data) in enumerate(BACKEND_RESPONSES.items()):
        for cuts in (0, 1, 2 + i):
            seed(f"backend-{name}-{cuts}", BACKEND | CLOSE, cuts, data)
    seed("backend-head", BACKEND | HEAD, 3, BACKEND_RESPONSES["plain"])


def write(data: bytes) -> bytes:
    """The server writes `data` (in pieces of at most 256 bytes)."""
    return b"".join(bytes([WRITE, len(data[i:i + 256]) - 1]) + data[i:i + 256] for i in range(0, len(data), 256))


def tls_seeds() -> None:
    """Exchanges: whole, a byte at a time, closed, renegotiated, tampered with, and raw bytes."""
    TLS_CORPUS.mkdir(parents=True, exist_ok=True)
    for old in TLS_CORPUS.glob("seed-*"):
        old.unlink()
    answer = bytes([ALL]) + bytes([REQUEST, ALL]) + write(OK) + bytes([ALL])
    seeds = {
        "tls13": bytes([0]) + answer, "tls12": bytes([TLS12]) + answer, "insecure": bytes([INSECURE]) + answer,
        "named": bytes([NAMED]) + answer, "named-insecure": bytes([NAMED | INSECURE]) + answer,
        "byte-by-byte": bytes([0, ALL, REQUEST, ALL]) + write(OK) + bytes([DELIVER, 0]) * 80,
        "handshake-byte-by-byte": bytes([TLS12]) + bytes([DELIVER, 0, REQUEST]) * 200,
        "close-notify": bytes([0]) + answer + bytes([NOTIFY, ALL]),
        "close-notify-mid-body": bytes([0, ALL, REQUEST, ALL]) + write(OK[:-1]) + bytes([NOTIFY, ALL]),
        "renegotiate": bytes([TLS12]) + answer + bytes([RENEGOTIATE, ALL, REQUEST, ALL]) + write(OK) + bytes([ALL]),
        "key-update": bytes([0]) + answer + bytes([RENEGOTIATE, ALL, REQUEST, ALL]) + write(OK) + bytes([ALL]),
        "flipped": bytes([0, ALL, REQUEST, ALL]) + write(OK) + bytes([FLIP, 30, ALL]),
        "flipped-handshake": bytes([TLS12, FLIP, 100, ALL]),
        "injected": bytes([0]) + answer + bytes([INJECT, 4]) + b"\x17\x03\x03\x00\x01",
        "big-body": bytes([0, ALL, REQUEST, ALL]) + write(b"HTTP/1.1 200 OK\r\nContent-Length: 3000\r\n\r\n"
                                                       + b"b" * 3000) + bytes([ALL]),
        "raw-http": bytes([RAW, 63]) + OK,
        "raw-alert": bytes([RAW, 6]) + b"\x15\x03\x03\x00\x02\x02\x28",
        "raw-garbage": bytes([RAW, 10]) + bytes(range(256)),
    }
    for name, data in seeds.items():
        (TLS_CORPUS / f"seed-{name}").write_bytes(data)


def main() -> None:
    CORPUS.mkdir(parents=True, exist_ok=True)
    for old in CORPUS.glob("seed-*"):
        old.unlink()
    for i, (name, data) in enumerate({**VALID, **HOSTILE}.items()):
        seed(name, CLOSE, i % 7, data)
        seed(f"{name}-head", HEAD, 0, data)
    seed("endless-headers-small-bound", SMALL_BOUND, 2, VALID["nginx"])
    seed("chunk-lines-small-bound", SMALL_BOUND, 3, VALID["chunked-ext"] + b"0" * 200)
    backend_seeds()
    server = FaultServer().start()
    try:
        for path in FAULT_PATHS:
            for method in ("GET", "HEAD") if path in ("/ok", "/chunked", "/interim/100") else ("GET",):
                got = capture(server.port, path, method, limit=MOST)  # each of these paths closes
                name = "fault" + path.replace("/", "-") + ("-head" if method == "HEAD" else "")
                control = (HEAD if method == "HEAD" else 0) | (CLOSE if got.ending == "eof" else 0)
                seed(name, control | (SMALL_BOUND if path.startswith("/endless") else 0), 5, b"".join(got.chunks))
    finally:
        server.stop()
    print(f"{len(list(CORPUS.iterdir()))} files in {CORPUS.relative_to(REPO)}")
    tls_seeds()
    print(f"{len(list(TLS_CORPUS.iterdir()))} files in {TLS_CORPUS.relative_to(REPO)}")


if __name__ == "__main__":
    main()
