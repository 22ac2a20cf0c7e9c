"""The loop-lag probe: how late the event loop runs what is due.

Every send, every read and every timer of a run is a callback on one event loop. When the
process is short of CPU, or the loop has more work than it can do, every callback runs
late, and that lateness is the client's, not the server's. The probe asks to be called
back every PROBE_PERIOD_NS and records how late each call came: a plain timer callback,
not a task, so it costs about a microsecond a tick (a hundred ticks a second).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

from runner.stats.client import PROBE_PERIOD_NS, next_due


class LoopProbe:
    """Calls `record(due_ns, ran_ns)` every period: when it was due, and when the loop ran it."""

    def __init__(self, record: Callable[[int, int], None], period_ns: int = PROBE_PERIOD_NS) -> None:
        self._record = record
        self._period_ns = period_ns
        self._handle: asyncio.TimerHandle | None = None
        self._due_ns = 0

    def start(self, now_ns: int) -> None:
        """From `now_ns` on, as the meter was told (ClientMeter.begin): the first tick is a period later."""
        self._due_ns = now_ns + self._period_ns
        self._schedule()

    def stop(self) -> None:
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None

    def _schedule(self) -> None:
        delay_ns = max(self._due_ns - time.monotonic_ns(), 0)
        self._handle = asyncio.get_running_loop().call_later(delay_ns / 1e9, self._tick)

    def _tick(self) -> None:
        now = time.monotonic_ns()
        self._record(self._due_ns, now)
        self._due_ns = next_due(self._due_ns, now, self._period_ns)  # after a stall: a period from now
        self._schedule()
