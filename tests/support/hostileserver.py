"""A server that answers every request with something different, much of it hostile, for fuzzing
the native engine's connection state machine (tests/integration/test_native_hostile.py).

Each connection draws from its own seeded random generator (the seed and the connection's
number), so a failing run can be told again: valid responses of every framing (a length,
chunks with and without trailers, the close, interim 1xx heads first, 204 and 304), the same
with bytes flipped, inserted or cut, garbage, bytes after a whole response, heads that end
early; each sent in random pieces with short pauses between some, and the connection then
kept (after a whole, valid response that keeps it), closed, or reset. Only what cannot end
by itself (a body cut short on a connection left open) is followed by a close, so a run is
bounded by the client's timeout at worst. Listens on 127.0.0.1 only.
"""

from __future__ import annotations

import random
import socket
import struct
import threading
import time

from tests.support.loopback import Acceptor

STATUSES = (200, 201, 204, 301, 304, 404, 418, 500, 503)


def _head(rng: random.Random, status: int, headers: list[tuple[str, str]]) -> bytes:
    extra = [("Server", "hostile/" + str(rng.randrange(100))), ("X-Filler", "f" * rng.randrange(0, 300))]
    rng.shuffle(extra)
    lines = [f"HTTP/1.{rng.choice('11110')} {status} Reason", *(f"{k}: {v}" for k, v in headers + extra)]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


def valid(rng: random.Random) -> tuple[bytes, bool]:
    """A well-formed response, and whether it leaves the connection usable for another request."""
    status = rng.choice(STATUSES)
    body = bytes(rng.randrange(32, 127) for _ in range(rng.choice((0, 1, 7, 100, 3000, 20000))))
    interim = b"HTTP/1.1 100 Continue\r\n\r\n" if rng.random() < 0.15 else b""
    if status in (204, 304):
        return interim + _head(rng, status, [("Content-Length", "0")] if rng.random() < 0.5 else []), True
    framing = rng.choice(("length", "length", "chunked", "close"))
    if framing == "length":
        return interim + _head(rng, status, [("Content-Length", str(len(body)))]) + body, True
    if framing == "chunked":
        chunks, at = [], 0
        while at < len(body):
            size = rng.randrange(1, 5000)
            chunks.append(b"%x%s\r\n%s\r\n" % (size if at + size <= len(body) else len(body) - at,
                                              b";ext=1" if rng.random() < 0.1 else b"", body[at:at + size]))
            at += size
        trailers = b"X-Trailer: t\r\n" if rng.random() < 0.2 else b""
        return interim + _head(rng, status, [("Transfer-Encoding", "chunked")]) + b"".join(chunks) + b"0\r\n" + \
            trailers + b"\r\n", True
    return interim + _head(rng, status, [("Connection", "close")]) + body, False


def mutated(rng: random.Random, data: bytes) -> bytes:
    """`data` with a few bytes flipped, inserted, dropped, or the rest cut."""
    out = bytearray(data)
    for _ in range(rng.randrange(1, 4)):
        if not out:
            break
        at = rng.randrange(len(out))
        what = rng.random()
        if what < 0.4:
            out[at] = rng.randrange(256)
        elif what < 0.6:
            out.insert(at, rng.choice(b"\r\n :0\x00\x7f9aZ;"))
        elif what < 0.8:
            del out[at]
        else:
            del out[at:]
    return bytes(out)


def answer(rng: random.Random) -> tuple[bytes, str]:
    """What to send for one request, and what to do after: keep, close or reset."""
    kind = rng.random()
    data, reusable = valid(rng)
    if kind < 0.45:
        after = "keep" if reusable and rng.random() < 0.8 else rng.choice(("close", "reset"))
        return data, after
    if kind < 0.75:
        return mutated(rng, data), rng.choice(("close", "close", "reset"))
    if kind < 0.85:
        return bytes(rng.randrange(256) for _ in range(rng.randrange(1, 200))), rng.choice(("close", "reset"))
    if kind < 0.93:  # a whole response and bytes nobody asked for
        return data + rng.choice((b"HTTP/1.1 200 OK\r\n", b"junk", b"\r\n")), rng.choice(("keep", "close"))
    return data[: rng.randrange(max(1, len(data)))], rng.choice(("close", "reset"))


class HostileServer(Acceptor):
    """Serves `answer()`s on a free loopback port in background threads; counts requests read."""

    def __init__(self, seed: int) -> None:
        super().__init__("hostileserver", backlog=128)
        self._seed = seed
        self._lock = threading.Lock()
        self._accepted = 0
        self.requests = 0
        self._threads: list[threading.Thread] = []

    def stop(self) -> None:
        """Stop accepting, then wait for each connection's thread."""
        super().stop()
        for thread in self._threads:
            thread.join(5)

    def _take(self, conn: socket.socket) -> None:
        with self._lock:
            number = self._accepted
            self._accepted += 1
        thread = threading.Thread(target=self._serve, args=(conn, random.Random(self._seed * 1_000_003 + number)),
                                  daemon=True)
        self._threads.append(thread)
        thread.start()

    def _serve(self, conn: socket.socket, rng: random.Random) -> None:
        conn.settimeout(5)
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        buffer = b""
        try:
            while not self._stopping.is_set():
                while b"\r\n\r\n" not in buffer:
                    chunk = conn.recv(65536)
                    if not chunk:
                        return
                    buffer += chunk
                _, buffer = buffer.split(b"\r\n\r\n", 1)
                with self._lock:
                    self.requests += 1
                data, after = answer(rng)
                _send_in_pieces(conn, data, rng)
                if after == "reset":
                    conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                    return
                if after == "close":
                    return
        except OSError:
            return
        finally:
            conn.close()


def _send_in_pieces(conn: socket.socket, data: bytes, rng: random.Random) -> None:
    at = 0
    while at < len(data):
        size = rng.choice((1, 2, 7, 100, 1000, 65536))
        conn.sendall(data[at:at + size])
        at += size
        if rng.random() < 0.05:
            time.sleep(0.002)
