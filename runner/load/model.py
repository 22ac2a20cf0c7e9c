"""The load model: how sends relate to the schedule, as one value made where the run is built.

    Closed  slow_cooker's: each client has one request in flight; sends that fall due while it
            is in flight are skipped (and counted), and latency runs from the actual send.
    Open    wrk2's: every send goes out at its due time whatever is in flight, up to
            max_in_flight; latency runs from the due time (no coordinated omission), and the
            latency from the actual send is kept beside it.
    Bench   ab's: no schedule at all; each client sends again as soon as it is answered, so
            nothing is ever due, skipped or late, and there is no goal.

Everything that differs between them is asked of this one value, in the spirit of vegeta's
Pacer handed to one Attack: which loop the engine runs, which latency a response counts
with, whether the run has a schedule (and so a goal, send lag and lateness), and whether
ab's per-phase figures are kept. No mode flag travels past the place the run is built
(runner.run.build), so a new model (a ramp, stages) is a new value here, not a boolean in
every layer.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import cache
from typing import TYPE_CHECKING, ClassVar

from runner.config.settings import Pacing
from runner.core.lazymethods import dataclass
from runner.load.result import Result
from runner.load.schedule import Ramp, Schedule
from runner.load.shards import Shard

if TYPE_CHECKING:
    from runner.load.handoff import Handoff
    from runner.load.request import Request


@dataclass(frozen=True)
class Closed:
    """One request in flight per client; what falls due meanwhile is skipped. The default."""

    precise: bool = False  # sleep to just before each due time, then yield until it (costs a core)

    name: ClassVar[str] = "closed"
    paced: ClassVar[bool] = True  # sends are due on a schedule: a goal, send lag, lateness
    corrected: ClassVar[bool] = False  # latency from the due time rather than the actual send
    ab_phases: ClassVar[bool] = False  # ab's per-phase timings (connect, processing, waiting)

    def latency_ns(self, result: Result) -> int:
        """The latency a response counts with: slow_cooker's, from the actual send."""
        return result.latency_ns


@dataclass(frozen=True)
class Open:
    """Every send at its due time, up to max_in_flight across this process's clients."""

    max_in_flight: int
    precise: bool = False

    name: ClassVar[str] = "open"
    paced: ClassVar[bool] = True
    corrected: ClassVar[bool] = True
    ab_phases: ClassVar[bool] = False

    def latency_ns(self, result: Result) -> int:
        """From when the send was due: a server that stalls is charged for the wait it caused."""
        return result.corrected_latency_ns


@dataclass(frozen=True)
class Bench:
    """ab's closed loop: no pacing, no schedule, no goal."""

    name: ClassVar[str] = "bench"
    paced: ClassVar[bool] = False
    corrected: ClassVar[bool] = False
    ab_phases: ClassVar[bool] = True
    precise: ClassVar[bool] = False

    def latency_ns(self, result: Result) -> int:
        return result.latency_ns


LoadModel = Closed | Open | Bench


@dataclass(frozen=True)
class Load:
    """What the engine must do, beyond the schedule itself."""

    requests: list[Request]  # one per URL; send n goes to requests[wheel[n % len(wheel)]]
    model: LoadModel  # which loop the clients run
    total_requests: int = 0  # stop after this many sends; 0: no limit
    hash_sample_rate: float = 0.0
    take_sessions: Handoff | None = None  # the clients' sessions come from here (a warm-up's), not the transport
    give_sessions: Handoff | None = None  # ... and go here when they are done, instead of being closed
    wheel: Sequence[int] | None = None  # the URL of each send of a turn (runner.config.targets); None: in order

    @property
    def turn(self) -> Sequence[int]:
        return self.wheel if self.wheel is not None else range(len(self.requests))


def model_of(pace: Pacing, max_in_flight: int | None = None) -> LoadModel:
    """The model the settings ask for; `max_in_flight`: this process's share of the run's, when split."""
    if pace.mode == "bench":
        return Bench()
    if pace.load_model == "open":
        return Open(pace.max_in_flight if max_in_flight is None else max_in_flight, pace.precise)
    return Closed(pace.precise)


def model_for(pace: Pacing, shard: Shard) -> LoadModel:
    """The model of one process of a run: its share of the run's maxInFlight (at least one)."""
    return model_of(pace, max(1, shard.share(pace.max_in_flight)))


def ramp_of(pace: Pacing) -> Ramp | None:
    """The run's stages as a ramp (runner.load.schedule.Ramp); None for a constant rate. One ramp for
    the same stages, whoever asks: what it has worked out (its due times, for the native engine,
    worked out as the engine is chosen) is not worked out again when the run's schedule is made."""
    return _ramp(pace.stages) if pace.stages else None


@cache
def _ramp(stages: tuple[tuple[int, float], ...]) -> Ramp:
    return Ramp.of(stages)


def schedule_of(pace: Pacing, shard: Shard, start_ns: int) -> Schedule:
    """When each of one process's sends is due, from `start_ns`: its share of the run's clients
    and sends, until the run's planned end (if it has one), at the constant rate or the stages' ramp."""
    end_ns = start_ns + pace.run_ns if pace.run_ns is not None else None
    return Schedule(start_ns, pace.qps, shard.share(pace.concurrency), end_ns, stride=shard.stride,
                    offset=shard.offset, ramp=ramp_of(pace))


def warmup_rate(pace: Pacing) -> float:
    """The rate a warm-up sends at: the run's, or with stages, the first stage's target."""
    return pace.stages[0][1] if pace.stages else pace.qps


def warmup_schedule_of(pace: Pacing, shard: Shard, start_ns: int) -> Schedule:
    """The warm-up's schedule: the run's clients and shards at warmup_rate, for warmup, from `start_ns`."""
    return Schedule(start_ns, warmup_rate(pace), shard.share(pace.concurrency), start_ns + pace.warmup_ns,
                    stride=shard.stride, offset=shard.offset)
