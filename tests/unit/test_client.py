"""The client's own figures: the saturation rule, lateness, the drain, and their records and lines."""

from __future__ import annotations

import dataclasses
import itertools
import json
import random
import tracemalloc

import pytest

from runner.config.settings import merge, settings_from
from runner.load.model import Closed
from runner.load.result import Result
from runner.load.schedule import Grid
from runner.report.clientnotes import drain_note, interval_note, run_note, short
from runner.report.summary import client_dict, drain_dict, latency_clock
from runner.stats.client import (
    LATE_NS,
    NODE,
    OWN_CPU,
    PROBE_PERIOD_NS,
    SATURATED_CPU,
    SATURATED_LAG_NS,
    ClientFigures,
    ClientMeter,
    is_saturated,
    next_due,
    starved_by,
)
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


# --- the rule ------------------------------------------------------------------------------------


@pytest.mark.parametrize(("cpu", "lag", "saturated"), [
    (0.0, 0, False), (SATURATED_CPU - 0.001, SATURATED_LAG_NS - 1, False), (SATURATED_CPU, 0, True),
    (1.7, 0, True), (0.0, SATURATED_LAG_NS, True), (0.05, 50 * MS, True),
])
def test_the_rule_is_cpu_of_a_core_or_loop_lag(cpu: float, lag: int, saturated: bool) -> None:
    assert is_saturated(cpu, lag) is saturated


def test_measured_figures_are_judged_by_the_rule_on_the_lag_p99() -> None:
    idle = ClientFigures.measured(0.05, SECOND, lags(*[200_000] * 99, 50 * MS))  # one stall in 100 ticks
    assert idle.cpu_share == pytest.approx(0.05) and not idle.saturated
    lagging = ClientFigures.measured(0.05, SECOND, lags(*[200_000] * 90, *[15 * MS] * 10))
    assert lagging.saturated
    busy = ClientFigures.measured(0.95, SECOND, lags(100_000))
    assert busy.cpu_share == pytest.approx(0.95) and busy.saturated
    assert ClientFigures.measured(1.0, 0, LatencyHistogram()).cpu_share == 0.0  # no span: nothing to judge


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


def test_the_meter_closes_intervals_and_counts_the_saturated_ones() -> None:
    meter = ClientMeter(GRID)
    meter.begin(10.0, START)
    due = on_time(meter, START + PROBE_PERIOD_NS, START + SECOND)
    quiet = closed(meter, 0, 10.05, START + SECOND)
    assert quiet.loop_lag.count == 99 and quiet.cpu_share == pytest.approx(0.05) and not quiet.saturated
    meter.tick(due, due - 5)  # a tick a hair early counts as on time
    busy = closed(meter, 1, 11.0, START + 2 * SECOND)  # 95% of a core; the ticks not run are late
    assert busy.saturated and busy.cpu_share == pytest.approx(0.95) and busy.loop_lag.min == 0
    assert busy.loop_lag.count == 100  # the one that ran, and the 99 due that had not run at the close
    meter.late(3 * MS)
    run = meter.run(11.0, START + 2 * SECOND)
    assert run.saturated and run.saturated_intervals == 1 and run.loop_lag.count == 199
    assert run.cpu_share == pytest.approx(0.5) and run.lateness is not None and run.lateness.count == 1


def test_without_a_cpu_reading_the_share_is_unknown_and_only_the_lag_judges() -> None:
    meter = ClientMeter(GRID, paced=False)
    meter.begin(0.0, START)
    meter.tick(START + PROBE_PERIOD_NS, START + PROBE_PERIOD_NS + 20 * MS)
    figures = closed(meter, 0, None, START + 30 * MS, end=START + 30 * MS, final=True)
    assert figures.cpu_share == 0.0 and not figures.saturated  # close() judges only with a reading
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
    assert quiet.loop_lag.count == 19 and quiet.loop_lag.max < 4 * MS and not quiet.saturated


def test_when_no_tick_is_due_none_is_late_however_long_it_waits() -> None:
    meter = ClientMeter(GRID)
    meter.begin(0.0, START)
    meter.tick(START + 5 * MS, START + 5 * MS)
    meter.expect(None)  # the native engine's thread has ended: its timer fires no more
    figures = closed(meter, 0, 0.01, START + 3 * SECOND)
    assert figures.loop_lag.count == 1 and not figures.saturated


def test_a_stall_after_a_long_gap_counts_from_the_tick_it_expected() -> None:
    """Nothing due for 100 ms (the fallback tick then): stopped 30 ms after the last firing, for
    2 s, and closed before the late tick has run, an interval counts its ticks from the fallback's
    due time on, each late until the close."""
    meter = ClientMeter(GRID)
    meter.begin(0.0, START)
    meter.tick(START + 400 * MS, START + 400 * MS)
    meter.expect(START + 500 * MS)
    first = closed(meter, 0, 0.01, START + 2430 * MS)
    assert first.saturated and first.loop_lag.count == 1 + 50  # 500 ms to 1 s, a period apart
    assert first.loop_lag.min == 0 and first.loop_lag.max >= 1930 * MS * 0.999
    meter.tick(START + 500 * MS, START + 2430 * MS)  # the late tick runs: those counted are not again
    second = closed(meter, 1, 0.011, START + 2431 * MS)
    assert second.saturated and second.loop_lag.count == 100


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
    assert [f.saturated for f in (first, second, third)] == [True, True, True]  # was: only the interval it ran in
    assert second.loop_lag.count == third.loop_lag.count == 100  # every tick due in them, each once
    assert second.loop_lag.min >= 200 * MS and third.loop_lag.max >= 1200 * MS * 0.999
    assert first.loop_lag.count == 99 and first.loop_lag.max >= 2700 * MS * 0.999
    assert fourth.saturated and fourth.loop_lag.max >= 190 * MS  # 3.0 s to 3.2 s: still stopped
    assert 99 <= fourth.loop_lag.count <= 100  # a period from the late tick's run to the next one
    run = meter.run(0.06503, START + 4 * SECOND)
    assert run.saturated_intervals == 4
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
    assert all(f.saturated and f.loop_lag.count == 1000 for f in figures[1:])
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


def test_short_durations_to_a_tenth_of_a_millisecond() -> None:
    assert [short(x) for x in (0, 49_999, 31_234_567, 1_500_000_000)] == ["0s", "0s", "31.2ms", "1.5s"]


def interval(late: int = 0, late_max: int = 0, saturated: bool = False) -> Interval:
    client = ClientFigures(0.97 if saturated else 0.1, lags(14 * MS if saturated else MS), saturated)
    return Interval(7, START, START + SECOND, Tally(good=10, late=late, late_max_ns=late_max), client=client)


def test_an_interval_note_only_when_sends_left_late_or_the_client_was_saturated() -> None:
    assert interval_note(interval()) == ""
    assert interval_note(interval(1, 3 * MS)) == "# iter 7: 1 send left late (up to 3ms), not skipped\n"
    note = interval_note(interval(12, 31_200_000, saturated=True))
    assert note.startswith("# iter 7: 12 sends left late (up to 31.2ms), not skipped; client saturated by its own "
                           "CPU: cpu 97% of a core (limit 90%)")
    assert "loop lag p99 14ms (limit 10ms)" in note and note.endswith("the client set the pace, not the server\n")
    assert interval_note(interval(saturated=True)).startswith("# iter 7: client saturated")


@pytest.mark.parametrize(("cpu", "cause"), [(0.0, NODE), (0.06, NODE), (SATURATED_CPU - 0.001, NODE),
                                            (SATURATED_CPU, OWN_CPU), (1.0, OWN_CPU), (1.7, OWN_CPU)])
def test_a_saturated_interval_says_whether_its_own_cpu_or_its_node_set_the_pace(cpu: float, cause: str) -> None:
    """`cpu 6% of a core (limit 90%) ... the client set the pace` was said of a process its node did not
    run: its loop ran late while it had CPU to spare."""
    figures = ClientFigures(cpu, lags(*[15 * MS] * 10), True)
    assert starved_by(figures) == cause
    note = interval_note(Interval(3, START, START + SECOND, Tally(good=1), client=figures))
    if cause == OWN_CPU:
        assert f"client saturated by its own CPU: cpu {cpu:.0%} of a core (limit 90%), loop lag p99 15ms" in note
    else:
        assert (f"client saturated by its node, which did not run it on time: loop lag p99 15ms (limit 10ms) "
                f"while it used {cpu:.0%} of a core: the client set the pace") in note


def summary(client: ClientFigures | None, drain: Tally | None = None, end: int = START + 3 * SECOND) -> RunSummary:
    info = RunInfo(settings_from(merge()), ["http://127.0.0.1/"], None, START, 1e9)
    return RunSummary(info, 3, end, START + 3 * SECOND, Tally(), None, None, None, "iterations", 0.1, 0,
                      client=client, drain=drain, last_interval_end_ns=START + 3 * SECOND)


def test_the_run_note_and_the_drain_note() -> None:
    assert run_note(summary(None)) == run_note(summary(ClientFigures())) == ""
    note = run_note(summary(ClientFigures(0.41, lags(12 * MS), True, 2)))
    assert note.startswith("# client saturated in 2 of 3 intervals (cpu 41% of a core")
    assert drain_note(summary(None)) == drain_note(summary(None, Tally())) == ""
    drained = summary(None, Tally(good=500, failed=91), end=START + 13 * SECOND)
    assert drain_note(drained) == ("# after the last interval: 591 responses (500/0/91 good/bad/failed) came back"
                                   " up to 10s later; in the summary's totals, not in the line above\n")
    assert drain_dict(drained) == {"requests": 591, "good": 500, "bad": 0, "failed": 91, "durationSeconds": 10.0}


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
