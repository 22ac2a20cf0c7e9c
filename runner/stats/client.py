"""The client's own figures: was it the client, not the server, that set the pace?

A load tester's numbers are true only while it keeps pace. When its event loop runs
callbacks late or its process has no CPU to spare, its own queueing shows up as the
server's latency and its late sends as the server's shortfall. So every run measures
itself, per interval and for the run: how late the loop ran its pacing timer's wake-ups
(the loop lag), how much of a core the process used, and how late sends left
beyond what the server made them wait (the lateness, see Result.client_lag_ns). Pure: the
run feeds it readings; nothing here reads a clock.

The rule, documented in docs/output.md: an interval is client-saturated when the process
used at least SATURATED_CPU of a core, or when the loop lag's p99 reached SATURATED_LAG_NS.
Either means callbacks (sends, reads, timers) waited for the client, not for the server.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field

from runner.core.units import NS_PER_MS, NS_PER_S
from runner.load.result import ErrorKind, Result
from runner.load.schedule import Grid
from runner.stats.histogram import LatencyHistogram

SATURATED_CPU = 0.9  # of one core: a Python event loop uses at most one
SATURATED_LAG_NS = 10 * NS_PER_MS  # loop lag p99: a timer 10 ms late means every callback waits as long
LATE_NS = 2 * NS_PER_MS  # a send this much after it could and should have left counts as late
# The loop lag is sampled on the pacing timer's own wake-ups (each firing: due at, ran at), as a
# probe ticking every PROBE_PERIOD_NS would see it: at most one sample a period, and a firing
# later than that stands for the ticks the stall swallowed too (ClientMeter.tick).
PROBE_PERIOD_NS = 10 * NS_PER_MS
# Where no firing is due sooner (a low rate, a stop), a fallback tick comes this long after the
# last one, so a stall of the process (SIGSTOP, a node that does not run it) still shows interval
# by interval, at a tenth of the wake-ups of a probe every period. Both engines, one rule.
WATCH_GAP_NS = 100 * NS_PER_MS


def is_late(result: Result) -> bool:
    """Whether a send left LATE_NS or more after it could and should have: the one rule for `late`.

    Only sends that went out count (a skip has no start), and not those cancelled at a stop.
    """
    return bool(result.start_ns) and result.error != ErrorKind.CANCELLED and result.client_lag_ns >= LATE_NS


def is_saturated(cpu_share: float, loop_lag_p99_ns: int) -> bool:
    """The rule: did the client rather than the server set the pace over a span?"""
    return cpu_share >= SATURATED_CPU or loop_lag_p99_ns >= SATURATED_LAG_NS


OWN_CPU, NODE = "own CPU", "node"


def starved_by(figures: ClientFigures) -> str:
    """Why a saturated span was: the process's OWN_CPU (it used SATURATED_CPU of a core or more,
    so its own work set the pace), or its NODE (its loop ran late while it had CPU to spare: it
    was not run on time, by a busy node, a CPU limit's throttling, or a stop)."""
    return OWN_CPU if figures.cpu_share >= SATURATED_CPU else NODE


@dataclass
class ClientFigures:
    """How the client fared over one interval, or over the whole run.

    Merging shards (processes or pods) keeps the busiest process's CPU share and every
    process's loop-lag samples; a merged span is saturated when any of its processes was.
    """

    cpu_share: float = 0.0  # CPU time over wall time, in cores
    loop_lag: LatencyHistogram = field(default_factory=LatencyHistogram)
    saturated: bool = False
    saturated_intervals: int = 0  # the run's: how many of its intervals were saturated
    lateness: LatencyHistogram | None = None  # the run's: every send's client lag (paced runs)

    @classmethod
    def measured(cls, cpu_seconds: float, span_ns: int, loop_lag: LatencyHistogram) -> ClientFigures:
        """One process's figures over a span, judged by the rule."""
        share = cpu_seconds * NS_PER_S / span_ns if span_ns > 0 else 0.0
        return cls(share, loop_lag, is_saturated(share, loop_lag.percentiles([99])[99]))

    def merge(self, other: ClientFigures) -> None:
        """Add another process's figures over the same span."""
        self.cpu_share = max(self.cpu_share, other.cpu_share)
        self.loop_lag.add(other.loop_lag)
        self.saturated = self.saturated or other.saturated
        self.saturated_intervals = max(self.saturated_intervals, other.saturated_intervals)
        if other.lateness is not None:
            if self.lateness is None:
                self.lateness = LatencyHistogram()
            self.lateness.add(other.lateness)


def next_due(due_ns: int, ran_ns: int, period_ns: int = PROBE_PERIOD_NS) -> int:
    """When the loop-lag probe's next tick is due, after the one due at `due_ns` ran at `ran_ns`:
    a period after it was due; after a stall longer than a period, a period after it ran (the
    ticks the stall swallowed are not run one after another, late: ClientMeter.tick counts them)."""
    return due_ns + period_ns if ran_ns - due_ns <= period_ns else ran_ns + period_ns


class ClientMeter:
    """Collects the readings of one process as the run goes, and closes them per interval.

    The run calls begin() once, tick() for every wake-up of the pacing timer (or the fallback
    tick), expect() with when the next one is due, late() for every send's client lag, and
    close() at every interval's end with the CPU time used so far.

    Both figures belong to the interval in which what they measure happened, not to the one
    being closed when they are read, which differ after a stall (a process stopped, or not run
    by its node): the intervals that passed meanwhile are closed in a burst when it runs again.

    - The loop lag: each tick is counted in the interval it was due in, and so is every tick a
      stall swallowed (each due a period after the last, late until the stall ended), as
      HdrHistogram corrects for coordinated omission: one sample for a 3 s stall would leave
      the p99 of the intervals it spanned untouched. A tick still not run when its interval is
      closed counts as late until then.
    - The CPU share: the CPU time is known only at each close, so between two readings it is
      taken as spent evenly, and an interval gets what falls within its own span; an interval
      closed in a burst after a stall gets its share of the stall's (little) CPU, not that of
      the moment of closing it, when the process is busy (it said 100% of a core).
    """

    def __init__(self, grid: Grid, paced: bool = True, period_ns: int = PROBE_PERIOD_NS) -> None:
        self._grid = grid
        self._period_ns = period_ns
        self._lag = LatencyHistogram()  # the open interval's: the ticks due in it
        self._next = 0  # the open interval: the first not yet closed
        # Ticks that ran, due in intervals not yet open: (first due, past the last due, when they ran).
        # A stall's ticks are counted interval by interval, so memory stays one histogram however long it was.
        self._spans: list[tuple[int, int, int]] = []
        self._run_lag = LatencyHistogram()
        self.lateness = LatencyHistogram() if paced else None
        self._readings: list[tuple[int, float]] = []  # (clock, CPU seconds used by then), oldest first
        self._first: tuple[int, float] | None = None
        self._next_due_ns: int | None = 0  # when the next tick is due (None: none is)
        self._counted_ns = 0  # ticks due before this have been counted
        self._saturated = 0

    def begin(self, cpu_s: float, t_ns: int) -> None:
        """The CPU time used and the clock when the run starts (and the probe with it)."""
        self._first = (t_ns, cpu_s)
        self._readings = [self._first]
        self._next_due_ns = t_ns + self._period_ns
        self._counted_ns = t_ns

    def tick(self, due_ns: int, ran_ns: int) -> None:
        """The probe's tick due at `due_ns` ran at `ran_ns`; so did every one a stall swallowed."""
        period = self._period_ns
        first = due_ns if due_ns >= self._counted_ns else due_ns + -(-(self._counted_ns - due_ns) // period) * period
        last = max(ran_ns, due_ns + 1)  # the tick itself counts even when it ran on the dot
        if first < last:  # not counted yet (as still late, when its interval was closed)
            self._counted_ns = first + -(-(last - first) // period) * period
            self._spans.append((first, last, ran_ns))
            self._count_ran(self._grid.end_of(self._next))
        self._next_due_ns = next_due(due_ns, ran_ns, period)

    def expect(self, due_ns: int | None) -> None:
        """The next tick is due at `due_ns` (the pacing timer's next firing, or the fallback's),
        not a period on as a probe's would be; None: none is (the engine has ended). A tick not
        run by an interval's close is late until then from here."""
        self._next_due_ns = due_ns

    def loop_lags(self, lags: LatencyHistogram) -> None:
        """Many loop-lag readings at once, each on time within a period: the native engine's timer,
        one interval's worth (its later firings come one by one, to tick())."""
        self._lag.add(lags)

    def late(self, lag_ns: int) -> None:
        if self.lateness is not None:
            self.lateness.record(max(lag_ns, 0))

    def close(self, cpu_s: float | None, t_ns: int, start_ns: int, end_ns: int, *,
              final: bool = False) -> ClientFigures:
        """The interval from `start_ns` to `end_ns`, closed at `t_ns` with `cpu_s` used so far (None:
        its share is unknown, 0). The final one also takes the ticks due after its end."""
        self._count_ran(math.inf if final else max(end_ns, start_ns))
        self._count_pending(t_ns if final else min(max(end_ns, start_ns), t_ns), t_ns)
        lag, self._lag = self._lag, LatencyHistogram()
        self._next += 1
        self._run_lag.add(lag)
        if cpu_s is None:
            return ClientFigures(loop_lag=lag)
        self._read(t_ns, cpu_s)
        figures = ClientFigures.measured(self._cpu_at(end_ns) - self._cpu_at(start_ns), end_ns - start_ns, lag)
        self._forget_before(end_ns)
        self._saturated += figures.saturated
        return figures

    def run(self, cpu_s: float | None, t_ns: int) -> ClientFigures:
        """The whole run's figures: saturated if any interval was, or the run as a whole."""
        if cpu_s is None or self._first is None:
            figures = ClientFigures(loop_lag=self._run_lag)
        else:
            first_t, first_cpu = self._first
            figures = ClientFigures.measured(cpu_s - first_cpu, t_ns - first_t, self._run_lag)
        figures.saturated = figures.saturated or self._saturated > 0
        figures.saturated_intervals = self._saturated
        figures.lateness = self.lateness
        return figures

    def _count_ran(self, until_ns: float) -> None:
        """Count, in the open interval, the ticks that ran and were due before `until_ns` (its end)."""
        period, kept = self._period_ns, []
        for first, last, ran in self._spans:
            d = first
            while d < last and d < until_ns:
                self._lag.record(max(ran - d, 0))  # a hair early counts as on time
                d += period
            if d < last:
                kept.append((d, last, ran))
        self._spans = kept

    def _count_pending(self, until_ns: int, now_ns: int) -> None:
        """Count, in the open interval, the ticks due before `until_ns` (its end) that have not run
        by `now_ns`: late by at least that much."""
        if self._next_due_ns is None:
            return
        period = self._period_ns
        d = max(self._next_due_ns, self._counted_ns)
        while d < until_ns:
            self._lag.record(now_ns - d)
            d += period
            self._counted_ns = d

    def _read(self, t_ns: int, cpu_s: float) -> None:
        if self._readings and t_ns <= self._readings[-1][0]:
            self._readings[-1] = (self._readings[-1][0], max(cpu_s, self._readings[-1][1]))
        else:
            self._readings.append((t_ns, cpu_s))

    def _cpu_at(self, t_ns: int) -> float:
        """The CPU time used by `t_ns`, spent evenly between the readings around it."""
        readings = self._readings
        if t_ns <= readings[0][0]:
            return readings[0][1]
        for (t0, c0), (t1, c1) in itertools.pairwise(readings):
            if t_ns <= t1:
                return c0 + (c1 - c0) * (t_ns - t0) / (t1 - t0)
        return readings[-1][1]

    def _forget_before(self, t_ns: int) -> None:
        """Drop the readings no later interval needs: all before the last one at or before `t_ns`."""
        keep = max((i for i, (t, _) in enumerate(self._readings) if t <= t_ns), default=0)
        del self._readings[:keep]
