"""What the test servers share: accepting connections on loopback until told to stop."""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable


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
