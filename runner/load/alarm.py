"""Wake-ups at the nanosecond for the engine's due times: one kernel timer (timerfd) per loop.

Why not the loop's own timers: uvloop keeps them in whole milliseconds against a clock it
reads once per loop iteration, so a timer may fire up to a millisecond early; asyncio's
round the wait up to the millisecond. A client woken early must sleep again for the rest,
and a rest under half a millisecond rounds to a zero timeout: the client spins through the
loop until its due time. At 100 req/s that spinning was about 14 wake-ups per send and
most of the process' CPU. A timerfd armed at the absolute due time (CLOCK_MONOTONIC, the
clock of time.monotonic_ns) fires once, never early, and late only by the kernel's wake-up.

One timer serves every client of a loop: it is armed for the earliest due time waited for,
and each firing wakes everyone whose time has come. Each firing also says how late it came
(its due time against when the loop ran it): that is the loop's lag, measured on the wake-ups
the run makes anyway, so the run needs no timer of its own to measure it (a Pacer, below,
is told of every firing and arming). Linux only (Python names no timerfd
before 3.13, so it is reached through libc); elsewhere `Alarm.open` gives None and the
engine sleeps on the loop's timers as before.
"""

from __future__ import annotations

import asyncio
import ctypes
import heapq
import itertools
import os
import sys
import time
from typing import Protocol

from runner.core.units import NS_PER_S

_CLOCK_MONOTONIC = 1
_TFD_NONBLOCK = os.O_NONBLOCK
_TFD_CLOEXEC = os.O_CLOEXEC
_TFD_TIMER_ABSTIME = 1


class _Timespec(ctypes.Structure):
    _fields_ = [("tv_sec", ctypes.c_long), ("tv_nsec", ctypes.c_long)]


class _Itimerspec(ctypes.Structure):
    _fields_ = [("it_interval", _Timespec), ("it_value", _Timespec)]


def _libc() -> ctypes.CDLL | None:
    """libc, if it has timerfd (Linux 2.6.25 and later); None elsewhere."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        create, settime = libc.timerfd_create, libc.timerfd_settime
    except (OSError, AttributeError):
        return None
    create.argtypes, create.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    settime.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.POINTER(_Itimerspec), ctypes.c_void_p]
    settime.restype = ctypes.c_int
    return libc


_LIBC = _libc()


class Pacer(Protocol):
    """Who is told of a pacing timer's wake-ups: the run's loop-lag watch (runner.run.probe)."""

    def fired(self, due_ns: int, ran_ns: int, next_ns: int | None) -> None:
        """A wake-up due at `due_ns` ran at `ran_ns`; the timer's next is due at `next_ns` (None: not set)."""
        ...

    def armed(self, due_ns: int | None) -> None:
        """The timer is now set for `due_ns`, sooner than it was; None: it is closed, nothing more comes."""
        ...


class Alarm:
    """Wakes each waiter at or after its due time (time.monotonic_ns), through one timerfd."""

    def __init__(self, loop: asyncio.AbstractEventLoop, fd: int) -> None:
        self._loop = loop
        self._fd = fd
        self.pacer: Pacer | None = None  # told of every firing and arming (the loop-lag watch)
        self._waiting: list[tuple[int, int, asyncio.Future[None]]] = []  # a heap by due time
        self._order = itertools.count()  # ties wake in the order they began to wait
        self._armed_ns: int | None = None  # the due time the timer is set for
        self._spec = _Itimerspec()  # reused: filled in and passed for every arming
        loop.add_reader(fd, self._fired)

    @classmethod
    def open(cls, loop: asyncio.AbstractEventLoop) -> Alarm | None:
        """An alarm on `loop`, or None where the platform has no timerfd."""
        if _LIBC is None:
            return None
        fd = _LIBC.timerfd_create(_CLOCK_MONOTONIC, _TFD_NONBLOCK | _TFD_CLOEXEC)
        return None if fd < 0 else cls(loop, fd)

    async def until(self, due_ns: int) -> None:
        """Return once time.monotonic_ns() has reached `due_ns` (at once if it has)."""
        if due_ns <= time.monotonic_ns():
            return
        waiter: asyncio.Future[None] = self._loop.create_future()
        heapq.heappush(self._waiting, (due_ns, next(self._order), waiter))
        if self._armed_ns is None or due_ns < self._armed_ns:
            self._arm(due_ns)
            if self.pacer is not None:
                self.pacer.armed(due_ns)
        await waiter  # a cancelled waiter stays in the heap until its time, then is dropped

    def close(self) -> None:
        """Stop watching the timer and close it; waiters still waiting are cancelled."""
        self._loop.remove_reader(self._fd)
        os.close(self._fd)
        for _, _, waiter in self._waiting:
            waiter.cancel()
        self._waiting.clear()
        if self.pacer is not None:
            self.pacer.armed(None)

    def _fired(self) -> None:
        due = self._armed_ns
        try:
            os.read(self._fd, 8)  # the expiry count; reading it re-arms readiness
        except BlockingIOError:
            due = None  # fired for a time since re-armed later: not a firing of the time it is set for
        self._armed_ns = None
        now = time.monotonic_ns()
        waiting = self._waiting
        while waiting and waiting[0][0] <= now:
            waiter = heapq.heappop(waiting)[2]
            if not waiter.done():
                waiter.set_result(None)
        if waiting:
            self._arm(waiting[0][0])
        if self.pacer is not None:
            if due is not None:
                self.pacer.fired(due, now, self._armed_ns)
            else:
                self.pacer.armed(self._armed_ns)

    def _arm(self, due_ns: int) -> None:
        """Set the timer to fire at `due_ns` (absolute, monotonic); one-shot."""
        assert _LIBC is not None
        value = self._spec.it_value
        value.tv_sec, value.tv_nsec = divmod(due_ns, NS_PER_S)
        if _LIBC.timerfd_settime(self._fd, _TFD_TIMER_ABSTIME, ctypes.byref(self._spec), None) != 0:
            raise OSError(ctypes.get_errno(), f"timerfd_settime: {os.strerror(ctypes.get_errno())}")
        self._armed_ns = due_ns
