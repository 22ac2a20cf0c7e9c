"""The engine's closed, open and bench loops on a scripted clock, against what the schedule says.

No real time and no socket: the clock (tests/support/clock.py) moves only when every client
waits, and the transport answers on it after a latency the test chooses. So each test knows
exactly when every send was due and when the server answered, and checks the engine against
an oracle written out by brute force, send by send: which sends go out and when, which are
skipped, that each due send is accounted for exactly once, and that nothing goes out after a
stop or past a count.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

import pytest

from runner.load.engine import Engine
from runner.load.handoff import Handoff
from runner.load.model import Bench, Closed, Load, LoadModel, Open
from runner.load.request import Request
from runner.load.result import Result
from runner.load.schedule import Ramp, Schedule, Skips
from tests.support.clock import ScriptedClock, ScriptedTransport
from tests.support.sessions import send_numbers, sent

MS = 1_000_000
START = 10**12
REQUEST = Request(method="GET", url="http://unit.invalid/", headers=(), body=b"", hidden=())


@dataclass
class Ran:
    engine: Engine
    records: list[Result | Skips]  # every record the engine's sink heard
    transport: ScriptedTransport  # its log: what the server answered
    schedule: Schedule
    clock: ScriptedClock


def run_engine(model: LoadModel, qps: float, clients: int, seconds: float, latency_ns: int | list[int], *,
               total: int = 0, stop_at_ns: int | None = None, ramp: Ramp | None = None,
               stall: tuple[int, int] | None = None) -> Ran:
    """Run an engine for `seconds` of scripted time (with `ramp`, for its stages instead; with `stall`,
    the process not run from its first moment until its second: ScriptedClock.stall)."""
    clock = ScriptedClock(START - 50 * MS)
    if stall is not None:
        clock.stall(*stall)
    latencies = latency_ns if isinstance(latency_ns, list) else None
    transport = ScriptedTransport(clock, lambda i: latencies[i % len(latencies)] if latencies else latency_ns)
    end = START + (ramp.duration_ns if ramp is not None else round(seconds * 1e9))
    schedule = Schedule(START, qps, clients, end, ramp=ramp)
    records: list[Result | Skips] = []
    engine = Engine(schedule, Load([REQUEST], model, total_requests=total), transport, records.append, clock)

    async def main() -> None:
        if stop_at_ns is None:
            await engine.run()
            return
        running = asyncio.ensure_future(engine.run())
        await clock.sleep_until(stop_at_ns)
        engine.stop(stop_at_ns)
        await running

    clock.run(main())
    return Ran(engine, records, transport, schedule, clock)


def due_sends(schedule: Schedule) -> list[int]:
    """Every send of the run due before its end, by brute force."""
    n, due = 0, []
    while schedule.in_run(n):
        due.append(n)
        n += 1
    return due


def closed_oracle(schedule: Schedule, latency_ns: int) -> tuple[set[int], set[int]]:
    """The closed model, send by send: (sent, skipped) of every client, with the server answering in `latency_ns`.

    A client sends its k-th send at its due time if it is free then; else, when it becomes free,
    it sends the newest send that fell due while it was busy and skips the older ones.
    """
    sent_ns, skipped = set(), set()
    for client in range(schedule.clients):
        free = 0
        k = 0
        while schedule.in_run(n := schedule.send_number(client, k)):
            due = schedule.due_ns(n)
            if due >= free:
                sent_ns.add(n)
                free = due + latency_ns
                k += 1
                continue
            # busy when it fell due: find the newest send due by the time the client is free
            newest = k
            while (schedule.in_run(schedule.send_number(client, newest + 1))
                   and schedule.due_ns(schedule.send_number(client, newest + 1)) <= free):
                newest += 1
            skipped.update(schedule.send_number(client, j) for j in range(k, newest))
            n = schedule.send_number(client, newest)
            if schedule.due_ns(n) <= free and free < schedule.end_ns:  # type: ignore[operator]
                sent_ns.add(n)
                free = free + latency_ns
            elif schedule.due_ns(n) <= free:
                skipped.add(n)  # it fell due while busy and the run was over when the client was free
            else:
                sent_ns.add(n)
                free = schedule.due_ns(n) + latency_ns
            k = newest + 1
    return sent_ns, skipped


def skipped_numbers(records: list[Result | Skips]) -> list[int]:
    return send_numbers([r for r in records if isinstance(r, Skips)])


@pytest.mark.parametrize(("qps", "clients", "latency_ms"), [(100, 5, 1), (100, 5, 50), (10, 1, 1), (50, 2, 19.9)])
def test_closed_clients_that_keep_pace_send_every_send_on_time(qps: float, clients: int, latency_ms: float) -> None:
    ran = run_engine(Closed(), qps, clients, 2.0, round(latency_ms * MS))
    assert send_numbers(ran.records) == due_sends(ran.schedule)  # every due send, once
    assert not skipped_numbers(ran.records)
    for result in sent(ran.records):
        assert result.start_ns == result.due_ns == ran.schedule.due_ns(result.seq)  # on time to the nanosecond
        assert result.client_lag_ns == 0
    assert ran.engine.sent == len(ran.transport.log) == len(due_sends(ran.schedule))


@pytest.mark.parametrize(("qps", "clients", "latency_ms"), [(100, 5, 130), (100, 1, 35), (30, 3, 101), (100, 2, 20)])
def test_a_slow_server_makes_closed_clients_skip_what_fell_due_while_busy(qps: float, clients: int,
                                                                          latency_ms: int) -> None:
    ran = run_engine(Closed(), qps, clients, 2.0, latency_ms * MS)
    expected_sent, expected_skipped = closed_oracle(ran.schedule, latency_ms * MS)
    assert {r.seq for r in sent(ran.records)} == expected_sent
    assert set(skipped_numbers(ran.records)) == expected_skipped
    assert send_numbers(ran.records) == due_sends(ran.schedule)  # sent + skipped = due, each once
    for result in sent(ran.records):
        assert result.client_lag_ns == 0  # late only by the server's doing, never the client's
        assert result.start_ns >= result.due_ns


@pytest.mark.parametrize("max_in_flight", [1, 3, 1000])
def test_open_clients_send_on_time_whatever_is_in_flight_up_to_the_bound(max_in_flight: int) -> None:
    ran = run_engine(Open(max_in_flight), 100, 2, 1.0, 45 * MS)
    due = due_sends(ran.schedule)
    assert send_numbers(ran.records) == due
    made = sent(ran.records)
    for result in made:
        assert result.start_ns == result.due_ns  # on time: the open model never waits for a response
    # The oracle: a send is made if fewer than max_in_flight are in flight at its due time.
    in_flight: list[int] = []
    expected = set()
    for n in due:
        at = ran.schedule.due_ns(n)
        in_flight = [end for end in in_flight if end > at]
        if len(in_flight) < max_in_flight:
            expected.add(n)
            in_flight.append(at + 45 * MS)
    assert {r.seq for r in made} == expected
    assert max(sum(1 for s, e in ran.transport.log if s <= t < e) for t, _ in ran.transport.log) <= max_in_flight


def test_open_latency_counts_from_the_due_time() -> None:
    ran = run_engine(Open(1000), 100, 1, 0.5, [5 * MS, 35 * MS])
    for result in sent(ran.records):
        assert Open(1000).latency_ns(result) == result.headers_ns - result.due_ns


@pytest.mark.parametrize(("clients", "total"), [(1, 10), (4, 10), (4, 4), (5, 101)])
def test_a_bench_sends_exactly_its_count_as_fast_as_answers_come(clients: int, total: int) -> None:
    ran = run_engine(Bench(), 1.0, clients, 3600.0, 3 * MS, total=total)
    made = sent(ran.records)
    assert sorted(r.seq for r in made) == list(range(total)) and not skipped_numbers(ran.records)
    assert ran.engine.sent == len(ran.transport.log) == total
    # Each client sends again the moment its answer comes: no pacing, so no gaps.
    rounds = -(-total // clients)
    assert max(end for _, end in ran.transport.log) == START + rounds * 3 * MS


def test_a_bench_ends_by_its_time() -> None:
    ran = run_engine(Bench(), 1.0, 3, 0.1, 7 * MS)
    assert all(start < ran.schedule.end_ns for start, _ in ran.transport.log)  # type: ignore[operator]
    assert len(sent(ran.records)) == 3 * 15  # 15 rounds start before 100 ms (0, 7, ..., 98 ms)


@pytest.mark.parametrize("model", [Closed(), Open(1000)])
def test_nothing_goes_out_after_a_stop_and_what_fell_due_before_it_is_counted(model: LoadModel) -> None:
    stop = START + 733 * MS
    ran = run_engine(model, 100, 5, 2.0, 120 * MS, stop_at_ns=stop)
    assert all(start < stop for start, _ in ran.transport.log)
    due_before = [n for n in due_sends(ran.schedule) if ran.schedule.due_ns(n) < stop]
    assert send_numbers(ran.records) == due_before  # sent + skipped = due by the stop, each once
    assert ran.engine.stopped_sending_ns == stop


@pytest.mark.parametrize("model", [Closed(), Open(1000)])
def test_a_client_stalled_across_the_end_sends_nothing_after_it(model: LoadModel) -> None:
    """Not run from 1.5 s to 2.5 s of a 2 s run (a process stopped, or not scheduled by its node): the
    sends due before the stall went out on time; those due in it were not made by the end, and
    once sending is over none goes out late, in either model: each is skipped, as one the client
    got to only after the end (the closed model sent one per client after the end, into the drain)."""
    stall = (START + 1_500 * MS, START + 2_500 * MS)
    ran = run_engine(model, 60, 4, 2.0, MS, stall=stall)
    end = ran.schedule.end_ns
    assert end is not None and all(start < stall[0] for start, _ in ran.transport.log)  # none after the end
    due = due_sends(ran.schedule)
    assert send_numbers(ran.records) == due  # sent + skipped = due, each once
    stalled = [n for n in due if ran.schedule.due_ns(n) >= stall[0]]
    assert skipped_numbers(ran.records) == stalled and len(stalled) == 30
    assert all(r.at_end for r in ran.records if isinstance(r, Skips))  # the client's own: it got to them too late


def test_a_count_is_sent_exactly_and_its_time_ends_with_its_last_slot() -> None:
    ran = run_engine(Closed(), 100, 5, 10.0, 1 * MS, total=123)
    assert len(ran.transport.log) == ran.engine.sent == 123 and not skipped_numbers(ran.records)
    assert ran.engine.stopped_sending_ns == ran.schedule.due_ns(123)  # the end of the 123rd send's slot


def test_the_clock_wakes_the_engine_once_per_due_time_of_a_paced_run() -> None:
    """One wake-up per distinct moment something is due or answered: no client spins."""
    clock_runs: list[int] = []
    ran = run_engine(Closed(), 100, 5, 1.0, 2 * MS)
    clock_runs.append(len(ran.transport.log))
    assert clock_runs == [100]


# Up to 200 req/s over 1 s, held for half a second, down to 0 over 1 s: 100 + 100 + 100 sends.
RAMP = Ramp.of([(1_000 * MS, 200), (500 * MS, 200), (1_000 * MS, 0)])


@pytest.mark.parametrize("model", [Closed(), Open(1000)])
def test_a_ramps_sends_go_out_at_the_ramps_due_times(model: LoadModel) -> None:
    ran = run_engine(model, 200, 4, 0, 1 * MS, ramp=RAMP)
    assert send_numbers(ran.records) == due_sends(ran.schedule) == list(range(300))  # the ramp's 300, each once
    assert not skipped_numbers(ran.records)
    for result in sent(ran.records):
        assert result.start_ns == result.due_ns == START + RAMP.due_ns(result.seq)  # on time to the nanosecond
    assert ran.engine.sent == len(ran.transport.log) == 300


def test_a_slow_server_on_a_ramp_skips_what_the_closed_oracle_says() -> None:
    ran = run_engine(Closed(), 200, 3, 0, 40 * MS, ramp=RAMP)
    expected_sent, expected_skipped = closed_oracle(ran.schedule, 40 * MS)
    assert {r.seq for r in sent(ran.records)} == expected_sent
    assert set(skipped_numbers(ran.records)) == expected_skipped
    assert expected_skipped  # at the top of the ramp, 40 ms is slower than each client's 15 ms
    assert send_numbers(ran.records) == list(range(300))  # sent + skipped = the ramp's sends, each once


def test_a_run_takes_over_its_warmups_sessions_and_what_fell_due_while_they_were_busy_is_skipped() -> None:
    # A warm-up of 1 s then a run of 1 s, at 10 req/s from one client, against a server that
    # answers in 300 ms: the warm-up's send 9, due at 900 ms, is answered at 1,200 ms, after the
    # run's sends 0 and 1 fell due; the run's client takes the session over then, as if it had
    # sent that request itself: 0 and 1 skipped, 2 (due at 1,200 ms) sent at once.
    clock = ScriptedClock(START - 50 * MS)
    sessions: list[object] = []

    class Counting(ScriptedTransport):
        def session(self):  # type: ignore[no-untyped-def]
            sessions.append(super().session())
            return sessions[-1]

    transport = Counting(clock, lambda i: 300 * MS)
    handoff = Handoff()
    taken: list[tuple[list[str], int]] = []
    handoff.taken = lambda held, free_ns: taken.append((held, free_ns))
    warm = Schedule(START, 10, 1, START + 1_000 * MS)
    run = Schedule(START + 1_000 * MS, 10, 1, START + 2_000 * MS)
    warm_records: list[Result | Skips] = []
    run_records: list[Result | Skips] = []
    warm_engine = Engine(warm, Load([REQUEST], Closed(), give_sessions=handoff), transport, warm_records.append, clock)
    run_engine_ = Engine(run, Load([REQUEST], Closed(), take_sessions=handoff), transport, run_records.append, clock)

    async def main() -> None:
        await asyncio.gather(warm_engine.run(), run_engine_.run())

    clock.run(main())
    assert len(sessions) == 1  # one connection's worth: the run opened none of its own
    assert taken == [(["HTTP/1.1"], START + 1_200 * MS)]  # the run is told what it took over, and from when
    assert skipped_numbers(run_records)[:2] == [0, 1]
    first = sent(run_records)[0]
    assert (first.seq, first.start_ns) == (2, START + 1_200 * MS)
    assert send_numbers(run_records) == due_sends(run)  # every due send of the run sent or skipped, once
    assert send_numbers(warm_records) == due_sends(warm)


@pytest.mark.parametrize("model", [Closed(), Open(10)])
def test_a_run_stopped_while_its_clients_wait_for_the_warmups_sessions_still_counts_every_due_send(
        model: LoadModel) -> None:
    # The warm-up's requests take 5 s; the run's client is still waiting for the session when the
    # run, 1 s long, is stopped and abandoned: every send it had due is skipped, none lost.
    clock = ScriptedClock(START - 50 * MS)
    transport = ScriptedTransport(clock, lambda i: 5_000 * MS)
    handoff = Handoff()
    warm = Schedule(START, 10, 1, START + 500 * MS)
    run = Schedule(START + 500 * MS, 10, 1, START + 1_500 * MS)
    run_records: list[Result | Skips] = []
    warm_engine = Engine(warm, Load([REQUEST], model, give_sessions=handoff), transport, lambda r: None, clock)
    run_engine_ = Engine(run, Load([REQUEST], model, take_sessions=handoff), transport, run_records.append, clock)

    async def main() -> None:
        warming = asyncio.ensure_future(warm_engine.run())
        running = asyncio.ensure_future(run_engine_.run())
        await clock.sleep_until(START + 1_600 * MS)
        run_engine_.stop(START + 1_500 * MS)
        run_engine_.cancel_in_flight()
        await asyncio.wait([running])
        warm_engine.cancel_in_flight()
        await asyncio.wait([warming])

    clock.run(main())
    assert not sent(run_records)
    assert send_numbers(run_records) == due_sends(run) == list(range(10))
