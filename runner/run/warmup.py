"""The warm-up: sending at the run's rate before the measured run, counted apart from it.

Interval 0 of a run against a cold target carries its start (connections, a proxy's
identity, a cold cache), and an interval rule can fail on it alone. A warm-up sends for
`warmup` at the run's (or its first stage's) rate on an engine, schedule and recorder of its
own, on a grid of its own that ends where the run's begins (its clients then hand their
sessions, and so their connections, to the run's); its intervals are reported as
warm-up lines, and what it measured (requests still in flight when it ended included) goes
to the summary's warmup section only: never the run's counts, histogram or thresholds.

The warm-up is sent by the engine the run is, built where the run's is
(runner.run.engines.warmup_run): the Python engine's clients hand their sessions on through a
runner.load.handoff.Handoff; the native engine's, in C, from the warm-up's engine to the run's
(NativeEngine.give_to), each client's once it is done with them. Either way it is an EngineRun
of its own, taken interval by interval as the run's is.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from runner.load.clock import RunClock
from runner.load.model import warmup_schedule_of
from runner.load.native.engine import NativeEngine
from runner.load.schedule import Grid
from runner.run.build import Parts
from runner.run.engines import EngineRun, warmup_run
from runner.run.probe import LoopWatch
from runner.stats.recorder import Interval, Tally
from runner.stats.runinfo import Warmup

if TYPE_CHECKING:  # the Python engine loads only where it sends (engines.warmup_run)
    from runner.load.handoff import Handoff


class WarmUpPhase:
    """One warm-up: from `start_ns` for the settings' warmup, then what it measured."""

    def __init__(self, parts: Parts, start_ns: int, clock: RunClock, watch: LoopWatch) -> None:
        """`clock`: the run's, which its engine paces on; `watch`: the run's loop-lag watch, told of
        the Python engine's wake-ups (runner.run.probe.LoopWatch; the run's EngineRun.begin starts it)."""
        pace = parts.settings.pace
        self._clock = clock
        self.end_ns = start_ns + pace.warmup_ns
        self.grid = Grid(start_ns, pace.interval_ns)
        self._schedule = warmup_schedule_of(pace, parts.shard, start_ns)
        # Its clients' connections go on to the run's clients (engines.engine_run takes `handoff`).
        self.run: EngineRun
        self.handoff: Handoff | NativeEngine
        self.run, self.handoff = warmup_run(parts, self.grid, self._schedule, clock, watch)
        self.run.drain_from(self.end_ns)  # what comes back after it ended is still the warm-up's
        self.task: asyncio.Future[None] | None = None
        self._stopped_ns: int | None = None

    def start(self, cpu_s: float, t_ns: int) -> None:
        """Start its engine; `cpu_s` and `t_ns`, the process's CPU time and the clock, begin its client
        figures (its client's alone: the loop-lag watch is the run's, started by the run's begin)."""
        self.run.client.begin(cpu_s, t_ns)
        self.task = asyncio.ensure_future(self.run.run())

    def next_end_ns(self) -> int:
        """Where the next warm-up interval ends: its grid boundary, or the warm-up's end."""
        return min(self.grid.end_of(self.run.next_index), self.end_ns)

    @property
    def over(self) -> bool:
        return self.run.next_index > 0 and self.grid.end_of(self.run.next_index - 1) >= self.end_ns

    def stop(self, at_ns: int) -> None:
        """Send nothing more from `at_ns` (a signal during the warm-up): requests in flight may finish."""
        self._stopped_ns = min(at_ns, self.end_ns)
        self.run.stop(self._stopped_ns)
        self.run.drain_from(self._stopped_ns)

    def close(self, end_ns: int, cpu_s: float, now_ns: int) -> Interval:
        """Close the next warm-up interval at `end_ns`, with the skips the engine knows of by then."""
        sending_end = self._stopped_ns if self._stopped_ns is not None else self.end_ns
        return self.run.take(end_ns, sending_end_ns=sending_end if end_ns >= sending_end else None,
                             cpu_s=cpu_s, now_ns=now_ns)

    async def finish(self, cancel_wait_ns: int) -> Warmup:
        """Once the run is over: what the warm-up measured, its stragglers included (those still out
        cancelled, and given `cancel_wait_ns` to wind up)."""
        task = self.task
        if task is not None and not task.done():
            self.run.cancel()
            await self._clock.wait([task], self._clock.now_ns() + cancel_wait_ns)
        tally = Tally()
        counted = self.run.totals()
        tally.merge(counted.total)
        tally.merge(self.run.leftover())
        start = self.grid.start_ns
        end = self._stopped_ns if self._stopped_ns is not None else self.end_ns
        return Warmup(tally=tally, due=self._schedule.sends_due(start, end), span_ns=end - start,
                      intervals=self.run.next_index, connections=dict(counted.connections))
