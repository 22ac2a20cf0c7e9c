"""Running one soak in this process, on its own event loop.

The CLI calls this for a run in one process; each local worker process calls it for its
part of a run split over workers. The parts come ready-made (runner.run.build); this only
starts the loop (uvloop when installed and the Python engine runs) and the Soak on it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from runner.report.base import Reporter
from runner.run.build import Parts
from runner.run.memory import steady_heap
from runner.run.soak import Soak
from runner.stats.runinfo import RunSummary

if TYPE_CHECKING:  # a run without metrics does not load them
    from runner.metrics.tally import MetricsTally

T = TypeVar("T")


def run(parts: Parts, reporters: Sequence[Reporter], start_wall: float | None = None,
        metrics: MetricsTally | None = None) -> RunSummary:
    """Run the soak (or bench, or this shard of it) to its end, telling `reporters`; `metrics`
    counts every result for Prometheus."""

    async def soak() -> RunSummary:
        return await Soak(parts, reporters, start_wall, metrics).run()

    steady_heap()  # RSS flat from the first interval on

    return run_async(soak(), busy_loop=parts.engine.name == "python")


def run_async(coroutine: Coroutine[Any, Any, T], busy_loop: bool = True) -> T:
    """Run on uvloop when it is installed (it is in the image) and the loop is busy, else on
    asyncio's loop. The Python engine's loop carries every request: uvloop halves its cost.
    The native engine's loop wakes to close an interval and little else (C's thread does the
    requests), and importing uvloop cost a short bench more than it could save (3 ms of the
    start's 110 ms of CPU)."""
    if not busy_loop:
        return asyncio.run(coroutine)
    try:
        import uvloop
    except ImportError:
        return asyncio.run(coroutine)
    return uvloop.run(coroutine)
