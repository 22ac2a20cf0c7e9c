"""When each send is due, and which reporting interval a moment falls in. Pure arithmetic.

The run's sends are numbered n = 0, 1, 2, ... and send n is due at `start + n / qps`: the
total rate is spread evenly in time. Client c owns sends c, c + C, c + 2C, ... (C clients),
so each client runs at qps / C and the clients interleave evenly. URL i gets sends
i, i + U, i + 2U, ... (U URLs), every U-th send of the whole run. Because due times are
absolute, a late send never shifts the ones after it and the rate cannot drift.

A run split over shards (processes or pods) keeps the same numbering: shard s of S owns
sends s, s + S, s + 2S, ..., and its clients share those as above.

A run with stages (runner.load.schedule.Ramp) has a rate that changes: each stage ramps
linearly from the previous stage's target (the first from 0) to its own, as k6's stages do.
Its sends are numbered the same way; send n is due at the first nanosecond by which the
ramp has made n sends due (the rate's integral reaches n), worked out in exact integers,
so the goals of the intervals add up to the ramp's sends exactly, and the clients, shards
and URLs share its sends as they share a constant rate's.

The Schedule holds the numbering (clients, shards, the end); what the rate is over time is its
RateShape, Constant or Ramp, three answers each (send n's due time, a span's goal, the last send
due by a moment), so a new shape of load is one class and no branch in the Schedule.
"""

from __future__ import annotations

import bisect
import math
from array import array
from collections.abc import Sequence
from dataclasses import field
from fractions import Fraction
from functools import cached_property
from typing import Protocol

from runner.core.lazymethods import dataclass
from runner.core.units import NS_PER_S

# With a ramp, a send it never makes due (beyond its total) is due this long after its end:
# past any run's end, so it is never in the run, and still an int every caller can compare.
NEVER_NS = 10**18
DUE_MEMO = 4096  # a ramp remembers this many due times at most (see Ramp._due)


@dataclass(frozen=True)
class Stage:
    """One stage of a ramp: for `duration_ns`, the rate moves linearly to `qps` (req/s, exact)."""

    duration_ns: int
    qps: Fraction


def exact_rate(qps: float | int | str | Fraction) -> Fraction:
    """A rate as written (100, 0.5, "33.3") as an exact fraction: 0.1 is 1/10, not the float's binary value."""
    if isinstance(qps, Fraction):
        return qps
    return Fraction(repr(qps) if isinstance(qps, float) else qps)


@dataclass(frozen=True)
class Ramp:
    """A piecewise-linear rate from 0: how many sends it makes due by each moment, and when each is due.

    Times are nanoseconds from the ramp's start. Within stage i, from rate r0 (the previous
    target) to r1 over D ns, the sends due by dt ns into it are
        base_i + (2*D*r0*dt + (r1 - r0)*dt^2) / (2*D*1e9)
    an exact rational. Every count is kept as an integer times 1/scale, one denominator for the
    whole ramp, so everything here is integer arithmetic (no float, and no Fraction on the
    engine's path): goals add up exactly and due times never drift however long the ramp.
    After the last stage nothing is due.
    """

    stages: tuple[Stage, ...]
    _starts: list[int] = field(init=False, repr=False, compare=False)  # each stage's start, ns
    _bases: list[int] = field(init=False, repr=False, compare=False)  # sends due by each stage's start, x scale
    _ends: list[int] = field(init=False, repr=False, compare=False)  # ... and by its end, x scale
    # Stage i's sends due dt ns into it, x scale, are bases[i] + (a*dt^2 + b*dt) * m: (a, b, m) each.
    _terms: list[tuple[int, int, int]] = field(init=False, repr=False, compare=False)
    _scale: int = field(init=False, repr=False, compare=False)
    # The last due times worked out: the engine asks for each send's several times (its wait,
    # its Result, the catch-up arithmetic), and a pure answer need not be worked out again.
    _due: dict[int, int | None] = field(init=False, repr=False, compare=False)
    _table: array[int] | None = field(init=False, repr=False, compare=False)  # due_times(), once asked for

    def __post_init__(self) -> None:
        if not self.stages or any(st.duration_ns <= 0 or st.qps < 0 for st in self.stages):
            raise ValueError("a ramp needs stages of positive duration and rates of at least 0")
        forms, starts, t, before = [], [], 0, Fraction(0)
        for st in self.stages:  # stage i: (a*dt^2 + b*dt) / den sends, the rates over their common denominator
            q = math.lcm(before.denominator, st.qps.denominator)
            p0, p1 = before.numerator * (q // before.denominator), st.qps.numerator * (q // st.qps.denominator)
            forms.append((p1 - p0, 2 * st.duration_ns * p0, 2 * st.duration_ns * NS_PER_S * q))
            starts.append(t)
            t, before = t + st.duration_ns, st.qps
        scale = math.lcm(*(den for _, _, den in forms))
        terms, bases, ends, count = [], [], [], 0
        for (a, b, den), st in zip(forms, self.stages, strict=True):
            m = scale // den
            terms.append((a, b, m))
            bases.append(count)
            d = st.duration_ns
            count += (a * d * d + b * d) * m
            ends.append(count)
        for name, value in (("_starts", starts), ("_bases", bases), ("_ends", ends), ("_terms", terms),
                            ("_scale", scale), ("_due", {}), ("_table", None)):
            object.__setattr__(self, name, value)

    @classmethod
    def of(cls, stages: Sequence[tuple[int, float | int | str | Fraction]]) -> Ramp:
        """A ramp from (duration ns, qps) pairs."""
        return cls(tuple(Stage(int(d), exact_rate(q)) for d, q in stages))

    @property
    def duration_ns(self) -> int:
        """How long the stages last together: the run's sending time."""
        return self._starts[-1] + self.stages[-1].duration_ns

    @property
    def total(self) -> Fraction:
        """The sends the whole ramp makes due (its rate's integral)."""
        return Fraction(self._ends[-1], self._scale)

    @property
    def first_qps(self) -> Fraction:
        """The first stage's target: the rate a warm-up sends at."""
        return self.stages[0].qps

    @property
    def peak_qps(self) -> Fraction:
        return max(st.qps for st in self.stages)

    def rate_at(self, t_ns: int) -> Fraction:
        """The rate at `t_ns` (req/s): 0 before the start and after the end."""
        if t_ns < 0 or t_ns >= self.duration_ns:
            return Fraction(0)
        i = bisect.bisect_right(self._starts, t_ns) - 1
        st = self.stages[i]
        r0 = self.stages[i - 1].qps if i else Fraction(0)
        return r0 + (st.qps - r0) * (t_ns - self._starts[i]) / st.duration_ns

    def _scaled_by(self, t_ns: int) -> int:
        """The sends due in [0, t_ns), times the ramp's scale: an integer."""
        if t_ns <= 0:
            return 0
        if t_ns >= self.duration_ns:
            return self._ends[-1]
        i = bisect.bisect_right(self._starts, t_ns) - 1
        a, b, m = self._terms[i]
        dt = t_ns - self._starts[i]
        return self._bases[i] + (a * dt * dt + b * dt) * m

    def sends_by(self, t_ns: int) -> Fraction:
        """The sends due in [0, t_ns): the rate's integral from the start to `t_ns`, exactly."""
        return Fraction(self._scaled_by(t_ns), self._scale)

    def sends_between(self, start_ns: int, end_ns: int) -> Fraction:
        """The sends due in [start_ns, end_ns), exactly: the goal `t` of that span."""
        if end_ns <= start_ns:
            return Fraction(0)
        return Fraction(self._scaled_by(end_ns) - self._scaled_by(start_ns), self._scale)

    def last_send_by(self, t_ns: int) -> int:
        """The highest n due at or before `t_ns` (-1 before the start): send n is due once n sends are."""
        if t_ns < 0:
            return -1
        return self._scaled_by(t_ns) // self._scale

    def due_ns(self, n: int) -> int | None:
        """When send n is due: the first nanosecond by which n sends are due; None if the ramp
        never gets there (n beyond its total)."""
        if n <= 0:
            return 0
        known = self._due.get(n, -1)
        if known != -1:
            return known
        if len(self._due) >= DUE_MEMO:
            self._due.clear()
        due = self._due[n] = self._work_out_due(n)
        return due

    # --- the RateShape the Schedule runs (Constant is the other) ------------------------------

    ends_slots = True  # it makes only so many sends due: the last one's slot ends with the run

    def send_due_ns(self, n: int) -> int:
        """When send n is due; a send it never makes due is due long after any end (NEVER_NS)."""
        due = self.due_ns(n)
        return self.duration_ns + NEVER_NS if due is None else due

    def share_due(self, start_ns: int, end_ns: int, share: int) -> float:
        """1/share of the sends due in [start_ns, end_ns): exact, made a float once."""
        return float(self.sends_between(start_ns, end_ns) / share)

    def due_times(self) -> array[int]:
        """Every send's due time, ns from the ramp's start, in order (n = 0, 1, ... as far as the
        ramp makes sends due), then NEVER_NS past its end: the due time of every later send.

        The ramp as data: an engine that looks send n's due time up here (at n, or at the last
        entry beyond it), and finds the sends due by a moment by searching here, keeps this ramp
        exactly without doing its arithmetic (the native engine: schedule.h). Worked out once,
        send by send, by the same rule as due_ns; 8 bytes a send.
        """
        times = self._table
        if times is None:
            times = array("q", [0])  # send 0 is due at the start, whatever the first stage's rate (due_ns)
            times.extend(self._work_out_due(n) or 0 for n in range(1, self.last_send_by(self.duration_ns) + 1))
            times.append(self.duration_ns + NEVER_NS)
            object.__setattr__(self, "_table", times)
        return times

    def _work_out_due(self, n: int) -> int | None:
        need = n * self._scale
        if need > self._ends[-1]:
            return None
        i = bisect.bisect_left(self._ends, need)  # the first stage by whose end n sends are due
        a, b, m = self._terms[i]
        c = -((self._bases[i] - need) // m)  # the smallest integer dt with a*dt^2 + b*dt >= c is due
        duration = self.stages[i].duration_ns
        dt = _root_guess(a, b, c, duration)
        while dt > 0 and a * (dt - 1) ** 2 + b * (dt - 1) >= c:
            dt -= 1
        while dt < duration and a * dt * dt + b * dt < c:
            dt += 1
        return self._starts[i] + dt


def _root_guess(a: int, b: int, c: int, limit: int) -> int:
    """Near the smallest dt in [0, limit] with a*dt^2 + b*dt >= c (c > 0), in integers; the caller settles it."""
    if a == 0:
        guess = -(-c // b) if b else limit
    else:
        root = math.isqrt(max(0, b * b + 4 * a * c))
        guess = (root - b) // (2 * a) if a > 0 else (b - root) // (-2 * a)
    return min(max(guess, 0), limit)


class RateShape(Protocol):
    """A run's rate over time, from its start (ns): what a Schedule asks of it, so a new shape of
    load is one class. Constant and Ramp are the two; Ramp.due_times hands a ramp to the native
    engine as data, and the native engine's constant rate is Constant.send_due_ns's formula."""

    ends_slots: bool  # it makes only so many sends due: its last send's slot ends with the run

    def send_due_ns(self, n: int) -> int:
        """When send n is due, ns from the start."""

    def share_due(self, start_ns: int, end_ns: int, share: int) -> float:
        """1/share of the sends due in [start_ns, end_ns): a span's goal, unrounded."""

    def last_send_by(self, t_ns: int) -> int:
        """The highest n due at or before `t_ns` (-1 if none)."""


@dataclass(frozen=True)
class Constant:
    """One rate from start to end: send n is due n / qps seconds in (rounded to the ns)."""

    qps: float
    ends_slots = False

    def send_due_ns(self, n: int) -> int:
        return round(n * NS_PER_S / self.qps)

    def share_due(self, start_ns: int, end_ns: int, share: int) -> float:
        # The rate over the span, not a count of due times: adjacent spans' goals add up.
        return self.qps / share * max(0, end_ns - start_ns) / NS_PER_S

    def last_send_by(self, t_ns: int) -> int:
        n = math.floor(t_ns * self.qps / NS_PER_S)
        # Float rounding can put n one off around a due time; settle it exactly.
        while n >= 0 and self.send_due_ns(n) > t_ns:
            n -= 1
        while self.send_due_ns(n + 1) <= t_ns:
            n += 1
        return max(n, -1)


@dataclass(frozen=True)
class Schedule:
    """The due time of every send of a run, and the clients' share of them."""

    start_ns: int
    qps: float  # the whole run's rate, all shards together
    clients: int  # this shard's clients
    end_ns: int | None = None  # sends due at or after this are not sent; None: no end
    stride: int = 1  # shards in the run
    offset: int = 0  # this shard's index
    ramp: Ramp | None = None  # stages: the rate changes as this says (qps is then its peak, for show)

    @cached_property
    def shape(self) -> RateShape:
        """The rate over time the run keeps: its ramp, else its constant qps."""
        return self.ramp if self.ramp is not None else Constant(self.qps)

    def due_ns(self, n: int) -> int:
        """When send n is due (with a ramp, a send it never makes due is due long after any end)."""
        return self.start_ns + self.shape.send_due_ns(n)

    def send_number(self, client: int, k: int) -> int:
        """The run-wide number of client `client`'s k-th send."""
        return self.offset + self.stride * (client + k * self.clients)

    def sends_due(self, start_ns: int, end_ns: int) -> float:
        """How many of this process's sends are due in [start_ns, end_ns): the goal `t` of a span.

        The rate over the span, not a count of due times (half a second at 5 req/s is 2.5
        sends, whichever sends' due times fall in it), so the goals of adjacent spans add up
        to the goal of both. Unrounded: figures round it once, where it is shown (see goal).
        The one place a goal is made from the run's rate; a rate that changes during a run
        changes only this.
        """
        return self.shape.share_due(start_ns - self.start_ns, end_ns - self.start_ns, self.stride)

    def planned_sends(self) -> int | None:
        """How many sends this process will have made by the end of sending, if nothing stops it
        early: its own among the run's sends due before the end, counted exactly. None when only a
        count or a signal ends the run."""
        if self.end_ns is None:
            return None
        run = self.last_send_by(self.end_ns - 1) + 1  # sends 0 .. run - 1 are due before the end
        return max(0, (run - self.offset + self.stride - 1) // self.stride)

    def slot_end_ns(self, n: int) -> int:
        """When send n's slot ends: when the run's next send after it is due (any shard's), so
        the shards of a count-limited run end together, at the run's end, not a stride apart.
        A ramp's last send's slot ends with the ramp (it may make no send n + 1 due at all)."""
        if self.shape.ends_slots and self.end_ns is not None:
            return min(self.due_ns(n + 1), self.end_ns)
        return self.due_ns(n + 1)

    def in_run(self, n: int) -> bool:
        """Whether send n is due before the end of sending."""
        return self.end_ns is None or self.due_ns(n) < self.end_ns

    def before_end(self, t_ns: int) -> bool:
        """Whether sending may still start at `t_ns`: the end of unpaced (bench) sending."""
        return self.end_ns is None or t_ns < self.end_ns

    def last_send_by(self, t_ns: int) -> int:
        """The run's highest send number due at or before `t_ns` (-1 if none), any shard's."""
        return self.shape.last_send_by(t_ns - self.start_ns)

    def last_due_by(self, client: int, now_ns: int) -> int:
        """The client's highest k whose send is due at or before `now_ns` (-1 if none)."""
        n = self.shape.last_send_by(now_ns - self.start_ns)
        k = ((n - self.offset) // self.stride - client) // self.clients
        # Float rounding can put k one off around a due time; settle it exactly.
        while k >= 0 and self.due_ns(self.send_number(client, k)) > now_ns:
            k -= 1
        while self.due_ns(self.send_number(client, k + 1)) <= now_ns:
            k += 1
        return max(k, -1)

    def end_k(self, client: int) -> int | None:
        """The client's first k whose send is not in the run (due at or after the end); None: no end."""
        if self.end_ns is None:
            return None
        return self.last_due_by(client, self.end_ns - 1) + 1

    def catch_up(self, client: int, k: int, free_ns: int, now_ns: int) -> tuple[int, int]:
        """A closed-loop client whose next send is its k-th: which to send, and how many to skip.

        `free_ns` is when its previous request ended (its response came back or it failed),
        `now_ns` when the client got round to sending again. Returns (k to send next, sends
        skipped). Only sends that fell due while the previous request was still in flight
        are skipped: the server set that pace, and of those only the newest goes out (now,
        late); sending them all late would burst. A send that fell due after the client was
        free goes out late, not skipped: only the client itself was slow, and its lateness
        is recorded as the client's (see the engine). Skips are counted, never dropped.
        Sends at or after the end of sending are not skipped; they were never in the run.
        Once sending has ended, nothing goes out late: every overdue send of the run is
        skipped and the k returned is past the run (a client stuck on a slow request until
        after the end would otherwise send one more request after the run was over).
        """
        if not self.before_end(now_ns):
            last = self.last_in_run(client, k, now_ns)
            return (k, 0) if last < k else (last + 1, last + 1 - k)
        last = self.last_in_run(client, k, min(free_ns, now_ns))
        if last < k:
            return k, 0
        return last, last - k

    def last_in_run(self, client: int, k: int, t_ns: int) -> int:
        """The client's highest send from its k-th on that is due by `t_ns` and in the run (k - 1 if none).

        Arithmetic, not a walk back from `t_ns`: a client that comes back long after the end
        at a high rate would otherwise step over every send due in between.
        """
        last = self.last_due_by(client, t_ns)
        end = self.end_k(client)
        if end is not None:
            last = min(last, end - 1)
        return max(last, k - 1)


@dataclass(frozen=True)
class Skips:
    """Sends of one client that were due and not made: its k-th from `first` up to, not
    including, `end` (closed model: it was still busy; open model: too many in flight; or
    the run stopped first; or, `at_end`, the client got to them only once sending was over).

    One record for any number of them, so skipping costs the same for one send as for a
    million (2,000,000 skipped Results once took a 2 s run 17 s). Whoever counts them splits
    them by when they were due (by_interval), with arithmetic on the schedule.
    """

    schedule: Schedule
    client: int
    first: int
    end: int
    # The client, free to send them (nothing of its in flight, room for more), got to them only at
    # or after the end of sending, when none goes out: its own delay made them skips, never the server.
    at_end: bool = False

    @property
    def count(self) -> int:
        return self.end - self.first

    def by_interval(self, grid: Grid) -> list[tuple[int, int]]:
        """(interval index, sends) for each interval of `grid` that their due times fall in, in
        order: O(intervals spanned), whatever the count. Before the grid's start is interval 0."""
        schedule, client = self.schedule, self.client
        spans = []
        k = self.first
        while k < self.end:
            index = grid.index(schedule.due_ns(schedule.send_number(client, k)))
            upto = min(self.end, schedule.last_due_by(client, grid.end_of(index) - 1) + 1)
            spans.append((index, upto - k))
            k = upto
        return spans


@dataclass(frozen=True)
class Grid:
    """Reporting intervals on a fixed grid from the start: interval k is [start + kI, start + (k+1)I)."""

    start_ns: int
    interval_ns: int

    def end_of(self, k: int) -> int:
        """When interval k ends."""
        return self.start_ns + (k + 1) * self.interval_ns

    def index(self, t_ns: int) -> int:
        """The interval a moment falls in; moments before the start count in interval 0."""
        return max(0, (t_ns - self.start_ns) // self.interval_ns)
