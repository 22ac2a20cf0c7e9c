"""The loop-lag watch (runner.run.probe.LoopWatch) between the pacing timer and the client meter.

The meter counts ticks in the order they were due (ClientMeter.tick): a tick reported after
a later one is taken as already counted. asyncio runs the pacing timer's firing (a reader,
its timerfd) before the loop's own timers in the same iteration, so after a stall the pacing
firing can be told before the fallback tick that was due sooner: the watch must report the
earliest first, or the stall's lag is measured from the later due time (a 600 ms SIGSTOP read
as 362 ms once in CI).
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from runner.load.schedule import Grid
from runner.run.probe import LoopWatch
from runner.stats.client import WATCH_GAP_NS, ClientMeter

MS = 1_000_000
SECOND = 1000 * MS


class Handle:
    def __init__(self, timers: list[Handle], due_ns: int, callback: Callable[[], None]) -> None:
        self.due_ns, self.callback, self.cancelled = due_ns, callback, False
        timers.append(self)

    def cancel(self) -> None:
        self.cancelled = True


class Clock:
    """The run clock as the watch uses it: read, and a timer set; a test runs what is due."""

    def __init__(self) -> None:
        self.t = 0
        self.timers: list[Handle] = []

    def now_ns(self) -> int:
        return self.t

    def call_at(self, due_ns: int, callback: Callable[[], None]) -> Handle:
        return Handle(self.timers, due_ns, callback)

    def run_timers(self) -> None:
        """The loop's own timers due by now, in due order (after the readers, as asyncio runs them)."""
        while due := sorted((h for h in self.timers if not h.cancelled and h.due_ns <= self.t), key=lambda h: h.due_ns):
            due[0].cancelled = True
            due[0].callback()


def watched(clock: Clock) -> tuple[LoopWatch, list[tuple[int, int]]]:
    told: list[tuple[int, int]] = []
    watch = LoopWatch(lambda due, ran: told.append((due, ran)), lambda due: None, clock)  # type: ignore[arg-type]
    watch.start(0)
    return watch, told


@pytest.mark.parametrize("pacing_ms", [150, 250, 500, 1000])
@pytest.mark.parametrize("stop_at_ms", [0, 10, 99, 100, 101, 180])
@pytest.mark.parametrize("stall_ms", [150, 600, 2500])
def test_after_a_stall_the_earliest_tick_due_is_told_first(pacing_ms: int, stop_at_ms: int, stall_ms: int) -> None:
    """A pacing timer firing every `pacing_ms` (beyond the fallback's gap), the process stopped at
    `stop_at_ms` for `stall_ms`: on resuming, the pacing firing runs first (a reader), then the
    fallback tick. What the meter is told is in due order, and the first due is at most a gap
    after the last tick before the stop, so the stall shows at least its length less the gap."""
    clock = Clock()
    watch, told = watched(clock)
    watch.fired(0, 0, pacing_ms * MS)  # a send at 0; the next is due a pacing period on
    last_ran = 0
    if stop_at_ms >= WATCH_GAP_NS // MS:  # the fallback ticked on time before the stop
        clock.t = WATCH_GAP_NS
        clock.run_timers()
        last_ran = clock.t
    resume = (stop_at_ms + stall_ms) * MS
    clock.t = resume
    if pacing_ms * MS <= resume:
        watch.fired(pacing_ms * MS, resume, resume + pacing_ms * MS)  # the reader first
    clock.run_timers()
    dues = [due for due, _ in told]
    assert dues == sorted(dues), told
    after_stop = [(due, ran) for due, ran in told if ran == resume]
    assert after_stop, told
    due, ran = after_stop[0]
    assert due <= last_ran + WATCH_GAP_NS
    assert ran - due >= stall_ms * MS - WATCH_GAP_NS


def test_the_meter_sees_the_stall_from_the_tick_the_stop_swallowed_first() -> None:
    """The CI case, end to end through the meter: sends every 250 ms, stopped 262 ms in for 600 ms.
    The interval's loop lag reaches 500 ms (the fallback due at 100 ms ran at 862), not 362."""
    clock = Clock()
    meter = ClientMeter(Grid(0, SECOND))
    watch = LoopWatch(meter.tick, meter.expect, clock)  # type: ignore[arg-type]
    meter.begin(0.0, 0)
    watch.start(0)
    clock.t = 250 * MS
    watch.fired(250 * MS, clock.t, 500 * MS)  # a send; the fallback is set for 350 ms
    clock.t = 862 * MS  # stopped at 262 ms, resumed 600 ms later
    watch.fired(500 * MS, clock.t, 750 * MS)
    clock.run_timers()
    lag = meter.close(0.0, SECOND, 0, SECOND).loop_lag
    assert lag.max >= 500 * MS, lag.max


def test_a_fallback_is_never_told_twice() -> None:
    """The fallback told with a pacing firing is withdrawn: the loop's timer, run later, tells nothing."""
    clock = Clock()
    watch, told = watched(clock)
    watch.fired(0, 0, 300 * MS)
    clock.t = 900 * MS
    watch.fired(300 * MS, clock.t, 1200 * MS)
    clock.run_timers()
    assert [due for due, _ in told] == [0, WATCH_GAP_NS, 300 * MS], told
