"""What the client's own delay may have changed in a span's figures (runner.stats.client.pace_of).

The rule, figure by figure, against what was reported: on a node busy with other work nearly
every interval was said to be the client's pace, also at 100% of its goal, on a target that
never answers and on a server slow on purpose; here each case says what the client's delay
could, and could not, have changed. The latencies at best are checked against brute force.
"""

from __future__ import annotations

import itertools
import random

import pytest

from runner.core.percentiles import PERCENTILES
from runner.load.result import ErrorKind, Result
from runner.stats.client import (
    LATE_NS,
    SATURATED_LAG_NS,
    TIMEOUT_SHARE,
    ClientFigures,
    Pace,
    PaceTerms,
    pace_of,
    run_pace,
)
from runner.stats.figures import Figures
from runner.stats.histogram import LatencyHistogram
from runner.stats.recorder import Tally, phased

MS = 1_000_000
SECOND = 1_000_000_000
CLOSED = PaceTerms(room=5)  # 5 clients: at 100 req/s, 50 ms between a client's sends
GAP = 50 * MS


def lagging(lag: int, cpu: float = 0.05) -> ClientFigures:
    """A client whose loop lagged up to `lag` (and mostly not at all)."""
    histogram = LatencyHistogram()
    histogram.record(min(lag, 100_000), 99)
    histogram.record(lag)
    return ClientFigures(cpu, histogram)


def answered(*latencies: int, kernel: bool = True, opened: int = 0) -> Tally:
    """Responses of these latencies, timed by the kernel (or the loop); `opened` of them opened a connection."""
    tally = Tally()
    for i, latency in enumerate(latencies):
        tally.add(Result(status=200, kernel_clock=kernel, connected_ns=1 if i < opened else 0), latency, 0)
    return tally


def failing(tally: Tally, kind: ErrorKind, n: int) -> Tally:
    for _ in range(n):
        tally.add(Result(error=kind, error_text=str(kind)), 0, 0)
    return tally


def judged(tally: Tally, client: ClientFigures, terms: PaceTerms = CLOSED, due: float = 100.0,
           seconds: int = 1) -> Pace:
    """pace_of over a span of `seconds` in which `due` sends were due."""
    return pace_of(tally, Figures.of(tally, due, seconds * SECOND), client, terms)


# --- latency -------------------------------------------------------------------------------------


@pytest.mark.parametrize("lag", [0, 3 * MS, 40 * MS, 2 * SECOND])
def test_kernel_timed_answers_on_kept_connections_hold_none_of_its_delay(lag: int) -> None:
    """From the write of the request to the kernel's receive time of the answer: a loop that ran
    late, or sends that left late, change no such latency (`p99 < 1ms` at 15 ms is the server's)."""
    tally = answered(*[15 * MS] * 100)
    tally.late, tally.late_max_ns = 40, lag
    pace = judged(tally, lagging(lag))
    assert (pace.delayed, pace.lag_ns, pace.best, pace.moved) == (0, 0, None, ("", 0))


def test_answers_timed_by_the_loop_or_that_opened_a_connection_may_hold_its_lag() -> None:
    pace = judged(answered(*[20 * MS] * 100, kernel=False), lagging(12 * MS))
    assert (pace.delayed, pace.lag_ns) == (100, 12 * MS) and pace.best is not None
    assert pace.best.ns("p99") == 8 * MS and pace.moved == ("p50", 12 * MS) and pace.saturated
    opened = judged(answered(*[20 * MS] * 100, opened=5), lagging(12 * MS))  # the connect is seen by the loop
    assert opened.delayed == 5 and opened.best is not None
    assert opened.best.ns("p50") == 20 * MS and opened.best.ns("max") == 20 * MS  # 95 answers still took 20 ms
    assert opened.moved == ("p50", 0) and not opened.saturated  # a few answers: no figure of the line moves


def test_a_kernel_timed_answer_that_opened_its_connection_holds_no_more_delay_than_its_setup_took() -> None:
    """Connected in 50 us (the native engine's connect on loopback returns at once): a loop 40 ms late
    may be in no more than those 50 us of it, whatever p999 nginx's own stalls made."""
    tally = phased()
    for i in range(1000):
        start = 10 * SECOND + i * MS
        connected = start + 50_000 if i < 5 else 0
        latency = 15 * MS if i % 250 == 7 else MS  # nginx's own: four slow answers, none a new connection's
        tally.add(Result(status=200, kernel_clock=True, start_ns=start, connected_ns=connected,
                         tcp_ns=connected, written_ns=connected or start, headers_ns=start + latency,
                         end_ns=start + latency), latency, 0)
    pace = judged(tally, lagging(40 * MS), due=1000.0)
    assert (pace.delayed, pace.lag_ns) == (5, 50_000) and pace.moved[1] <= 50_000 and not pace.saturated
    unknown = answered(*[MS] * 996, *[15 * MS] * 4, opened=5)  # no phases timed: bound by their own 1 ms
    pace = judged(unknown, lagging(40 * MS), due=1000.0)
    assert pace.lag_ns == MS and pace.best is not None and pace.best.ns("p999") == 15 * MS


def test_latencies_slower_than_every_delayed_response_hold_none_of_the_delay() -> None:
    """Answers timed by the loop took at most 2 ms, the loop lagged 40 ms: nginx's own 15 ms answers
    (kernel-timed) are its own, so p999 and max are as measured, and no note says otherwise."""
    tally = answered(*[MS] * 990, *[15 * MS] * 4)
    tally.merge(answered(*[2 * MS] * 6, kernel=False))
    pace = judged(tally, lagging(40 * MS), due=1000.0)
    assert (pace.delayed, pace.lag_ns, tally.delayed_max_ns) == (6, 2 * MS, 2 * MS) and pace.best is not None
    assert pace.best.ns("p999") == pace.best.ns("max") == 15 * MS and not pace.saturated


def test_in_the_open_model_a_late_sends_lateness_is_in_its_latency() -> None:
    """Latency runs from the due time: the lateness of a late send is in it, kernel timestamps or not."""
    tally = answered(*[30 * MS] * 100)
    tally.late, tally.late_max_ns, tally.delayed_max_ns = 100, 25 * MS, 30 * MS  # as the recorder counts them
    pace = judged(tally, lagging(25 * MS), PaceTerms(room=1000, corrected=True))
    assert (pace.delayed, pace.lag_ns) == (100, 25 * MS) and pace.best is not None and pace.best.ns("p99") == 5 * MS
    closed = judged(tally, lagging(25 * MS))  # from the actual send: not in it
    assert closed.delayed == 0


def brute_best(values: list[int], delayed: int, lag: int, rank: int, slowest: int) -> int:
    """The lowest the rank-th smallest latency can be with `delayed` of those no slower than `slowest`
    each up to `lag` faster: all that is known of which ones the client's delay may be in."""
    lowest = None
    candidates = [i for i, v in enumerate(values) if v <= slowest]
    for chosen in itertools.combinations(candidates, delayed):
        faster = sorted(max(v - lag, 0) if i in chosen else v for i, v in enumerate(values))
        lowest = faster[rank - 1] if lowest is None else min(lowest, faster[rank - 1])
    assert lowest is not None
    return lowest


def test_the_latencies_at_best_are_the_lowest_the_delay_allows() -> None:
    """Against every way of taking the lag off `delayed` of the answers no slower than the slowest
    delayed one (values under 2048 ns, which the histogram keeps exactly): a percentile slower than
    all of them is as measured; any other falls by the lag at most, and never below the value as
    many ranks down as there are delayed answers."""
    rng = random.Random(32)
    for _ in range(300):
        n = rng.randint(1, 8)
        values = [rng.randint(0, 2000) for _ in range(n)]
        kernel = rng.randint(0, n)  # those timed by the kernel come first: the rest may hold the lag
        tally = answered(*values[:kernel])
        tally.merge(answered(*values[kernel:], kernel=False))
        lag = rng.choice([1, 50, 300, 1500, 2000])
        pace = judged(tally, lagging(lag), PaceTerms())
        delayed = n - kernel
        if not delayed:
            assert pace.best is None
            continue
        assert pace.best is not None and pace.delayed == delayed
        slowest = max(values[kernel:])
        for key, p in PERCENTILES.items():
            rank = max(int(p.rank * n / 100 + 0.5), 1)
            best = brute_best(values, delayed, min(lag, slowest), rank, slowest)
            assert pace.best.ns(key) == best, (values, delayed, lag, key)
            truly = sorted(values[:kernel] + [max(v - lag, 0) for v in values[kernel:]])  # the ones timed by the loop
            assert best <= truly[rank - 1]  # never above what taking the lag off them does
        assert pace.best.ns("max") == brute_best(values, delayed, min(lag, slowest), n, slowest)
        assert (sum(values) - lag * delayed) / n - 1e-9 <= pace.best.ns("mean") <= sum(values) / n


# --- skips ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(("latency", "behind", "theirs"), [
    (MS, LATE_NS, False), (MS, 30 * MS, False), (MS, GAP - MS - 1, False), (MS, GAP - MS, True), (MS, 2 * SECOND, True),
    (45 * MS, 4 * MS, False), (45 * MS, 5 * MS, True),  # 5 ms late and 45 ms to answer: past the next due time
    (200 * MS, 30 * MS, False), (200 * MS, 2 * SECOND, False),  # slower than the gap: the server's pace
])
def test_skips_are_the_clients_only_if_it_ran_the_gap_less_its_slowest_quick_answer_behind(
        latency: int, behind: int, theirs: bool) -> None:
    """A closed-model client skips a send that fell due while its request was in flight: had a request
    that took `latency` gone on time, the next send would have gone out unless the request took the
    gap between a client's sends. A server slow on purpose skipped them, however late the client."""
    tally = answered(*[latency] * 91)
    tally.skipped, tally.late, tally.late_max_ns = 9, 20, behind
    pace = judged(tally, lagging(100_000))
    assert pace.skipped == (9 if theirs else 0)
    assert pace.behind_ns == behind


def test_mixed_answers_judge_skips_by_the_slowest_that_came_within_the_gap() -> None:
    tally = answered(*[MS] * 80, *[48 * MS] * 3, *[300 * MS] * 8)
    tally.skipped, tally.late, tally.late_max_ns = 9, 5, 2 * MS
    assert judged(tally, lagging(100_000)).skipped == 9  # 48 ms and 2 ms late: past the next due time
    quick = answered(*[MS] * 83, *[300 * MS] * 8)
    quick.skipped, quick.late, quick.late_max_ns = 9, 5, 2 * MS
    assert judged(quick, lagging(100_000)).skipped == 0


def test_skips_with_nothing_answered_quickly() -> None:
    refused = failing(Tally(skipped=9), ErrorKind.REFUSED, 10)  # refused at once: free for the next send
    assert judged(refused, lagging(GAP)).skipped == 9 and judged(refused, lagging(GAP - 1)).skipped == 0
    held = failing(Tally(skipped=9), ErrorKind.TIMEOUT, 10)  # each held its client for the timeout
    assert judged(held, lagging(2 * SECOND)).skipped == 0
    stopped = Tally(skipped=9)  # nothing ended in it at all (a stopped client)
    assert judged(stopped, lagging(GAP)).skipped == 9 and judged(stopped, lagging(GAP - 1)).skipped == 0
    assert judged(Tally(skipped=9), lagging(LATE_NS), PaceTerms()).skipped == 9  # no gap known: any lateness


def test_in_the_open_model_the_gap_is_max_in_flight_over_the_rate() -> None:
    tally = answered(*[MS] * 91)
    tally.skipped = 9
    assert judged(tally, lagging(9 * SECOND), PaceTerms(room=1000, corrected=True)).skipped == 0  # 10 s of room
    assert judged(tally, lagging(10 * SECOND), PaceTerms(room=1000, corrected=True)).skipped == 9


# --- timeouts and the goal -----------------------------------------------------------------------


@pytest.mark.parametrize("lag", [0, 30 * MS, 4999 * MS, 5 * SECOND, 12 * SECOND])
def test_a_target_that_never_answers_is_the_servers_unless_the_loop_lagged_half_the_timeout(lag: int) -> None:
    """Every send timed out after 10 s: a client whose loop lagged less than 5 s could not have read
    an answer late enough to call it a timeout unless the server took 5 s and more."""
    tally = failing(Tally(skipped=80), ErrorKind.TIMEOUT, 20)
    pace = judged(tally, lagging(lag))
    theirs = lag >= 10 * SECOND * TIMEOUT_SHARE
    assert pace.timeouts == (20 if theirs else 0)
    assert pace.skipped == 0  # held by requests the server never answered
    assert pace.crossed == 0  # however late they went out, none would have been answered
    assert pace.saturated is theirs


@pytest.mark.parametrize(("behind", "crossed", "short"), [
    (0, 0, 0), (LATE_NS - 1, 0, 0), (LATE_NS, 1, 0), (30 * MS, 3, 0), (GAP - 1, 5, 0), (GAP, 5, 2), (3 * SECOND, 100, 2)])
def test_a_goal_missed_is_the_clients_once_it_ran_a_whole_gap_behind(behind: int, crossed: int, short: int) -> None:
    """98 of 100 due answered: sends due within `behind` of the end may have gone out, or come back,
    after it (crossed); as responses cross a line's edges both ways, that is the client's cut of the
    goal (short) only once it ran the gap between a client's sends behind, as a stopped client does."""
    tally = answered(*[MS] * 98)
    tally.late, tally.late_max_ns = 3, behind
    pace = judged(tally, lagging(100_000))
    assert (pace.crossed, pace.short, pace.saturated) == (crossed, short, bool(short))
    assert judged(answered(*[MS] * 100), lagging(3 * SECOND)).short == 0  # at 100%: nothing missing


def test_a_slow_server_behind_a_busy_client_lost_its_goal_by_itself() -> None:
    """200 ms answers, 5 clients at 100 req/s: a quarter of the goal answered, the rest skipped
    behind requests slower than the gap. The client, 124 ms behind on a busy node, may have pushed
    3 of the sends due at the end past it (as many as the server answered of those due): under a
    hundredth of the goal, no change to its line. Nothing is said but the skips, the server's."""
    tally = answered(*[200 * MS] * 115)
    tally.skipped, tally.late, tally.late_max_ns = 375, 10, 124 * MS
    pace = judged(tally, lagging(124 * MS), due=500.0, seconds=5)
    assert (pace.skipped, pace.crossed, pace.short, pace.saturated) == (0, 3, 0, False)


def test_a_stopped_client_with_nothing_answered_may_have_cost_the_whole_goal() -> None:
    pace = judged(Tally(), lagging(2500 * MS), due=6.0)  # 6 due while it was stopped: none sent yet
    assert (pace.crossed, pace.short, pace.saturated) == (6, 6, True)


def test_a_bench_has_no_schedule_to_fall_behind() -> None:
    tally = answered(*[MS] * 100)
    tally.late, tally.late_max_ns = 10, SECOND
    pace = pace_of(tally, Figures.of(tally, None, SECOND), lagging(SECOND), PaceTerms(paced=False))
    assert (pace.behind_ns, pace.skipped, pace.crossed, pace.short) == (0, 0, 0, 0)


# --- saturated, merged, the run ------------------------------------------------------------------


def test_saturated_is_a_figure_changed_enough_to_read_the_line_otherwise() -> None:
    assert not Pace().saturated and not Pace(behind_ns=SECOND, crossed=100, delayed=100, lag_ns=SECOND).saturated
    for pace in (Pace(skipped=1), Pace(timeouts=1), Pace(short=1), Pace(moved=("p99", SATURATED_LAG_NS))):
        assert pace.saturated, pace
    assert not Pace(moved=("p99", SATURATED_LAG_NS - 1)).saturated


def test_paces_add_up_and_the_run_works_its_latencies_out_on_its_own_histogram() -> None:
    one = judged(answered(*[20 * MS] * 50, kernel=False), lagging(12 * MS, 0.4))
    two = judged(answered(*[20 * MS] * 50), lagging(40 * MS, 0.1))
    both = one.merge(two)
    assert (both.delayed, both.lag_ns, both.cpu_share, both.best) == (50, 12 * MS, 0.4, None)
    tally = answered(*[20 * MS] * 50, kernel=False)
    tally.merge(answered(*[20 * MS] * 50))
    run = run_pace(tally, both)
    assert run.best is not None and run.best.ns("p50") == 8 * MS and run.best.ns("p75") == 20 * MS  # 50 may hold it
    assert run.best.ns("mean") == pytest.approx(14 * MS) and run.moved == ("p50", 12 * MS)
    assert run_pace(tally, Pace()).best is None
