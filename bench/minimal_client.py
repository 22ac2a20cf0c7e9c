"""The floor of a Python HTTP client on this machine, measured in the same run as soak.

    python bench/minimal_client.py URL -c 50 -t 10             # keep-alive, as fast as it goes
    python bench/minimal_client.py URL -c 100 -n 20000 --new   # a new connection per request
    python bench/minimal_client.py URL -c 5 -t 60 --qps 100    # paced, like a soak

Nothing but uvloop, one asyncio Protocol per connection, a Future per request and
Content-Length framing: no result records, no histograms, no timeouts, no error handling,
no kernel timestamps. What soak costs above this is soak's; what this costs is Python's,
asyncio's and the kernel's, and no Python client can do with less. bench/run.py runs it
beside soak, wrk, ab and hey. It prints one line of JSON: requests made, p50 and p99 latency.
Loopback only, bounded by -t or -n.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from urllib.parse import urlsplit

import uvloop


class _Connection(asyncio.Protocol):
    """One connection: a response is complete when its head and Content-Length bytes are in."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.done: asyncio.Future[None] | None = None
        self._buffer = b""
        self._need = -1

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        self._buffer += data
        if self._need < 0:
            end = self._buffer.find(b"\r\n\r\n")
            if end < 0:
                return
            at = self._buffer.lower().find(b"content-length: ", 0, end) + 16
            self._need = end + 4 + int(self._buffer[at:self._buffer.index(b"\r", at)])
        if len(self._buffer) >= self._need and self.done is not None:
            self._buffer, self._need = self._buffer[self._need:], -1
            self.done.set_result(None)


async def _client(c: int, args: argparse.Namespace, plan: dict, latencies: list[int]) -> None:
    loop = asyncio.get_running_loop()
    url = urlsplit(args.url)
    request = (f"GET {url.path or '/'} HTTP/1.1\r\nHost: {url.netloc}\r\n"
               + ("Connection: close\r\n" if args.new else "") + "\r\n").encode()
    connection: _Connection | None = None
    k = 0
    while time.monotonic_ns() < plan["stop_ns"] and plan["left"] > 0:
        plan["left"] -= 1
        if args.qps:
            due = plan["start_ns"] + round((c + k * args.c) * 1e9 / args.qps)
            while (delay := due - time.monotonic_ns()) > 0:
                await asyncio.sleep(delay / 1e9)
            k += 1
        start = time.monotonic_ns()
        if connection is None:
            _, connection = await loop.create_connection(_Connection, url.hostname, url.port or 80)
        connection.done = loop.create_future()
        assert connection.transport is not None
        connection.transport.write(request)
        await connection.done
        latencies.append(time.monotonic_ns() - start)
        if args.new:
            connection.transport.close()
            connection = None
    if connection is not None and connection.transport is not None:
        connection.transport.close()


async def _main(args: argparse.Namespace) -> None:
    now = time.monotonic_ns()
    plan = {"start_ns": now, "stop_ns": now + round(args.t * 1e9) if args.t else now + 600 * 10**9,
            "left": args.n or 10**12}
    latencies: list[int] = []
    await asyncio.gather(*(_client(c, args, plan, latencies) for c in range(args.c)))
    latencies.sort()
    at = lambda q: round(latencies[min(len(latencies) - 1, int(q * len(latencies)))] / 1e6, 3)  # noqa: E731
    print(json.dumps({"requests": len(latencies), "p50_ms": at(0.5), "p99_ms": at(0.99)}))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("url")
    parser.add_argument("-c", type=int, default=1, help="connections (clients)")
    parser.add_argument("-t", type=float, default=0.0, help="seconds to run")
    parser.add_argument("-n", type=int, default=0, help="requests to make")
    parser.add_argument("--qps", type=float, default=0.0, help="pace to this many requests a second, all clients")
    parser.add_argument("--new", action="store_true", help="a new connection for each request")
    args = parser.parse_args()
    if not (args.t or args.n):
        parser.error("give -t or -n: every load is bounded")
    if urlsplit(args.url).hostname not in ("127.0.0.1", "localhost", "::1"):
        parser.error("load goes to loopback only")
    uvloop.run(_main(args))


if __name__ == "__main__":
    main()
