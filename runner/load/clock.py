"""The engine's clock and the run's: the one place either reads the time or waits, given as a value.

The engine decides what to send, skip or wait for from the moments the clock gives it
(the decisions themselves are runner.load.schedule's pure arithmetic); it never reads
time.monotonic_ns() on its own. So a test can hand it a scripted clock whose time moves
only when every client is waiting, and check the closed, open and bench loops against the
schedule's brute-force oracles, on an event loop but without real time or a socket (the
h11 lesson: give the code `now`).

A run's driver (runner.run.soak), its warm-up and the local workers' parent read the time
and wait through the same value, a RunClock: the wall clock for the run's start, the CPU time
used, a wait for whichever comes first of some futures and a moment, a timer callback, and the
clock each engine paces on. So intervals, stops, drains and warm-ups run on a scripted clock
too, in the unit tier (tests/support/clock.py).

The real clock sleeps on the kernel timer where there is one (runner.load.alarm) and on
the loop's timers elsewhere; in precise mode it sleeps to just before the due time and
yields to the loop for the rest. Either way its wake-ups are told to a Pacer (the run's
loop-lag watch), so the loop's lag is measured on the wake-ups pacing makes anyway.
"""

from __future__ import annotations

import asyncio
import resource
import time
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:  # the kernel timer loads where a client first sleeps on it (MonotonicClock.sleep_until)
    from runner.load.alarm import Alarm, Pacer

# Precise pacing: how long before a due time the sleep ends and yielding begins. Longer than
# the worst early or late timer wake-up (about a millisecond), so the sleep never overshoots.
PRECISE_WINDOW_NS = 2_000_000


class Clock(Protocol):
    """What the engine asks of time: the monotonic now, and a sleep until a moment."""

    def now_ns(self) -> int:
        """The time now, on the monotonic clock of every timestamp in a Result."""
        ...

    async def sleep_until(self, due_ns: int) -> None:
        """Return at or after `due_ns` (perhaps early: the caller reads now_ns() again)."""
        ...

    def close(self) -> None:
        """Release what the clock holds (the kernel timer); waiters still waiting are cancelled."""
        ...


class Timer(Protocol):
    """A callback set for a moment (RunClock.call_at), until cancelled."""

    def cancel(self) -> object:
        ...


class RunClock(Clock, Protocol):
    """What a run's driver asks of time beyond the engine's: the clock a run is given (SystemClock,
    or a scripted one in tests), and the one its engines pace on (for_engine)."""

    def wall_s(self) -> float:
        """The Unix time now: where a run's start is agreed on and shown."""
        ...

    def cpu_s(self) -> float:
        """The CPU seconds (user and system) this process has used: the client's own figures."""
        ...

    async def wait(self, futures: Iterable[asyncio.Future[Any]], until_ns: int) -> None:
        """Return once one of `futures` is done or the clock has reached `until_ns`, whichever is first
        (with no futures, at `until_ns`). Neither is cancelled: the caller reads which it was."""
        ...

    def call_at(self, due_ns: int, callback: Callable[[], None]) -> Timer:
        """Call `callback` on the loop at or after `due_ns` (perhaps late), unless cancelled first."""
        ...

    def for_engine(self, precise: bool, pacer: Pacer | None) -> Clock:
        """The clock an engine paces on, closed when the engine ends: in precise mode (PRECISE_WINDOW_NS)
        or not, its wake-ups told to `pacer` (the run's loop-lag watch)."""
        ...


class SystemClock:
    """The process's own clocks: monotonic, wall and CPU time, waits on the loop's timers, and each
    engine's MonotonicClock (its kernel timer) for pacing."""

    def now_ns(self) -> int:
        return time.monotonic_ns()

    def wall_s(self) -> float:
        return time.time()

    def cpu_s(self) -> float:
        usage = resource.getrusage(resource.RUSAGE_SELF)
        return usage.ru_utime + usage.ru_stime

    async def sleep_until(self, due_ns: int) -> None:
        delay = due_ns - time.monotonic_ns()
        if delay > 0:
            await asyncio.sleep(delay / 1e9)

    async def wait(self, futures: Iterable[asyncio.Future[Any]], until_ns: int) -> None:
        waits = list(futures)
        delay = max(until_ns - time.monotonic_ns(), 0) / 1e9
        if not waits:
            await asyncio.sleep(delay)
            return
        await asyncio.wait(waits, timeout=delay, return_when=asyncio.FIRST_COMPLETED)

    def call_at(self, due_ns: int, callback: Callable[[], None]) -> Timer:
        delay_ns = max(due_ns - time.monotonic_ns(), 0)
        return asyncio.get_running_loop().call_later(delay_ns / 1e9, callback)

    def for_engine(self, precise: bool, pacer: Pacer | None) -> Clock:
        return MonotonicClock(precise, pacer)

    def close(self) -> None:
        """Nothing to release: each engine's clock holds its own timer (for_engine)."""


class MonotonicClock:
    """time.monotonic_ns(), and sleeps on the kernel timer, or on the loop's timers where there is none.

    Where there is a kernel timer (alarm.py) a client sleeps on it, to within the kernel's
    wake-up. Elsewhere on the loop's timers, which may fire early (uvloop keeps milliseconds)
    and late (asyncio rounds up to the millisecond), so the engine reads the clock again after
    every wake-up rather than trusting it. In precise mode the sleep ends a little before the
    due time and the rest is spent yielding to the loop, which sends within microseconds of the
    due time at the price of a busy core while it waits. Precise mode sleeps on the loop's
    timers: measured at 1,000 req/s, its send lag was p50 10 us that way and 56 us when it woke
    on the kernel timer (cause not found).
    """

    def __init__(self, precise: bool = False, pacer: Pacer | None = None) -> None:
        self._spin_ns = PRECISE_WINDOW_NS if precise else 0
        self._pacer = pacer  # told how late each wake-up came (alarm.Pacer)
        # The kernel timer, opened on the running loop at the first sleep; precise pacing keeps
        # the loop's timers (above), so it opens none.
        self._alarm: Alarm | None = None
        self._opened = precise

    def now_ns(self) -> int:
        return time.monotonic_ns()

    async def sleep_until(self, due_ns: int) -> None:
        delay = due_ns - time.monotonic_ns()
        if delay <= 0:
            return
        if not self._opened:  # the Python engine's first sleep: a run the native engine sends never gets here
            from runner.load.alarm import Alarm

            self._alarm, self._opened = Alarm.open(asyncio.get_running_loop()), True
            if self._alarm is not None:
                self._alarm.pacer = self._pacer
        if delay <= self._spin_ns:
            await asyncio.sleep(0)
        elif self._alarm is not None:
            await self._alarm.until(due_ns)
        else:
            await asyncio.sleep((delay - self._spin_ns) / 1e9)
            if self._pacer is not None:  # a loop timer: how late it came, with no promise of the next
                self._pacer.fired(due_ns - self._spin_ns, time.monotonic_ns(), None)

    def close(self) -> None:
        if self._alarm is not None:
            self._alarm.close()
            self._alarm = None
