"""Response byte streams for the tests of the native parser: valid ones of every framing,
hostile ones, and systematic mutations of both, each fed in several chunkings.

They carry no expected outcome: tests/integration/test_native_response.py asks of each that
every chunking of it reads the same and that the reading breaks no rule that holds for any
bytes (tests/support/replay.py); what particular bytes must come to is the contract table's
(tests/support/contract.py). tests/fuzz/seed_corpus.py seeds the fuzzer with VALID and HOSTILE.

Everything is generated from a fixed seed, so a failure names a case that can be run again.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from dataclasses import dataclass

NGINX_HEAD = (b"HTTP/1.1 200 OK\r\nServer: nginx/1.22.1\r\nDate: Tue, 01 Dec 2026 09:00:00 GMT\r\n"
              b"Content-Type: text/html\r\nContent-Length: 612\r\nLast-Modified: Mon, 30 Nov 2026 18:00:00 GMT\r\n"
              b"Connection: keep-alive\r\nETag: \"6367a6e0-264\"\r\nAccept-Ranges: bytes\r\n\r\n")
NGINX_RESPONSE = NGINX_HEAD + b"x" * 611 + b"\n"  # the 612-byte page, as tests/conftest.py serves it


@dataclass(frozen=True)
class Case:
    name: str
    method: str
    data: bytes
    eof: bool = False  # the server closes after `data`


def _head(status: bytes, *headers: bytes) -> bytes:
    return status + b"\r\n" + b"".join(h + b"\r\n" for h in headers) + b"\r\n"


def _chunked(*pieces: bytes, trailers: bytes = b"", ext: bytes = b"") -> bytes:
    return b"".join(b"%x%s\r\n%s\r\n" % (len(p), ext, p) for p in pieces) + b"0\r\n" + trailers + b"\r\n"


OK = b"HTTP/1.1 200 OK"
TE = b"Transfer-Encoding: chunked"

# Valid responses (and a few the grammar takes whose framing is odd), by name.
VALID: dict[str, bytes] = {
    "nginx": NGINX_RESPONSE,
    "length-0": _head(OK, b"Content-Length: 0"),
    "length-5": _head(OK, b"Content-Length: 5") + b"hello",
    "length-leading-zeros": _head(OK, b"Content-Length: 0005 \t") + b"hello",
    "length-huge": _head(OK, b"Content-Length: 18446744073709551615") + b"a few bytes",
    "chunked": _head(OK, TE) + _chunked(b"a" * 10, b"b", b"c" * 300),
    "chunked-upper-hex": _head(OK, TE) + b"A\r\n" + b"z" * 10 + b"\r\n0000\r\n\r\n",
    "chunked-ext": _head(OK, TE) + _chunked(b"hello", ext=b";a=b;c;d=\"q \\\" t\";e=\"\"") ,
    "chunked-trailers": _head(OK, TE) + _chunked(b"hello", trailers=b"X-Sum: 1\r\nServer: trailing\r\n"),
    "chunked-trailer-close": _head(OK, TE) + _chunked(b"hello", trailers=b"Connection: close\r\n"),
    "chunked-trailer-te": _head(OK, TE) + _chunked(b"hello", trailers=b"Transfer-Encoding: gzip\r\n"),
    "chunked-trailer-length": _head(OK, TE) + _chunked(b"hello", trailers=b"Content-Length: 5\r\n"),
    "te-gzip-chunked": _head(OK, b"Transfer-Encoding: gzip, chunked") + _chunked(b"hello"),
    "te-two-lines": _head(OK, b"Transfer-Encoding: gzip", TE) + _chunked(b"hello"),
    "te-chunked-then-gzip": _head(OK, TE, b"Transfer-Encoding: gzip") + b"until the close",
    "te-chunked-gzip": _head(OK, b"Transfer-Encoding: chunked, gzip") + b"until the close",
    "te-chunked-tab": _head(OK, b"Transfer-Encoding: chunked\t") + b"until the close",
    "te-chunked-space": _head(OK, b"Transfer-Encoding: CHUNKED  ") + _chunked(b"hello"),
    "te-xchunked": _head(OK, b"Transfer-Encoding: xchunked") + b"until the close",
    "te-identity": _head(OK, b"Transfer-Encoding: identity") + b"until the close",
    "close-delimited": _head(OK) + b"until the close",
    # the backendHeader X-Soak-Backend (every replay keeps its value), in every form a value takes:
    # any case, blanks (NEL and NBSP too) about it, longer than kept, empty, twice (the first counts),
    # near names, in a 1xx head and in trailers (neither counts)
    "backend": _head(OK, b"Content-Length: 2", b"X-Soak-Backend: web-7d9f-abcde") + b"ok",
    "backend-case-blanks": _head(OK, b"Content-Length: 2", b"x-SOAK-backend: \t\x85\xa0pod-1\xa0 \t") + b"ok",
    "backend-long": _head(OK, b"Content-Length: 2", b"X-Soak-Backend: " + b"p" * 63 + b" past 64") + b"ok",
    "backend-empty": _head(OK, b"Content-Length: 2", b"X-Soak-Backend:") + b"ok",
    "backend-twice": _head(OK, b"Content-Length: 2", b"X-Soak-Backend: one", b"X-Soak-Backend: two") + b"ok",
    "backend-near-names": _head(OK, b"X-Soak-Backends: no", b"X-Soak-Backen: no", b"X-Soak-Backend: yes",
                                b"Content-Length: 2") + b"ok",
    "backend-interim": _head(b"HTTP/1.1 100 Continue", b"X-Soak-Backend: early")
                       + _head(OK, b"Content-Length: 2", b"X-Soak-Backend: final") + b"ok",
    "backend-trailer": _head(OK, TE) + _chunked(b"hello", trailers=b"X-Soak-Backend: trailing\r\n"),
    "close-delimited-empty": _head(OK),
    "connection-close": _head(OK, b"Content-Length: 2", b"Connection: close") + b"ok",
    "connection-tokens": _head(OK, b"Content-Length: 2", b"Connection: keep-alive, CLOSE, upgrade") + b"ok",
    "connection-closed": _head(OK, b"Content-Length: 2", b"Connection: closed") + b"ok",
    "connection-close-x": _head(OK, b"Content-Length: 2", b"Connection: close x") + b"ok",
    "connection-x-close": _head(OK, b"Content-Length: 2", b"Connection: x,close") + b"ok",
    "proxy-connection": _head(OK, b"Content-Length: 2", b"Proxy-Connection: close") + b"ok",
    "http10": _head(b"HTTP/1.0 200 OK", b"Content-Length: 2") + b"ok",
    "http10-keep-alive": _head(b"HTTP/1.0 200 OK", b"Content-Length: 2", b"Connection: Keep-Alive") + b"ok",
    "http10-keep-alive-x": _head(b"HTTP/1.0 200 OK", b"Content-Length: 2", b"Connection: keep-alivex") + b"ok",
    "http09": _head(b"HTTP/0.9 200 OK", b"Content-Length: 2") + b"ok",
    "http20": _head(b"HTTP/2.0 200 OK", b"Content-Length: 2") + b"ok",
    "rtsp": _head(b"RTSP/1.0 200 OK", b"Content-Length: 2") + b"ok",
    "ice": _head(b"ICE/1.1 200 OK", b"Content-Length: 2") + b"ok",
    "no-reason": _head(b"HTTP/1.1 404", b"Content-Length: 2") + b"no",
    "empty-reason": _head(b"HTTP/1.1 500 ", b"Content-Length: 2") + b"no",
    "odd-reason": _head(b"HTTP/1.1 200 \x01\x7f\xff ok", b"Content-Length: 2") + b"ok",
    "status-999": _head(b"HTTP/1.1 999 Whatever", b"Content-Length: 2") + b"ok",
    "status-600": _head(b"HTTP/1.1 600 Whatever") + b"until the close",
    "204-length": _head(b"HTTP/1.1 204 No Content", b"Content-Length: 5"),
    "204-chunked": _head(b"HTTP/1.1 204 No Content", TE),
    "304": _head(b"HTTP/1.1 304 Not Modified", b"Content-Length: 612", b"ETag: \"x\""),
    "304-te": _head(b"HTTP/1.1 304 Not Modified", b"Transfer-Encoding: gzip"),
    "interim-100": _head(b"HTTP/1.1 100 Continue") + _head(OK, b"Content-Length: 2", b"Server: final") + b"ok",
    "interim-100-length": _head(b"HTTP/1.1 100 Continue", b"Content-Length: 5") + _head(OK, b"Content-Length: 2") + b"ok",
    "interim-102-103": (_head(b"HTTP/1.1 102 Processing", b"Server: interim") + _head(b"HTTP/1.1 103 Early Hints", b"Link: </a>")
                        + _head(OK, b"Server: final", b"Content-Length: 2") + b"ok"),
    "interim-150-body": _head(b"HTTP/1.1 150 Odd", b"Content-Length: 3") + b"abc" + _head(OK, b"Content-Length: 2") + b"ok",
    "interim-199-chunked": _head(b"HTTP/1.1 199 Odd", TE) + _chunked(b"abc") + _head(OK, b"Content-Length: 2") + b"ok",
    "interim-150-te": _head(b"HTTP/1.1 150 Odd", b"Transfer-Encoding: gzip") + b"until the close",
    "interim-http10": _head(b"HTTP/1.0 100 Continue") + _head(OK, b"Content-Length: 2") + b"ok",
    "interim-close": _head(b"HTTP/1.1 100 Continue", b"Connection: close") + b"\r\n\r\n",
    "interim-crlf": _head(b"HTTP/1.1 100 Continue") + b"\r\n\r\n" + _head(OK, b"Content-Length: 2") + b"ok",
    "interim-no-reason": _head(b"HTTP/1.1 100", b"Server: interim") + _head(OK, b"Server: final", b"Content-Length: 2") + b"ok",
    "leading-crlf": b"\r\n\n\r\n" + _head(OK, b"Content-Length: 2") + b"ok",
    "switch": _head(b"HTTP/1.1 101 Switching Protocols", b"Upgrade: websocket", b"Connection: Upgrade") + b"\x00\x01",
    "status-000": _head(b"HTTP/1.1 000 Zero", b"Content-Length: 2") + b"ok",
    "status-099": _head(b"HTTP/1.1 099 Low"),
    "server-blanks": _head(OK, b"Server: \xa0 nginx \t\x85", b"Content-Length: 2") + b"ok",
    "server-empty": _head(OK, b"Server:", b"Server: second", b"Content-Length: 2") + b"ok",
    "server-long": _head(OK, b"Server: " + b"s" * 300 + b"  ", b"Content-Length: 2") + b"ok",
    "server-256": _head(OK, b"Server: " + b"s" * 256 + b" ", b"Content-Length: 2") + b"ok",
    "server-obs-text": _head(OK, b"sErVeR:\t\xe9t\xe9 1.0", b"Content-Length: 2") + b"ok",
    "gzip": _head(OK, b"Content-Encoding: gzip", b"Content-Length: 2") + b"ok",
    "gzip-upper": _head(OK, b"Content-Encoding:  X-GZip \xa0", b"Content-Length: 2") + b"ok",
    "gzip-list": _head(OK, b"Content-Encoding: gzip, br", b"Content-Length: 2") + b"ok",
    "gzip-second": _head(OK, b"Content-Encoding: br", b"Content-Encoding: gzip", b"Content-Length: 2") + b"ok",
    "upgrade-header": _head(OK, b"Upgrade: h2c", b"Connection: upgrade", b"Content-Length: 2") + b"ok",
    "header-names": _head(OK, b"Content-Lengthx: 5", b"X-Content-Length: 7", b"connection-x: close",
                          b"!#$%&'*+-.^_`|~09AZaz: v", b"Content-Length: 2") + b"ok",
    "header-values": _head(OK, b"X-Empty:", b"X-Blank: \t ", b"X-High: \x80\xff", b"X-Quote: \"a,b\"",
                           b"Content-Length: 2") + b"ok",
}

# Refused by llhttp's grammar, or by the engine's rules on top of it (response.h), one reason each.
HOSTILE: dict[str, bytes] = {
    "garbage": b"SSH-2.0-OpenSSH_9.6 this is not HTTP\r\n\r\n",
    "lower-http": b"http/1.1 200 OK\r\n\r\n",
    "version-12": _head(b"HTTP/1.2 200 OK"),
    "version-30": _head(b"HTTP/3.0 200 OK"),
    "version-11-1": _head(b"HTTP/11.1 200 OK"),
    "version-no-dot": _head(b"HTTP/1 200 OK"),
    "no-space": _head(b"HTTP/1.1200 OK"),
    "two-spaces": _head(b"HTTP/1.1  200 OK"),
    "status-2-digits": _head(b"HTTP/1.1 20 OK"),
    "status-4-digits": _head(b"HTTP/1.1 2000 OK"),
    "status-letters": _head(b"HTTP/1.1 2x0 OK"),
    "status-lf": b"HTTP/1.1 200\n\r\n",
    "status-line-bare-lf": b"HTTP/1.1 200 OK\nContent-Length: 0\r\n\r\n",
    "status-cr-x": b"HTTP/1.1 200 OK\rX\r\n\r\n",
    "header-bare-lf": b"HTTP/1.1 200 OK\r\nContent-Length: 0\n\r\n",
    "end-bare-lf": b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\n",
    "end-cr-x": b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\rX",
    "value-cr-x": b"HTTP/1.1 200 OK\r\nX-A: b\rX\r\n\r\n",
    "space-first-header": b"HTTP/1.1 200 OK\r\n X: y\r\n\r\n",
    "obs-fold": _head(OK, b"X-Folded: a", b" b", b"Content-Length: 0"),
    "obs-fold-tab": _head(OK, b"X-Folded: a", b"\tb", b"Content-Length: 0"),
    "obs-fold-empty": _head(OK, b"X-Folded:", b" b"),
    "space-before-colon": _head(OK, b"Content-Length : 0"),
    "space-before-colon-x": _head(OK, b"X-A : 0"),
    "space-in-name": _head(OK, b"X A: 0"),
    "empty-name": _head(OK, b": 0"),
    "no-colon": _head(OK, b"Content-Length"),
    "control-in-value": _head(OK, b"X-A: a\x01b"),
    "del-in-value": _head(OK, b"X-A: a\x7fb"),
    "nul-in-name": _head(OK, b"X-\x00: b"),
    "length-and-te": _head(OK, b"Content-Length: 5", TE) + b"5\r\nhello\r\n0\r\n\r\n",
    "te-and-length": _head(OK, TE, b"Content-Length: 5") + b"hello",
    "duplicate-length": _head(OK, b"Content-Length: 5", b"Content-Length: 5") + b"hello",
    "length-letters": _head(OK, b"Content-Length: abc"),
    "length-plus": _head(OK, b"Content-Length: +5"),
    "length-two-numbers": _head(OK, b"Content-Length: 1 2"),
    "length-comma": _head(OK, b"Content-Length: 5, 5"),
    "length-empty": _head(OK, b"Content-Length:"),
    "length-blank": _head(OK, b"Content-Length:  \t"),
    "length-overflow": _head(OK, b"Content-Length: 18446744073709551616"),
    "length-overflow-long": _head(OK, b"Content-Length: 99999999999999999999999"),
    "te-empty": _head(OK, b"Transfer-Encoding:"),
    "te-control": _head(OK, b"Transfer-Encoding: chunked\x01"),
    "chunk-size-letters": _head(OK, TE) + b"zz\r\nhello\r\n0\r\n\r\n",
    "chunk-size-space": _head(OK, TE) + b"5 \r\nhello\r\n0\r\n\r\n",
    "chunk-size-tab": _head(OK, TE) + b"5\t\r\nhello\r\n0\r\n\r\n",
    "chunk-size-empty": _head(OK, TE) + b"\r\nhello\r\n0\r\n\r\n",
    "chunk-size-lf": _head(OK, TE) + b"5\nhello\r\n0\r\n\r\n",
    "chunk-size-overflow": _head(OK, TE) + b"10000000000000000\r\n",
    "chunk-size-max": _head(OK, TE) + b"ffffffffffffffff\r\nsome",
    "chunk-size-minus": _head(OK, TE) + b"-5\r\n",
    "chunk-ext-space": _head(OK, TE) + b"5; a=b\r\nhello\r\n0\r\n\r\n",
    "chunk-ext-cr": _head(OK, TE) + b"5;\r\nhello\r\n0\r\n\r\n",
    "chunk-ext-lf": _head(OK, TE) + b"5;a\nhello\r\n0\r\n\r\n",
    "chunk-ext-value-lf": _head(OK, TE) + b"5;a=b\nhello\r\n0\r\n\r\n",
    "chunk-ext-bad-name": _head(OK, TE) + b"5;a(\r\nhello\r\n0\r\n\r\n",
    "chunk-ext-bad-value": _head(OK, TE) + b"5;a=b(\r\nhello\r\n0\r\n\r\n",
    "chunk-ext-open-quote": _head(OK, TE) + b"5;a=\"b\r\nhello\r\n0\r\n\r\n",
    "chunk-ext-bad-pair": _head(OK, TE) + b"5;a=\"\\\x01\"\r\nhello\r\n0\r\n\r\n",
    "chunk-ext-after-quote": _head(OK, TE) + b"5;a=\"b\"c\r\nhello\r\n0\r\n\r\n",
    "chunk-ext-quote-lf": _head(OK, TE) + b"5;a=\"b\"\nhello\r\n0\r\n\r\n",
    "chunk-data-no-crlf": _head(OK, TE) + b"5\r\nhelloX\r\n0\r\n\r\n",
    "chunk-data-cr-x": _head(OK, TE) + b"5\r\nhello\rX0\r\n\r\n",
    "chunk-data-lf": _head(OK, TE) + b"5\r\nhello\n0\r\n\r\n",
    "chunk-lf-x": _head(OK, TE) + b"5\rXhello",
    "trailer-fold": _head(OK, TE) + b"0\r\nX: a\r\n b\r\n\r\n",
    "trailer-space": _head(OK, TE) + b"0\r\n X: a\r\n\r\n",
    "trailer-bare-lf": _head(OK, TE) + b"0\r\n\n",
    "data-after-close": _head(b"HTTP/1.0 100 Continue") + _head(OK, b"Content-Length: 2") + b"ok",
    "switch-no-upgrade": _head(b"HTTP/1.1 101 Switching Protocols"),
    "status-000-bad-header": _head(b"HTTP/1.1 000 Zero", b"X A: b"),
}

# The bytes a mutation may put anywhere: each class boundary the grammar has.
INTERESTING = b"\x00\t\n\r \"(),-./:;=\\\x7f\x80\x85\xa0\xff019AFHIRTZacefghkmnsuz|~"


def mutations(data: bytes, limit: int) -> Iterator[tuple[str, bytes]]:
    """Each byte of the first `limit` replaced by each interesting byte, deleted, or doubled."""
    for i in range(min(limit, len(data))):
        for b in INTERESTING:
            if b != data[i]:
                yield f"{i}={b:#04x}", data[:i] + bytes([b]) + data[i + 1:]
        yield f"{i}-deleted", data[:i] + data[i + 1:]
        yield f"{i}-doubled", data[:i + 1] + data[i:]


def chunkings(data: bytes, rng: random.Random, at: int | None = None) -> Iterator[list[bytes]]:
    """`data` whole, split at `at` (a mutated byte) and just after it, and cut at random points."""
    yield [data]
    if at is not None and 0 < at < len(data):
        yield [data[:at], data[at:at + 1], data[at + 1:]]
    cuts = sorted(rng.sample(range(1, len(data)), min(len(data) - 1, rng.randint(1, 6)))) if len(data) > 1 else []
    yield [data[a:b] for a, b in zip([0, *cuts], [*cuts, len(data)])]


def cases(seed: int = 22) -> Iterator[tuple[Case, list[bytes]]]:
    """Every case, each with each of its chunkings, one after another (the first is whole):
    VALID and HOSTILE also in two at every byte and a byte per read, their prefixes then the
    close whole, each mutation at and after its byte and at random."""
    rng = random.Random(seed)
    for name, data in {**VALID, **HOSTILE}.items():
        for method in ("GET", "HEAD"):
            for eof in (False, True):
                case = Case(name, method, data, eof)
                yield case, [data]
                yield case, [bytes([b]) for b in data]  # a byte per read
                for at in range(1, len(data)):
                    yield case, [data[:at], data[at:]]
                for chunks in chunkings(data, rng):
                    yield case, chunks
        for cut in range(len(data)):  # every prefix, then the close
            yield Case(f"{name}[:{cut}]", "GET", data[:cut], True), [data[:cut]]
    for name in ("nginx", "chunked-ext", "interim-102-103", "http10-keep-alive", "chunked-trailers", "gzip-upper"):
        data = VALID[name]
        head_end = data.find(b"\r\n\r\n") + 4
        limit = len(data) if name.startswith("chunked") else head_end
        for what, mutated in mutations(data, limit):
            i = int(what.split("=")[0].split("-")[0])
            for eof in (False, True):
                case = Case(f"{name}@{what}", "GET", mutated, eof)
                for chunks in chunkings(mutated, rng, i):
                    yield case, chunks


# Pieces a random mutation inserts: the grammar's tokens, and whole lines that change the framing.
TOKENS = (b"\r\n", b"\r\n\r\n", b"\n", b"\r", b" ", b"\t", b":", b";", b"=", b"\"", b"\\", b",", b"0", b"5", b"f",
          b"ffffffffffffffff", b"Content-Length: 5\r\n", b"Content-Length: 0\r\n", b"Transfer-Encoding: chunked\r\n",
          b"Transfer-Encoding: gzip\r\n", b"Connection: close\r\n", b"Connection: keep-alive\r\n", b"Server: x\r\n",
          b"Content-Encoding: gzip\r\n", b"HTTP/1.1 100 Continue\r\n\r\n", b"HTTP/1.0 200 OK\r\n", b"HTTP/1.1 204 X\r\n",
          b"HTTP/1.1 101 X\r\n", b"HTTP/1.1 199 X\r\n", b"0\r\n\r\n", b"5\r\nhello\r\n", b";a=\"b\"", b"chunked",
          b"close", b"keep-alive", b"\x00", b"\x80", b"\xff", b"\xa0", b"\x85")


def _mutate(rng: random.Random, data: bytes, seeds: list[bytes]) -> bytes:
    """One to four random edits: a byte replaced, a token inserted, bytes deleted or repeated, a splice."""
    for _ in range(rng.randint(1, 4)):
        op, i = rng.randrange(6), rng.randint(0, len(data))
        j = min(i, len(data) - 1)
        if op == 0 and data:
            data = data[:j] + bytes([rng.randrange(256)]) + data[j + 1:]
        elif op == 1:
            data = data[:i] + rng.choice(TOKENS) + data[i:]
        elif op == 2:
            data = data[:i] + data[rng.randint(i, min(len(data), i + 8)):]
        elif op == 3:
            k = rng.randint(i, min(len(data), i + 16))
            data = data[:k] + data[i:k] + data[k:]
        elif op == 4:
            other = rng.choice(seeds)
            start = rng.randint(0, len(other))
            data = data[:i] + other[start:start + rng.randint(1, 40)]
        elif data:
            data = data[:j] + bytes([rng.choice(INTERESTING)]) + data[j + 1:]
    return data


def random_cases(rng: random.Random, count: int) -> Iterator[tuple[Case, list[bytes]]]:
    """`count` random mutations of the cases above, each cut at random, HEAD one time in seven."""
    seeds = [*VALID.values(), *HOSTILE.values()]
    for n in range(count):
        data = _mutate(rng, rng.choice(seeds), seeds)
        chunks = next(iter(chunkings(data, rng))) if rng.random() < 0.3 else list(chunkings(data, rng))[-1]
        yield Case(f"random-{n}", "HEAD" if rng.random() < 1 / 7 else "GET", data, rng.random() < 0.5), chunks
