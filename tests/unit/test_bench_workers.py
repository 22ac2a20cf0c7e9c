"""`soak bench --workers N`, the pure parts: how a bench is split, and how the workers' ab
figures merge, checked against brute force: k workers' merged report is the report of one
process that saw every request."""

from __future__ import annotations

import dataclasses
import json
import random
import statistics

import pytest

from runner.config.settings import merge, settings_from
from runner.core.errors import UsageError
from runner.load.result import Result
from runner.load.shards import Shard
from runner.report.abreport import report
from runner.report.summary import summary_dict
from runner.run.build import split_of
from runner.stats.merge import merged_bench
from runner.stats.record import bench_from_record, bench_record
from runner.stats.recorder import BenchTally, Tally
from runner.stats.runinfo import RunInfo, RunSummary

START = 7_000_000_000_000  # the parent's clock at the run's start
WALL = 1_767_225_600.0
MS = 1_000_000
SEEDS = 24


# --- splitting ---------------------------------------------------------------------------------


def shares(total: int, workers: int) -> list[int]:
    return [Shard(0, 1, w, workers).share(total) for w in range(workers)]


def test_n_and_c_split_so_the_parts_add_up_exactly() -> None:
    assert shares(10, 3) == [4, 3, 3]
    assert shares(1000, 2) == [500, 500]
    for total in range(1, 120):
        for workers in range(1, min(total, 9) + 1):
            parts = shares(total, workers)
            assert sum(parts) == total and max(parts) - min(parts) <= 1 and min(parts) >= 1


def bench_settings(**layer: object):  # -> Settings
    return settings_from(merge({"mode": "bench", "totalRequests": 1000, "concurrency": 4, **layer}))


def test_a_bench_splits_over_workers() -> None:
    assert split_of(bench_settings(workers=3)) == Shard(0, 1, 0, 3)


@pytest.mark.parametrize("layer, message", [
    ({"concurrency": 1, "workers": 2},
     "-c: 1 is not allowed with workers: 2; must be at least the number of workers, so that every worker has its share"),
    ({"totalRequests": 2, "concurrency": 3, "workers": 3},
     "-n: 2 is not allowed with workers: 3; must be at least the number of workers, so that every worker has its share"),
    ({"shards": 2, "shard": 0}, "mode: bench runs in one pod; shards split soaks only (local workers split a bench too)"),
])
def test_a_bench_that_cannot_be_split_is_refused_in_one_line(layer: dict, message: str) -> None:
    with pytest.raises(UsageError) as refused:
        split_of(bench_settings(**layer))
    assert str(refused.value) == message


# --- merging: k workers against one process ----------------------------------------------------


def random_sends(rng: random.Random, n: int) -> list[Result]:
    """Sends as a bench makes them, times from the run's start: new and kept-alive connections,
    bodies of a few lengths (so Length failures), failures with and without a response head."""
    sends = []
    for _ in range(n):
        start = rng.randrange(0, 2000 * MS)
        head = rng.choice([230, 230, 231])
        if rng.random() < 0.1:  # a failure: not timed, but its bytes and its end count
            status = rng.choice([0, 200])
            sends.append(Result(start_ns=start, end_ns=start + rng.randrange(1, 50 * MS), error="reset",
                                status=status, header_bytes=head if status else 0, server="nginx" if status else ""))
            continue
        connected = start + rng.randrange(1, 3 * MS) if rng.random() < 0.5 else 0
        written = (connected or start) + rng.randrange(0, 100_000)
        headers = written + int(rng.expovariate(1 / MS)) + 1
        end = headers + rng.randrange(0, 2 * MS)
        sends.append(Result(start_ns=start, connected_ns=connected, written_ns=written, headers_ns=headers, end_ns=end,
                            status=rng.choice([200, 200, 404]), bytes_in=rng.choice([612] * 6 + [100, 0, 700]),
                            header_bytes=head, server=rng.choice(["nginx", "nginx", "", "other"]),
                            kept_alive=rng.random() < 0.7))
    return sorted(sends, key=lambda r: r.end_ns)  # the order one process records them in


def moved(result: Result, by: int) -> Result:
    """The same send on a clock `by` ns on (0 stays 0: a moment that did not happen)."""
    times = {name: getattr(result, name) + by if getattr(result, name) else 0
             for name in ("start_ns", "connected_ns", "written_ns", "headers_ns", "end_ns")}
    return dataclasses.replace(result, **times)


def one_process(sends: list[Result]) -> BenchTally:
    bench = BenchTally()
    for send in sends:
        bench.add(moved(send, START))
    return bench


def scenario(seed: int) -> tuple[list[Result], list[tuple[BenchTally, int]]]:
    """Random sends dealt out to 1 to 5 workers, each on a clock of its own: (sends, [(worker's tally, its start)])."""
    rng = random.Random(seed)
    sends = random_sends(rng, rng.choice([1, 2, 5, 50, 400]))
    k = rng.randint(1, 5)
    clocks = [rng.randrange(1, 10**15) for _ in range(k)]
    parts = [BenchTally() for _ in range(k)]
    for send in sends:
        w = rng.randrange(k)
        parts[w].add(moved(send, clocks[w]))
    return sends, list(zip(parts, clocks))


def sent_home_and_merged(parts: list[tuple[BenchTally, int]]) -> BenchTally:
    """Each worker's figures sent home as JSON, read back on the parent's clock, and merged."""
    records = [json.loads(json.dumps(bench_record(part, clock))) for part, clock in parts]
    return merged_bench([bench_from_record(record, START) for record in records])


def ab_summary(bench: BenchTally, sends: list[Result]) -> dict:
    """The summary dict ab's report is printed from, of a run that made `sends`."""
    tally = Tally()
    for send in sends:
        tally.add(send, send.end_ns - send.start_ns, 0)
    info = RunInfo(settings_from(merge({"mode": "bench", "totalRequests": len(sends), "concurrency": 4})),
                   ["http://127.0.0.1/"], None, START, WALL)
    summary = RunSummary(info, 3, START + 2100 * MS, START + 2000 * MS, tally, None, None, None, "totalRequests",
                         0.5, 1, bench=bench)
    return summary_dict(summary)


@pytest.mark.parametrize("seed", range(SEEDS))
def test_k_workers_merged_report_exactly_what_one_process_does(seed: int) -> None:
    sends, parts = scenario(seed)
    whole, merged = one_process(sends), sent_home_and_merged(parts)
    expected, got = ab_summary(whole, sends), ab_summary(merged, sends)
    assert got["bench"] == expected["bench"]  # every figure, each phase's HDR histogram included
    assert report(got) == report(expected)
    for name, histogram in merged.phases().items():  # ab's sd: of the sample, from the sum of squares
        assert (histogram.count, histogram.sum, histogram.sum_sq) == (whole.phases()[name].count,
                                                                      whole.phases()[name].sum,
                                                                      whole.phases()[name].sum_sq)
    timed = [s for s in sends if not s.error]
    if len(timed) > 1:
        truth = statistics.stdev(s.end_ns - s.start_ns for s in timed)
        assert merged.total.stdev(sample=True) == pytest.approx(truth, rel=1e-9)


def test_length_is_counted_against_the_runs_first_response_whoever_got_it() -> None:
    """Worker 1 answered first, with 100 bytes; worker 0's own first was 612: every 612 is a
    Length failure of the run, and the 100 that worker 0 counted against its own 612 is not."""
    answered = [[(5, 612), (6, 612), (7, 100), (8, 612)], [(1, 100), (2, 612), (3, 100)]]  # (end ms, bytes)
    parts = []
    for answers in answered:
        bench = BenchTally()
        for end, size in answers:
            bench.add(Result(start_ns=0, headers_ns=end * MS, end_ns=end * MS, status=200, bytes_in=size))
        parts.append(bench)
    assert [(p.document_length, p.length_mismatches) for p in parts] == [(612, 1), (100, 1)]
    merged = merged_bench(parts)
    assert (merged.document_length, merged.length_mismatches) == (100, 4)


def test_the_brute_force_meets_workers_whose_first_lengths_differ() -> None:
    """The random runs above include the case of the test before (else they would prove less)."""
    differing = 0
    for seed in range(SEEDS):
        firsts = {part.document_length for part, _ in scenario(seed)[1] if part.document_length is not None}
        differing += len(firsts) > 1
    assert differing >= 5


def test_no_worker_answered_merges_to_an_empty_bench() -> None:
    merged = merged_bench([BenchTally(), BenchTally()])
    assert (merged.document_length, merged.server, merged.last_end_ns, merged.total.count) == (None, None, 0, 0)
