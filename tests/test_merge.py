"""Merging shards without a network: records round-trip exactly, intervals line up on the grid."""

from __future__ import annotations

import json
import random

import pytest

from runner.config import merge as merge_layers
from runner.config import settings_from
from runner.histogram import LatencyHistogram
from runner.merge import ShardRun, merge_shards
from runner.podlogs import read_pods, split_by_pod
from runner.recorder import Tally
from runner.report import RunInfo
from runner.result import Result

SECOND = 1_000_000_000


def tally_of(latencies_ms: list[int], errors: int = 0, seed: int = 0) -> Tally:
    rng = random.Random(seed)
    tally = Tally()
    for ms in latencies_ms:
        result = Result(start_ns=0, headers_ns=ms * 1_000_000 + rng.randint(0, 999), end_ns=1,
                        status=rng.choice([200, 404, 503]), bytes_in=10)
        tally.add(result, result.headers_ns, 0)
    for _ in range(errors):
        tally.add(Result(error="timeout", error_text="timeout: no response headers within 1s", url_index=1), 0, 0)
    return tally


def test_a_tally_survives_json_exactly() -> None:
    tally = tally_of(list(range(1, 2000)), errors=7)
    back = Tally.from_record(json.loads(json.dumps(tally.to_record())))
    assert back.to_record() == tally.to_record()
    wanted = [50, 90, 99, 99.9, 100]
    assert back.latency.percentiles(wanted) == tally.latency.percentiles(wanted)
    assert (back.latency.min, back.latency.max, back.latency.mean) == (tally.latency.min, tally.latency.max,
                                                                        tally.latency.mean)
    assert back.error_texts == tally.error_texts and back.statuses == tally.statuses


def test_an_empty_histogram_survives_too() -> None:
    back = LatencyHistogram.from_record(LatencyHistogram().to_record())
    assert back.count == 0 and back.percentiles([50]) == {50: 0}


@pytest.mark.parametrize("record", [{}, {"hdr": "not base64!", "min": 0, "max": 0, "sum": 0, "sumSq": 0},
                                    {"hdr": "", "min": "x", "max": 0, "sum": 0, "sumSq": 0}])
def test_a_bad_histogram_record_is_a_value_error(record: dict) -> None:
    with pytest.raises(ValueError):
        LatencyHistogram.from_record(record)


def test_a_bad_tally_record_is_a_value_error() -> None:
    with pytest.raises(ValueError):
        Tally.from_record({"good": 1})


def shard(index: int, count: int, start_wall: float, tallies: list[Tally], interval_s: int = 10) -> ShardRun:
    intervals = [{"iter": k, "startNs": k * interval_s * SECOND, "endNs": (k + 1) * interval_s * SECOND,
                  "sendingEndNs": None, "tally": t.to_record()} for k, t in enumerate(tallies)]
    run = {"index": index, "count": count, "endNs": len(tallies) * interval_s * SECOND,
           "sendingEndNs": len(tallies) * interval_s * SECOND, "stopReason": "iterations", "cpuSeconds": 1.5,
           "maxRssBytes": 40_000_000, "uncorrected": None, "sendLag": None, "inUnit": None}
    config = settings_from(merge_layers({"qps": 30, "concurrency": 3, "interval": f"{interval_s}s"})).effective
    return ShardRun(index, count, start_wall, config, ["http://127.0.0.1:9/"], None, intervals, run)


def test_intervals_match_on_the_grid_even_when_a_shard_started_an_interval_late() -> None:
    a = shard(0, 2, 1_000.0, [tally_of([1] * 10), tally_of([2] * 10), tally_of([3] * 10)])
    late = shard(1, 2, 1_010.0, [tally_of([20] * 5), tally_of([30] * 5)])  # its iter 0 is a's iter 1
    merged = merge_shards([a, late])
    counts = [i.tally.responses for i in merged.intervals]
    assert counts == [10, 15, 15]
    assert [i.end_ns - i.start_ns for i in merged.intervals] == [10 * SECOND] * 3
    assert merged.summary.tally.responses == 40
    assert merged.summary.cpu_seconds == 3.0 and merged.summary.shards["merged"] == [0, 1]
    assert merged.notes == ["the shards did not start together (shard 1: 1 interval late); the first and last "
                            "intervals hold only some shards' load"]


def test_a_shard_that_stopped_early_does_not_shorten_the_others_goal() -> None:
    """Shard 1 stopped (SIGTERM) 4 s into interval 1 while shard 0 sent to its end: sends were
    due all through interval 1, so its goal is the whole interval's, and the shortfall shows."""
    a = shard(0, 2, 1_000.0, [tally_of([1] * 10), tally_of([1] * 10)])
    b = shard(1, 2, 1_000.0, [tally_of([1] * 10), tally_of([1] * 4)])
    b.intervals[1]["sendingEndNs"] = b.intervals[1]["endNs"] = 14 * SECOND
    merged = merge_shards([a, b])
    assert [i.sending_end_ns for i in merged.intervals] == [None, None]
    assert [i.due_span_ns for i in merged.intervals] == [10 * SECOND, 10 * SECOND]
    assert merged.notes == []


def test_merged_percentiles_come_from_the_merged_buckets() -> None:
    fast, slow = tally_of([1] * 99), tally_of([100] * 1)
    merged = merge_shards([shard(0, 2, 0.0, [fast]), shard(1, 2, 0.0, [slow])])
    p = merged.intervals[0].tally.latency.percentiles([50, 99.9])
    assert p[50] // 1_000_000 == 1 and p[99.9] // 1_000_000 == 100
    assert merged.summary.tally.requests == 100


def test_missing_and_incomplete_shards_are_named() -> None:
    merged = merge_shards([shard(0, 4, 0.0, [tally_of([1])]), shard(2, 4, 0.0, [tally_of([1])])], incomplete=[3])
    assert merged.summary.shards == {"count": 4, "merged": [0, 2], "missing": [1], "incomplete": [3]}
    assert merged.notes == ["shard 1 of 4: no output found, not merged",
                            "shard 3 of 4: its output was cut off before its summary, not merged"]


def test_merged_info_is_the_whole_run() -> None:
    merged = merge_shards([shard(0, 2, 5.0, [tally_of([1])]), shard(1, 2, 5.0, [tally_of([1])])])
    info: RunInfo = merged.info
    assert info.shard.alone and info.qps == 30 and info.concurrency == 3 and info.wall_start == 5.0


def test_kubectl_prefixes_split_the_pods_apart() -> None:
    text = ("[pod/a/soak] line 1\n[pod/b/soak] other 1\n[pod/a/soak] line 2\n"
            "[pod/a/linkerd-proxy] proxy says hi\n")
    groups = dict(split_by_pod(text, "stdin"))
    assert groups == {"pod/a/soak": "line 1\nline 2\n", "pod/b/soak": "other 1\n",
                      "pod/a/linkerd-proxy": "proxy says hi\n"}
    assert split_by_pod("no prefixes\n", "file.log") == [("file.log", "no prefixes\n")]


def test_logs_without_a_shard_are_skipped_and_said() -> None:
    found = read_pods([("proxy.log", "some proxy output\n"), ("empty.log", "")])
    assert found.shards == [] and found.notes == ["proxy.log: skipped: not a soak shard's output"]
