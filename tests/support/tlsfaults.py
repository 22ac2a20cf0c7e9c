"""A misbehaving HTTPS server: TLS faults a client must count, name and survive.

nginx speaks TLS politely; this server does what servers and middleboxes really do wrong. Its
TLS runs in memory (ssl.SSLObject over a MemoryBIO pair) on a plain socket, so the test decides
every byte that goes on the wire and when the TCP connection ends, whatever TLS would say.
Each accepted connection is one thread; it listens on 127.0.0.1 only.

`TlsFaultServer(pki, cert, on_accept, split)`:

- `cert`: which certificate it presents ("server": one the test CA signed for 127.0.0.1;
  "expired", "self-signed", "other-host": ones that must not verify, tests/support/certs.py);
- `on_accept`: "serve" (shake hands, then answer the paths below), "stall-handshake" (read the
  client's hello, send the first half of the server's answer, then nothing: a handshake that
  never finishes), "close-handshake" (read the hello, close the TCP connection), "garbage"
  (answer the hello with bytes that are not TLS: a plain HTTP server on a TLS port);
- `split`: write every byte of TLS (handshake and records) in a send of its own, so the
  client's reads find records cut at every byte.

Paths, after the handshake:

    /ok               200 with OK_BODY, Content-Length, keep-alive
    /cut-mid-body     Content-Length CUT_DECLARED, CUT_SENT bytes of it, then the TCP connection
                      closed without TLS's close_notify
    /cut-after-body   200 with OK_BODY and its Content-Length, then the TCP connection closed
                      without close_notify (the response is whole; the connection is not reusable)
    /cut-until-close  200 with OK_BODY and no length (its end is the close), then the TCP
                      connection closed without close_notify: a truncation no one can tell
                      from the end
    /notify-until-close  the same, ended with close_notify: the end, as TLS says it
    /notify-mid-body  Content-Length CUT_DECLARED, CUT_SENT bytes, then close_notify: a
                      clean TLS close of a body cut short

Counts requests per path (`seen`) and connections (`accepted`), as FaultServer does.

`renegotiating_server` is OpenSSL's own s_server, asking for a renegotiation before each answer;
`TlsFront` puts TLS in front of a plain server (the hostile one), records cut where it cuts.
"""

from __future__ import annotations

import socket
import ssl
import struct
import subprocess
import threading
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager

from tests.support import reaper
from tests.support.certs import Pki
from tests.support.loopback import Acceptor
from tests.support.programs import program

OK_BODY = b"ok\n"
CUT_DECLARED = 100_000
CUT_SENT = 1_000
_READ = 65536


class TlsFaultServer(Acceptor):
    """Serves TLS faults on a free loopback port (see the module's docstring)."""

    def __init__(self, pki: Pki, cert: str = "server", on_accept: str = "serve", split: bool = False) -> None:
        assert on_accept in ("serve", "stall-handshake", "close-handshake", "garbage"), on_accept
        files = {"server": (pki.server_cert, pki.server_key), "expired": (pki.expired_cert, pki.expired_key),
                 "self-signed": (pki.self_signed_cert, pki.self_signed_key),
                 "other-host": (pki.other_host_cert, pki.other_host_key)}[cert]
        self._context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        self._context.load_cert_chain(str(files[0]), str(files[1]))
        self._context.set_alpn_protocols(["http/1.1"])
        self._on_accept = on_accept
        self._split = split
        super().__init__("tlsfaults")
        self._lock = threading.Condition()
        self._seen: Counter[str] = Counter()
        self._open: set[socket.socket] = set()
        self.accepted = 0

    def url(self, path: str = "/ok") -> str:
        return f"https://127.0.0.1:{self.port}{path}"

    def __exit__(self, *_: object) -> None:
        super().__exit__()
        with self._lock:
            for conn in self._open:
                _shutdown(conn)
        self.wait_idle()

    def seen(self, path: str | None = None) -> int:
        with self._lock:
            return self._seen[path] if path is not None else sum(self._seen.values())

    def wait_idle(self, timeout: float = 5.0) -> bool:
        """Wait until every connection has ended (the client's side closed too): `seen` is final then."""
        with self._lock:
            return self._lock.wait_for(lambda: not self._open, timeout)

    def _take(self, conn: socket.socket) -> None:
        conn.settimeout(10)
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        with self._lock:
            self._open.add(conn)
            self.accepted += 1
        threading.Thread(target=self._serve, args=(conn,), name="tlsfaults-conn", daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        try:
            tls = _Tls(conn, self._context, self._split)
            if self._on_accept == "serve":
                if tls.handshake():
                    self._answer(tls)
            else:
                hello = conn.recv(_READ)
                if hello and self._on_accept == "stall-handshake":
                    tls.incoming.write(hello)
                    try:
                        tls.obj.do_handshake()
                    except ssl.SSLWantReadError:
                        pass
                    flight = tls.outgoing.read()
                    tls.send_raw(flight[: len(flight) // 2])
                    _drain(conn)
                elif hello and self._on_accept == "garbage":
                    conn.sendall(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
                    _drain(conn)
        except (OSError, ssl.SSLError):
            pass
        finally:
            conn.close()
            with self._lock:
                self._open.discard(conn)
                self._lock.notify_all()

    def _answer(self, tls: _Tls) -> None:
        """Answer requests until a path ends the connection or the client closes it."""
        buffer = b""
        while not self._stopping.is_set():
            while b"\r\n\r\n" not in buffer:
                data = tls.read()
                if not data:
                    return
                buffer += data
            head, _, buffer = buffer.partition(b"\r\n\r\n")
            path = head.split(b" ", 2)[1].decode("latin-1")
            with self._lock:
                self._seen[path] += 1
            if path == "/ok":
                tls.write(b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\n" + OK_BODY)
                continue
            if path in ("/cut-mid-body", "/notify-mid-body"):
                tls.write(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % CUT_DECLARED + b"x" * CUT_SENT)
            elif path == "/cut-after-body":
                tls.write(b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\n" + OK_BODY)
            elif path in ("/cut-until-close", "/notify-until-close"):
                tls.write(b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n" + OK_BODY)
            else:
                tls.write(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n")
                continue
            if path.startswith("/notify-"):
                tls.close_notify()
            return  # closed without close_notify, or after it


class _Tls:
    """One server-side TLS connection in memory over a plain socket: what goes out is written by hand."""

    def __init__(self, conn: socket.socket, context: ssl.SSLContext, split: bool) -> None:
        self.conn = conn
        self.incoming, self.outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
        self.obj = context.wrap_bio(self.incoming, self.outgoing, server_side=True)
        self._split = split

    def send_raw(self, data: bytes) -> None:
        if not self._split:
            self.conn.sendall(data)
            return
        for at in range(len(data)):
            self.conn.sendall(data[at:at + 1])

    def _flush(self) -> None:
        data = self.outgoing.read()
        if data:
            self.send_raw(data)

    def _fill(self) -> bool:
        data = self.conn.recv(_READ)
        if not data:
            return False
        self.incoming.write(data)
        return True

    def handshake(self) -> bool:
        """Shake hands; False if the client went away or failed it (its alert is its business)."""
        while True:
            try:
                self.obj.do_handshake()
                self._flush()
                return True
            except ssl.SSLWantReadError:
                self._flush()
                if not self._fill():
                    return False
            except ssl.SSLError:
                self._flush()  # our alert, so the client can name what went wrong
                return False

    def read(self) -> bytes:
        """Some of the client's plaintext; b"" when it closed."""
        while True:
            try:
                return self.obj.read(_READ)
            except ssl.SSLWantReadError:
                self._flush()
                if not self._fill():
                    return b""
            except ssl.SSLZeroReturnError:
                return b""

    def write(self, data: bytes) -> None:
        self.obj.write(data)
        self._flush()

    def close_notify(self) -> None:
        try:
            self.obj.unwrap()
        except ssl.SSLWantReadError:
            pass  # ours is sent; the client's reply is not waited for
        self._flush()


def _drain(conn: socket.socket) -> None:
    """Read until the client closes: a server that says nothing more."""
    try:
        while conn.recv(_READ):
            pass
    except OSError:
        pass


def _shutdown(conn: socket.socket) -> None:
    try:
        conn.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass


@contextmanager
def renegotiating_server(pki: Pki, responses: int) -> Iterator[int]:
    """`openssl s_server` over TLS 1.2 on a free loopback port that, before each of `responses`
    answers on its one connection, asks the client to shake hands again (a HelloRequest: the
    renegotiation a server may start, which OpenSSL's client accepts when it is secure).

    s_server sends what it reads on its standard input: "r" on a line of its own renegotiates,
    any other line goes to the client (with -crlf, each LF as CR LF). Yields the port."""
    from tests.conftest import free_port

    port = free_port()
    server = reaper.spawn(
        [program("openssl", "apt-get install -y openssl"), "s_server", "-accept", f"127.0.0.1:{port}", "-cert",
         str(pki.server_cert), "-key", str(pki.server_key), "-tls1_2", "-crlf", "-naccept", "1"], "openssl s_server",
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    assert server.stdin is not None and server.stdout is not None
    stdin, stdout = server.stdin, server.stdout
    listening = threading.Event()

    def answer() -> None:
        sent = 0
        for line in stdout:
            if line == b"ACCEPT\n":  # listening (a probe's connect would take its one connection)
                listening.set()
            if line == b"\r\n" and sent < responses:  # a request's end
                stdin.write(b"r\n")
                stdin.flush()
                time.sleep(0.2)  # its own read of standard input, apart from the answer
                stdin.write(b"HTTP/1.1 200 OK\nContent-Length: 4\n\nok\n")
                stdin.flush()
                sent += 1
        listening.set()

    threading.Thread(target=answer, name="renegotiating-server", daemon=True).start()
    try:
        assert listening.wait(30) and server.poll() is None, "openssl s_server did not start"
        yield port
    finally:
        reaper.stop(server)


class TlsFront(Acceptor):
    """TLS in front of a plain server on `backend` (tests/support/hostileserver.py): each connection's
    handshake done here, then each piece the client sends goes to the backend as it is, and each
    piece the backend sends (in whatever cuts) comes back as one TLS record; when the backend closes
    or resets, the client's TCP connection is closed without close_notify (or reset). So every
    hostile byte pattern reaches the client over TLS, records cut where the backend cut its sends."""

    def __init__(self, pki: Pki, backend: int) -> None:
        self._context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        self._context.load_cert_chain(str(pki.server_cert), str(pki.server_key))
        self._backend = backend
        super().__init__("tlsfront")

    def _take(self, conn: socket.socket) -> None:
        conn.settimeout(10)
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        threading.Thread(target=self._serve, args=(conn,), name="tlsfront-conn", daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        backend: socket.socket | None = None
        try:
            tls = _Tls(conn, self._context, split=False)
            if not tls.handshake():
                return
            backend = socket.create_connection(("127.0.0.1", self._backend), timeout=10)
            backend.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            lock = threading.Lock()  # one SSL object, two threads: each step under the lock
            threading.Thread(target=self._upstream, args=(tls, backend, lock), daemon=True).start()
            while True:
                try:
                    piece = backend.recv(_READ)
                except ConnectionResetError:
                    conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                    return
                if not piece:
                    return
                with lock:
                    tls.write(piece)
        except (OSError, ssl.SSLError):
            pass
        finally:
            conn.close()
            if backend is not None:
                backend.close()

    @staticmethod
    def _upstream(tls: _Tls, backend: socket.socket, lock: threading.Lock) -> None:
        """The client's plaintext to the backend, as it comes; the backend told when the client stops."""
        try:
            data, ended = b"", False  # what came with the handshake's end may hold the first request already
            while not ended:
                plain = []
                with lock:
                    tls.incoming.write(data)
                    while True:
                        try:
                            piece = tls.obj.read(_READ)
                        except ssl.SSLWantReadError:
                            break
                        except ssl.SSLZeroReturnError:
                            piece = b""
                        if not piece:  # the client's close_notify
                            ended = True
                            break
                        plain.append(piece)
                if plain:
                    backend.sendall(b"".join(plain))
                data = b"" if ended else tls.conn.recv(_READ)
                ended = ended or not data
            backend.shutdown(socket.SHUT_WR)
        except (OSError, ssl.SSLError):
            pass
