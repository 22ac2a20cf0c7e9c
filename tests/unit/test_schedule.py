"""The schedule (when each send is due, who sends it) and the reporting grid: pure arithmetic."""

from __future__ import annotations

import itertools
import random
from collections import Counter
from fractions import Fraction

import pytest

from runner.core.units import NS_PER_S
from runner.load.schedule import Constant, Grid, Ramp, RateShape, Schedule, Skips
from runner.stats.figures import goal

START = 1_000_000_000_000  # an arbitrary monotonic reading


# --- due times -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("qps", "n", "offset_ns"),
    [
        (100, 0, 0),
        (100, 1, 10_000_000),
        (100, 100, NS_PER_S),
        (100, 6000, 60 * NS_PER_S),
        (1, 3, 3 * NS_PER_S),
        (1000, 7, 7_000_000),
        (0.5, 1, 2 * NS_PER_S),
        (0.5, 3, 6 * NS_PER_S),
        (2.5, 1, 400_000_000),
        (2.5, 5, 2 * NS_PER_S),
        (3, 1, 333_333_333),  # 333333333.33 rounds down
        (3, 2, 666_666_667),  # 666666666.67 rounds up
        (3, 3, NS_PER_S),
        (7, 1, 142_857_143),
        (1_000_000, 1, 1_000),
        (1_000_000, 999_999, 999_999_000),
    ],
)
def test_send_n_is_due_at_start_plus_n_over_qps(qps: float, n: int, offset_ns: int) -> None:
    schedule = Schedule(START, qps, 5)
    due = schedule.due_ns(n)
    assert type(due) is int
    assert due == START + offset_ns


@pytest.mark.parametrize("qps", [1, 3, 7, 13, 0.3, 0.7, 2.5, 33.3, 99.9, 123.456, 1e6])
def test_due_times_are_the_exact_rounded_rational(qps: float) -> None:
    schedule = Schedule(0, qps, 1)
    exact_rate = Fraction(qps)
    for n in range(0, 2000):
        # The exact time rounded to the nearest nanosecond.
        assert schedule.due_ns(n) == round(Fraction(n * NS_PER_S) / exact_rate), (qps, n)
    day = int(86_400 * qps)  # the send due a day into the run
    for n in itertools.chain(range(day - 50, day + 1), range(day // 24 - 5, day // 24 + 5)):
        # A day into a run float division may be one off the rounded exact time, never more.
        assert abs(schedule.due_ns(n) - Fraction(n * NS_PER_S) / exact_rate) < 1, (qps, n)


@pytest.mark.parametrize("qps", [0.5, 1, 3, 100, 33.3, 1e6])
def test_due_times_strictly_increase_and_do_not_drift(qps: float) -> None:
    schedule = Schedule(START, qps, 3)
    dues = [schedule.due_ns(n) for n in range(5000)]
    assert all(b > a for a, b in zip(dues, dues[1:]))
    # Absolute due times: the 5000th send is where 5000/qps says, not a sum of rounded steps.
    assert abs(schedule.due_ns(5000) - (START + 5000 * NS_PER_S / qps)) <= 1


def test_due_times_are_independent_of_the_number_of_clients() -> None:
    one, many = Schedule(START, 40, 1), Schedule(START, 40, 8)
    assert [one.due_ns(n) for n in range(100)] == [many.due_ns(n) for n in range(100)]


# --- clients and URLs ----------------------------------------------------------------------


@pytest.mark.parametrize("clients", [1, 2, 3, 5, 7, 16])
def test_client_c_owns_sends_c_c_plus_C_and_so_on(clients: int) -> None:
    schedule = Schedule(START, 100, clients)
    owned: dict[int, int] = {}
    for c in range(clients):
        mine = [schedule.send_number(c, k) for k in range(50)]
        assert mine == list(range(c, c + 50 * clients, clients))
        for n in mine:
            assert n not in owned, f"send {n} owned by clients {owned.get(n)} and {c}"
            owned[n] = c
    # Together the clients cover every send exactly once.
    assert sorted(owned)[: 50 * clients] == list(range(50 * clients))


def test_each_client_runs_at_qps_over_clients() -> None:
    schedule = Schedule(START, 100, 5)
    for c in range(5):
        dues = [schedule.due_ns(schedule.send_number(c, k)) for k in range(20)]
        assert {b - a for a, b in zip(dues, dues[1:])} == {50_000_000}  # 20 req/s each
        assert dues[0] == START + c * 10_000_000  # clients interleave, 10 ms apart


@pytest.mark.parametrize(("clients", "urls"), [(1, 3), (4, 3), (5, 2), (3, 3), (6, 4), (7, 1)])
def test_urls_get_every_len_urls_th_send_of_the_run(clients: int, urls: int) -> None:
    """URL i gets sends i, i + U, ...: an even split whatever the number of clients."""
    schedule = Schedule(START, 100, clients)
    per_url = [0] * urls
    for c in range(clients):
        for k in range(12 * urls):
            n = schedule.send_number(c, k)
            if n < 12 * urls * clients:
                per_url[n % urls] += 1
    assert per_url == [12 * clients] * urls


# --- end of sending ------------------------------------------------------------------------


def test_in_run_ends_before_the_end_boundary() -> None:
    schedule = Schedule(START, 100, 5, end_ns=START + NS_PER_S)
    assert schedule.in_run(0)
    assert schedule.in_run(99)  # due 990 ms after the start
    assert schedule.due_ns(100) == START + NS_PER_S
    assert not schedule.in_run(100)  # due exactly at the end: not sent
    assert not schedule.in_run(101)
    assert sum(schedule.in_run(n) for n in range(1000)) == 100


def test_in_run_without_an_end_is_always_true() -> None:
    schedule = Schedule(START, 100, 5)
    assert all(schedule.in_run(n) for n in (0, 1, 10**6, 10**9))


def test_in_run_with_a_fractional_rate() -> None:
    schedule = Schedule(START, 2.5, 1, end_ns=START + 2 * NS_PER_S)
    assert [n for n in range(10) if schedule.in_run(n)] == [0, 1, 2, 3, 4]  # send 5 is due at exactly 2 s


def test_in_run_end_at_start_means_nothing_is_sent() -> None:
    schedule = Schedule(START, 100, 5, end_ns=START)
    assert not schedule.in_run(0)


# --- last_due_by ---------------------------------------------------------------------------


def _brute_last_due_by(schedule: Schedule, client: int, now: int) -> int:
    last = -1
    k = 0
    while schedule.due_ns(schedule.send_number(client, k)) <= now:
        last = k
        k += 1
    return last


def test_last_due_by_matches_brute_force() -> None:
    checked = 0
    for qps in (1, 3, 7, 10, 100, 0.5, 0.3, 2.5, 33.3, 99.9, 1234.5):
        for clients in (1, 2, 3, 5, 8):
            schedule = Schedule(START, qps, clients)
            horizon = int(20 * clients * NS_PER_S / qps)
            # Every due time, one ns either side of it, and points in between.
            moments = {START - 1, START, START + 1, START + horizon}
            for n in range(20 * clients):
                due = schedule.due_ns(n)
                moments.update((due - 1, due, due + 1))
            moments.update(START + horizon * i // 97 for i in range(97))
            for client in range(clients):
                for now in moments:
                    assert schedule.last_due_by(client, now) == _brute_last_due_by(schedule, client, now), (
                        qps, clients, client, now)
                    checked += 1
    assert checked > 10_000


def test_last_due_by_before_the_start_is_minus_one() -> None:
    schedule = Schedule(START, 100, 5)
    for client in range(5):
        assert schedule.last_due_by(client, START - 1) == -1
        assert schedule.last_due_by(client, START - 3600 * NS_PER_S) == -1
    assert schedule.last_due_by(0, START) == 0  # send 0 is due at the start itself
    assert schedule.last_due_by(1, START) == -1


def test_last_due_by_exactly_at_a_due_time_includes_it() -> None:
    schedule = Schedule(START, 3, 2)  # send n due at n/3 s; client 1 owns 1, 3, 5, ...
    due_of_5 = schedule.due_ns(5)  # client 1's k = 2
    assert schedule.last_due_by(1, due_of_5) == 2
    assert schedule.last_due_by(1, due_of_5 - 1) == 1


def test_last_send_by_matches_brute_force() -> None:
    for qps in (3, 10, 0.7, 33.3, 100):
        schedule = Schedule(START, qps, 5)
        for t in range(START - NS_PER_S, START + 5 * NS_PER_S, 7_777_777):
            n = schedule.last_send_by(t)
            assert n == max((m for m in range(0, 600) if schedule.due_ns(m) <= t), default=-1), (qps, t)
        assert schedule.last_send_by(schedule.due_ns(7)) == 7 and schedule.last_send_by(schedule.due_ns(7) - 1) == 6


# --- catch_up ------------------------------------------------------------------------------


def test_catch_up_not_yet_due_sends_k_and_skips_nothing() -> None:
    schedule = Schedule(START, 100, 5)  # each client every 50 ms
    due_k3 = schedule.due_ns(schedule.send_number(2, 3))
    assert schedule.catch_up(2, 3, due_k3 - 1, due_k3 - 1) == (3, 0)
    assert schedule.catch_up(2, 3, START - 10 * NS_PER_S, START - 10 * NS_PER_S) == (3, 0)


def test_catch_up_exactly_due_sends_k() -> None:
    schedule = Schedule(START, 100, 5)
    due_k3 = schedule.due_ns(schedule.send_number(2, 3))
    assert schedule.catch_up(2, 3, due_k3, due_k3) == (3, 0)


def test_catch_up_newest_overdue_is_sent_older_ones_skipped() -> None:
    schedule = Schedule(START, 100, 5)  # client 0: k due at START + k * 50 ms
    # Free 170 ms in: k = 1, 2, 3 are overdue (50, 100, 150 ms); k = 3 goes out, 1 and 2 are skipped.
    assert schedule.catch_up(0, 1, START + 170_000_000, START + 170_000_000) == (3, 2)
    # Only its own next send overdue: no skip.
    assert schedule.catch_up(0, 1, START + 60_000_000, START + 60_000_000) == (1, 0)
    # At exactly the due time of k = 4: k = 4 is sent, 1, 2, 3 are skipped.
    assert schedule.catch_up(0, 1, START + 200_000_000, START + 200_000_000) == (4, 3)


def test_catch_up_never_counts_sends_at_or_after_the_end_as_skipped() -> None:
    end = START + 200_000_000
    schedule = Schedule(START, 100, 5, end_ns=end)  # client 0 sends k = 0..3 (0, 50, 100, 150 ms)
    # Free long after the end: k = 2 and 3 were in the run and are skipped; nothing goes out late.
    k, skipped = schedule.catch_up(0, 2, end + 10 * NS_PER_S, end + 10 * NS_PER_S)
    assert (k, skipped) == (4, 2)
    assert not schedule.in_run(schedule.send_number(0, k))
    # Free at the end itself, with its own next send overdue: skipped too, not sent.
    assert schedule.catch_up(0, 3, end, end) == (4, 1)
    # Free just before the end: the newest overdue send still goes out, within the run.
    assert schedule.catch_up(0, 2, end - 1, end - 1) == (3, 1)
    # Free after the end with the next send already outside the run: nothing to skip.
    k, skipped = schedule.catch_up(0, 4, end + 10 * NS_PER_S, end + 10 * NS_PER_S)
    assert skipped == 0
    assert k == 4 and not schedule.in_run(schedule.send_number(0, k))


def _brute_catch_up(schedule: Schedule, client: int, k: int, free: int, now: int) -> tuple[int, int]:
    def due_by(t: int) -> list[int]:
        overdue = itertools.takewhile(lambda j: schedule.due_ns(schedule.send_number(client, j)) <= t,
                                      itertools.count(k))
        return [j for j in overdue if schedule.in_run(schedule.send_number(client, j))]

    if schedule.end_ns is not None and now >= schedule.end_ns:
        late = due_by(now)
        return (max(late) + 1, max(late) + 1 - k) if late else (k, 0)  # sending is over: all skipped
    busy = due_by(min(free, now))  # due while the previous request was in flight: the server's doing
    if not busy:
        return k, 0  # due after it came back, if at all: goes out, late or not
    return max(busy), max(busy) - k


def test_catch_up_matches_brute_force() -> None:
    for qps, clients, end_after in itertools.product((3, 10, 0.7, 33.3), (1, 3, 4), (None, 2, 7)):
        end = None if end_after is None else START + end_after * NS_PER_S
        schedule = Schedule(START, qps, clients, end_ns=end)
        for client in range(clients):
            for k in range(0, 8):
                for now in (START + i * 137_000_000 for i in range(0, 90, 7)):
                    for free in (now, now - 290_000_000, now - 3 * NS_PER_S, START - NS_PER_S):
                        got = schedule.catch_up(client, k, free, now)
                        assert got == _brute_catch_up(schedule, client, k, free, now), \
                            (qps, clients, end_after, client, k, free, now)
                        sent, skipped = got
                        assert skipped >= 0
                        # Every skipped send was part of the run and due while busy, or sending is over.
                        for j in range(sent - skipped, sent):
                            n = schedule.send_number(client, j)
                            assert schedule.in_run(n) and schedule.due_ns(n) <= now
                            assert schedule.due_ns(n) <= free or not schedule.before_end(now)


def test_catch_up_a_send_due_after_the_response_goes_out_late_not_skipped() -> None:
    schedule = Schedule(START, 100, 5)  # client 0: k due at START + k * 50 ms
    # The response came back at 40 ms, but the client got round to it only at 170 ms: k = 1, 2, 3
    # fell due after it was free, so k = 1 goes out (late) and nothing is skipped.
    assert schedule.catch_up(0, 1, START + 40_000_000, START + 170_000_000) == (1, 0)
    # Back at 120 ms (k = 1, 2 due while in flight), free to send at 170 ms: k = 2 goes, 1 skipped.
    assert schedule.catch_up(0, 1, START + 120_000_000, START + 170_000_000) == (2, 1)


# --- the reporting grid --------------------------------------------------------------------


def test_grid_end_of() -> None:
    grid = Grid(START, 10 * NS_PER_S)
    assert grid.end_of(0) == START + 10 * NS_PER_S
    assert grid.end_of(5) == START + 60 * NS_PER_S
    assert grid.end_of(-1) == START  # the end of "interval -1" is the start of interval 0


def test_grid_index() -> None:
    grid = Grid(START, 10 * NS_PER_S)
    assert grid.index(START) == 0
    assert grid.index(START + 10 * NS_PER_S - 1) == 0
    assert grid.index(START + 10 * NS_PER_S) == 1  # a boundary belongs to the interval it starts
    assert grid.index(START + 25 * NS_PER_S) == 2
    assert grid.index(START + 3600 * NS_PER_S) == 360
    assert grid.index(START - 1) == 0  # before the start: interval 0
    assert grid.index(0) == 0


def test_grid_index_and_end_of_agree() -> None:
    grid = Grid(START, 1_500_000_000)
    for k in range(200):
        assert grid.index(grid.end_of(k) - 1) == k
        assert grid.index(grid.end_of(k)) == k + 1
        assert grid.index(grid.end_of(k - 1)) == k


# --- goal ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("qps", "span_ns", "expected"),
    [
        (100, 60 * NS_PER_S, 6000),
        (100, NS_PER_S, 100),
        (100, 2 * NS_PER_S, 200),
        (100, 1_500_000_000, 150),
        (10, 500_000_000, 5),
        (2.5, 2 * NS_PER_S, 5),
        (0.5, 10 * NS_PER_S, 5),
        (100, 0, 0),
        (100, 1_234_000_000, 123.4),
        (3, 1_000_000_000, 3),
    ],
)
def test_goal(qps: float, span_ns: int, expected: float) -> None:
    assert goal(Schedule(0, qps, 1).sends_due(0, span_ns)) == pytest.approx(expected, abs=1e-9)


def test_goal_is_not_truncated_to_whole_seconds() -> None:
    """slow_cooker truncated the interval to whole seconds; ours is exact."""
    assert goal(Schedule(0, 100, 1).sends_due(0, 2_900_000_000)) == pytest.approx(290)


@pytest.mark.parametrize("stride", [1, 2, 3, 7])
def test_the_sends_due_in_adjacent_spans_add_up_to_both(stride: int) -> None:
    """A shard is due its share of the rate; splitting a span anywhere keeps the total."""
    schedule = Schedule(10**9, 7.0, 3, stride=stride, offset=stride - 1)
    for cut in (10**9, 1_234_567_891, 2 * 10**9, 3 * 10**9):
        assert (schedule.sends_due(10**9, cut) + schedule.sends_due(cut, 3 * 10**9)
                == pytest.approx(schedule.sends_due(10**9, 3 * 10**9)))
    assert schedule.sends_due(10**9, 3 * 10**9) == pytest.approx(14 / stride)
    assert schedule.sends_due(3 * 10**9, 10**9) == 0  # a span that ends before it starts holds nothing


@pytest.mark.parametrize(("qps", "run_s", "stride", "expected"), [
    (100, 60, 1, 6000), (100, 60, 3, 2000), (7, 1, 2, 4), (0.5, 3, 1, 2),
])
def test_planned_sends(qps: float, run_s: int, stride: int, expected: int) -> None:
    assert Schedule(0, qps, 1, run_s * NS_PER_S, stride=stride).planned_sends() == expected
    assert Schedule(0, qps, 1, None, stride=stride).planned_sends() is None


# --- skipped sends in bulk -------------------------------------------------------------------


def _brute_by_interval(skips: Skips, grid: Grid) -> list[tuple[int, int]]:
    counts: Counter[int] = Counter()
    for k in range(skips.first, skips.end):
        counts[grid.index(skips.schedule.due_ns(skips.schedule.send_number(skips.client, k)))] += 1
    return sorted(counts.items())


def test_skips_by_interval_match_brute_force() -> None:
    """Every run of skipped sends splits by due time exactly as counting them one by one does:
    rates whole and fractional, clients and shards, runs that start before the grid, that cross
    a boundary on a due time or one ns either side, and that span many intervals."""
    checked = 0
    for qps in (1, 3, 7, 100, 0.3, 2.5, 33.3, 1e6):
        for clients, stride, offset in ((1, 1, 0), (3, 1, 0), (2, 3, 1), (5, 2, 0)):
            schedule = Schedule(START, qps, clients, stride=stride, offset=offset)
            slot = NS_PER_S / qps
            for interval_ns in (round(slot * clients * stride), round(slot * 7.5) + 1, NS_PER_S, 1):
                interval_ns = max(interval_ns, 1)
                for grid_start in (START, START + 1, START - interval_ns // 3, schedule.due_ns(3 * stride)):
                    grid = Grid(grid_start, interval_ns)
                    for client in range(clients):
                        for first, end in ((0, 1), (0, 40), (3, 4), (5, 29), (17, 17), (1, 60)):
                            skips = Skips(schedule, client, first, end)
                            assert skips.by_interval(grid) == _brute_by_interval(skips, grid), (
                                qps, clients, stride, offset, interval_ns, grid_start, client, first, end)
                            checked += 1
    assert checked > 5_000


def test_a_million_skips_split_in_as_many_steps_as_intervals() -> None:
    """At a million sends a second, two seconds of skips are two intervals' arithmetic, not 2e6 steps."""
    schedule = Schedule(START, 1e6, 1)
    grid = Grid(START, NS_PER_S)
    skips = Skips(schedule, 0, 1, 2_000_000)
    assert skips.count == 1_999_999
    assert skips.by_interval(grid) == [(0, 999_999), (1, 1_000_000)]


def test_end_k_is_the_first_send_not_in_the_run() -> None:
    for qps in (1, 3, 0.7, 33.3, 1e6):
        for clients in (1, 4):
            end = START + 2 * NS_PER_S + 12_345
            schedule = Schedule(START, qps, clients, end, stride=2, offset=1)
            for client in range(clients):
                k = schedule.end_k(client)
                assert k is not None
                assert not schedule.in_run(schedule.send_number(client, k)), (qps, clients, client)
                assert k == 0 or schedule.in_run(schedule.send_number(client, k - 1)), (qps, clients, client)
    assert Schedule(START, 10, 2).end_k(1) is None


def test_last_in_run_matches_a_walk_back() -> None:
    """The highest send due by t that is in the run, from k on: arithmetic, as the one-by-one walk says."""
    for qps in (3, 100, 0.7, 1e5):
        schedule = Schedule(START, qps, 3, START + NS_PER_S + 7)
        for client in range(3):
            for k in (0, 2, 50):
                for t in (START - 1, START, START + NS_PER_S // 2, START + NS_PER_S + 7, START + 5 * NS_PER_S):
                    last = schedule.last_due_by(client, t)
                    while last >= k and not schedule.in_run(schedule.send_number(client, last)):
                        last -= 1
                    assert schedule.last_in_run(client, k, t) == max(last, k - 1), (qps, client, k, t)


def test_planned_sends_are_the_shards_sends_due_before_the_end() -> None:
    """Against counting them one by one, over rates, ends and shards where floats round."""
    rng = random.Random(20261201)
    for _ in range(400):
        qps, run_ns = rng.choice([1, 3, 7, 100, 100 / 3, 0.5, 1234.5]), rng.randrange(1, 5 * NS_PER_S)
        stride = rng.randint(1, 5)
        offset = rng.randrange(stride)
        schedule = Schedule(10**9, qps, 1, 10**9 + run_ns, stride=stride, offset=offset)
        brute = sum(1 for n in range(offset, int(qps * run_ns / NS_PER_S) + 3, stride) if schedule.in_run(n))
        assert schedule.planned_sends() == brute, (qps, run_ns, stride, offset)


SHAPES: list[RateShape] = [Constant(7.0), Constant(1 / 3), Constant(1000.0), Ramp.of([(NS_PER_S, 10), (2 * NS_PER_S, 3)]),
                           Ramp.of([(NS_PER_S // 2, 0), (NS_PER_S, "33.3")])]


@pytest.mark.parametrize("shape", SHAPES, ids=repr)
def test_each_rate_shape_answers_what_a_schedule_asks_alike(shape: RateShape) -> None:
    """The Schedule asks a shape three things; a new shape is one class that answers them so: the
    last send due by t is the highest n whose due time is at or before t, due times never go back,
    and the goals of adjacent spans add up to the goal of both."""
    dues = [shape.send_due_ns(n) for n in range(40)]
    assert dues == sorted(dues) and dues[0] == 0
    for t in sorted({*dues, *(d - 1 for d in dues), *(d + 1 for d in dues), -1} - {dues[-1], dues[-1] + 1}):
        assert shape.last_send_by(t) == max((n for n, d in enumerate(dues) if d <= t), default=-1)
    for a, b, c in [(0, NS_PER_S // 3, NS_PER_S), (NS_PER_S, 2 * NS_PER_S, 3 * NS_PER_S + 7)]:
        assert shape.share_due(a, b, 2) + shape.share_due(b, c, 2) == pytest.approx(shape.share_due(a, c, 2))


def test_a_schedule_keeps_its_ramp_else_its_constant_rate() -> None:
    ramp = Ramp.of([(NS_PER_S, 10)])
    assert Schedule(0, 5.0, 1).shape == Constant(5.0)
    assert Schedule(0, 10.0, 1, ramp=ramp).shape is ramp
    assert Schedule(100, 5.0, 1).due_ns(3) == 100 + Constant(5.0).send_due_ns(3)
