"""The loop-lag watch: how late the event loop runs what is due, measured on pacing's own wake-ups.

Every send, every read and every timer of a run is a callback on one event loop. When the
process is short of CPU, or the loop has more work than it can do, every callback runs
late, and that lateness is the client's, not the server's. The pacing timer knows it of
each of its firings (due at, ran at: runner.load.alarm), so the watch is told of those
and hands them to the client meter (ClientMeter.tick): an idle client wakes only to send
or to read. Only where no firing is due for long (a low rate, a stop, the engine done)
does the watch set a timer of its own, a fallback tick WATCH_GAP_NS after the last one,
so a stall of the process still shows, interval by interval, however little is sent.
"""

from __future__ import annotations

from collections.abc import Callable

from runner.load.clock import RunClock, Timer
from runner.stats.client import WATCH_GAP_NS


class LoopWatch:
    """Passes every pacing wake-up to `record(due_ns, ran_ns)`, and the next one expected to
    `expect(due_ns)`; ticks itself only where no wake-up is due within `gap_ns` of the last.

    It is the runner.load.alarm.Pacer of the run's clocks. Their promises (a timer set for a
    time) are kept or withdrawn (armed(None), at a close), so with the fallback there is always
    a tick due within `gap_ns` of the last: one of theirs, or its own.
    """

    def __init__(self, record: Callable[[int, int], None], expect: Callable[[int], None], clock: RunClock,
                 gap_ns: int = WATCH_GAP_NS) -> None:
        """`clock`: the run's, which the fallback tick is read and set on."""
        self._record = record
        self._clock = clock
        self._expect = expect
        self._gap_ns = gap_ns
        self._last_ns = 0  # when the last tick ran
        self._promised: int | None = None  # when the pacing timer's next firing is due, if set
        self._handle: Timer | None = None  # the fallback tick, when it is needed
        self._due_ns = 0  # ... and when it is due
        self._running = False

    def start(self, now_ns: int) -> None:
        """From `now_ns` on, as the meter was told (ClientMeter.begin)."""
        self._last_ns, self._running = now_ns, True
        self._plan()

    def stop(self) -> None:
        self._running = False
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None

    def fired(self, due_ns: int, ran_ns: int, next_ns: int | None) -> None:
        """Pacer: a firing due at `due_ns` ran at `ran_ns`; the timer's next is due at `next_ns`."""
        if not self._running:
            return
        if self._handle is not None and self._due_ns < due_ns:
            # The fallback fell due first and a stall kept both from running: asyncio runs this
            # firing (a reader) before the loop's timers, but the meter counts ticks in due
            # order, so the earlier is told first (ran now) and withdrawn; else the stall's lag
            # would be read from this firing's later due time.
            self._handle.cancel()
            self._handle = None
            self._record(self._due_ns, ran_ns)
        self._record(due_ns, ran_ns)
        self._last_ns, self._promised = max(ran_ns, self._last_ns), next_ns
        self._plan()

    def armed(self, due_ns: int | None) -> None:
        """Pacer: the timer is set for `due_ns` now (None: closed)."""
        self._promised = due_ns
        if self._running:
            self._plan()

    def _plan(self) -> None:
        """Tell the meter when the next tick is due: the timer's firing if it comes within the
        gap; otherwise the fallback's, set if it is not yet."""
        promised, limit = self._promised, self._last_ns + self._gap_ns
        if promised is not None and promised <= limit:
            if self._handle is not None:
                self._handle.cancel()
                self._handle = None
            self._expect(promised)
            return
        if self._handle is None:  # one set earlier stays: it comes sooner, at most one spare tick a gap
            self._due_ns = limit
            self._handle = self._clock.call_at(limit, self._tick)
        self._expect(self._due_ns)

    def _tick(self) -> None:
        """The fallback: no firing came within the gap (or none was due); it ticks instead."""
        self._handle = None
        now = self._clock.now_ns()
        self._record(self._due_ns, now)
        self._last_ns = now
        self._plan()
