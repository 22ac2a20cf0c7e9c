"""The kernel timer the engine sleeps on: nobody wakes before their time, and pacing holds with or without it.

An integration test because an event loop opens a socket pair of its own. What is asserted
holds on a busy machine: a wake-up may come late there, never early, and never out of order.
"""

from __future__ import annotations

import asyncio
import os
import random
import time
from collections.abc import Callable, Coroutine
from typing import Any

import pytest
import uvloop

from runner.load import alarm as alarm_module
from runner.load.alarm import Alarm
from runner.load.engine import Engine
from runner.load.model import Closed, Load
from runner.load.request import Request
from runner.load.result import Result
from runner.load.schedule import Schedule, Skips
from tests.support.sessions import InstantTransport, send_numbers, sent

MS = 1_000_000
LOOPS: dict[str, Callable[[Coroutine[Any, Any, Any]], Any]] = {"uvloop": uvloop.run, "asyncio": asyncio.run}

pytestmark = pytest.mark.skipif(alarm_module._LIBC is None, reason="no timerfd on this platform")


def _alarm() -> Alarm:
    made = Alarm.open(asyncio.get_running_loop())
    assert made is not None
    return made


@pytest.mark.parametrize("run", LOOPS.values(), ids=LOOPS.keys())
def test_each_waiter_wakes_at_or_after_its_time_and_in_its_order(run: Callable[..., Any]) -> None:
    woke: list[tuple[int, int, bool]] = []  # (due, when it woke, it began before its due), in waking order

    async def wait(alarm: Alarm, due: int) -> None:
        began = time.monotonic_ns()
        await alarm.until(due)
        woke.append((due, time.monotonic_ns(), began < due))

    async def go() -> None:
        alarm = _alarm()
        start = time.monotonic_ns()
        dues = [start + random.randrange(20 * MS, 80 * MS) for _ in range(40)] + [start + 50 * MS] * 3  # ties too
        random.shuffle(dues)
        await asyncio.wait_for(asyncio.gather(*(wait(alarm, due) for due in dues)), 10)
        alarm.close()

    run(go())
    assert len(woke) == 43
    assert all(at >= due for due, at, _ in woke), "a waiter woke before its time"
    # On a busy machine a waiter may begin after its time has passed and return at once, ahead
    # of others still waiting; the order holds among those that waited.
    waited = [due for due, _, began_before in woke if began_before]
    assert waited == sorted(waited), "waiters woke out of order"


def test_a_time_already_past_returns_without_waiting() -> None:
    async def go() -> None:
        alarm = _alarm()
        waiting = alarm.until(time.monotonic_ns() - MS)
        with pytest.raises(StopIteration):
            waiting.send(None)  # it finished at its first step: it never suspended
        alarm.close()

    uvloop.run(go())


def test_a_cancelled_waiter_holds_up_nobody() -> None:
    async def go() -> tuple[int, int]:
        alarm = _alarm()
        start = time.monotonic_ns()
        early = asyncio.ensure_future(alarm.until(start + 20 * MS))
        later = start + 40 * MS
        await asyncio.sleep(0)
        early.cancel()
        await asyncio.wait_for(alarm.until(later), 10)
        woke = time.monotonic_ns()
        alarm.close()
        assert early.cancelled()
        return later, woke

    later, woke = uvloop.run(go())
    assert woke >= later


def test_close_cancels_the_waiting_and_closes_the_timer() -> None:
    async def go() -> None:
        alarm = _alarm()
        fd = alarm._fd
        waiting = asyncio.ensure_future(alarm.until(time.monotonic_ns() + 60_000 * MS))
        await asyncio.sleep(0)
        alarm.close()
        with pytest.raises(asyncio.CancelledError):
            await waiting
        with pytest.raises(OSError):
            os.fstat(fd)

    uvloop.run(go())


@pytest.mark.parametrize("kernel_timer", [True, False], ids=["timerfd", "loop timers"])
@pytest.mark.parametrize("precise", [False, True], ids=["default", "precise"])
def test_paced_sends_never_leave_before_they_are_due(
    kernel_timer: bool, precise: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With the kernel timer, and without it (as on a platform that has none): every send of
    the schedule is made or skipped, and none leaves before its due time."""
    if not kernel_timer:
        monkeypatch.setattr(Alarm, "open", classmethod(lambda cls, loop: None))
    results: list[Result | Skips] = []

    async def go() -> None:
        start = time.monotonic_ns()
        schedule = Schedule(start, 400.0, 4, start + 250 * MS)  # 100 sends due
        load = Load([Request("GET", "http://x/", (), b"")], Closed(precise))
        await asyncio.wait_for(Engine(schedule, load, InstantTransport(), results.append).run(), 10)

    uvloop.run(go())
    assert send_numbers(results) == list(range(100)), "each due send is sent or skipped, once"
    made = sent(results)
    assert made
    early = [r.due_ns - r.start_ns for r in made if r.start_ns < r.due_ns]
    assert not early, f"{len(early)} sends left early, by up to {max(early, default=0)} ns"
