"""The native engine's schedule arithmetic (runner/load/native/schedule.h) is schedule.py's, exactly.

A ramp's (stages) is not arithmetic in C: it is handed the ramp's due times (Ramp.due_times),
and every answer it gives from them must be schedule.py's from the ramp itself.

Every search in schedule.h starts from a floating-point estimate and settles it against the
due times, as schedule.py does; here both answer the same questions on random schedules
(rates that do not divide a second, shards, ends, moments before the start and after the
end) and on the edges (exactly at a due time, a nanosecond either side). Integration tier
only because the C has to be compiled first; no socket is opened. So is the histogram's layout:
its counts_len is hdrh's for every range the engine keeps.
"""

from __future__ import annotations

import random
from fractions import Fraction

import pytest
from hdrh.histogram import HdrHistogram

from runner.core.units import NS_PER_S
from runner.load.schedule import Ramp, Schedule
from runner.stats.histogram import HIGHEST_NS
from tests.support.nativerun import native_engine_module


@pytest.fixture(scope="module")
def native(tmp_path_factory: pytest.TempPathFactory):  # -> the _engine module
    return native_engine_module(tmp_path_factory.mktemp("native-schedule"))


def python_answers(s: Schedule, client: int, k: int, free_ns: int, now_ns: int) -> dict[str, int]:
    n = s.send_number(client, k)
    next_k, skipped = s.catch_up(client, k, free_ns, now_ns)
    last = s.last_due_by(client, now_ns)
    end = s.end_k(client) if hasattr(s, "end_k") else None
    if end is None and s.end_ns is not None:
        end = s.last_due_by(client, s.end_ns - 1) + 1
    last_in_run = max(min(last, end - 1) if end is not None else last, k - 1)
    return {"send_number": n, "due_ns": s.due_ns(n), "last_due_by": last, "last_send_by": s.last_send_by(now_ns),
            "last_in_run": last_in_run, "in_run": int(s.in_run(n)), "before_end": int(s.before_end(now_ns)),
            "catch_up_k": next_k, "catch_up_skipped": skipped, "slot_end": s.slot_end_ns(n)}


def test_schedule_h_answers_as_schedule_py_does(native) -> None:  # noqa: ANN001
    rng = random.Random(2026)
    for _ in range(20_000):
        start = rng.randrange(0, 10**15)
        qps = rng.choice([1.0, 7.0, 100.0, 333.3, 1e4, 123456.789, 1e6, 4e8, rng.uniform(0.01, 2e6)])  # 4e8: halves
        clients, stride = rng.randrange(1, 60), rng.choice([1, 1, 2, 3, 7])
        offset = rng.randrange(stride)
        span = int(rng.uniform(0, 3600) * 1e9)
        end = None if rng.random() < 0.3 else start + span
        s = Schedule(start, qps, clients, end, stride=stride, offset=offset)
        client, k = rng.randrange(clients), rng.randrange(0, 10**6)
        due = s.due_ns(s.send_number(client, rng.randrange(0, 10**7)))
        now = rng.choice([due, due - 1, due + 1, start - rng.randrange(1, 10**10), start + rng.randrange(0, 10**13)])
        if end is not None and now > end:
            # main's catch_up steps back one send at a time from `now` to the end: keep that walk short
            now = end + rng.randrange(0, int(50 * 1e9 / qps) + 1)
        free = now - rng.randrange(0, 10**10)
        got = native.schedule(start, qps, clients, end, stride, offset, client, k, free, now)
        assert got == python_answers(s, client, k, free, now), (s, client, k, free, now)


def random_ramp(rng: random.Random) -> Ramp:
    """Up to four stages of 1 ms to 20 s, each to a rate that may be 0, fractional or high."""
    stages = []
    for _ in range(rng.randrange(1, 5)):
        duration = rng.choice([NS_PER_S // 1000, NS_PER_S, 3 * NS_PER_S, rng.randrange(1, 20 * NS_PER_S)])
        qps = rng.choice([0, 1, 20, 100, Fraction(333, 10), Fraction(7, 3), rng.randrange(1, 5_000)])
        stages.append((duration, qps))
    if all(q == 0 for _, q in stages):
        stages[-1] = (stages[-1][0], 50)
    return Ramp.of(stages)


def test_schedule_h_answers_a_ramp_as_schedule_py_does_from_its_due_times(native) -> None:  # noqa: ANN001
    rng = random.Random(34)
    for _ in range(300):
        ramp = random_ramp(rng)
        dues = ramp.due_times()
        start = rng.randrange(0, 10**15)
        clients, stride = rng.randrange(1, 20), rng.choice([1, 1, 2, 3])
        offset = rng.randrange(stride)
        end = start + rng.choice([ramp.duration_ns, ramp.duration_ns, rng.randrange(1, ramp.duration_ns + 1)])
        s = Schedule(start, float(ramp.peak_qps), clients, end, stride=stride, offset=offset, ramp=ramp)
        sends = len(dues) - 1
        for _ in range(60):
            client, k = rng.randrange(clients), rng.randrange(0, sends // (clients * stride) + 3)
            due = s.due_ns(s.send_number(client, rng.randrange(0, sends + 2)))
            now = rng.choice([due, due - 1, due + 1, start - rng.randrange(1, 10**10),
                              start + rng.randrange(0, ramp.duration_ns + 10**10)])
            now = min(now, end + rng.randrange(0, 10**9))
            free = now - rng.randrange(0, 10**10)
            got = native.schedule(start, float(ramp.peak_qps) or 1.0, clients, end, stride, offset, client, k, free,
                                  now, dues)
            assert got == python_answers(s, client, k, free, now), (ramp, s, client, k, free, now)


@pytest.mark.parametrize("unit_ns", [1, 1_000, 1_000_000, 1_000_000_000])
def test_counts_len_is_hdrhs(native, unit_ns: int) -> None:  # noqa: ANN001
    highest = max(HIGHEST_NS // unit_ns, 2)
    assert native.counts_len(highest) == HdrHistogram(1, highest, 3).counts_len
