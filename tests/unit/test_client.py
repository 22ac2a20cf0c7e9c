"""The client's own figures: the meter, lateness, the drain, and their records and lines (what its
delay may have changed, Pace, is tested in test_pace.py)."""

from __future__ import annotations

import dataclasses
import itertools
import json
import random
import tracemalloc
from collections import Counter

import pytest

from runner.config.settings import merge, settings_from
from runner.load.model import Closed, Open
from runner.load.result import ErrorKind, Result
from runner.load.schedule import Grid
from runner.report.clientnotes import backend_note, drain_note, interval_note, run_note, short
from runner.report.summary import client_dict, drain_dict, latency_clock
from runner.stats.client import (
    LATE_NS,
    NODE,
    OWN_CPU,
    PROBE_PERIOD_NS,
    SATURATED_CPU,
    ClientFigures,
    ClientMeter,
    Pace,
    PaceTerms,
    next_due,
    starved_by,
)
from runner.stats.figures import NO_BACKEND, OTHER_BACKENDS
from runner.stats.histogram import LatencyHistogram
from runner.stats.record import client_from_record, client_record, tally_from_record, tally_record
from runner.stats.recorder import Interval, Recorder, Tally
from runner.stats.runinfo import RunInfo, RunSummary

START = 5_000_000_000_000
SECOND = 1_000_000_000
MS = 1_000_000
GRID = Grid(START, SECOND)


def lags(*values: int) -> LatencyHistogram:
    histogram = LatencyHistogram()
    for value in values:
        histogram.record(value)
    return histogram


# --- the figures ---------------------------------------------------------------------------------


def test_measured_figures_are_the_cpu_share_and_the_lag_and_judge_nothing() -> None:
    """A process at 95% of a core, or whose loop ran 50 ms late, is not saturated for that: its
    saturation is what its delay may have changed in an interval's figures (Pace.saturated)."""
    idle = ClientFigures.measured(0.05, SECOND, lags(*[200_000] * 99, 50 * MS))  # one stall in 100 ticks
    assert idle.cpu_share == pytest.approx(0.05) and not idle.saturated
    busy = ClientFigures.measured(0.95, SECOND, lags(*[15 * MS] * 100))
    assert busy.cpu_share == pytest.approx(0.95) and not busy.saturated
    assert ClientFigures.measured(1.0, 0, LatencyHistogram()).cpu_share == 0.0  # no span: nothing to judge


@pytest.mark.parametrize(("cpu", "cause"), [(0.0, NODE), (0.06, NODE), (SATURATED_CPU - 0.001, NODE),
                                            (SATURATED_CPU, OWN_CPU), (1.0, OWN_CPU), (1.7, OWN_CPU)])
def test_a_client_behind_is_starved_by_its_own_cpu_or_by_its_node(cpu: float, cause: str) -> None:
    assert starved_by(cpu) == cause


def test_merging_keeps_the_busiest_process_every_sample_and_any_saturation() -> None:
    for a, b in itertools.product((False, True), repeat=2):
        one = ClientFigures(0.3, lags(1 * MS, 2 * MS), a, 1, lags(5 * MS))
        two = ClientFigures(0.6, lags(3 * MS), b, 4, None)
        one.merge(two)
        assert one.cpu_share == 0.6 and one.loop_lag.count == 3 and one.saturated is (a or b)
        assert one.saturated_intervals == 4 and one.lateness is not None and one.lateness.count == 1
    empty = ClientFigures()
    empty.merge(ClientFigures(lateness=lags(7 * MS)))
    assert empty.lateness is not None and empty.lateness.max >= 7 * MS * 0.999


def test_the_run_counts_its_saturated_intervals_names_the_first_and_adds_up_what_they_changed() -> None:
    meter = ClientMeter(GRID)
    meter.begin(0.0, START)
    for k in range(14):
        closed(meter, k, 0.01 * (k + 1), GRID.end_of(k))
        meter.counted(k, Pace(behind_ns=k * MS, skipped=3, cpu_share=0.01 * k) if k % 2 else Pace(behind_ns=90 * MS))
    run = meter.run(0.15, GRID.end_of(13))
    assert run.saturated and run.saturated_intervals == 7 and run.named == (1, 3, 5, 7, 9, 11, 13)
    assert run.pace is not None and (run.pace.skipped, run.pace.behind_ns) == (21, 13 * MS)  # not the unsaturated 90 ms
    assert run.pace.cpu_share == pytest.approx(0.13)
    many = ClientFigures()
    for k in range(25):
        many.count_saturated(k, Pace(timeouts=1))
    assert many.named == tuple(range(10)) and many.saturated_intervals == 25 and many.pace == Pace(timeouts=25)
    quiet = ClientMeter(GRID)
    quiet.counted(0, Pace(behind_ns=90 * MS, crossed=9))
    assert not quiet.run(None, START).saturated and quiet.run(None, START).pace is None


def on_time(meter: ClientMeter, since: int, until: int, lag: int = 100_000) -> int:
    """The probe's ticks from `since` to `until`, each `lag` late; the next one's due time."""
    due = since
    while due < until:
        meter.tick(due, due + lag)
        due = next_due(due, due + lag)
    return due


def closed(meter: ClientMeter, k: int, cpu: float | None, at: int, *, final: bool = False,
           end: int | None = None) -> ClientFigures:
    """Close interval k of GRID at `at`, with `cpu` seconds used by then."""
    return meter.close(cpu, at, GRID.end_of(k - 1), GRID.end_of(k) if end is None else end, final=final)


def test_the_meter_closes_intervals_with_their_cpu_and_lag() -> None:
    meter = ClientMeter(GRID)
    meter.begin(10.0, START)
    due = on_time(meter, START + PROBE_PERIOD_NS, START + SECOND)
    quiet = closed(meter, 0, 10.05, START + SECOND)
    assert quiet.loop_lag.count == 99 and quiet.cpu_share == pytest.approx(0.05)
    meter.tick(due, due - 5)  # a tick a hair early counts as on time
    busy = closed(meter, 1, 11.0, START + 2 * SECOND)  # 95% of a core; the ticks not run are late
    assert busy.cpu_share == pytest.approx(0.95) and busy.loop_lag.min == 0
    assert busy.loop_lag.count == 100  # the one that ran, and the 99 due that had not run at the close
    meter.late(3 * MS)
    run = meter.run(11.0, START + 2 * SECOND)
    assert not run.saturated and run.saturated_intervals == 0 and run.loop_lag.count == 199  # none counted()
    assert run.cpu_share == pytest.approx(0.5) and run.lateness is not None and run.lateness.count == 1


def test_without_a_cpu_reading_the_share_is_unknown_and_only_the_lag_judges() -> None:
    meter = ClientMeter(GRID, paced=False)
    meter.begin(0.0, START)
    meter.tick(START + PROBE_PERIOD_NS, START + PROBE_PERIOD_NS + 20 * MS)
    figures = closed(meter, 0, None, START + 30 * MS, end=START + 30 * MS, final=True)
    assert figures.cpu_share == 0.0  # without a reading
    assert figures.loop_lag.count == 2  # the tick 20 ms late, and the one it swallowed, 10 ms late
    meter.late(5 * MS)  # a bench keeps no lateness
    assert meter.run(None, START).lateness is None


def test_the_next_tick_is_a_period_on_or_after_a_stall_a_period_from_when_it_ran() -> None:
    assert next_due(START, START + 3 * MS) == START + PROBE_PERIOD_NS
    assert next_due(START, START + PROBE_PERIOD_NS) == START + PROBE_PERIOD_NS  # due at once: still on the grid
    assert next_due(START, START + 3 * SECOND) == START + 3 * SECOND + PROBE_PERIOD_NS


def test_a_sparse_pacing_timer_counts_no_lateness_between_its_firings() -> None:
    """The ticks are the pacing timer's firings, 50 ms apart at 20 req/s, and the meter is told when
    each next one is due: a close between two firings finds none late. Before, it took the next as
    due a probe period on, and counted the four a probe would have had in the gap as late until the
    close (up to 40 ms: a light run flagged)."""
    meter = ClientMeter(GRID)
    meter.begin(0.0, START)
    firings = [START + 50 * MS * (i + 1) for i in range(19)]  # the last one due at 950 ms
    for due in firings:
        meter.tick(due, due + 100_000)
        meter.expect(due + 50 * MS)  # the timer's next firing: the next send's due time
    quiet = closed(meter, 0, 0.01, START + SECOND + 3 * MS)  # closed 3 ms late: the firing due at 1 s is the next's
    assert quiet.loop_lag.count == 19 and quiet.loop_lag.max < 4 * MS


def test_when_no_tick_is_due_none_is_late_however_long_it_waits() -> None:
    meter = ClientMeter(GRID)
    meter.begin(0.0, START)
    meter.tick(START + 5 * MS, START + 5 * MS)
    meter.expect(None)  # the native engine's thread has ended: its timer fires no more
    figures = closed(meter, 0, 0.01, START + 3 * SECOND)
    assert figures.loop_lag.count == 1 and figures.loop_lag.max < MS


def test_a_stall_after_a_long_gap_counts_from_the_tick_it_expected() -> None:
    """Nothing due for 100 ms (the fallback tick then): stopped 30 ms after the last firing, for
    2 s, and closed before the late tick has run, an interval counts its ticks from the fallback's
    due time on, each late until the close."""
    meter = ClientMeter(GRID)
    meter.begin(0.0, START)
    meter.tick(START + 400 * MS, START + 400 * MS)
    meter.expect(START + 500 * MS)
    first = closed(meter, 0, 0.01, START + 2430 * MS)
    assert first.loop_lag.count == 1 + 50  # 500 ms to 1 s, a period apart
    assert first.loop_lag.min == 0 and first.loop_lag.max >= 1930 * MS * 0.999
    meter.tick(START + 500 * MS, START + 2430 * MS)  # the late tick runs: those counted are not again
    second = closed(meter, 1, 0.011, START + 2431 * MS)
    assert second.loop_lag.count == 100


STALL_FROM, STALL_TO = START + 500 * MS, START + 3 * SECOND + 200 * MS  # stopped, as SIGSTOP or a busy node does


def stalled_meter(tick_first: bool) -> tuple[ClientMeter, list[ClientFigures]]:
    """Intervals 0 to 3 of a run stopped from 0.5 s to 3.2 s, using 5% of a core when it ran. After the
    stall the probe's late tick and the burst of closes of intervals 0 to 2 come in either order."""
    meter = ClientMeter(GRID)
    meter.begin(0.0, START)
    due = on_time(meter, START + PROBE_PERIOD_NS, STALL_FROM)
    figures = []
    ran = STALL_TO if tick_first else STALL_TO + 5000
    if tick_first:
        meter.tick(due, ran)
    for k, cpu in enumerate((0.025, 0.02501, 0.02502)):  # the burst: microseconds apart
        figures.append(closed(meter, k, cpu, STALL_TO + k * 1000))
    if not tick_first:
        meter.tick(due, ran)
    on_time(meter, next_due(due, ran), START + 4 * SECOND)
    figures.append(closed(meter, 3, 0.06503, START + 4 * SECOND))
    return meter, figures


@pytest.mark.parametrize("tick_first", [True, False], ids=["tick-then-closes", "closes-then-tick"])
def test_a_stall_counts_every_tick_it_swallowed_where_it_was_due(tick_first: bool) -> None:
    meter, (first, second, third, fourth) = stalled_meter(tick_first)
    assert [f.loop_lag.max >= 200 * MS for f in (first, second, third)] == [True] * 3  # was: only where it ran
    assert second.loop_lag.count == third.loop_lag.count == 100  # every tick due in them, each once
    assert second.loop_lag.min >= 200 * MS and third.loop_lag.max >= 1200 * MS * 0.999
    assert first.loop_lag.count == 99 and first.loop_lag.max >= 2700 * MS * 0.999
    assert fourth.loop_lag.max >= 190 * MS  # 3.0 s to 3.2 s: still stopped
    assert 99 <= fourth.loop_lag.count <= 100  # a period from the late tick's run to the next one
    run = meter.run(0.06503, START + 4 * SECOND)
    assert run.loop_lag.count == sum(f.loop_lag.count for f in (first, second, third, fourth))  # each once


def test_a_long_stall_is_counted_interval_by_interval_in_flat_memory() -> None:
    """Ten minutes stopped (a frozen pod, a laptop asleep) across sixty 10 s intervals, the late tick
    run before their burst of closes: each interval counts its thousand ticks as it closes, and the
    meter never holds more than its open interval's histogram (one of 270 kB per interval was 16 MB)."""
    grid = Grid(START, 10 * SECOND)
    meter = ClientMeter(grid)
    meter.begin(0.0, START)
    resumed = START + 600 * SECOND
    tracemalloc.start()
    try:
        meter.tick(START + PROBE_PERIOD_NS, resumed)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 2_000_000, peak
    figures = [meter.close(0.001, resumed + k, grid.end_of(k - 1), grid.end_of(k)) for k in range(60)]
    assert all(f.loop_lag.count == 1000 for f in figures[1:])
    assert figures[0].loop_lag.count == 999  # due from the first tick, a period after the start
    assert figures[-1].loop_lag.min >= 0 and figures[0].loop_lag.max >= 599 * SECOND


@pytest.mark.parametrize("tick_first", [True, False], ids=["tick-then-closes", "closes-then-tick"])
def test_intervals_closed_in_a_burst_after_a_stall_do_not_claim_its_cpu(tick_first: bool) -> None:
    """Closing them took microseconds of a busy process: each said 100% of a core (1000% here)."""
    _, (first, second, third, fourth) = stalled_meter(tick_first)
    assert first.cpu_share == pytest.approx(0.025 / 3.2, rel=1e-3)  # what it used, spread over the stall
    assert second.cpu_share == third.cpu_share == pytest.approx(first.cpu_share, rel=1e-3)
    assert fourth.cpu_share < 0.05  # the 40 ms it used after, over its second


def test_evenly_spent_cpu_gives_every_interval_the_same_share_however_late_it_closes() -> None:
    """Closes late by random amounts, bursts included: a process using 30% of a core all along
    is said to have used 30% in every interval, and the shares add up to what it used."""
    rng = random.Random(20)
    for _ in range(40):
        meter = ClientMeter(GRID, period_ns=SECOND)  # few probe ticks: only the CPU is looked at
        meter.begin(0.0, START)
        closes, at = [], START
        for k in range(8):
            at = max(at + rng.choice([0, 1000, 3 * MS, 2 * SECOND]), GRID.end_of(k))
            closes.append((k, at))
        shares = [closed(meter, k, 0.3 * (at - START) / SECOND, at).cpu_share for k, at in closes]
        assert shares == pytest.approx([0.3] * 8)


# --- lateness and the drain in the recorder ------------------------------------------------------


def sent(*, due: int, free: int = 0, start: int, latency: int = MS) -> Result:
    return Result(due_ns=due, free_ns=free, start_ns=start, headers_ns=start + latency, end_ns=start + latency,
                  status=200)


def test_client_lag_is_from_when_a_send_could_and_should_have_left() -> None:
    assert sent(due=START, start=START + 3 * MS).client_lag_ns == 3 * MS
    # Due while its client's previous request was in flight: waiting for that was the server's doing.
    assert sent(due=START, free=START + 40 * MS, start=START + 41 * MS).client_lag_ns == MS
    assert sent(due=START + 50 * MS, free=START + 40 * MS, start=START + 51 * MS).client_lag_ns == MS


def test_late_sends_are_counted_where_their_results_land() -> None:
    recorder = Recorder(GRID, Closed())
    recorder.record(sent(due=START, start=START + LATE_NS - 1))
    recorder.record(sent(due=START + 10 * MS, start=START + 10 * MS + LATE_NS))
    recorder.record(sent(due=START + 20 * MS, start=START + 60 * MS))
    recorder.record(sent(due=START + SECOND + 20 * MS, free=START + SECOND + 90 * MS, start=START + SECOND + 91 * MS))
    first, second = recorder.close(), recorder.close()
    assert (first.tally.late, first.tally.late_max_ns) == (2, 40 * MS)
    assert (second.tally.late, second.tally.late_max_ns) == (0, 0)
    assert (recorder.total.late, recorder.total.late_max_ns) == (2, 40 * MS)
    assert recorder.client.lateness is not None and recorder.client.lateness.count == 4


def test_the_drain_is_counted_in_the_run_but_not_in_the_last_interval() -> None:
    recorder = Recorder(GRID, Closed())
    end = START + SECOND + 500 * MS  # the schedule ends halfway through interval 1
    recorder.drain_from(end)
    recorder.record(sent(due=START, start=START))
    recorder.record(sent(due=end - 10 * MS, start=end - 10 * MS, latency=9 * MS))  # back in time
    recorder.record(sent(due=end - 5 * MS, start=end - 5 * MS, latency=5 * MS))  # back exactly at the end: drain
    recorder.record(sent(due=end - 5 * MS, start=end - 5 * MS, latency=3 * SECOND))  # two intervals later
    first = recorder.close()
    last = recorder.close(end, final=True)
    assert (first.tally.requests, last.tally.requests) == (1, 1)
    assert recorder.drain is not None and recorder.drain.requests == 2
    assert recorder.drain_end_ns == end - 5 * MS + 3 * SECOND
    assert recorder.total.requests == 4 and recorder.total.good == 4


def test_without_a_drain_point_late_results_still_join_the_last_interval() -> None:
    recorder = Recorder(GRID, Closed())  # totalRequests runs: the last interval ends when the last answer is in
    recorder.record(sent(due=START, start=START, latency=3 * SECOND))
    last = recorder.close(START + 4 * SECOND, final=True)
    assert last.tally.requests == 1 and recorder.drain is None


# --- records, summary and lines ------------------------------------------------------------------


def test_client_figures_round_trip_through_json() -> None:
    for lateness in (None, lags(3 * MS, 40 * MS)):
        figures = ClientFigures(0.4321, lags(100_000, 12 * MS), True, 3, lateness)
        back = client_from_record(json.loads(json.dumps(client_record(figures))))
        assert (back.cpu_share, back.saturated, back.saturated_intervals) == (0.4321, True, 3)
        assert back.loop_lag.count == 2 and back.loop_lag.max == figures.loop_lag.max
        assert (back.lateness is None) is (lateness is None)
    none = client_from_record(None)  # an earlier version's record has none
    assert (none.cpu_share, none.loop_lag.count, none.saturated, none.lateness) == (0.0, 0, False, None)
    with pytest.raises(ValueError, match="not a client record"):
        client_from_record({"cpuShare": "x", "loopLag": {}, "saturated": False})


def test_late_counts_round_trip_and_old_records_read_as_none_late() -> None:
    tally = Tally(good=3, late=2, late_max_ns=40 * MS)
    back = tally_from_record(json.loads(json.dumps(tally_record(tally))))
    assert (back.late, back.late_max_ns) == (2, 40 * MS)
    old = tally_record(tally)
    del old["late"], old["lateMaxNs"]
    assert (tally_from_record(old).late, tally_from_record(old).late_max_ns) == (0, 0)
    merged = Tally(late=1, late_max_ns=50 * MS)
    merged.merge(back)
    assert (merged.late, merged.late_max_ns) == (3, 50 * MS)


def test_the_slowest_answer_that_may_hold_the_clients_delay_is_kept_merged_and_recorded() -> None:
    """Answers the kernel timed on a kept connection hold none of it; one timed by the loop or that
    opened its connection may (stats.client.holds_delay), and so may, in the open model, one sent
    late (its latency runs from the due time). A record without it (an earlier version) says any may."""
    recorder = Recorder(GRID, Open(1000))
    recorder.record(Result(status=200, kernel_clock=True, due_ns=START, start_ns=START, headers_ns=START + 90 * MS,
                           end_ns=START + 90 * MS))
    recorder.record(Result(status=200, kernel_clock=False, due_ns=START, start_ns=START, headers_ns=START + 7 * MS,
                           end_ns=START + 7 * MS))
    recorder.record(Result(status=200, kernel_clock=True, connected_ns=START + MS, due_ns=START, start_ns=START,
                           headers_ns=START + 9 * MS, end_ns=START + 9 * MS))
    recorder.record(Result(status=200, kernel_clock=True, due_ns=START, start_ns=START + 3 * MS,
                           headers_ns=START + 14 * MS, end_ns=START + 14 * MS))  # 3 ms late: 14 ms from its due time
    tally = recorder.close().tally
    assert tally.delayed_max_ns == 14 * MS and tally.latency.max >= 90 * MS * 0.999
    back = tally_from_record(json.loads(json.dumps(tally_record(tally))))
    assert back.delayed_max_ns == 14 * MS
    old = tally_record(tally)
    del old["delayedMaxNs"]
    assert tally_from_record(old).delayed_max_ns == tally.latency.max
    with pytest.raises(ValueError, match="delayedMaxNs"):
        tally_from_record({**tally_record(tally), "delayedMaxNs": -1})
    merged = Tally(delayed_max_ns=20 * MS)
    merged.merge(back)
    assert merged.delayed_max_ns == 20 * MS


def test_short_durations_to_a_tenth_of_a_millisecond() -> None:
    assert [short(x) for x in (0, 49_999, 31_234_567, 1_500_000_000)] == ["0s", "0s", "31.2ms", "1.5s"]


def interval(good: int = 100, *, skipped: int = 0, late: int = 0, late_max: int = 0, lag: int = MS, cpu: float = 0.1,
             kernel: bool = True, timeouts: int = 0, room: int = 5, latency: int = MS) -> Interval:
    """Interval 7 of a run at 100 req/s in 1 s intervals (5 clients: 50 ms between a client's sends),
    its responses in `latency`, timed by the kernel or by the loop, its loop lagging up to `lag`."""
    tally = Tally()
    for _ in range(good):
        tally.add(Result(status=200, kernel_clock=kernel), latency, 0)
    for _ in range(timeouts):
        tally.add(Result(error=ErrorKind.TIMEOUT, error_text="timeout"), 0, 0)
    tally.skipped, tally.late, tally.late_max_ns = skipped, late, late_max
    return Interval(7, START, START + SECOND, tally, client=ClientFigures(cpu, lags(100_000, lag)), due=100.0,
                    terms=PaceTerms(room=room))


def test_no_note_for_a_few_sends_a_few_milliseconds_late_or_a_loop_that_lagged_on_kernel_timed_answers() -> None:
    """`# iter 7: 1 send left late (up to 4.6ms), not skipped` followed most lines of an hourly log,
    and `client saturated by its node` did on a busy node, at 100% of the goal: neither changed a
    figure of the line."""
    assert interval_note(interval()) == ""
    assert interval_note(interval(late=1, late_max=4_600_000)) == ""
    assert interval_note(interval(late=38, late_max=30 * MS, lag=40 * MS)) == ""  # kernel-timed, at 100%
    assert interval_note(interval(99, late=12, late_max=9 * MS, lag=9 * MS)) == ""  # a response across its end
    assert not interval(late=38, late_max=30 * MS, lag=40 * MS).client.saturated


def test_skipped_sends_are_always_said_and_whose_pace_they_may_be() -> None:
    """The 9 sends an interval skipped (goal% 99%) were never shown in the text."""
    assert interval_note(interval(91, skipped=9)) == "# iter 7: 9 sends skipped while requests were still in flight\n"
    note = interval_note(interval(91, skipped=9, late=30, late_max=60 * MS, lag=61 * MS, cpu=0.02))
    assert note == ("# iter 7: 9 sends skipped, goal% 91% (9 sends short): the client's own delay may have caused "
                    "them, running up to 61ms behind (its node did not run it on time: it used 2% of a core)\n")
    busy = interval_note(interval(99, skipped=1, late=3, late_max=50 * MS, cpu=0.97))
    assert busy == ("# iter 7: 1 send skipped, goal% 99% (1 send short): the client's own delay may have caused them, "
                    "running up to 50ms behind on its own CPU (97% of a core)\n")


def test_latency_the_clients_delay_may_be_in_is_said_with_the_figure_and_how_much() -> None:
    note = interval_note(interval(lag=31 * MS, kernel=False, latency=40 * MS))
    assert note == ("# iter 7: p50 up to 31ms higher: the client's own delay may have caused it, running up to 31ms "
                    "behind (its node did not run it on time: it used 10% of a core)\n")
    assert interval_note(interval(lag=31 * MS, kernel=False)) == ""  # answers in 1 ms: it may be 1 ms of them at most
    assert interval_note(interval(lag=9 * MS, kernel=False, latency=40 * MS)) == ""  # under 10 ms
    timeouts = interval_note(interval(90, timeouts=10, lag=6 * SECOND))
    assert timeouts.startswith("# iter 7: goal% 90% (10 sends short), 10 timeouts: the client's own delay may have ")


def summary(client: ClientFigures | None, drain: Tally | None = None, end: int = START + 3 * SECOND) -> RunSummary:
    info = RunInfo(settings_from(merge()), ["http://127.0.0.1/"], None, START, 1e9)
    return RunSummary(info, 3, end, START + 3 * SECOND, Tally(), None, None, None, "iterations", 0.1, 0,
                      client=client, drain=drain, last_interval_end_ns=START + 3 * SECOND)


def test_the_run_note_names_the_intervals_and_shows_their_figures_and_the_drain_note() -> None:
    """`cpu 1% (limit 90%), loop lag p99 4.7ms (limit 10ms)`, whole-run figures under their own limits,
    read as a contradiction: the note shows what the client's delay may have changed in the intervals
    it names."""
    assert run_note(summary(None)) == run_note(summary(ClientFigures())) == ""
    client = ClientFigures(0.01, lags(4_700_000))
    client.count_saturated(4, Pace(behind_ns=118 * MS, skipped=7, short=7, cpu_share=0.03))
    client.count_saturated(9, Pace(behind_ns=61 * MS, skipped=2, short=1, cpu_share=0.02))
    assert run_note(summary(client)) == (
        "# the client's own delay may have changed 2 of 3 intervals (4, 9): 9 sends skipped, 8 sends short of the "
        "goal: the client's own delay may have caused them, running up to 118ms behind (its node did not run it "
        "on time: it used 3% of a core)\n")
    assert drain_note(summary(None)) == drain_note(summary(None, Tally())) == ""
    drained = summary(None, Tally(good=500, failed=91), end=START + 13 * SECOND)
    assert drain_note(drained) == ("# after the last interval: 591 responses (500/0/91 good/bad/failed) came back"
                                   " up to 10s later; in the summary's totals, not in the line above\n")
    assert drain_dict(drained) == {"requests": 591, "good": 500, "bad": 0, "failed": 91, "durationSeconds": 10.0}


@pytest.mark.parametrize(("backends", "said"), [
    ({}, False), ({NO_BACKEND: 40}, True), ({NO_BACKEND: 39, "pod-a": 1}, False), ({OTHER_BACKENDS: 40}, False)])
def test_a_run_where_no_response_carried_the_backend_header_says_so_once(backends: dict, said: bool) -> None:
    info = RunInfo(settings_from(merge({"backendHeader": "X-Pod"})), ["http://127.0.0.1/"], None, START, 1e9)
    tally = Tally(good=sum(backends.values()) or 40, backends=Counter(backends))
    run = RunSummary(info, 3, START + 3 * SECOND, START + 3 * SECOND, tally, None, None, None, "iterations", 0.1, 0)
    expected = "# backendHeader X-Pod: none of the 40 responses carried it, so no backend was counted\n"
    assert backend_note(run) == (expected if said else "")
    unnamed = RunSummary(RunInfo(settings_from(merge()), ["http://127.0.0.1/"], None, START, 1e9), 3, START, START,
                         Tally(good=40), None, None, None, "iterations", 0.1, 0)
    assert backend_note(unnamed) == ""


def test_the_client_section_has_lateness_only_in_paced_runs() -> None:
    paced = client_dict(ClientFigures(0.123456, lags(MS), False, 0, lags(3 * MS)))
    assert paced["cpuPercent"] == 12.3 and paced["saturatedIntervals"] == 0
    assert set(paced["loopLagMs"]) == {"p50", "p99", "max"} and "latenessMs" in paced
    assert "latenessMs" not in client_dict(dataclasses.replace(ClientFigures(), lateness=None))


def test_the_latency_clock_says_whose_clock_timed_the_responses() -> None:
    assert latency_clock(Tally()) == "loop"  # no responses: nothing was timed by the kernel
    assert latency_clock(Tally(good=3, bad=1, kernel_clocked=4)) == "kernel"
    assert latency_clock(Tally(good=3, kernel_clocked=1)) == "mixed"
    assert latency_clock(Tally(good=3, failed=2)) == "loop"
    tally = Tally()
    tally.add(Result(status=200, kernel_clock=True), MS, 0)
    tally.add(Result(status=503), MS, 0)
    assert tally.kernel_clocked == 1 and tally_from_record(tally_record(tally)).kernel_clocked == 1
