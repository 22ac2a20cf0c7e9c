"""Running one soak in this process: its requests, its HTTP client, its event loop.

The CLI calls this for a run in one process; each local worker process calls it for its
part of a run split over workers. It only puts parts together: the requests for the URLs,
the transport the settings name, the loop (uvloop when installed), and the Soak.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine, Sequence
from typing import Any, TypeVar

from runner.config.settings import Settings
from runner.load.fast_transport import FastTransport
from runner.load.request import build_requests, origin
from runner.load.result import Result
from runner.load.shards import ALONE, Shard
from runner.load.transport import Transport, TransportOptions
from runner.report.base import Reporter
from runner.run.soak import Soak
from runner.stats.run import RunSummary

T = TypeVar("T")


def run(settings: Settings, urls: list[str], source: str | None, reporters: Sequence[Reporter],
        shard: Shard = ALONE, start_wall: float | None = None,
        tap: Callable[[Result], None] | None = None) -> RunSummary:
    """Run the soak (or bench, or this shard of it) to its end, telling `reporters`; `tap` sees every result."""
    requests = build_requests(settings, urls)
    transport = transport_for(settings, shard, len({origin(url) for url in urls}))

    async def soak() -> RunSummary:
        return await Soak(settings, requests, urls, source, transport, reporters, shard, start_wall, tap).run()

    return run_async(soak())


def transport_for(settings: Settings, shard: Shard = ALONE, origins: int = 1) -> Transport:
    """The HTTP client the settings name, with the options every session shares; `origins`:
    the servers (scheme, host, port) the URLs name, each of which a client keeps a connection to."""
    options = TransportOptions(
        timeout_ns=settings.client.timeout_ns,
        no_reuse=settings.client.no_reuse,
        compress=settings.client.compress,
        max_connections=max(1, shard.share(settings.pace.max_in_flight)) if settings.pace.open_model else 1,
        ca_bundle=settings.client.ca_bundle,
        insecure=settings.client.insecure,
        client_cert=settings.client.client_cert,
        client_key=settings.client.client_key,
        http2=settings.client.http2,
        origins=origins,
    )
    return TRANSPORTS[settings.client.transport](options)


def _httpx_transport(options: TransportOptions) -> Transport:
    """httpx and what it pulls in (anyio, httpcore, h11) load only when asked for."""
    from runner.load.httpx_transport import HttpxTransport

    return HttpxTransport(options)


TRANSPORTS: dict[str, Callable[[TransportOptions], Transport]] = {"fast": FastTransport, "httpx": _httpx_transport}


def run_async(coroutine: Coroutine[Any, Any, T]) -> T:
    """Run on uvloop when it is installed (it is in the image), else on asyncio's loop."""
    try:
        import uvloop
    except ImportError:
        return asyncio.run(coroutine)
    return uvloop.run(coroutine)
