"""The client's own figures: was it the client, not the server, that set the pace?

A load tester's numbers are true only while it keeps pace. When its event loop runs
callbacks late or its process has no CPU to spare, its own queueing shows up as the
server's latency and its late sends as the server's shortfall. So every run measures
itself, per interval and for the run: how late the loop ran a timer set every few
milliseconds (the loop lag), how much of a core the process used, and how late sends left
beyond what the server made them wait (the lateness, see Result.client_lag_ns). Pure: the
run feeds it readings; nothing here reads a clock.

The rule, documented in docs/output.md: an interval is client-saturated when the process
used at least SATURATED_CPU of a core, or when the loop lag's p99 reached SATURATED_LAG_NS.
Either means callbacks (sends, reads, timers) waited for the client, not for the server.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from runner.core.units import NS_PER_MS, NS_PER_S
from runner.load.result import ErrorKind, Result
from runner.stats.histogram import LatencyHistogram

SATURATED_CPU = 0.9  # of one core: a Python event loop uses at most one
SATURATED_LAG_NS = 10 * NS_PER_MS  # loop lag p99: a timer 10 ms late means every callback waits as long
LATE_NS = 2 * NS_PER_MS  # a send this much after it could and should have left counts as late
PROBE_PERIOD_NS = 10 * NS_PER_MS  # how often the loop-lag probe asks to be woken


def is_late(result: Result) -> bool:
    """Whether a send left LATE_NS or more after it could and should have: the one rule for `late`.

    Only sends that went out count (a skip has no start), and not those cancelled at a stop.
    """
    return bool(result.start_ns) and result.error != ErrorKind.CANCELLED and result.client_lag_ns >= LATE_NS


def is_saturated(cpu_share: float, loop_lag_p99_ns: int) -> bool:
    """The rule: did the client rather than the server set the pace over a span?"""
    return cpu_share >= SATURATED_CPU or loop_lag_p99_ns >= SATURATED_LAG_NS


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


class ClientMeter:
    """Collects the readings of one process as the run goes, and closes them per interval.

    The run calls begin() once, loop_lag() for every probe tick, late() for every send's
    client lag, and close() at every interval's end with the CPU time used so far.
    """

    def __init__(self, paced: bool = True) -> None:
        self._lag = LatencyHistogram()
        self._run_lag = LatencyHistogram()
        self.lateness = LatencyHistogram() if paced else None
        self._cpu_s = self._first_cpu_s = 0.0
        self._t_ns = self._first_t_ns = 0
        self._saturated = 0

    def begin(self, cpu_s: float, t_ns: int) -> None:
        """The CPU time used and the clock when the run starts."""
        self._cpu_s = self._first_cpu_s = cpu_s
        self._t_ns = self._first_t_ns = t_ns

    def loop_lag(self, lag_ns: int) -> None:
        self._lag.record(max(lag_ns, 0))

    def loop_lags(self, lags: LatencyHistogram) -> None:
        """Many loop-lag readings at once: the native engine's timer, one interval's worth."""
        self._lag.add(lags)

    def late(self, lag_ns: int) -> None:
        if self.lateness is not None:
            self.lateness.record(max(lag_ns, 0))

    def close(self, cpu_s: float | None, t_ns: int) -> ClientFigures:
        """The interval that ends now; without a CPU reading, its share is unknown (0)."""
        lag, self._lag = self._lag, LatencyHistogram()
        self._run_lag.add(lag)
        if cpu_s is None:
            return ClientFigures(loop_lag=lag)
        figures = ClientFigures.measured(cpu_s - self._cpu_s, t_ns - self._t_ns, lag)
        self._cpu_s, self._t_ns = cpu_s, t_ns
        self._saturated += figures.saturated
        return figures

    def run(self, cpu_s: float | None, t_ns: int) -> ClientFigures:
        """The whole run's figures: saturated if any interval was, or the run as a whole."""
        if cpu_s is None:
            figures = ClientFigures(loop_lag=self._run_lag)
        else:
            figures = ClientFigures.measured(cpu_s - self._first_cpu_s, t_ns - self._first_t_ns, self._run_lag)
        figures.saturated = figures.saturated or self._saturated > 0
        figures.saturated_intervals = self._saturated
        figures.lateness = self.lateness
        return figures
