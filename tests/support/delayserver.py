"""An HTTP/1.1 server on loopback whose latency is known: it answers each request `delay_ms`
after the kernel received it, and records how long it actually took.

The truth against which a client's reported latency is measured: the server stamps each
request with the kernel's receive time (SO_TIMESTAMPNS), sleeps until shortly before
stamp + delay, spins to it, sends, and keeps (sent - received) per response. On a busy
machine its thread may still be late; what it kept is then longer than the delay, and it
is still the truth. What a client should report is that plus two loopback transits (a few
microseconds each).

    python tests/support/delayserver.py DELAY_MS      # prints its URL, serves until killed
"""

from __future__ import annotations

import socket
import struct
import sys
import threading
import time

from tests.support.loopback import Acceptor

SO_TIMESTAMPNS = 35
BODY = b"x" * 100
RESPONSE = b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\nContent-Type: text/plain\r\n\r\n%s" % (len(BODY), BODY)
SPIN_NS = 300_000  # sleep until this long before the answer is due, then spin: time.sleep overshoots


class DelayServer(Acceptor):
    """Answers every request on a connection (keep-alive until the client closes) after `delay_ms`."""

    def __init__(self, delay_ms: float) -> None:
        super().__init__("delayserver", backlog=512)
        self.delay_ns = int(delay_ms * 1e6)
        self.served_ns: list[int] = []  # per response: from the kernel's receipt of the request to the send
        self.sent_wall_ns: list[int] = []  # per response: when it was sent (CLOCK_REALTIME)
        self.received_wall_ns: list[int] = []  # per request: when the kernel received it (CLOCK_REALTIME)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/"

    def _take(self, conn: socket.socket) -> None:
        threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        conn.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        conn.settimeout(30)
        pending = b""
        with conn:
            while not self._stopping.is_set():
                try:
                    data, control, _, _ = conn.recvmsg(65536, 64)
                except OSError:
                    return
                if not data:
                    return
                received = _stamp(control) or time.time_ns()
                pending += data
                while b"\r\n\r\n" in pending:  # one answer per request head (the client sends no bodies)
                    _, _, pending = pending.partition(b"\r\n\r\n")
                    self.received_wall_ns.append(received)
                    if not self._answer(conn, received):
                        return

    def _answer(self, conn: socket.socket, received: int) -> bool:
        due = received + self.delay_ns
        rest = due - time.time_ns()
        if rest > SPIN_NS:
            time.sleep((rest - SPIN_NS) / 1e9)
        while time.time_ns() < due:
            pass
        sent = time.time_ns()
        try:
            conn.sendall(RESPONSE)
        except OSError:
            return False
        self.served_ns.append(sent - received)
        self.sent_wall_ns.append(sent)
        return True


def _stamp(control: list[tuple[int, int, bytes]]) -> int:
    for level, kind, data in control:
        if level == socket.SOL_SOCKET and kind == SO_TIMESTAMPNS and len(data) >= 16:
            seconds, nanoseconds = struct.unpack_from("@qq", data)
            return seconds * 1_000_000_000 + nanoseconds
    return 0


if __name__ == "__main__":
    with DelayServer(float(sys.argv[1])) as server:
        print(server.url, flush=True)
        threading.Event().wait()
