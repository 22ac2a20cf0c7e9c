"""Local workers as their parent sees them (runner.run.workers.Crew), each a real run on one scripted clock.

Each worker runs what a worker process runs (runner.run.workers._work): its shard's parts built
from the run's settings, and its Soak with a _Courier as its only reporter, but on
tests/support/clock.py's scripted clock and transport, on one event loop beside the others,
its messages handed to the parent as they are sent instead of through a pipe. While the parent
waits for them (receive), time moves. A test kills a worker at a moment it chooses (as the OOM
killer's SIGKILL does: it sends nothing more and exits with -9) and sends the parent signals at
moments it chooses; the parent passes them on (signal) to the workers still running, whose
Soaks stop as they would on their own signal. Moments are offsets from the agreed start, where
the workers' first sends are due.
"""

from __future__ import annotations

import asyncio
import signal
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from runner.config.settings import Settings
from runner.load.shards import Shard
from runner.metrics.tally import UrlSlots
from runner.run.build import build
from runner.run.soak import Soak
from runner.run.workers import Message, _Courier
from tests.support.clock import ScriptedClock, ScriptedSignals, ScriptedTransport

LIMIT_NS = 3600 * 10**9  # no scripted split run goes on longer: past it, the parent is stuck


class ScriptedCrew:
    """The workers of one split run (a runner.run.workers.Crew; `spawn` starts them)."""

    def __init__(self, clock: ScriptedClock, transport: ScriptedTransport, *,
                 kills: Sequence[tuple[int, int]] = (), signals: Sequence[tuple[int, str]] = (),
                 parent: ScriptedSignals | None = None) -> None:
        """`kills`: (moment, worker) of each SIGKILL; `signals`: (moment, name) of each signal the
        parent gets, through `parent` (the Signals the parent listens to)."""
        self._clock = clock
        self._transport = transport
        self._kills = kills
        self._signals_at = signals
        self._parent = parent
        self._loop = asyncio.new_event_loop()
        self._inbox: list[Message] = []
        self._tasks: list[asyncio.Task[None]] = []
        self._listening: list[ScriptedSignals] = []  # each worker's signals
        self._killed: set[int] = set()
        self.start_ns = 0  # the agreed start on the monotonic clock
        self.signalled: list[tuple[int, str, list[int]]] = []  # (moment, signal, the workers it was sent to)
        self.joined = False

    def spawn(self, settings: Settings, urls: Sequence[str], source: str | None, pod: Shard, start_wall: float,
              slots: UrlSlots | None, step: int) -> ScriptedCrew:
        """Start the workers (runner.run.workers.Spawn), as _spawn starts processes: none runs yet."""
        clock = self._clock
        self.start_ns = clock.now_ns() + round((start_wall - clock.wall_s()) * 1e9)
        workers = settings.split.workers
        self._listening = [ScriptedSignals() for _ in range(workers)]
        for w in range(workers):
            shard = Shard(pod.index, pod.count, w, workers)
            self._tasks.append(self._loop.create_task(self._work(settings, urls, source, shard, start_wall, step)))
        self._loop.create_task(self._script())
        return self

    async def _work(self, settings: Settings, urls: Sequence[str], source: str | None, shard: Shard,
                    start_wall: float, step: int) -> None:
        """One worker: runner.run.workers._work on the scripted clock, transport and signals."""
        outbox = _Box(self, shard.worker)
        try:
            parts = replace(build(settings, urls, source, shard), transport=self._transport)
            soak = Soak(parts, [_Courier(outbox, None, step)], start_wall,  # type: ignore[arg-type]
                        clock=self._clock, signals=self._listening[shard.worker])
            await soak.run()
        except Exception as e:
            outbox.put(("failed", shard.worker, f"{type(e).__name__}: {e}"))

    async def _script(self) -> None:
        """The test's events, each at its moment: kills, and signals to the parent."""
        events: list[tuple[int, Any]] = [*((t, lambda w=w: self._kill(w)) for t, w in self._kills),
                                         *((t, lambda name=name: self._signal_parent(name)) for t, name in self._signals_at)]
        for moment, act in sorted(events, key=lambda event: event[0]):
            await self._clock.sleep_until(self.start_ns + moment)
            act()

    def _kill(self, worker: int) -> None:
        self._killed.add(worker)
        self._tasks[worker].cancel()

    def _signal_parent(self, name: str) -> None:
        assert self._parent is not None, "a signal to a parent that listens to none"
        self._parent.arrive(name)

    def sent(self, worker: int, message: Message) -> None:
        """A worker's message, home at once; a killed worker's courier sends nothing more."""
        if worker not in self._killed:
            self._inbox.append(message)

    def __len__(self) -> int:
        return len(self._tasks)

    def receive(self, timeout_s: float) -> list[Message]:
        if not self._inbox:
            until = self._clock.now_ns() + round(timeout_s * 1e9)
            assert until - self.start_ns <= LIMIT_NS, "the parent waits on past any run's end"
            self._loop.run_until_complete(self._clock.advance(until, lambda: bool(self._inbox)))
        messages, self._inbox = self._inbox, []
        return messages

    def exit_code(self, worker: int) -> int | None:
        if worker in self._killed:
            return -signal.SIGKILL
        return 0 if self._tasks[worker].done() else None

    def signal(self, sig: signal.Signals) -> None:
        running = [w for w in range(len(self)) if self.exit_code(w) is None]
        self.signalled.append((self._clock.now_ns() - self.start_ns, sig.name, running))
        for w in running:
            self._listening[w].arrive(sig.name)

    def join(self, timeout_s: float) -> None:
        self.joined = True

    def close(self) -> None:
        """The end of the run: whatever the loop still holds (a killed worker's clients) is cancelled."""
        async def cancel_all() -> None:
            tasks = asyncio.all_tasks() - {asyncio.current_task()}
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

        self._loop.run_until_complete(cancel_all())
        self._loop.close()


class _Box:
    """A worker's outbox (runner.run.workers._Outbox): each message goes home as it is put."""

    def __init__(self, crew: ScriptedCrew, worker: int) -> None:
        self._crew = crew
        self._worker = worker

    def put(self, message: Message) -> None:
        self._crew.sent(self._worker, message)
