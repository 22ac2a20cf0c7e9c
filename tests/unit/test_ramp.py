"""Stages: a piecewise-linear rate's sends due, and when each is due, in exact integers.

Checked against an independent reference: the rate's integral as trapezoids of the rate
between its corners (exact for a linear rate), with due times found by bisection on it.
"""

from __future__ import annotations

import bisect
import itertools
import random
from fractions import Fraction

import pytest

from runner.core.units import NS_PER_MS, NS_PER_S
from runner.load.schedule import NEVER_NS, Grid, Ramp, Schedule, Skips, exact_rate

START = 1_000_000_000_000


def reference_sends_by(stages: list[tuple[int, Fraction]], t: int) -> Fraction:
    """The rate's integral over [0, t): trapezoids between the corners of the piecewise-linear rate."""
    total, begin, before = Fraction(0), 0, Fraction(0)
    for duration, target in stages:
        stop = min(t, begin + duration)
        if stop > begin:
            rate_at_stop = before + (target - before) * Fraction(stop - begin, duration)
            total += (before + rate_at_stop) * (stop - begin) / 2 / NS_PER_S
        begin += duration
        before = target
    return total


def reference_due(stages: list[tuple[int, Fraction]], n: int) -> int | None:
    """The first nanosecond t with n sends due by t, by bisection on the reference integral."""
    end = sum(d for d, _ in stages)
    if reference_sends_by(stages, end) < n:
        return None
    low, high = 0, end
    while low < high:
        mid = (low + high) // 2
        if reference_sends_by(stages, mid) >= n:
            high = mid
        else:
            low = mid + 1
    return low


RAMPS = [
    [(2 * NS_PER_S, 10)],  # 0 -> 10 req/s: 10 sends
    [(NS_PER_S, 100), (3 * NS_PER_S, 100), (NS_PER_S, 0)],  # up, hold, down: 400
    [(NS_PER_S, 7), (NS_PER_S, 3), (500 * NS_PER_MS, 0), (NS_PER_S, 0), (NS_PER_S, 5)],  # a pause in the middle
    [(333 * NS_PER_MS, "33.3"), (777 * NS_PER_MS, "0.5"), (1_234_567_891, "123.456")],  # fractions, odd spans
    [(1, 1000), (NS_PER_S, 1000)],  # a one-nanosecond ramp
    [(10 * NS_PER_S, 0), (NS_PER_S, 2)],  # nothing due for 10 s but send 0 at the start
]


def exact(stages: list[tuple[int, int | str]]) -> list[tuple[int, Fraction]]:
    return [(d, exact_rate(q)) for d, q in stages]


@pytest.mark.parametrize("stages", RAMPS)
def test_sends_due_are_the_rates_integral_exactly(stages: list[tuple[int, int | str]]) -> None:
    ramp, ref = Ramp.of(stages), exact(stages)
    end = ramp.duration_ns
    assert end == sum(d for d, _ in stages)
    rng = random.Random(24)
    moments = {0, 1, end - 1, end, end + 1, *itertools.accumulate(d for d, _ in stages)}
    moments |= {rng.randrange(0, end + 2) for _ in range(400)}
    for t in sorted(moments):
        assert ramp.sends_by(t) == reference_sends_by(ref, t), t
    assert ramp.total == reference_sends_by(ref, end)


@pytest.mark.parametrize("stages", RAMPS)
def test_each_send_is_due_when_its_count_is_reached(stages: list[tuple[int, int | str]]) -> None:
    ramp, ref = Ramp.of(stages), exact(stages)
    last = int(ramp.total)
    for n in [*range(min(last, 150) + 2), *range(max(0, last - 30), last + 3)]:
        expected = 0 if n == 0 else reference_due(ref, n)
        assert ramp.due_ns(n) == expected, n
        if expected is not None:
            assert ramp.last_send_by(expected) >= n  # due at that nanosecond, not before
            assert n == 0 or ramp.last_send_by(expected - 1) == n - 1 or ramp.due_ns(n - 1) == expected


@pytest.mark.parametrize("stages", RAMPS)
@pytest.mark.parametrize("interval_ns", [NS_PER_S, 250 * NS_PER_MS, 333_333_333])
def test_interval_goals_add_up_to_the_ramps_sends(stages: list[tuple[int, int | str]], interval_ns: int) -> None:
    ramp = Ramp.of(stages)
    grid = Grid(0, interval_ns)
    goals, k = [], 0
    while grid.end_of(k - 1) < ramp.duration_ns:
        goals.append(ramp.sends_between(grid.end_of(k - 1), min(grid.end_of(k), ramp.duration_ns)))
        k += 1
    assert sum(goals) == ramp.total  # exact fractions: no rounding anywhere


def test_a_ramp_up_hold_down_has_the_trapezoids_sends() -> None:
    # k6's example shape: 0 -> 100 req/s over 2 s, 100 for 5 s, down to 0 over 2 s: 100 + 500 + 100.
    ramp = Ramp.of([(2 * NS_PER_S, 100), (5 * NS_PER_S, 100), (2 * NS_PER_S, 0)])
    assert ramp.total == 700
    assert [ramp.sends_between(i * NS_PER_S, (i + 1) * NS_PER_S) for i in range(9)] == [
        25, 75, 100, 100, 100, 100, 100, 75, 25]
    assert ramp.rate_at(NS_PER_S) == 50 and ramp.rate_at(8 * NS_PER_S) == 50
    # The first second of a ramp from 0 to 100 over 2 s makes 25 due: send 25 is due at 1 s, not before.
    assert ramp.due_ns(25) == NS_PER_S and ramp.due_ns(24) < NS_PER_S


@pytest.mark.parametrize("stages", RAMPS[:4])
@pytest.mark.parametrize(("clients", "stride"), [(1, 1), (3, 1), (2, 3), (5, 2)])
def test_clients_and_shards_share_the_ramps_sends_exactly(stages: list[tuple[int, int | str]], clients: int,
                                                           stride: int) -> None:
    ramp = Ramp.of(stages)
    end = START + ramp.duration_ns
    owned: list[int] = []
    planned = 0
    for offset in range(stride):
        schedule = Schedule(START, float(ramp.peak_qps), clients, end, stride=stride, offset=offset, ramp=ramp)
        planned += schedule.planned_sends() or 0
        for client in range(clients):
            stop = schedule.end_k(client)
            assert stop is not None
            sends = [schedule.send_number(client, k) for k in range(stop)]
            assert all(schedule.in_run(n) for n in sends)
            assert not schedule.in_run(schedule.send_number(client, stop))
            owned += sends
            # The client's last due send by any moment, against a walk over its sends.
            for t in (START, START + 1, START + ramp.duration_ns // 3, end - 1, end + NS_PER_S):
                walked = max((k for k in range(stop + 1) if schedule.due_ns(schedule.send_number(client, k)) <= t),
                             default=-1)
                assert schedule.last_due_by(client, t) == walked
    # Every send due before the end belongs to exactly one client of one shard.
    assert sorted(owned) == list(range(planned))
    assert planned == Schedule(START, 1.0, 1, end, ramp=ramp).last_send_by(end - 1) + 1


def test_the_schedules_goal_is_the_ramps_and_skips_split_by_interval() -> None:
    ramp = Ramp.of([(2 * NS_PER_S, 100), (NS_PER_S, 0)])  # 100 sends, then 50 over the last second
    schedule = Schedule(START, 100.0, 2, START + ramp.duration_ns, ramp=ramp)
    grid = Grid(START, NS_PER_S)
    assert [schedule.sends_due(grid.end_of(k - 1), grid.end_of(k)) for k in range(3)] == [25.0, 75.0, 50.0]
    stop = schedule.end_k(0)
    assert stop is not None
    spans = Skips(schedule, 0, 0, stop).by_interval(grid)
    assert [index for index, _ in spans] == [0, 1, 2]
    # Client 0 owns the even sends: the 0..24 due in the first second are 13 of them (0, 2, .., 24).
    assert spans[0] == (0, 13) and sum(count for _, count in spans) == stop


@pytest.mark.parametrize("seed", range(40))
def test_random_ramps_agree_with_the_reference(seed: int) -> None:
    rng = random.Random(seed)
    stages = [(rng.choice([1, 7, NS_PER_MS, 10 * NS_PER_MS, rng.randrange(1, NS_PER_S)]),
               rng.choice([0, 1, 3, 50, 999, "0.25", "12.5", rng.randrange(0, 5000)])) for _ in range(rng.randrange(1, 6))]
    ramp, ref = Ramp.of(stages), exact(stages)
    assert ramp.total == reference_sends_by(ref, ramp.duration_ns)
    last = int(ramp.total)
    for n in {0, 1, 2, last, last + 1, *(rng.randrange(0, last + 2) for _ in range(30))}:
        assert ramp.due_ns(n) == (0 if n == 0 else reference_due(ref, n)), (stages, n)
    dues = [ramp.due_ns(n) for n in range(last + 1)]
    assert all(b is not None and a is not None and b >= a for a, b in zip(dues, dues[1:]))


def test_a_ramp_refuses_what_it_cannot_be() -> None:
    for bad in ([], [(0, 10)], [(NS_PER_S, -1)]):
        with pytest.raises(ValueError):
            Ramp.of(bad)


def test_the_last_sends_slot_ends_with_the_ramp() -> None:
    # 0 -> 3 req/s over 1 s makes 1.5 sends due: sends 0 and 1, and no send 2 ever. A run whose
    # totalRequests is spent on send 1 ends sending at the ramp's end, not at a send 2 that never comes.
    ramp = Ramp.of([(NS_PER_S, 3)])
    schedule = Schedule(START, 3.0, 1, START + NS_PER_S, ramp=ramp)
    assert schedule.planned_sends() == 2 and not schedule.in_run(2)
    assert schedule.slot_end_ns(1) == START + NS_PER_S
    assert schedule.slot_end_ns(0) == schedule.due_ns(1) < START + NS_PER_S


def assert_due_times_are_the_ramp(ramp: Ramp) -> None:
    """The ramp as data (what the native engine is handed): send n's due time at n, the last entry
    every later send's; and the two things schedule.h does with it, a look-up and a binary
    search, answer as the ramp does at every due time and a nanosecond either side."""
    table = ramp.due_times()
    last = int(ramp.total)
    assert len(table) == last + 2
    assert list(table[:-1]) == [ramp.due_ns(n) for n in range(last + 1)]
    assert table[-1] == ramp.duration_ns + NEVER_NS and ramp.due_ns(last + 1) is None
    for n in range(last + 3):  # schedule.h's soak_due
        assert table[min(n, len(table) - 1)] == (ramp.due_ns(n) if n <= last else ramp.duration_ns + NEVER_NS)
    moments = {-1, 0, ramp.duration_ns - 1, ramp.duration_ns, ramp.duration_ns + 1}
    moments |= {due + step for due in table[:-1] for step in (-1, 0, 1)}
    for t in sorted(moments):  # schedule.h's soak_estimate: the highest n due by t
        assert bisect.bisect_right(table, t) - 1 == ramp.last_send_by(t), t


@pytest.mark.parametrize("stages", RAMPS)
def test_the_ramps_due_times_are_its_sends_due_times_and_answer_as_it_does(stages: list[tuple[int, int | str]]) -> None:
    assert_due_times_are_the_ramp(Ramp.of(stages))


def test_random_ramps_due_times_answer_as_the_ramp_does() -> None:
    rng = random.Random(34)
    for _ in range(60):
        stages = [(rng.choice([1, 7, NS_PER_MS, rng.randrange(1, 3 * NS_PER_S)]),
                   rng.choice([0, 1, 3, 50, 999, "0.25", "12.5", rng.randrange(0, 2000)]))
                  for _ in range(rng.randrange(1, 5))]
        assert_due_times_are_the_ramp(Ramp.of(stages))
