"""The bytes a server really sends for one request, read as the native engine reads a socket.

The tests of the native parser replay them in several chunkings: capturing once and replaying
the same reads means each reading is of identical input, however the machine's load cut the
stream.
"""

from __future__ import annotations

import select
import socket
from collections.abc import Callable
from dataclasses import dataclass

READ_SIZE = 65536
"""The most one recv() asks for, as the native engine reads (core.c's READ_SIZE): a capture's reads
are then cut where the engine's would be, a large body in pieces of this size."""


@dataclass(frozen=True)
class Capture:
    chunks: list[bytes]  # one per recv(), in order
    ending: str  # "eof" (the server closed), "reset", or "quiet" (nothing more came, or enough did)


def capture(port: int, path: str, method: str = "GET", close: bool = True, limit: int = 512 * 1024,
            quiet: float = 30.0, headers: str = "", until: Callable[[list[bytes]], bool] | None = None) -> Capture:
    """Send one request for `path` to 127.0.0.1:`port` (`headers`: more lines, each ending in
    CRLF) and read until the server closes or resets, `quiet` seconds pass with nothing read,
    `limit` bytes have come, or `until` says the reads so far are enough.

    A server that answers and closes ends the capture itself, however slow the machine: the
    quiet time is for one that never does (a stall), so keep it short only for those."""
    request = (f"{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n{headers}"
               + ("Connection: close\r\n" if close else "") + "\r\n")
    chunks: list[bytes] = []
    total = 0
    try:
        sock = socket.create_connection(("127.0.0.1", port), timeout=10)
    except ConnectionResetError:  # a server that resets at once can do it before connect() returns
        return Capture(chunks, "reset")
    with sock:
        try:
            sock.sendall(request.encode("latin-1"))
        except ConnectionResetError:
            return Capture(chunks, "reset")
        while total < limit:
            if not select.select([sock], [], [], quiet)[0]:
                return Capture(chunks, "quiet")
            try:
                data = sock.recv(READ_SIZE)
            except ConnectionResetError:
                return Capture(chunks, "reset")
            if not data:
                return Capture(chunks, "eof")
            chunks.append(data)
            total += len(data)
            if until is not None and until(chunks):
                return Capture(chunks, "quiet")
    return Capture(chunks, "quiet")
