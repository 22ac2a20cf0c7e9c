"""The warm-up: sending at the run's rate before the measured run, counted apart from it.

Interval 0 of a run against a cold target carries its start (connections, a proxy's
identity, a cold cache), and an interval rule can fail on it alone. A warm-up sends for
`warmup` at the run's (or its first stage's) rate on an engine, schedule and recorder of its
own, on a grid of its own that ends where the run's begins (its clients then hand their
sessions, and so their connections, to the run's); its intervals are reported as
warm-up lines, and what it measured (requests still in flight when it ended included) goes
to the summary's warmup section only: never the run's counts, histogram or thresholds.

The warm-up is sent by the engine the run is (runner.run.build.engine_for): the Python
engine's clients hand their sessions on through a runner.load.handoff.Handoff; the native
engine's, in C, from the warm-up's engine to the run's (NativeEngine.give_to), each client's
once it is done with them. Either way the warm-up's counting is a recorder of its own, Recorder or
TakenRecorder, closed here alike.
"""

from __future__ import annotations

import asyncio
import dataclasses
from typing import TYPE_CHECKING

from runner.load.alarm import Pacer
from runner.load.clock import RunClock
from runner.load.model import warmup_schedule_of
from runner.load.native.engine import NativeEngine
from runner.load.schedule import Grid
from runner.run.build import Parts
from runner.run.engines import native_of
from runner.stats.native import TakenRecorder
from runner.stats.recorder import Interval, Recorder, Tally
from runner.stats.runinfo import Warmup

if TYPE_CHECKING:  # the Python engine loads only where it sends (WarmUpPhase.__init__)
    from runner.load.engine import Engine
    from runner.load.handoff import Handoff


class WarmUpPhase:
    """One warm-up: from `start_ns` for the settings' warmup, then what it measured."""

    def __init__(self, parts: Parts, start_ns: int, clock: RunClock, pacer: Pacer | None = None) -> None:
        """`clock`: the run's, which its engine paces on; `pacer`: told of the engine's wake-ups, for the
        loop's lag (runner.run.probe.LoopWatch)."""
        pace = parts.settings.pace
        self._clock = clock
        self.end_ns = start_ns + pace.warmup_ns
        self.grid = Grid(start_ns, pace.interval_ns)
        self._schedule = warmup_schedule_of(pace, parts.shard, start_ns)
        load = dataclasses.replace(parts.load(), total_requests=0)  # totalRequests counts the run's sends only
        # Its clients' connections go on to the run's clients (engines.engine_run takes `handoff`).
        self.engine: Engine | NativeEngine
        self.recorder: Recorder | TakenRecorder
        self.handoff: Handoff | NativeEngine
        if parts.engine.name == "native":
            self.engine, self.recorder = native_of(parts, self._schedule, self.grid, load)
            self.handoff = self.engine
        else:
            from runner.load.engine import Engine
            from runner.load.handoff import Handoff

            self.recorder = parts.recorder(self.grid, self._schedule)
            self.handoff = Handoff()
            self.engine = Engine(self._schedule, dataclasses.replace(load, give_sessions=self.handoff),
                                 parts.transport, self.recorder.record, clock.for_engine(load.model.precise, pacer))
        self.recorder.drain_from(self.end_ns)  # what comes back after it ended is still the warm-up's
        self.task: asyncio.Future[None] | None = None
        self._stopped_ns: int | None = None

    def start(self, cpu_s: float, t_ns: int) -> None:
        """Start its engine; `cpu_s` and `t_ns`, the process's CPU time and the clock, begin its client figures."""
        self.recorder.client.begin(cpu_s, t_ns)
        self.task = asyncio.ensure_future(self.engine.run())

    def next_end_ns(self) -> int:
        """Where the next warm-up interval ends: its grid boundary, or the warm-up's end."""
        return min(self.grid.end_of(self.recorder.next_index), self.end_ns)

    @property
    def over(self) -> bool:
        return self.recorder.next_index > 0 and self.grid.end_of(self.recorder.next_index - 1) >= self.end_ns

    def stop(self, at_ns: int) -> None:
        """Send nothing more from `at_ns` (a signal during the warm-up): requests in flight may finish."""
        self._stopped_ns = min(at_ns, self.end_ns)
        self.engine.stop(at_ns=self._stopped_ns)
        self.recorder.drain_from(self._stopped_ns)

    def close(self, end_ns: int, cpu_s: float, now_ns: int) -> Interval:
        """Close the next warm-up interval at `end_ns`, with the skips the engine knows of by then
        (the native engine counts them as the interval is taken)."""
        if not isinstance(self.engine, NativeEngine):
            self.engine.skip_due_before(end_ns)
        sending_end = self._stopped_ns if self._stopped_ns is not None else self.end_ns
        return self.recorder.close(end_ns, sending_end_ns=sending_end if end_ns >= sending_end else None,
                                   cpu_s=cpu_s, now_ns=now_ns)

    async def finish(self, cancel_wait_ns: int) -> Warmup:
        """Once the run is over: what the warm-up measured, its stragglers included (those still out
        cancelled, and given `cancel_wait_ns` to wind up)."""
        task = self.task
        if task is not None and not task.done():
            self.engine.cancel_in_flight()
            await self._clock.wait([task], self._clock.now_ns() + cancel_wait_ns)
        tally = Tally()
        tally.merge(self.recorder.total)
        tally.merge(self.recorder.leftover())
        start = self.grid.start_ns
        end = self._stopped_ns if self._stopped_ns is not None else self.end_ns
        return Warmup(tally=tally, due=self._schedule.sends_due(start, end), span_ns=end - start,
                      intervals=self.recorder.next_index, connections=dict(self.recorder.connections))
