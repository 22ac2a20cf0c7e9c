"""A deliberately misbehaving HTTP/1.1 server, for testing how the runner survives faults.

nginx answers politely; real targets do not always. This server answers each path with
one specific fault, so a test can aim load at exactly one failure mode and check that the
runner counts it, names it and keeps going. It also counts every request it received, per
path, on the server side: a test can then check the runner's good + bad + failed against
what really arrived, instead of trusting the runner's own arithmetic.

It is built on plain blocking sockets, one thread per connection, and runs inside the
pytest process (the runner under test is a separate subprocess). Load in these tests is a
few dozen requests from at most a handful of clients, so threads keep it simple: a stall
is a blocked recv(), a slow answer is a wait, a big body is a loop of sendall().
It listens on 127.0.0.1 only.

Paths:

    /ok               200, a small body, keep-alive
    /status/N         status N with a small body; a 3xx also gets `Location: /ok`, so a
                      runner that followed redirects would show up as requests to /ok
    /slow/MS          200 after MS milliseconds
    /phased/H/B       headers H milliseconds after the request was read, then the body B ms
                      after them (keep-alive): a known ttfb (at least H) and body phase (at least B)
    /slow-first/MS/S  200 after MS milliseconds for requests that arrive within S seconds of
                      this path's first one, at once after: a target that starts cold (a warm-up)
    /fail-after/N     200 for this path's first N requests, 503 for every one after: a target
                      that gives way under load (a capacity search)
    /fail-after/N/S   the same with status S after them: `/fail-after/20/401`, a token that
                      expires after 20 requests (each path counts its own)
    /stall            reads the request and never answers (for timeouts and cancellation)
    /close            reads the request and closes the connection without answering
    /reset-mid-body   headers with Content-Length 100000, part of the body, then a TCP RST
    /close-mid-body   the same, but a clean close (FIN) instead of the reset
    /slow-body/MS     headers and part of the body, the rest MS milliseconds later (or
                      never, if the client gives up first): a timeout while reading the body
    /garbage          a reply that is not HTTP at all
    /big/N            a body of N bytes streamed in 1 MiB pieces, never held in memory
    /chunked          a chunked body of CHUNKED_SIZE bytes, in several chunks
    /varying[/N]      200 (or status N) with a body whose length alternates: VARYING_BODIES[0],
                      [1], [0], ... (server-wide), so every other response differs from the first
    /interim/100      `100 Continue`, then 200 with OK_BODY
    /interim/102-close  a lone `102 Processing`, then the close
    /interim/102-stall  a lone `102 Processing`, then nothing (for a timeout)
    /switch           `101 Switching Protocols`, then bytes that are not HTTP, then the close
    /endless-headers  a status line, then header lines forever (until the client gives up,
                      at most ENDLESS_CAP bytes)
    /endless-chunk-line  a chunked head, then a chunk-size line of zeros that never ends (as above)
    /bad-chunking     a chunked head, then a chunk size that is not hexadecimal
    /trickle/N/MS     a body of N bytes, one byte every MS milliseconds
    /raw-status/TEXT  a status line with TEXT as its status code, verbatim (`000`, `099`, `1000`),
                      then a small body
    /gzip             GZIP_PLAIN gzipped, with `Content-Encoding: gzip`
    /gzip-lie         `Content-Encoding: gzip` on a body that is not gzip
    /gzip-bomb/N      a gzip body that inflates to N MiB of zeros (N = 256: 255 KiB on the wire),
                      then the close
    /early/MS         200 with OK_BODY as soon as the request's head has come, then, MS
                      milliseconds later, the request's body read to its Content-Length and
                      dropped, and the connection kept: a server that answers an upload before
                      taking it (as one refusing it does), and reads on from where the client
                      stopped writing
    /extra/N          200 with OK_BODY and N bytes after it, in one write, the connection kept:
                      bytes that belong to no response
    anything else     404

`FaultServer(on_accept="silent")` misbehaves before any request instead: it reads whatever
comes and never answers (a TLS client waits for the server's hello forever).
`reset_at_accept_server()` resets every connection as soon as it is accepted.
"""

from __future__ import annotations

import gzip
import socket
import struct
import subprocess
import sys
import threading
import time
import zlib
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager

from tests.support import reaper
from tests.support.loopback import Acceptor

RESET_DECLARED = 100_000  # Content-Length promised by /reset-mid-body
RESET_SENT = 10_000  # body bytes actually sent before the reset
CHUNKS = (b"a" * 1000, b"b" * 1, b"c" * 4096, b"d" * 123, b"e" * 70_000)  # /chunked's pieces
CHUNKED_SIZE = sum(len(c) for c in CHUNKS)
OK_BODY = b"ok\n"
VARYING_BODIES = (b"ok\n", b"okay\n")  # /varying's bodies, in turn
_PIECE = b"z" * (1 << 20)  # what /big/N repeats; the only body buffer it has
ENDLESS_CAP = 256 << 20  # most bytes an endless head or chunk line sends if the client never gives up
# The listen backlog: nginx's 511 is too few for an open-model run's 1,000 connections opened
# at once (a full queue drops the handshake's last ACK, and the client waits seconds for an
# answer that is the backlog's fault, not the client's); 4,096 is the kernel's somaxconn.
LISTEN_BACKLOG = 4096
GZIP_PLAIN = b"soak gzip body\n" * 100  # /gzip's body, before compression
GZIP_LIE = b"this body is not gzip, whatever the headers say\n"
_REASONS = {200: "OK", 301: "Moved Permanently", 302: "Found", 401: "Unauthorized", 404: "Not Found",
            418: "I'm a teapot", 500: "Internal Server Error", 503: "Service Unavailable"}


class FaultServer(Acceptor):
    """Serves the fault paths above on a free loopback port, in background threads."""

    def __init__(self, on_accept: str = "serve") -> None:
        assert on_accept in ("serve", "silent"), on_accept
        super().__init__("faultserver", backlog=LISTEN_BACKLOG)
        self._on_accept = on_accept
        self._lock = threading.Condition()
        self._seen: Counter[str] = Counter()  # requests received, by path
        self._connections: set[socket.socket] = set()  # open ones, so stop() can wake them
        self._accepted = 0
        self._varying = 0  # /varying responses sent so far
        self._first_seen: dict[str, float] = {}  # when each path's first request arrived (monotonic)

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def stop(self) -> None:
        """Stop accepting, wake every handler (stalled ones included) and wait for them."""
        super().stop()
        with self._lock:
            for conn in self._connections:
                _shutdown(conn)
        self.wait_idle(timeout=5)

    def seen(self, path: str | None = None) -> int:
        """Requests received on `path`, or on every path if None."""
        with self._lock:
            return self._seen[path] if path is not None else sum(self._seen.values())

    @property
    def connections_accepted(self) -> int:
        with self._lock:
            return self._accepted

    def wait_idle(self, timeout: float = 5.0) -> bool:
        """Wait until every connection has been closed and read to its end.

        Once the runner has exited, its side of every connection is closed, so when the
        handlers have all seen that, every request it sent has been read and counted:
        `seen()` is final. False if some connection is still open after `timeout`.
        """
        deadline = time.monotonic() + timeout
        with self._lock:
            while self._connections:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._lock.wait(left)
            return True

    # --- connections -------------------------------------------------------------------

    def _take(self, conn: socket.socket) -> None:
        conn.settimeout(None)
        # A response goes out in several writes (head, then body); without this, Nagle holds
        # the body back until the client's delayed ACK (40 ms) on a keep-alive connection,
        # and closed-model runs against /slow/N skip sends the delay alone does not explain.
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        with self._lock:
            self._connections.add(conn)
            self._accepted += 1
        threading.Thread(target=self._serve, args=(conn,), name="faultserver-conn", daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        """Answer requests on one connection until either side closes it."""
        buffer = b""
        try:
            if self._on_accept == "silent":
                _drain(conn)
                return
            while not self._stopping.is_set():
                head = _read_head(conn, buffer)
                if head is None:
                    return
                path, keep_alive, length, buffer = head
                with self._lock:
                    self._seen[path] += 1
                    self._first_seen.setdefault(path, time.monotonic())
                early = path.startswith("/early/")
                if early and not self._answer_early(conn, path):
                    return
                rest = _read_body(conn, buffer, length)
                if rest is None:
                    return
                buffer = rest
                if not early and not self._answer(conn, path) or not keep_alive:
                    return
        except OSError:
            return  # the client went away mid-answer: that is its business
        finally:
            conn.close()
            with self._lock:
                self._connections.discard(conn)
                self._lock.notify_all()

    def _answer(self, conn: socket.socket, path: str) -> bool:
        """Send `path`'s answer (or fault); True if the connection may carry another request."""
        if path == "/ok":
            return _respond(conn, 200, OK_BODY)
        if path == "/varying" or path.startswith("/varying/"):
            with self._lock:
                body = VARYING_BODIES[self._varying % len(VARYING_BODIES)]
                self._varying += 1
            return _respond(conn, int(path[len("/varying/"):] or 200), body)
        if path.startswith("/status/"):
            status = int(path.rsplit("/", 1)[1])
            extra = [("Location", "/ok")] if 300 <= status < 400 else []
            return _respond(conn, status, f"status {status}\n".encode(), extra)
        if path.startswith("/slow/"):
            if self._stopping.wait(int(path.rsplit("/", 1)[1]) / 1000):
                return False
            return _respond(conn, 200, OK_BODY)
        if path.startswith("/phased/"):
            head_ms, body_ms = (int(part) for part in path.split("/")[2:4])
            if self._stopping.wait(head_ms / 1000):
                return False
            _send_head(conn, 200, [("Content-Length", str(len(OK_BODY)))])
            if self._stopping.wait(body_ms / 1000):
                return False
            conn.sendall(OK_BODY)
            return True
        if path.startswith("/slow-first/"):
            delay_ms, seconds = (int(part) for part in path.split("/")[2:4])
            with self._lock:
                cold = time.monotonic() - self._first_seen[path] < seconds
            if cold and self._stopping.wait(delay_ms / 1000):
                return False
            return _respond(conn, 200, OK_BODY)
        if path.startswith("/fail-after/"):
            count, _, status = path[len("/fail-after/"):].partition("/")
            with self._lock:
                over = self._seen[path] > int(count)
            return _respond(conn, int(status or 503), b"given way\n") if over else _respond(conn, 200, OK_BODY)
        if path == "/stall":
            _drain(conn)
            return False
        if path == "/close":
            return False  # closed by _serve, with nothing sent: a clean FIN, no response
        if path in ("/reset-mid-body", "/close-mid-body"):
            _send_head(conn, 200, [("Content-Length", str(RESET_DECLARED))])
            conn.sendall(b"r" * RESET_SENT)
            # Give the client time to read the headers, so the fault really lands mid-body
            # rather than before the response started.
            time.sleep(0.05)
            if path == "/reset-mid-body":
                _linger_zero(conn)
            return False
        if path.startswith("/slow-body/"):
            _send_head(conn, 200, [("Content-Length", str(2 * RESET_SENT))])
            conn.sendall(b"s" * RESET_SENT)
            # Wait for the client to give up (recv() returns b"" when it closes), at most MS.
            conn.settimeout(int(path.rsplit("/", 1)[1]) / 1000)
            try:
                if not conn.recv(65536):
                    return False
            except TimeoutError:
                pass
            conn.settimeout(None)
            conn.sendall(b"s" * RESET_SENT)
            return True
        if path == "/garbage":
            conn.sendall(b"SSH-2.0-OpenSSH_9.6 this is not HTTP\r\n\r\n")
            return False
        if path.startswith("/big/"):
            size = int(path.rsplit("/", 1)[1])
            _send_head(conn, 200, [("Content-Length", str(size))])
            view = memoryview(_PIECE)
            while size > 0 and not self._stopping.is_set():
                n = min(size, len(_PIECE))
                conn.sendall(view[:n])
                size -= n
            return size == 0
        if path == "/until-close":
            # No Content-Length, not chunked: the body is whatever comes before the close.
            conn.sendall(b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n" + OK_BODY * 3)
            return False
        if path == "/chunked":
            _send_head(conn, 200, [("Transfer-Encoding", "chunked")])
            for chunk in CHUNKS:
                conn.sendall(b"%x\r\n%s\r\n" % (len(chunk), chunk))
                time.sleep(0.002)  # separate writes, so the client really reads several chunks
            conn.sendall(b"0\r\n\r\n")
            return True
        if path.startswith("/interim/"):
            return self._interim(conn, path)
        if path == "/switch":
            conn.sendall(b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: soak-test\r\nConnection: Upgrade\r\n\r\n"
                         b"\x00\x01 not HTTP any more")
            return False
        if path == "/endless-headers":
            conn.sendall(b"HTTP/1.1 200 OK\r\n")
            self._endless(conn, b"X-Filler: " + b"f" * 1000 + b"\r\n")
            return False
        if path == "/endless-chunk-line":
            _send_head(conn, 200, [("Transfer-Encoding", "chunked")])
            self._endless(conn, b"0" * 1024)
            return False
        if path == "/bad-chunking":
            _send_head(conn, 200, [("Transfer-Encoding", "chunked")])
            conn.sendall(b"5\r\nhello\r\nzz\r\nthis is no chunk\r\n0\r\n\r\n")
            return False
        if path.startswith("/trickle/"):
            size, pause = (int(part) for part in path.split("/")[2:4])
            _send_head(conn, 200, [("Content-Length", str(size))])
            for _ in range(size):
                if self._stopping.wait(pause / 1000):
                    return False
                conn.sendall(b"t")
            return True
        if path.startswith("/raw-status/"):
            code = path[len("/raw-status/"):]
            conn.sendall(f"HTTP/1.1 {code} Whatever\r\nContent-Length: {len(OK_BODY)}\r\n\r\n".encode("latin-1")
                         + OK_BODY)
            return True
        if path == "/gzip":
            return _respond(conn, 200, gzip.compress(GZIP_PLAIN, mtime=0), [("Content-Encoding", "gzip")])
        if path.startswith("/gzip-bomb/"):
            body = gzip_bomb(int(path.rsplit("/", 1)[1]))
            _respond(conn, 200, body, [("Content-Encoding", "gzip"), ("Connection", "close")])
            return False
        if path.startswith("/extra/"):
            extra = b"x" * int(path.rsplit("/", 1)[1])
            conn.sendall(f"HTTP/1.1 200 OK\r\nContent-Length: {len(OK_BODY)}\r\n\r\n".encode() + OK_BODY + extra)
            return True
        if path == "/gzip-lie":
            return _respond(conn, 200, GZIP_LIE, [("Content-Encoding", "gzip")])
        return _respond(conn, 404, b"no such fault\n")

    def _answer_early(self, conn: socket.socket, path: str) -> bool:
        """/early/MS: the response before the body is read, then MS ms with nothing read (the
        client's writes fill the socket's buffers meanwhile); False if stopped meanwhile."""
        _respond(conn, 200, OK_BODY)
        return not self._stopping.wait(int(path.rsplit("/", 1)[1]) / 1000)

    def _interim(self, conn: socket.socket, path: str) -> bool:
        """An interim 1xx response, then the final one (/interim/100), the close, or a stall."""
        if path == "/interim/100":
            conn.sendall(b"HTTP/1.1 100 Continue\r\n\r\n")
            time.sleep(0.002)  # a separate write, so the client reads the 1xx on its own too
            return _respond(conn, 200, OK_BODY)
        conn.sendall(b"HTTP/1.1 102 Processing\r\n\r\n")
        if path == "/interim/102-stall":
            _drain(conn)
        return False

    def _endless(self, conn: socket.socket, line: bytes) -> None:
        """Send `line` over and over until the client gives up (sendall raises), a stop, or ENDLESS_CAP."""
        sent = 0
        while sent < ENDLESS_CAP and not self._stopping.is_set():
            conn.sendall(line)
            sent += len(line)


_BOMBS: dict[int, bytes] = {}


def gzip_bomb(mib: int) -> bytes:
    """N MiB of zeros, gzipped (made once per size, a MiB at a time: 0.7 s for 256 MiB)."""
    with _BOMB_LOCK:
        if mib not in _BOMBS:
            deflate = zlib.compressobj(9, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
            zeros = bytes(1 << 20)
            _BOMBS[mib] = b"".join([*(deflate.compress(zeros) for _ in range(mib)), deflate.flush()])
        return _BOMBS[mib]


_BOMB_LOCK = threading.Lock()


def _read_head(conn: socket.socket, buffer: bytes) -> tuple[str, bool, int, bytes] | None:
    """Read one request's head: (path, keep-alive, its Content-Length, what follows the head).

    None when the client closed the connection before a whole head arrived.
    """
    while b"\r\n\r\n" not in buffer:
        data = conn.recv(65536)
        if not data:
            return None
        buffer += data
    head, buffer = buffer.split(b"\r\n\r\n", 1)
    lines = head.decode("latin-1").split("\r\n")
    target = lines[0].split(" ")[1]
    headers = {}
    for line in lines[1:]:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip().lower()
    # HTTP/1.1 keeps the connection unless told to close; HTTP/1.0 (ab without -k) closes it
    # unless asked to keep it.
    if lines[0].endswith("HTTP/1.0"):
        keep_alive = headers.get("connection") == "keep-alive"
    else:
        keep_alive = headers.get("connection") != "close"
    return target.split("?", 1)[0], keep_alive, int(headers.get("content-length", "0")), buffer


def _read_body(conn: socket.socket, buffer: bytes, length: int) -> bytes | None:
    """Read (and drop) a body of `length` bytes, `buffer` the first of them: what follows it.

    None when the client closed the connection before the whole body arrived. Large bodies
    (an upload of megabytes) are not kept whole: only what is left over after them.
    """
    while len(buffer) < length:
        length -= len(buffer)
        buffer = conn.recv(65536)
        if not buffer:
            return None
    return buffer[length:]


def _send_head(conn: socket.socket, status: int, headers: list[tuple[str, str]]) -> None:
    lines = [f"HTTP/1.1 {status} {_REASONS.get(status, 'Whatever')}", *(f"{k}: {v}" for k, v in headers)]
    conn.sendall(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1"))


def _respond(conn: socket.socket, status: int, body: bytes, extra: list[tuple[str, str]] | None = None) -> bool:
    """A complete response with a Content-Length body; True: the connection stays open."""
    if status < 200 or status in (204, 304):
        body = b""
    _send_head(conn, status, [("Content-Length", str(len(body))), *(extra or [])])
    conn.sendall(body)
    return True


def _drain(conn: socket.socket) -> None:
    """Read (and ignore) whatever comes, until the client gives up and closes, or stop()
    shuts the socket down: either way recv() returns b""."""
    while conn.recv(65536):
        pass


def _linger_zero(conn: socket.socket) -> None:
    """SO_LINGER on with a zero timeout: close() then sends RST instead of FIN."""
    conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))


def _shutdown(conn: socket.socket) -> None:
    try:
        conn.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass


def refused_port() -> socket.socket:
    """A socket bound to a loopback port but not listening: connecting to it is refused.

    Keeping it bound for the test's life means no other process can start listening
    there meanwhile, so "refused" is guaranteed. Close it when done.
    """
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.bind(("127.0.0.1", 0))
    return s


def unaccepting_port() -> tuple[socket.socket, socket.socket]:
    """A loopback port whose accept queue is full: a new connection's SYN goes unanswered.

    listen(0) queues one connection, which the filler returned here takes; the listener
    never accepts it, so every later connect waits, as to a host that drops packets, and
    times out. Close both when done.
    """
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.bind(("127.0.0.1", 0))
    listener.listen(0)
    filler = socket.create_connection(listener.getsockname(), timeout=5)
    return listener, filler


# A loop of accept and reset, as fast as Python goes, for at most RESET_SERVER_LIFETIME seconds.
_RESET_AT_ACCEPT = """
import socket, struct, sys, time
listener = socket.socket()
listener.bind(("127.0.0.1", 0))
listener.listen(128)
listener.settimeout(0.2)
print(listener.getsockname()[1], flush=True)
linger = struct.pack("ii", 1, 0)
end = time.monotonic() + float(sys.argv[1])
while time.monotonic() < end:
    try:
        conn, _ = listener.accept()
    except TimeoutError:
        continue
    conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, linger)
    conn.close()
"""
RESET_SERVER_LIFETIME = 120.0


@contextmanager
def reset_at_accept_server() -> Iterator[int]:
    """A loopback port whose server resets every connection as soon as it has accepted it.

    In a process of its own: a thread of the test process shares the GIL with the test
    and resets late, after the client has written its request; this one resets as fast as
    a tight loop can, so some resets land between the client's connect and its write,
    the race that once crashed a client. Yields the port.
    """
    process = reaper.spawn([sys.executable, "-c", _RESET_AT_ACCEPT, str(RESET_SERVER_LIFETIME)], "reset-at-accept server",
                           stdout=subprocess.PIPE, text=True)
    try:
        assert process.stdout is not None
        yield int(process.stdout.readline())
    finally:
        reaper.stop(process)
