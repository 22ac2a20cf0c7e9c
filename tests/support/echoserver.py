"""A loopback HTTP/1.1 server that keeps every request head it receives and echoes it back in
ways a real server might, for tests of what the runner sends and what it prints.

Secrets reach a log when a server repeats them: in an error page, a garbled status line, a
Server header. This server does exactly that on purpose, on the paths below, so a test can
check that what the runner prints never holds a secret it sent, and that a server's control
characters arrive escaped. It also records every request's head, so a test can check on the
wire what each transport really sent (headers included), not what the runner says it sent.

Paths (the query string is ignored):

    /ok            200, a small body; `Server: ` followed by the request's Authorization
                   header, its other headers' values and its target, so they would be printed
                   wherever the runner prints the Server header (ab's report)
    /echo-garbage  a status line that is not HTTP, holding the request's target and headers:
                   a client that quotes what it could not parse quotes them
    /esc           a status line that is not HTTP, holding ESC and other control characters
    /short         headers announcing a body of 1000 + (a number that changes every time)
                   bytes, then 3 bytes and a clean close: failures whose texts differ by numbers
    /metrics/...   a Pushgateway that refuses every push: 400, with control characters in the
                   body (what was pushed is kept, under ":body", for a test to read)

It listens on 127.0.0.1 only, one thread per connection, in the pytest process.
"""

from __future__ import annotations

import socket
import threading

from tests.support.loopback import Acceptor

SERVER_ESC = "evil\x1b[2J\x1b]0;owned\x07"  # clear the screen, retitle the terminal


class EchoServer(Acceptor):
    """Serves the paths above on a free loopback port; `heads` holds every request head received."""

    def __init__(self) -> None:
        super().__init__("echoserver", backlog=128)  # 128: what socket.listen() gives when not told
        self.heads: list[dict[str, str]] = []  # per request: lower-cased header names, plus ":target"
        self._lock = threading.Lock()
        self._short = 0
        self._threads: list[threading.Thread] = []

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def stop(self) -> None:
        """Stop accepting, then wait for each connection's thread."""
        super().stop()
        for thread in list(self._threads):
            thread.join(timeout=5)

    def _take(self, conn: socket.socket) -> None:
        thread = threading.Thread(target=self._serve, args=(conn,), daemon=True)
        self._threads.append(thread)
        thread.start()

    def _serve(self, conn: socket.socket) -> None:
        conn.settimeout(5)
        buffer = b""
        try:
            while not self._stopping.is_set():
                while b"\r\n\r\n" not in buffer:
                    data = conn.recv(65536)
                    if not data:
                        return
                    buffer += data
                raw, buffer = buffer.split(b"\r\n\r\n", 1)
                head = _parse(raw)
                length = int(head.get("content-length", "0"))
                while len(buffer) < length:
                    data = conn.recv(65536)
                    if not data:
                        return
                    buffer += data
                head[":body"], buffer = buffer[:length].decode("latin-1"), buffer[length:]
                with self._lock:
                    self.heads.append(head)
                if not self._answer(conn, head):
                    return
        except OSError:
            return
        finally:
            conn.close()

    def _answer(self, conn: socket.socket, head: dict[str, str]) -> bool:
        """Answer one request; True if the connection may carry another."""
        path = head[":target"].split("?", 1)[0]
        echoed = " ".join([head[":target"], *(v for k, v in head.items() if not k.startswith(":")), head[":body"]])
        if path == "/ok":
            conn.sendall(f"HTTP/1.1 200 OK\r\nServer: {echoed}\r\nContent-Length: 3\r\n\r\nok\n".encode("latin-1"))
            return True
        if path == "/echo-garbage":
            conn.sendall(f"HTTP/1.1 2x0 {echoed}\r\n\r\n".encode("latin-1"))
            return False
        if path == "/esc":
            conn.sendall(f"HTTP/1.1 {SERVER_ESC}\r\n\r\n".encode("latin-1"))
            return False
        if path.startswith("/metrics/"):
            body = f"push refused: {SERVER_ESC}".encode("latin-1")
            conn.sendall(b"HTTP/1.1 400 Bad Request\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body))
            return False
        if path == "/short":
            with self._lock:
                self._short += 1
                length = 1000 + self._short
            conn.sendall(f"HTTP/1.1 200 OK\r\nContent-Length: {length}\r\n\r\nabc".encode())
            return False
        conn.sendall(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n")
        return True


def _parse(raw: bytes) -> dict[str, str]:
    lines = raw.decode("latin-1").split("\r\n")
    head = {":target": lines[0].split(" ")[1] if " " in lines[0] else lines[0]}
    for line in lines[1:]:
        name, _, value = line.partition(":")
        head[name.strip().lower()] = value.strip()
    return head
