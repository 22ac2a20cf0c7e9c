"""The built-in target for `soak demo`: a tiny keep-alive HTTP/1.1 server on loopback.

It runs in a child process, so its work never shares an event loop (or the GIL) with the
client whose latencies it is there to show. Every request gets the same small page.
`python -m runner.run.demo_target` serves on a free loopback port and prints its URL on one line.
"""

from __future__ import annotations

import asyncio
import re
import subprocess
import sys

_PAGE = b"<!DOCTYPE html>\n<title>soak demo target</title>\n<p>Hello from soak's built-in target.</p>\n"
_HEAD = b"HTTP/1.1 200 OK\r\nServer: soak-demo\r\nContent-Type: text/html\r\nContent-Length: %d\r\n" % len(_PAGE)
_KEEP = _HEAD + b"\r\n" + _PAGE
_CLOSE = _HEAD + b"Connection: close\r\n\r\n" + _PAGE
_CONTENT_LENGTH = re.compile(rb"\r\ncontent-length:\s*(\d+)", re.IGNORECASE)
_CONNECTION_CLOSE = re.compile(rb"\r\nconnection:\s*close", re.IGNORECASE)
_MAX_HEAD = 64 * 1024


class _Connection(asyncio.Protocol):
    """Answers each complete request on a connection, in order."""

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport: asyncio.Transport = transport  # type: ignore[assignment]
        self._buffer = b""

    def data_received(self, data: bytes) -> None:
        self._buffer += data
        while (end := self._buffer.find(b"\r\n\r\n")) >= 0:
            head = self._buffer[:end]
            length = _CONTENT_LENGTH.search(head)
            total = end + 4 + (int(length.group(1)) if length else 0)
            if len(self._buffer) < total:
                return
            self._buffer = self._buffer[total:]
            if _CONNECTION_CLOSE.search(head):
                self._transport.write(_CLOSE)
                self._transport.close()
                return
            self._transport.write(_KEEP)
        if len(self._buffer) > _MAX_HEAD:
            self._transport.close()


async def serve(host: str = "127.0.0.1", port: int = 0) -> None:
    """Serve until killed, after printing the URL served."""
    server = await asyncio.get_running_loop().create_server(_Connection, host, port)
    bound_port = server.sockets[0].getsockname()[1]
    print(f"http://{host}:{bound_port}/", flush=True)
    async with server:
        await server.serve_forever()


def start_target() -> tuple[subprocess.Popen[str], str]:
    """Start the target in a child process; return it and the URL it serves."""
    child = subprocess.Popen(
        [sys.executable, "-m", "runner.run.demo_target"],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert child.stdout is not None
    url = child.stdout.readline().strip()
    if not url.startswith("http://"):
        child.kill()
        raise RuntimeError("the demo target did not start")
    return child, url


def stop_target(child: subprocess.Popen[str]) -> None:
    child.terminate()
    try:
        child.wait(timeout=5)
    except subprocess.TimeoutExpired:
        child.kill()
        child.wait()


if __name__ == "__main__":
    try:
        asyncio.run(serve())
    except KeyboardInterrupt:
        pass
