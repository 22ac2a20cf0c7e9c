"""Splitting one run over several processes or pods (shards), with nothing lost in the split.

The run's sends are numbered 0, 1, 2, ... and send n is due at `start + n / qps`, whoever
sends it; shard i of N owns sends i, i + N, i + 2N, ... So the shards' rates add up to the
total exactly, whatever the numbers, and their sends interleave evenly. Counts that must
be whole (clients, a totalRequests budget) are split with the remainder going to the
first shards, so they add up exactly too. All shards start on one wall-clock instant, so
their interval boundaries coincide and their intervals can be merged.
"""

from __future__ import annotations

import math
import os
from collections.abc import Collection, Mapping, Sequence
from fractions import Fraction

from runner.core.errors import UsageError
from runner.core.lazymethods import dataclass
from runner.core.numbers import whole_number

# Kubernetes sets this in each pod of an Indexed Job: the pod's index, 0 to completions - 1.
INDEX_ENV = "JOB_COMPLETION_INDEX"


@dataclass(frozen=True)
class Shard:
    """Which part of a run this process sends: worker `worker` of `workers` in shard `index` of `count`.

    Shards are pods (or any processes started apart); workers are the local processes one
    of them runs. The split is in two steps, so a pod's workers together hold exactly the
    pod's part: shard s of S owns sends s, s + S, ...; its worker w of W owns every W-th
    of those, sends s + S*w, s + S*w + S*W, ...
    """

    index: int = 0
    count: int = 1
    worker: int = 0
    workers: int = 1

    @property
    def alone(self) -> bool:
        return self.count * self.workers == 1

    @property
    def stride(self) -> int:
        """Every how many sends of the run is this process's."""
        return self.count * self.workers

    @property
    def offset(self) -> int:
        """This process's first send number."""
        return self.index + self.count * self.worker

    def share(self, total: int) -> int:
        """This process's part of a whole number: remainders go one each to the first shards, then workers."""
        part = _part(total, self.index, self.count)
        return _part(part, self.worker, self.workers)

    def pod(self) -> Shard:
        """The shard this worker belongs to, all its workers together."""
        return Shard(self.index, self.count)

    def urls(self, wheel: Sequence[int] | int) -> Sequence[int]:
        """The URLs (indices, in order) this process sends to. Send n goes to URL wheel[n mod len(wheel)]
        (runner.config.targets; a count of URLs for the wheel of them in order), and this process
        sends offset, offset + stride, ...: those reach the wheel's places p with p = offset mod
        gcd(stride, len(wheel)), so a stride sharing a factor with the wheel's length skips the URLs
        of the other places (3 shards of 3 URLs: one URL each)."""
        turn = range(wheel) if isinstance(wheel, int) else wheel
        step = math.gcd(self.stride, len(turn)) or 1
        places = range(self.offset % step, len(turn), step)
        if isinstance(turn, range) and turn == range(len(turn)):
            return places  # the URLs in order: the places are the URLs
        return sorted({turn[p] for p in places})

    def part_of(self, wheel: Sequence[int] | int, urls: Collection[int]) -> Fraction:
        """This process's part of the run's sends to `urls` (indices), 0 to 1: what a figure of its
        sends to them is to be divided by to stand for the whole run's (a rate).

        Not 1/stride: a shard whose stride skips some wheel places (urls()) sends to fewer URLs,
        and more of each one's sends. Over lcm(stride, len(wheel)) sends, with g = gcd of the two,
        this process makes one send at each place p = offset mod g of the wheel, and the run
        makes stride / g at every place; so its part is g x (its places holding one of `urls`) /
        (stride x (all places holding one)). Exact, from the wheel alone: every shard works out
        the same parts, and they add up to 1. 0 when the wheel never sends to them.
        """
        turn = range(wheel) if isinstance(wheel, int) else wheel
        wanted = set(urls)
        step = math.gcd(self.stride, len(turn)) or 1
        everywhere = sum(1 for url in turn if url in wanted)
        if not everywhere:
            return Fraction(0)
        here = sum(1 for p in range(self.offset % step, len(turn), step) if turn[p] in wanted)
        return Fraction(step * here, self.stride * everywhere)

    def label(self) -> str:
        label = f"shard {self.index} of {self.count}" if self.count > 1 else ""
        if self.workers > 1:
            label += (", " if label else "") + f"worker {self.worker} of {self.workers}"
        return label


def _part(total: int, index: int, count: int) -> int:
    return total // count + (1 if index < total % count else 0)


ALONE = Shard()  # a run that is not split


def shard_of(shards: int, shard: int | None, workers: int = 1, worker: int = 0,
             environ: Mapping[str, str] = os.environ) -> Shard:
    """This process's part, from the settings, the Indexed Job's index, and the local worker.

    The Indexed Job's index counts only for a run split over shards: a plain Indexed Job
    (shards: 1) runs the whole load in every pod, as it would without the index.
    """
    index = shard if shard is not None else (completion_index(environ) if shards > 1 else 0)
    if not 0 <= index < shards:
        raise UsageError(f"shard: {index} is not allowed; must be from 0 to {shards - 1} (shards: {shards})")
    return Shard(index, shards, worker, workers)


def completion_index(environ: Mapping[str, str]) -> int:
    """The Indexed Job's index of this pod (0 outside one); a UsageError if it is not a whole number."""
    value = environ.get(INDEX_ENV, "").strip()
    if not value:
        return 0
    index = whole_number(value)
    if index is None or value[0] in "+-":  # str.isdigit() let `²` through to int(), a ValueError traceback
        raise UsageError(f"{INDEX_ENV}: {value!r} is not allowed; must be a whole number")
    return index


def check_split(shard: Shard, concurrency: int, total_requests: int = 0, max_in_flight: int | None = None,
                no_latency_summary: bool = False) -> None:
    """Every process of the split needs at least one client, one request of a totalRequests
    (a share of 0 would read as no limit at all) and one of maxInFlight (the open model's);
    and the shards' summaries, which the merge reads."""
    for name, value in (("concurrency", concurrency), ("totalRequests", total_requests),
                        ("maxInFlight", max_in_flight)):
        if value and value < shard.stride:
            raise UsageError(f"{name}: {value} is not allowed; must be at least shards x workers "
                             f"({shard.count} x {shard.workers}), so that every process has its share")
    if no_latency_summary and shard.count > 1:
        raise UsageError("noLatencySummary: true is not allowed with shards: soak merge needs each shard's summary")


def aligned_start(now_wall: float, interval_s: float) -> float:
    """The wall-clock instant the shards of one run start at: the next multiple of the interval.

    Each shard works it out alone, from its own clock, so shards started within the same
    interval (the pods of one Job start within seconds) agree on it, and their interval
    boundaries coincide. A shard started just before a boundary starts at that boundary,
    a moment later, rather than an interval later.
    """
    return math.ceil(now_wall / interval_s) * interval_s
