"""What the test servers share: accepting connections on loopback until told to stop."""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable
from typing import Self


def accept_until(listener: socket.socket, stopping: threading.Event, take: Callable[[socket.socket], None]) -> None:
    """Hand each connection accepted on `listener` to `take`, until `stopping` is set.

    accept() is not woken by close() from another thread, so the listener has a short
    timeout, after which the loop looks at `stopping` again.
    """
    while not stopping.is_set():
        try:
            conn, _ = listener.accept()
        except TimeoutError:
            continue
        except OSError:
            return
        take(conn)


class Acceptor:
    """A server on a free loopback port whose thread hands each connection to `_take`, from `start`
    (or `with`) to `stop`: the listener, the thread and their stop, for a server to add its serving
    to. `backlog`: the listen queue, which a server sized for its load keeps (a full queue drops
    handshakes, and a client then waits on the backlog, not on the server)."""

    def __init__(self, name: str, *, backlog: int = 1024) -> None:
        self._listener = socket.create_server(("127.0.0.1", 0), backlog=backlog)
        self._listener.settimeout(0.1)
        self.port: int = self._listener.getsockname()[1]
        self._stopping = threading.Event()
        self._acceptor = threading.Thread(target=accept_until, args=(self._listener, self._stopping, self._take),
                                          name=f"{name}-accept", daemon=True)

    def _take(self, conn: socket.socket) -> None:
        raise NotImplementedError

    def start(self) -> Self:
        self._acceptor.start()
        return self

    def stop(self) -> None:
        """Stop accepting; a server that serves on threads of its own waits for them after this."""
        self._stopping.set()
        self._acceptor.join(timeout=5)
        self._listener.close()

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *_: object) -> None:
        self.stop()
