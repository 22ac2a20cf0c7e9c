"""A scripted clock and a transport that answers on it: the engine's loops, and a whole run's, without real time.

The clock's time moves only when every task on the event loop is waiting (on it, or on
nothing else): it then jumps to the earliest moment a waiter asked for and wakes everyone
due by then, like trio's autojump clock. A run of an hour takes milliseconds, and what the
engine does at each moment is exactly reproducible, so its closed, open and bench loops are
checked against brute-force oracles of what the schedule says, on asyncio's own loop (the
unit tier refuses uvloop and every network socket). It is a whole runner.load.clock.RunClock,
so a run's driver (runner.run.soak.Soak) runs on it too: its intervals, stops, drains and
warm-ups, and its events (a signal, say: call_at) at moments a test chooses.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
from collections.abc import Callable, Coroutine, Iterable
from typing import Any, TypeVar

from runner.load.alarm import Pacer
from runner.load.clock import Clock
from runner.load.request import Request
from runner.load.result import Result

T = TypeVar("T")


class ScriptedClock:
    """Virtual monotonic nanoseconds, moved only by run() when the loop has nothing else to do."""

    def __init__(self, start_ns: int = 0, wall_s: float = 1_764_584_443.0) -> None:
        self.t = start_ns
        self._wall_at_start = wall_s - start_ns / 1e9  # the Unix time at monotonic 0: wall_s() moves with t
        self.cpu = 0.0  # what cpu_s() reads: the process's CPU seconds, as a test sets them
        self._sleepers: list[tuple[int, int, asyncio.Future[None]]] = []  # a heap by due time
        self._order = itertools.count()
        self.wakeups = 0  # how often time moved: the engine's wake-ups, as the real clock would make them
        self._stall: tuple[int, int] | None = None  # (from, until): the process is not run then (stall())

    def stall(self, from_ns: int, until_ns: int) -> None:
        """Run nothing from `from_ns` until `until_ns`, as a stopped or unscheduled process: whatever
        falls due meanwhile wakes only at `until_ns`, all at once, late."""
        self._stall = (from_ns, until_ns)

    def now_ns(self) -> int:
        return self.t

    async def sleep_until(self, due_ns: int) -> None:
        if due_ns <= self.t:
            await asyncio.sleep(0)
            return
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        heapq.heappush(self._sleepers, (due_ns, next(self._order), waiter))
        await waiter

    def close(self) -> None:
        """The engine's end: nothing is left to wake (a real clock cancels its waiters too)."""

    def wall_s(self) -> float:
        return self._wall_at_start + self.t / 1e9

    def cpu_s(self) -> float:
        return self.cpu

    async def wait(self, futures: Iterable[asyncio.Future[Any]], until_ns: int) -> None:
        timer = asyncio.ensure_future(self.sleep_until(until_ns))
        try:
            await asyncio.wait([*futures, timer], return_when=asyncio.FIRST_COMPLETED)
        finally:
            timer.cancel()

    def call_at(self, due_ns: int, callback: Callable[[], None]) -> asyncio.Future[None]:
        async def later() -> None:
            await self.sleep_until(due_ns)
            callback()

        return asyncio.ensure_future(later())

    def for_engine(self, precise: bool, pacer: Pacer | None) -> Clock:
        """Every engine paces on this same clock; its wake-ups are told to no pacer (they are never late)."""
        return self

    def run(self, main: Coroutine[Any, Any, T], limit_ns: int = 3600 * 10**9) -> T:
        """Run `main` on a fresh asyncio loop, moving time whenever everything waits; its result.

        Fails if nothing can move time while `main` is unfinished (a hang), or past `limit_ns`.
        """
        return asyncio.run(self._drive(main, self.t + limit_ns))

    async def advance(self, until_ns: int, done: Callable[[], bool]) -> None:
        """Move time as run() does, but only up to `until_ns`, and stop early once `done()` holds: for a
        caller that is not on the loop (the local workers' parent, which waits on its pipes instead)."""
        while True:
            await _settle()
            if done():
                return
            while self._sleepers and self._sleepers[0][2].done():  # cancelled meanwhile
                heapq.heappop(self._sleepers)
            if not self._sleepers or self._sleepers[0][0] > until_ns:
                self.t = max(self.t, until_ns)
                return
            self.t = max(self.t, self._sleepers[0][0])
            self.wakeups += 1
            while self._sleepers and self._sleepers[0][0] <= self.t:
                waiter = heapq.heappop(self._sleepers)[2]
                if not waiter.done():
                    waiter.set_result(None)

    async def _drive(self, main: Coroutine[Any, Any, T], limit_ns: int) -> T:
        task = asyncio.ensure_future(main)
        while True:
            await _settle()
            if task.done():
                return task.result()
            while self._sleepers and self._sleepers[0][2].done():  # cancelled meanwhile
                heapq.heappop(self._sleepers)
            assert self._sleepers, "every task waits on something other than the clock: a hang"
            self.t = max(self.t, self._sleepers[0][0])
            if self._stall is not None and self.t >= self._stall[0]:  # woken only once the stall is over
                self.t, self._stall = max(self.t, self._stall[1]), None
            assert self.t <= limit_ns, "the run went on past its limit"
            self.wakeups += 1
            while self._sleepers and self._sleepers[0][0] <= self.t:
                waiter = heapq.heappop(self._sleepers)[2]
                if not waiter.done():
                    waiter.set_result(None)


async def _settle() -> None:
    """Yield until no callback but this one is ready: every other task waits."""
    loop = asyncio.get_running_loop()
    for _ in range(100_000):
        await asyncio.sleep(0)
        if not loop._ready:  # type: ignore[attr-defined]  # asyncio's queue of ready callbacks
            return
    raise AssertionError("the loop never went quiet: a task spins")


class ScriptedSession:
    """Answers each send with a 200 after `latency(send_count)` of the clock's time."""

    def __init__(self, clock: ScriptedClock, latency: Callable[[int], int], log: list[tuple[int, int]],
                 started: list[int] | None = None) -> None:
        self._clock = clock
        self._latency = latency
        self._log = log  # (start, end) of every send answered
        self._started = started if started is not None else []  # the start of every send made: what the server saw

    async def send(self, request: Request, hash_body: bool) -> Result:
        start = self._clock.now_ns()
        self._started.append(start)
        await self._clock.sleep_until(start + self._latency(len(self._log)))
        end = self._clock.now_ns()
        self._log.append((start, end))
        return Result(start_ns=start, headers_ns=end, end_ns=end, status=200)

    async def aclose(self) -> None:
        pass

    def held(self) -> list[str]:
        return ["HTTP/1.1"]  # the one kept-alive connection it stands for


class ScriptedTransport:
    """Sessions on one scripted clock; `log` holds every send the "server" answered, `started` when
    each send it saw began (those still unanswered, or never answered, included)."""

    def __init__(self, clock: ScriptedClock, latency: Callable[[int], int]) -> None:
        self._clock = clock
        self._latency = latency
        self.log: list[tuple[int, int]] = []
        self.started: list[int] = []

    def session(self) -> ScriptedSession:
        return ScriptedSession(self._clock, self._latency, self.log, self.started)


class ScriptedSignals:
    """Stop signals as a test sends them (runner.run.signals.Signals): `pending` ones, held before the
    run could handle them, are taken as it installs its handler; send() is one arriving now."""

    def __init__(self, pending: tuple[str, ...] = ()) -> None:
        self._pending = list(pending)
        self._handle: Callable[[str, bool], None] | None = None
        self.installed = False

    def install(self, handle: Callable[[str, bool], None]) -> None:
        self._handle, self.installed = handle, True
        while self._pending:
            handle(self._pending.pop(0), True)

    def remove(self) -> None:
        self._handle = None

    def arrive(self, name: str = "SIGTERM") -> None:
        """A signal now: taken at once by a run that listens, else held until it does (a local
        worker still starting, whose stop signals are held until its handler is in place)."""
        if self._handle is not None:
            self._handle(name, False)
        elif not self.installed:
            self._pending.append(name)

    def send(self, name: str = "SIGTERM") -> None:
        """A signal now; one sent while no run listens is lost, as a real one would kill the process."""
        assert self._handle is not None, "no run is listening for signals"
        self._handle(name, False)
