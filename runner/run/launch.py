"""Running one soak in this process, on its own event loop.

The CLI calls this for a run in one process; each local worker process calls it for its
part of a run split over workers. The parts come ready-made (runner.run.build); this only
starts the loop (uvloop when installed) and the Soak on it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine, Sequence
from typing import Any, TypeVar

from runner.load.engine import Sink
from runner.report.base import Reporter
from runner.run.build import Parts
from runner.run.soak import Soak
from runner.stats.runinfo import RunSummary

T = TypeVar("T")


def run(parts: Parts, reporters: Sequence[Reporter], start_wall: float | None = None,
        tap: Sink | None = None) -> RunSummary:
    """Run the soak (or bench, or this shard of it) to its end, telling `reporters`; `tap` sees every result."""

    async def soak() -> RunSummary:
        return await Soak(parts, reporters, start_wall, tap).run()

    return run_async(soak())


def run_async(coroutine: Coroutine[Any, Any, T]) -> T:
    """Run on uvloop when it is installed (it is in the image), else on asyncio's loop."""
    try:
        import uvloop
    except ImportError:
        return asyncio.run(coroutine)
    return uvloop.run(coroutine)
