"""Figures computed once: what an interval or a whole run measured, as exact numbers.

Every output of a run (slow_cooker's lines, the JSON summary, ab's report, the CSV, the
verdict, the Prometheus gauges) shows the same few figures: counts, the sends due (the goal
`t`), goal%, errors%, the rate asked for and achieved, and latency percentiles. They are
worked out here, once per interval and once per run, from the tallies the recorder closed;
reporters only format them (truncate to a unit, round, print), the way vegeta's
Metrics.Close() computes its figures once for every reporter. `soak compare` and `soak plot`
read finished runs back into the same records (runner.readback), so a figure means the same
thing whether it was just measured or read from last week's log.

Latencies are exact nanoseconds; the percentiles a report shows are data (PERCENTILES and
the sets below), so a new one is a line here, not a change in every format. Pure: nothing
here reads a clock or touches the network.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import field
from typing import Protocol

from runner.core.columns import LATENCY_COLUMNS
from runner.core.lazymethods import dataclass
from runner.core.percentiles import PERCENTILES
from runner.stats.histogram import LatencyHistogram
from runner.stats.phases import PhaseTally

# Which percentiles each output shows, in its order. The summary's first keys are slow_cooker's;
# the interval line's (and so the intervalStats' and the gauges') are its columns', in
# runner.core.columns.
SUMMARY_PERCENTILES = ("p50", "p75", "p90", "p95", "p99", "p999")
PHASE_PERCENTILES = ("p50", "p90", "p99")  # the summary's `phases` section, and `soak compare`'s phase rows

# backendHeader: the backends shown by name, in the summary, the interval records and the
# metrics' backend label: the first BACKENDS_SHOWN (by count; in the metrics, as first seen, for
# a series must never change backend), the rest added up as OTHER_BACKENDS, as the url label's
# "other". A response without the header is NO_BACKEND's. Neither is a pod's name (a DNS label
# has no parentheses; a pod named "other" would share its count).
BACKENDS_SHOWN = 20
OTHER_BACKENDS = "other"
NO_BACKEND = "(none)"


@dataclass(frozen=True)
class Latency:
    """A span's response latencies in exact nanoseconds; all 0 when nothing came back.

    min, max, mean and the deviation are exact; a percentile is the highest value of its
    HDR bucket (0.1%), capped at the exact max, as Go's hdrhistogram reports it.
    """

    count: int = 0
    min_ns: int = 0
    max_ns: int = 0
    mean_ns: float = 0.0
    stdev_ns: float = 0.0
    percentiles: Mapping[str, int] = field(default_factory=dict)  # by Percentile.key

    @classmethod
    def of(cls, histogram: LatencyHistogram, keys: Iterable[str] = PERCENTILES) -> Latency:
        """The figures of a histogram, with the percentiles named by `keys`."""
        wanted = [PERCENTILES[key] for key in keys]
        found = histogram.percentiles(p.rank for p in wanted)
        return cls(histogram.count, histogram.min, histogram.max, histogram.mean, histogram.stdev(),
                   {p.key: found[p.rank] for p in wanted})

    def in_line(self) -> dict[str, int]:
        """The figures the interval line's latency columns show (LATENCY_COLUMNS), in exact ns, in order."""
        ends = {"min": self.min_ns, "max": self.max_ns}
        return {key: ends[key] if key in ends else self.percentiles[key] for key in LATENCY_COLUMNS}

    def ns(self, name: str) -> float:
        """A latency by name: a percentile key, or min, max or mean."""
        if name in self.percentiles:
            return float(self.percentiles[name])
        return float({"min": self.min_ns, "max": self.max_ns, "mean": self.mean_ns}[name])


def goal(sends_due: float) -> float:
    """The sends due in a span as its goal `t` is counted and shown: to 1/1000 of a send.

    Spans come from due times rounded to the nanosecond (and from clocks of shards that agree
    to microseconds), so 10 sends at 7 req/s span 10.000000003 sends' worth: unrounded, all
    10 answered would read as 99%.
    """
    return round(sends_due, 3)


def goal_percent(responses: int, due: float | None) -> float | None:
    """goal%: responses (good and bad) against the goal, at most 100; the one definition.

    None when the load has no schedule (a bench sends as fast as it can: nothing is due);
    100 when nothing was due. Failed sends are not responses, as in slow_cooker. The line
    and the summary show it truncated to a whole percent; the verdict and the gauges use it whole.
    """
    if due is None:
        return None
    if due <= 0:
        return 100.0
    return min(responses / due * 100, 100.0)


def errors_percent(bad: int, failed: int, requests: int) -> float | None:
    """errors%: bad and failed requests against all requests made; None when none were made."""
    return share_percent(bad + failed, requests)


def share_percent(part: int, whole: int) -> float | None:
    """A part of the requests (or of the due sends) as a percentage; None when there were none."""
    return part * 100 / whole if whole else None


class Outcomes(Protocol):
    """A span's sends by outcome: every one made is good, bad or failed."""

    @property
    def good(self) -> int: ...
    @property
    def bad(self) -> int: ...
    @property
    def failed(self) -> int: ...


class Sends:
    """The one definition of a span's requests and responses, for every record of its outcomes
    (Figures, runner.stats.recorder.Tally, the log scanner's rows)."""

    @property
    def requests(self: Outcomes) -> int:
        """Sends made: every one is good, bad or failed."""
        return self.good + self.bad + self.failed

    @property
    def responses(self: Outcomes) -> int:
        """Sends answered, with any status: good or bad."""
        return self.good + self.bad


class Counted(Outcomes, Protocol):
    """What figures are made of: a span's tally (runner.stats.recorder.Tally), read only."""

    @property
    def skipped(self) -> int: ...
    @property
    def late(self) -> int: ...
    @property
    def hash_mismatches(self) -> int: ...
    @property
    def errors(self) -> Mapping[str, int]: ...
    @property
    def statuses(self) -> Mapping[int, int]: ...
    @property
    def latency(self) -> LatencyHistogram: ...
    @property
    def backends(self) -> Mapping[str, int]: ...
    @property
    def connections_opened(self) -> int: ...
    @property
    def connections_closed(self) -> int: ...
    @property
    def phases(self) -> PhaseTally | None: ...


def shown_backends(counts: Mapping[str, int], shown: int = BACKENDS_SHOWN) -> dict[str, int]:
    """Responses per backend as shown: the `shown` backends with most (ties by name), then every
    other one's added up as OTHER_BACKENDS, last (with any the tally already counted there)."""
    named = sorted(((n, b) for b, n in counts.items() if b != OTHER_BACKENDS and n), key=lambda e: (-e[0], e[1]))
    kept = {backend: n for n, backend in named[:shown]}
    rest = sum(n for n, _ in named[shown:]) + counts.get(OTHER_BACKENDS, 0)
    return kept | ({OTHER_BACKENDS: rest} if rest else {})


def backends_reached(counts: Mapping[str, int]) -> int:
    """How many backends answered: the distinct names counted, neither OTHER_BACKENDS nor NO_BACKEND.

    Exact up to the names a tally keeps (runner.stats.recorder.BACKENDS_KEPT), and a lower bound beyond.
    """
    return sum(1 for backend, n in counts.items() if n and backend not in (OTHER_BACKENDS, NO_BACKEND))


def phase_figures(phases: PhaseTally | None, keys: Iterable[str] = PERCENTILES) -> dict[str, Latency]:
    """Each phase's latencies (PHASES' order), or none when no response was timed."""
    if phases is None or not phases.count:
        return {}
    keys = tuple(keys)
    return {name: Latency.of(histogram, keys) for name, histogram in phases.histograms().items()}


@dataclass(frozen=True)
class Figures(Sends):
    """One span of a run, an interval or the whole: its counts and the figures made from them.

    `due` is the span's goal `t`: the sends the schedule made due in it, to 1/1000 of a send
    (goal()); None when the load model has no schedule (bench). `due_seconds` is how long
    sends were due in it: the span, or less when sending stopped inside it.
    """

    good: int
    bad: int
    failed: int
    skipped: int
    late: int
    due: float | None
    due_seconds: float
    latency: Latency
    bhash: int = 0
    errors: Mapping[str, int] = field(default_factory=dict)  # failed sends by kind
    statuses: Mapping[int, int] = field(default_factory=dict)  # responses by status (the summary's statusCodes)
    backends: Mapping[str, int] = field(default_factory=dict)  # responses by backend, as shown (shown_backends)
    backends_reached: int = 0  # backends that answered (backends_reached); 0 without a backendHeader
    connections_opened: int = 0
    connections_closed: int = 0
    # Where the responses' time went (runner.stats.phases), by phase name in PHASES' order; empty when
    # none was timed (a per-URL span, or a record that has no phases).
    phases: Mapping[str, Latency] = field(default_factory=dict)

    @classmethod
    def of(cls, tally: Counted, due: float | None, due_ns: int, keys: Iterable[str] = PERCENTILES) -> Figures:
        """A tally's figures, `due` sends (unrounded, from the schedule) due over `due_ns`."""
        return cls(tally.good, tally.bad, tally.failed, tally.skipped, tally.late,
                   None if due is None else goal(due), due_ns / 1e9, Latency.of(tally.latency, keys),
                   tally.hash_mismatches, dict(sorted(tally.errors.items())), dict(sorted(tally.statuses.items())),
                   shown_backends(tally.backends),
                   backends_reached(tally.backends), tally.connections_opened, tally.connections_closed,
                   phase_figures(tally.phases, keys))

    @property
    def goal_percent(self) -> float | None:
        return goal_percent(self.responses, self.due)

    @property
    def errors_percent(self) -> float | None:
        return errors_percent(self.bad, self.failed, self.requests)

    @property
    def failed_percent(self) -> float | None:
        return share_percent(self.failed, self.requests)

    @property
    def bad_percent(self) -> float | None:
        return share_percent(self.bad, self.requests)

    def status_percent(self, codes: range) -> float | None:
        """The responses whose status is in `codes` (a class, 400 to 499, or one status) against all
        responses, good and bad; None when none came back. A failed send has no status: it is
        failed%'s, not a status rule's, so the share of 401s does not fall while the target is down."""
        return share_percent(sum(n for code, n in self.statuses.items() if code in codes), self.responses)

    @property
    def skipped_percent(self) -> float | None:
        """Skipped sends against every send that was due and went out or was skipped."""
        return share_percent(self.skipped, self.requests + self.skipped)

    @property
    def rate_target(self) -> float | None:
        """The rate asked for over the span, req/s: the sends due over the time they were due in."""
        if self.due is None or self.due_seconds <= 0:
            return None
        return self.due / self.due_seconds

    @property
    def rate_achieved(self) -> float:
        """Requests made per second of the time sends were due."""
        return self.requests / self.due_seconds if self.due_seconds > 0 else 0.0
