"""The client's own figures: what its own delay may have changed in the figures of a span.

A load tester's numbers are true only while it keeps pace. When its event loop runs
callbacks late or its process has no CPU to spare, its sends leave late and its reads may
be late, and part of that can show as the server's latency or shortfall. So every run
measures itself, per interval and for the run: how late the loop ran its pacing timer's
wake-ups (the loop lag), how much of a core the process used, and how late sends left
beyond what the server made them wait (the lateness, see Result.client_lag_ns). Pure: the
run feeds it readings; nothing here reads a clock.

Seeing the client lag does not make a figure wrong: a latency timed from the request's write
to the kernel's receive time of the answer holds no delay of the client's, and an interval
that met its goal lost nothing to it. So pace_of() says, figure by figure, what the client's
delay may have changed in a span and by how much (Pace), and an interval is client-saturated
(Pace.saturated) only where its delay may have changed one of its figures. The rules are
documented in docs/output.md (#is-the-client-the-limit).
"""

from __future__ import annotations

import itertools
import math
import sys
from collections.abc import Mapping
from dataclasses import field, replace
from typing import Protocol

from runner.config.settings import Settings
from runner.core.columns import LINE_PERCENTILES
from runner.core.lazymethods import dataclass
from runner.core.percentiles import PERCENTILES
from runner.core.units import NS_PER_MS, NS_PER_S
from runner.load.model import Closed, Open, model_for
from runner.load.result import ErrorKind, Result
from runner.load.schedule import Grid
from runner.load.shards import Shard
from runner.stats.figures import Figures, Latency
from runner.stats.histogram import LatencyHistogram
from runner.stats.phases import PhaseTally


class PacedTally(Protocol):
    """What pace_of reads of a span's tally (runner.stats.recorder.Tally), read only."""

    good: int
    bad: int
    failed: int
    skipped: int
    skipped_at_end: int
    late: int
    late_max_ns: int
    kernel_clocked: int
    delayed_max_ns: int
    connections_opened: int

    @property
    def errors(self) -> Mapping[str, int]: ...
    @property
    def latency(self) -> LatencyHistogram: ...
    @property
    def phases(self) -> PhaseTally | None: ...


SATURATED_CPU = 0.9  # of one core: a Python event loop uses at most one; at this share its own work sets its pace
SATURATED_LAG_NS = 10 * NS_PER_MS  # delay in latencies worth a note: a timer 10 ms late, every callback as late
LATE_NS = 2 * NS_PER_MS  # a send this much after it could and should have left counts as late
# The loop lag is sampled on the pacing timer's own wake-ups (each firing: due at, ran at), as a
# probe ticking every PROBE_PERIOD_NS would see it: at most one sample a period, and a firing
# later than that stands for the ticks the stall swallowed too (ClientMeter.tick).
PROBE_PERIOD_NS = 10 * NS_PER_MS
# Where no firing is due sooner (a low rate, a stop), a fallback tick comes this long after the
# last one, so a stall of the process (SIGSTOP, a node that does not run it) still shows interval
# by interval, at a tenth of the wake-ups of a probe every period. Both engines, one rule.
WATCH_GAP_NS = 100 * NS_PER_MS
# A timeout is the client's only when its loop lagged this share of the timeout or more: then an
# answer that came in the first half of the wait may have been read after the deadline. Below it,
# the server had not answered in more than half the time the run gives it.
TIMEOUT_SHARE = 0.5
WITHIN_GAP = 0.998  # of the gap between a client's sends: a request that took less ended within it (_may_skip)
# Of a span's goal: the least its client's lateness alone must be able to cost it to count as
# changing it (a line shows goal% to the whole percent).
GOAL_NOTED = 0.01
NAMED_INTERVALS = 10  # saturated intervals a run keeps the numbers of, for its note (ClientFigures.named)


def is_late(result: Result) -> bool:
    """Whether a send left LATE_NS or more after it could and should have: the one rule for `late`.

    Only sends that went out count (a skip has no start), and not those cancelled at a stop.
    """
    return bool(result.start_ns) and result.error != ErrorKind.CANCELLED and result.client_lag_ns >= LATE_NS


def holds_delay(result: Result) -> bool:
    """Whether a response's latency may hold some of the client's own delay: it was timed by the
    loop's clock, not the kernel's receive time, or it opened its connection (the loop sees the
    connect). One timed from its due time (the open model) holds its lateness too: the recorder
    counts those where it knows the model. Tally.delayed_max_ns keeps the slowest."""
    return not result.kernel_clock or bool(result.connected_ns)


OWN_CPU, NODE = "own CPU", "node"


def starved_by(cpu_share: float) -> str:
    """Why a client fell behind: its OWN_CPU (it used SATURATED_CPU of a core or more, so its own
    work set the pace), or its NODE (it had CPU to spare and still ran late: it was not run on
    time, by a busy node, a CPU limit's throttling, or a stop)."""
    return OWN_CPU if cpu_share >= SATURATED_CPU else NODE


@dataclass(frozen=True)
class PaceTerms:
    """What judging a span's pace needs of its run's settings (pace_of).

    `room`: how many requests this process may have in flight before a due send is skipped: its
    clients (closed model: one each) or its maxInFlight (open model); 0 when there is no such
    limit to judge skips by (a bench, or unknown: then any skip may be the client's).
    `senders`: how many take turns at the rate's sends, each sending its own in order: the closed
    model's clients (a client's sends are senders / rate apart), or 1 in the open model, where
    every send is its own, due 1 / rate after the one before whatever is in flight; 0 when unknown.
    """

    room: int = 0
    corrected: bool = False  # latency from the due time (open model): a late send's lateness is in it
    paced: bool = True  # sends are due on a schedule: a goal, skips, lateness (not a bench)
    timeout_ns: int = 10 * NS_PER_S
    senders: int = 0

    @classmethod
    def of(cls, settings: Settings, shard: Shard) -> PaceTerms:
        """The terms of one process's run (`shard`: its part of the run; a merged run is ALONE)."""
        model = model_for(settings.pace, shard)
        clients = shard.share(settings.pace.concurrency)
        room = clients if isinstance(model, Closed) else model.max_in_flight if isinstance(model, Open) else 0
        senders = clients if isinstance(model, Closed) else 1 if isinstance(model, Open) else 0
        return cls(room, model.corrected, model.paced, settings.client.timeout_ns, senders)


@dataclass(frozen=True)
class Pace:
    """What the client's own delay may have changed in one span's figures (pace_of), and by how much.

    Each count is at most what the span measured, and 0 where the client's delay could not have
    changed that figure: a guess that leans to the client (`may have`), never a certainty.
    """

    behind_ns: int = 0  # how far behind its schedule the client ran: its latest send, its loop's longest lag
    lag_ns: int = 0  # the most of its delay a response's latency may hold (0: none holds any)
    delayed: int = 0  # the responses whose latency may hold it
    # Skipped sends it may have caused: those it got to only once sending was over (at_end), and
    # all the others skipped behind requests in flight, or none of them.
    skipped: int = 0
    timeouts: int = 0  # timeouts it may have caused (its loop lagged half the timeout): all, or none
    crossed: int = 0  # sends due in the span that its delay may have pushed past the span's end
    short: int = 0  # of the sends the span's goal missed, those its delay may have cost it, beyond its edges' jitter
    cpu_share: float = 0.0  # the busiest process's share of a core: why it fell behind (starved_by)
    best: Latency | None = None  # the span's latencies had its delay cost nothing; None where it is in none
    # Of the figures an interval line shows (LINE_LATENCIES), the one its delay may have raised most, and by how much.
    moved: tuple[str, int] = ("", 0)
    at_end: int = 0  # of the skipped, those it got to only once sending was over (Tally.skipped_at_end): its own
    # Of `sends`, those the span's goal missed (never more than its due sends less its responses): what
    # its delay may have cost goal%, rate or backends; None where not known (taken as `sends`).
    lost: int | None = None

    @property
    def saturated(self) -> bool:
        """Whether the client's delay may have changed the span's figures enough to read them
        otherwise: it may have cost sends (skipped, timed out, or missing from a goal not met
        while it ran a whole gap between a sender's own sends behind), or have raised a latency the
        line shows by SATURATED_LAG_NS or more. A client a few milliseconds late whose goal% lost
        a response or two across the line's end is not (responses cross its edges both ways), nor
        one whose delay is in the latency of the few responses that opened its connections."""
        return bool(self.skipped or self.timeouts or self.short) or self.moved[1] >= SATURATED_LAG_NS

    @property
    def sends(self) -> int:
        """The sends its delay may have kept from the span: skipped, timed out, or pushed past its end."""
        return self.skipped + self.timeouts + self.crossed

    @property
    def cost(self) -> int:
        """Of `sends`, those the span's goal missed: a send pushed past the end of a span that got
        as many answers as were due cost it nothing (`lost`)."""
        return self.sends if self.lost is None else self.lost

    def merge(self, other: Pace) -> Pace:
        """Two spans' (intervals of one run, or shards of one interval), added up; `best` is the
        span's own (run_pace works it out again for the whole)."""
        return Pace(max(self.behind_ns, other.behind_ns), max(self.lag_ns, other.lag_ns),
                    self.delayed + other.delayed, self.skipped + other.skipped, self.timeouts + other.timeouts,
                    self.crossed + other.crossed, self.short + other.short, max(self.cpu_share, other.cpu_share),
                    moved=max(self.moved, other.moved, key=lambda m: m[1]), at_end=self.at_end + other.at_end,
                    lost=None if self.lost is None and other.lost is None else self.cost + other.cost)


def pace_of(tally: PacedTally, figures: Figures, client: ClientFigures, terms: PaceTerms = PaceTerms()) -> Pace:
    """What the client's own delay may have changed in a span (an interval), from its figures and
    the client's: the rule, figure by figure (docs/output.md#is-the-client-the-limit).

    - Latency: a response timed by the kernel's receive time, on a connection it did not open,
      ran from the write of its request to the arrival of its answer: no delay of the client's is
      in it. One timed by the loop's clock (TLS, httpx) may hold up to the loop's longest lag; one
      that opened a connection, as much of it as its setup took at most (the connect is seen by
      the loop); in the open model a late send's lateness too, latency being timed from the due time.
    - Skips: a send the client, free to send it, got to only once sending was over (the run's end)
      is skipped, never sent late: its own delay, whatever the server did (Tally.skipped_at_end,
      as the engine tells it). Any other skip fell due while requests were in flight: a
      closed-model client's own, or maxInFlight's in the open model. A request that ended within
      the gap a request has before it holds up a due send (room / rate: clients / rate, or
      maxInFlight / rate) would have left room for it, had it gone on time: so those skips may be
      the client's only if it ran at least that gap, less its slowest such request (less the delay
      its latency may hold), behind, as a client sending late in a burst does. Requests all slower
      than the gap: the server's.
    - Timeouts: only when the loop lagged TIMEOUT_SHARE of the timeout or more.
    - The goal: sends due within `behind` of the span's end may have been sent, or answered, after
      it (`crossed`: those of them not skipped at the run's end; as many as the server let the
      client send, and answered: _pushed). As responses cross a line's edges both ways, that is
      the client's cut of a goal not met (`short`) only once it ran the gap between a sender's own
      sends behind (senders / rate: a closed-model client's, or 1 / rate in the open model, where
      each send is its own), as a stopped client does, and could cost GOAL_NOTED of the goal; the
      skips above are its cut whatever it ran behind.
    """
    ran_behind = max(tally.late_max_ns, client.loop_lag.max) if terms.paced else 0
    behind = ran_behind if ran_behind >= LATE_NS else 0
    at_end = tally.skipped_at_end if terms.paced else 0  # late by however little: past the end, none goes out
    lag, delayed, best = _latency_delay(tally, client, terms)
    rate = figures.rate_target
    gap = terms.room * NS_PER_S / rate if terms.room and rate else 0.0  # before a due send is held up in flight
    in_flight = tally.skipped - at_end
    skipped = at_end + (in_flight if in_flight and behind and _may_skip(tally, gap, behind, lag) else 0)
    timeouts = figures.errors.get(ErrorKind.TIMEOUT, 0) if client.loop_lag.max >= terms.timeout_ns * TIMEOUT_SHARE \
        else 0
    due = figures.due or 0.0
    unskipped = max(math.ceil(due) - tally.skipped, 0)  # the span's due sends that were not skipped
    crossed = min(unskipped, max(_pushed(tally, best, rate, behind, terms) - at_end, 0))
    missing = max(math.ceil(due - figures.responses - 1e-9), 0)
    spacing = terms.senders * NS_PER_S / rate if terms.senders and rate else 0.0  # between a sender's own sends
    edges = crossed if spacing and behind >= spacing and crossed >= due * GOAL_NOTED else 0  # beyond edges' jitter
    short = min(missing, skipped + timeouts + edges)
    return Pace(behind or (ran_behind if at_end else 0), lag, delayed, skipped, timeouts, crossed, short,
                client.cpu_share, best, _moved(figures.latency, best), at_end,
                None if figures.due is None else min(skipped + timeouts + crossed, missing))


def _pushed(tally: PacedTally, best: Latency | None, rate: float | None, behind_ns: int, terms: PaceTerms) -> int:
    """The most sends of a span its client's delay may have kept from it: those due within `behind_ns`
    of its end, at the pace the server let it send them (no faster than its room over the span's
    mean latency at best: each of its clients, or maxInFlight, waits for its answer), and of those,
    as many as the server answered of the sends made (none for a target that never answers; all
    where nothing ended in the span). Not the share of the span's goal it answered: the client's
    own delay cut that (a stopped client's interval answered 16 of its 60)."""
    if not behind_ns or not rate:
        return 0
    mean = tally.latency.mean if best is None else best.ns("mean")
    served = min(rate, terms.room * NS_PER_S / mean) if terms.room and tally.latency.count and mean > 0 else rate
    made = tally.good + tally.bad + tally.failed
    answered = (tally.good + tally.bad) / made if made else 1.0
    return math.ceil(served * behind_ns / NS_PER_S * answered - 1e-9)


def run_pace(tally: PacedTally, intervals: Pace) -> Pace:
    """A whole run's Pace: its intervals' added up (`intervals`), with the latencies at best worked
    out on the run's own histogram, its delayed responses each as late as the latest was."""
    best = _best_latency(tally.latency, intervals.delayed, intervals.lag_ns, tally.delayed_max_ns) \
        if intervals.delayed else None
    return replace(intervals, best=best, moved=_moved(Latency.of(tally.latency), best))


LINE_LATENCIES = (*LINE_PERCENTILES, "max")  # the latencies an interval line shows


def _moved(measured: Latency, best: Latency | None) -> tuple[str, int]:
    """Which latency an interval line shows the client's delay may have raised most, and by how much."""
    if best is None:
        return "", 0
    return max(((key, int(measured.ns(key) - best.ns(key))) for key in LINE_LATENCIES), key=lambda m: m[1])


def _latency_delay(tally: PacedTally, client: ClientFigures, terms: PaceTerms) -> tuple[int, int, Latency | None]:
    """(the most of the client's delay in a response's latency, how many responses may hold it, the
    latencies without it), or (0, 0, None). A kernel-timed response that opened its connection may
    hold it only in its connection's setup: no more than the slowest setup took. None holds more
    than the slowest of them took in all (Tally.delayed_max_ns)."""
    responses = tally.good + tally.bad
    by_loop = responses - tally.kernel_clocked
    opened = min(responses - by_loop, tally.connections_opened)
    lag = client.loop_lag.max if by_loop else min(client.loop_lag.max, _setup_max(tally)) if opened else 0
    delayed = by_loop + opened
    if terms.corrected and tally.late:  # timed from the due time: a late send's lateness is in its latency
        lag += tally.late_max_ns
        delayed = min(responses, delayed + tally.late)
    lag = min(lag, tally.delayed_max_ns)
    if not delayed or lag <= 0:
        return 0, 0, None
    return lag, delayed, _best_latency(tally.latency, delayed, lag, tally.delayed_max_ns)


def _setup_max(tally: PacedTally) -> int:
    """The longest a connection's setup (name lookup, connect, TLS) may have taken in the span; a
    tally without phases (a record of an earlier version) says nothing: no bound."""
    phases = tally.phases
    if phases is None or not phases.connect_new.count:
        return sys.maxsize
    return phases.dns_new.max + phases.connect_new.max + phases.tls_new.max


def _best_latency(histogram: LatencyHistogram, delayed: int, lag_ns: int, delayed_max_ns: int | None = None) -> Latency:
    """The latencies had `delayed` of the responses, none slower than `delayed_max_ns`, each been up
    to `lag_ns` faster: a lower bound of each. A percentile slower than every delayed response is
    as measured; any other falls by at most the lag, and no lower than the value as many ranks
    down as there are delayed responses (the others are as measured)."""
    n = histogram.count
    if not n:
        return Latency()
    # Slower than the slowest delayed response, by more than a histogram bucket (0.1%): no delay in it.
    fixed = math.inf if delayed_max_ns is None else delayed_max_ns + delayed_max_ns // 500
    ranks = {key: max(int(p.rank * n / 100 + 0.5), 1) for key, p in PERCENTILES.items()}
    shifted = {key: rank - delayed for key, rank in ranks.items()}
    lower = histogram.percentiles(s * 100 / n for s in (*shifted.values(), n - delayed) if s > 0)
    measured = histogram.percentiles(p.rank for p in PERCENTILES.values())

    def at_best(value: int, rank: int) -> int:
        return value if value > fixed else max(value - lag_ns, lower[rank * 100 / n] if rank > 0 else 0, 0)

    best = {key: at_best(measured[p.rank], shifted[key]) for key, p in PERCENTILES.items()}
    return Latency(n, at_best(histogram.min, 0), at_best(histogram.max, n - delayed),
                   max(histogram.mean - lag_ns * delayed / n, 0.0), 0.0, best)


def _may_skip(tally: PacedTally, gap: float, behind_ns: int, lag_ns: int) -> bool:
    """Whether the span's skips may be the client's: it ran at least the gap a request has before
    its client's next send falls due (room / rate), less the slowest request that ended within it
    (its latency less `lag_ns`, the most of the client's delay a latency may hold). A failure other
    than a timeout ends at once; with nothing ended in the span, none is known."""
    if not gap:
        return True  # no gap to judge by
    histogram = tally.latency
    # Below the gap by more than a histogram bucket (0.1%): an answer in the gap's own bucket took it all.
    within = histogram.counts_up_to([int(gap * WITHIN_GAP) + lag_ns])[0] if histogram.count else 0
    if within:
        rank = within * 100 / histogram.count
        slowest = max(min(histogram.percentiles([rank])[rank] - lag_ns, gap), 0)
        return behind_ns >= gap - slowest
    fast_failures = tally.failed - sum(tally.errors.get(kind, 0) for kind in (ErrorKind.TIMEOUT, ErrorKind.CANCELLED))
    if fast_failures or not (histogram.count or tally.failed):
        return behind_ns >= gap
    return False  # every request of the span was slower than the gap: the server's


@dataclass
class ClientFigures:
    """How the client fared over one interval, or over the whole run.

    `saturated` is not read off these figures: it is whether the client's delay may have changed
    the interval's (Pace.saturated, judged once the interval is closed), and for the run whether
    it did in any interval. Merging shards (processes or pods) keeps the busiest process's CPU
    share and every process's loop-lag samples.
    """

    cpu_share: float = 0.0  # CPU time over wall time, in cores
    loop_lag: LatencyHistogram = field(default_factory=LatencyHistogram)
    saturated: bool = False
    saturated_intervals: int = 0  # the run's: how many of its intervals were saturated
    lateness: LatencyHistogram | None = None  # the run's: every send's client lag (paced runs)
    # The run's: the first NAMED_INTERVALS saturated intervals, and what the client's delay may
    # have changed in all of them, added up (None where none was, or not known: a shard's record).
    named: tuple[int, ...] = ()
    pace: Pace | None = None

    @classmethod
    def measured(cls, cpu_seconds: float, span_ns: int, loop_lag: LatencyHistogram) -> ClientFigures:
        """One process's figures over a span."""
        return cls(cpu_seconds * NS_PER_S / span_ns if span_ns > 0 else 0.0, loop_lag)

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

    def count_saturated(self, index: int, pace: Pace) -> None:
        """The run's: interval `index` was saturated, by what its Pace says."""
        self.saturated = True
        self.saturated_intervals += 1
        if len(self.named) < NAMED_INTERVALS:
            self.named += (index,)
        self.pace = pace if self.pace is None else self.pace.merge(pace)


def next_due(due_ns: int, ran_ns: int, period_ns: int = PROBE_PERIOD_NS) -> int:
    """When the loop-lag probe's next tick is due, after the one due at `due_ns` ran at `ran_ns`:
    a period after it was due; after a stall longer than a period, a period after it ran (the
    ticks the stall swallowed are not run one after another, late: ClientMeter.tick counts them)."""
    return due_ns + period_ns if ran_ns - due_ns <= period_ns else ran_ns + period_ns


class ClientMeter:
    """Collects the readings of one process as the run goes, and closes them per interval.

    The run calls begin() once, tick() for every wake-up of the pacing timer (or the fallback
    tick), expect() with when the next one is due, late() for every send's client lag,
    close() at every interval's end with the CPU time used so far, and counted() with what the
    client's delay may have changed in the interval so closed (its Pace).

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
        self._saturation = ClientFigures()  # the saturated intervals so far (count_saturated)

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
        return figures

    def counted(self, index: int, pace: Pace) -> None:
        """Interval `index`, closed, and what the client's delay may have changed in it."""
        if pace.saturated:
            self._saturation.count_saturated(index, pace)

    def run(self, cpu_s: float | None, t_ns: int) -> ClientFigures:
        """The whole run's figures: saturated if any interval was (counted())."""
        if cpu_s is None or self._first is None:
            figures = ClientFigures(loop_lag=self._run_lag)
        else:
            first_t, first_cpu = self._first
            figures = ClientFigures.measured(cpu_s - first_cpu, t_ns - first_t, self._run_lag)
        seen = self._saturation
        figures.saturated, figures.saturated_intervals = seen.saturated, seen.saturated_intervals
        figures.named, figures.pace = seen.named, seen.pace
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
