"""Merging shards without a network: records round-trip exactly, intervals line up on the grid."""

from __future__ import annotations

import io
import json
import random
import re
from collections.abc import Iterator, Sequence
from dataclasses import replace

import pytest

from runner.config.settings import merge as merge_layers
from runner.config.settings import settings_from
from runner.core.errors import UsageError
from runner.core.units import rfc3339
from runner.load.result import Result
from runner.readback.podlogs import read_pods, split_by_pod, split_runs
from runner.report.outcome import interrupted_line
from runner.report.verdict import Verdict
from runner.stats.histogram import LatencyHistogram
from runner.stats.merge import merge_shards, merged_engine, merged_info
from runner.stats.record import (
    ShardRun,
    check_run_record,
    histogram_from_record,
    histogram_record,
    tally_from_record,
    tally_record,
    warmup_from_record,
    warmup_record,
)
from runner.stats.recorder import Tally, phased
from runner.stats.runinfo import RunInfo, Warmup

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
    back = tally_from_record(json.loads(json.dumps(tally_record(tally))))
    assert tally_record(back) == tally_record(tally)
    wanted = [50, 90, 99, 99.9, 100]
    assert back.latency.percentiles(wanted) == tally.latency.percentiles(wanted)
    assert (back.latency.min, back.latency.max, back.latency.mean) == (tally.latency.min, tally.latency.max,
                                                                        tally.latency.mean)
    assert back.error_groups == tally.error_groups and back.statuses == tally.statuses


def test_texts_read_back_from_a_record_are_printable_as_a_runs_own() -> None:
    """A shard's record comes from a log anyone may have written: its backend names and failure
    texts are made printable as a run makes its own (they reached the terminal raw in a merge);
    what a run wrote comes back the same."""
    tally = tally_of([1, 2], errors=2)
    tally.count_backend("pod-a", 2)
    record = json.loads(json.dumps(tally_record(tally)))
    assert tally_record(tally_from_record(record)) == tally_record(tally)
    record["backends"] = {"pod-\x1b[2J": 2}
    record["errorGroups"][0] |= {"text": "timeout\x07 \u202e", "pattern": "timeout\x07"}
    back = tally_from_record(record)
    assert list(back.backends) == ["pod-\\x1b[2J"]
    assert [(key, group.text) for key, group in back.error_groups.items()] == [
        (("timeout", "timeout\\x07"), "timeout\\x07 \\u202e")]
    info = RunInfo(settings_from(merge_layers({})), ["http://h/\x1b[31m"], None, 0, 1e9)
    assert info.urls == ["http://h/\\x1b[31m"]


def test_an_empty_histogram_survives_too() -> None:
    back = histogram_from_record(histogram_record(LatencyHistogram()))
    assert back.count == 0 and back.percentiles([50]) == {50: 0}


@pytest.mark.parametrize("record", [{}, {"hdr": "not base64!", "min": 0, "max": 0, "sum": 0, "sumSq": 0},
                                    {"hdr": "", "min": "x", "max": 0, "sum": 0, "sumSq": 0}])
def test_a_bad_histogram_record_is_a_value_error(record: dict) -> None:
    with pytest.raises(ValueError):
        histogram_from_record(record)


def test_a_bad_tally_record_is_a_value_error() -> None:
    with pytest.raises(ValueError):
        tally_from_record({"good": 1})


def shard(index: int, count: int, start_wall: float, tallies: list[Tally], interval_s: int = 10,
          qps: float = 30, **layer: object) -> ShardRun:
    intervals = [{"iter": k, "startNs": k * interval_s * SECOND, "endNs": (k + 1) * interval_s * SECOND,
                  "sendingEndNs": None, "tally": tally_record(t)} for k, t in enumerate(tallies)]
    run = {"index": index, "count": count, "endNs": len(tallies) * interval_s * SECOND,
           "sendingEndNs": len(tallies) * interval_s * SECOND, "stopReason": "iterations", "cpuSeconds": 1.5,
           "maxRssBytes": 40_000_000, "uncorrected": None, "sendLag": None, "inUnit": None}
    config = settings_from(merge_layers({"qps": qps, "concurrency": 3, "interval": f"{interval_s}s", **layer})).effective
    return ShardRun(index, count, start_wall, config, ["http://127.0.0.1:9/"], None, intervals, run)


def test_intervals_match_on_the_grid_even_when_a_shard_started_an_interval_late() -> None:
    a = shard(0, 2, 1_000.0, [tally_of([1] * 10), tally_of([2] * 10), tally_of([3] * 10)])
    late = shard(1, 2, 1_010.0, [tally_of([20] * 5), tally_of([30] * 5)])  # its iter 0 is a's iter 1
    merged = merge_shards([a, late])
    intervals = list(merged.intervals)
    counts = [i.tally.responses for i in intervals]
    assert counts == [10, 15, 15]
    assert [i.end_ns - i.start_ns for i in intervals] == [10 * SECOND] * 3
    assert merged.summary().tally.responses == 40
    assert merged.summary().cpu_seconds == 3.0 and merged.summary().shards["merged"] == [0, 1]
    assert merged.notes == ["the shards did not start together (shard 1: 1 interval late); the first and last "
                            "intervals hold only some shards' load"]


def test_a_shard_that_stopped_early_does_not_shorten_the_others_goal() -> None:
    """Shard 1 stopped sending 4 s into interval 1 (its own end, not a signal's: see below) while
    shard 0 sent to its end: the goal is each shard's share for the time it was sending, 10 s + 4 s
    at half the rate, 7 s at the full one (it was cut to the stopped shard's 4 s, and 51 of 30 read
    as 100%)."""
    a = shard(0, 2, 1_000.0, [tally_of([1] * 10), tally_of([1] * 10)])
    b = shard(1, 2, 1_000.0, [tally_of([1] * 10), tally_of([1] * 4)])
    b.intervals[1]["sendingEndNs"] = b.intervals[1]["endNs"] = 14 * SECOND
    merged = merge_shards([a, b])
    intervals = list(merged.intervals)
    assert [i.sending_end_ns for i in intervals] == [None, None]
    assert [i.due_span_ns for i in intervals] == [10 * SECOND, 7 * SECOND]
    assert [i.due for i in intervals] == pytest.approx([300, 210])  # at 30 req/s: 10 s, then 10 s + 4 s at half
    assert merged.summary().due == pytest.approx(510)
    assert merged.notes == []


def stopped_by_sigterm(s: ShardRun, at_s: float) -> ShardRun:
    """The shard as a pod evicted `at_s` seconds into its run leaves it: its last interval cut there."""
    at = round(at_s * SECOND)
    records = [json.loads(json.dumps(r)) for r in s.intervals if r["startNs"] < at]
    records[-1]["sendingEndNs"] = records[-1]["endNs"] = at
    return replace(s, intervals=records, totals={**(s.totals or {}), "endNs": at, "sendingEndNs": at,
                                                 "stopReason": "signal SIGTERM"})


def test_a_shard_stopped_by_a_signal_owes_its_share_until_the_others_stop() -> None:
    """A pod evicted 14 s into a 30 s run kept its log, merged with the one that ran on: the goal
    counted only the shards still sending, so goal% read 100% "ok" for a run that lacked half its
    load from then on, and only the exit code (7) said the run was cut. Its share stays in the goal
    until the others stopped, as a missing shard's does; the merge says which shard and when, the
    verdict too, and the exit code is a missing part's (5)."""
    a = shard(0, 2, 1_000.0, [tally_of([1] * 150, seed=k) for k in range(3)])
    b = stopped_by_sigterm(shard(1, 2, 1_000.0, [tally_of([1] * 150, seed=k) for k in range(3)]), 14)
    merged = merge_shards([a, b])
    intervals = list(merged.intervals)
    assert [i.due for i in intervals] == pytest.approx([300, 300, 300])  # 30 req/s over each 10 s: both shards'
    summary = merged.summary()
    assert summary.due == pytest.approx(900) and summary.figures.goal_percent < 90
    assert summary.shards is not None
    assert summary.shards["stopped"] == [{"shard": 1, "stopReason": "signal SIGTERM", "sendingSeconds": 14.0,
                                          "notSentSeconds": 16.0}]
    said = "shard 1 of 2 stopped by SIGTERM after 14s of 10m0s, 16s before the others"
    assert merged.notes == [f"{said}: its share of the rest was not sent, and stays in the goal"]
    assert not merged.complete
    assert summary.stopped_before_the_others() == [said]
    assert interrupted_line(summary) == ("stopped by SIGTERM before its planned end: shard 1 of 2 after 14s of 10m0s: "
                                         "its share of the rest was not sent while the others went on, and stays in "
                                         "the goal")
    out = io.StringIO()
    verdict = Verdict.for_settings(settings_from(merge_layers({"thresholds": ["goal% >= 95"]})), out)
    assert verdict is not None
    verdict.finish(summary)
    assert out.getvalue().splitlines()[-2:] == [
        "# thresholds: 1 of 1 broken",
        f"# thresholds judged with {said}: its share of the rest counts as due and not sent"]


def test_shards_a_signal_stopped_together_are_a_run_cut_short_not_a_part_missing() -> None:
    """A Job deleted: its pods stop within moments of each other. What the first owes until the last
    stopped is in the goal, but no part is missing: the run was cut (7), as one process's is."""
    a = stopped_by_sigterm(shard(0, 2, 1_000.0, [tally_of([1] * 150, seed=k) for k in range(3)]), 14)
    b = stopped_by_sigterm(shard(1, 2, 1_000.0, [tally_of([1] * 150, seed=k) for k in range(3)]), 14.2)
    merged = merge_shards([a, b])
    intervals = list(merged.intervals)
    assert [i.due for i in intervals] == pytest.approx([300, 30 * (4 + 4.2 + 0.2) / 2])
    assert merged.complete and merged.notes == []
    summary = merged.summary()
    assert summary.stopped_before_the_others() == []
    assert interrupted_line(summary) == ("stopped by SIGTERM before its planned end: shard 0 of 2 after 14s of 10m0s, "
                                         "shard 1 of 2 after 14.2s of 10m0s: the results cover only that")


def test_shards_started_an_interval_apart_keep_a_true_goal() -> None:
    """Shard 1 started one interval after shard 0: the edge intervals hold one shard's share
    each, and their goal is that share's (they read 50%, and the run 74%, for a perfect run)."""
    a = shard(0, 2, 1_000.0, [tally_of([1] * 150), tally_of([1] * 150)])
    late = shard(1, 2, 1_010.0, [tally_of([1] * 150), tally_of([1] * 150)])
    merged = merge_shards([a, late])
    intervals = list(merged.intervals)
    assert [i.due_span_ns for i in intervals] == [5 * SECOND, 10 * SECOND, 5 * SECOND]
    assert [i.due for i in intervals] == pytest.approx([150, 300, 150])
    assert merged.summary().due == pytest.approx(600)  # 600 sends due at 30 req/s: all answered
    assert merged.summary().figures.goal_percent == 100


def test_shards_of_a_ramp_started_an_interval_apart_each_keep_their_own_ramps_goal() -> None:
    """With stages, each shard ramps from its own start: shard 1, an interval late, owes in each
    interval what its own ramp made due there, not the merged clock's ramp (0 -> 30 req/s over
    20 s: 75 then 225 sends due in its 10 s intervals, half of them each shard's)."""
    stages = {"stages": [{"duration": "20s", "qps": 30}]}
    a = shard(0, 2, 1_000.0, [tally_of([1] * 37), tally_of([1] * 113)], **stages)
    late = shard(1, 2, 1_010.0, [tally_of([1] * 38), tally_of([1] * 112)], **stages)
    merged = merge_shards([a, late])
    assert [i.due for i in merged.intervals] == pytest.approx([37.5, 112.5 + 37.5, 112.5])
    assert merged.summary().due == pytest.approx(300)  # both shards' whole ramps: 150 sends each


def test_a_missing_shard_still_owes_its_share() -> None:
    """A shard with no output at all: nothing says its load was sent, so its share stays in the goal."""
    merged = merge_shards([shard(0, 2, 0.0, [tally_of([1] * 150)])], expected=2)
    assert [i.due_span_ns for i in merged.intervals] == [10 * SECOND]


def test_merged_percentiles_come_from_the_merged_buckets() -> None:
    fast, slow = tally_of([1] * 99), tally_of([100] * 1)
    merged = merge_shards([shard(0, 2, 0.0, [fast]), shard(1, 2, 0.0, [slow])])
    p = next(merged.intervals).tally.latency.percentiles([50, 99.9])
    assert p[50] // 1_000_000 == 1 and p[99.9] // 1_000_000 == 100
    assert merged.summary().tally.requests == 100


def test_missing_and_incomplete_shards_are_named() -> None:
    merged = merge_shards([shard(0, 4, 0.0, [tally_of([1])]), shard(2, 4, 0.0, [tally_of([1])])], incomplete=[3])
    assert merged.summary().shards == {"count": 4, "merged": [0, 2], "missing": [1], "incomplete": [3], "stopped": []}
    assert merged.notes == ["shard 1 of 4: no output found, not merged",
                            "shard 3 of 4: its output has no usable summary (cut off or damaged), not merged"]


def test_merged_info_is_the_whole_run() -> None:
    merged = merge_shards([shard(0, 2, 5.0, [tally_of([1])]), shard(1, 2, 5.0, [tally_of([1])])])
    info: RunInfo = merged.info
    assert info.shard.alone and info.qps == 30 and info.concurrency == 3 and info.wall_start == 5.0


class Watched(Sequence[dict]):
    """A shard's interval records that count how many have been read, as a log's are decoded one by one."""

    def __init__(self, records: Sequence[dict]) -> None:
        self.records, self.read = records, 0

    def __len__(self) -> int:
        return len(self.records)

    def __getitem__(self, index):  # noqa: ANN001, ANN204 - only iteration is used
        raise AssertionError("the merge walks the records in order; it never indexes them")

    def __iter__(self) -> Iterator[dict]:
        for record in self.records:
            self.read += 1
            yield record


def test_the_shards_are_read_in_lockstep_one_record_ahead_at_most() -> None:
    """Merged interval k is made while no shard has been read past its record for k + 1: the
    merge never holds more than a couple of each shard's intervals, however long the run."""
    a = shard(0, 2, 1_000.0, [tally_of([1] * 3, seed=k) for k in range(8)])
    late = shard(1, 2, 1_010.0, [tally_of([2] * 3, seed=k) for k in range(6)])  # its record j is slot j + 1
    a.intervals, late.intervals = Watched(a.intervals), Watched(late.intervals)
    merged = merge_shards([a, late])
    for k, interval in enumerate(merged.intervals):
        assert interval.index == k
        assert a.intervals.read <= k + 2 and late.intervals.read <= k + 1, (k, a.intervals.read, late.intervals.read)
    assert (a.intervals.read, late.intervals.read) == (8, 6)
    assert merged.summary().intervals == 8 and merged.summary().tally.responses == 42


def test_the_summary_alone_merges_every_interval_first() -> None:
    shards = [shard(0, 2, 0.0, [tally_of([1] * 5), tally_of([3] * 5)]), shard(1, 2, 0.0, [tally_of([2] * 5)])]
    walked = merge_shards(shards)
    intervals = list(walked.intervals)
    alone = merge_shards(shards).summary()
    assert alone.tally.responses == walked.summary().tally.responses == 15 and alone.intervals == len(intervals) == 2
    assert alone.due == walked.summary().due and alone.last_interval_end_ns == intervals[-1].end_ns


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


# --- reading shards back from logs ------------------------------------------------------------


def shard_log(s: ShardRun, cut: bool = False) -> str:
    """The shard's stdout as the runner prints it: startup line, then a JSON summary with its shard record."""
    record = {**(s.totals or {}), "index": s.index, "count": s.count, "startWall": s.start_wall, "urls": s.urls,
              "urlSource": s.url_source, "intervals": s.intervals}
    requests = sum(r["tally"]["good"] + r["tally"]["bad"] + r["tally"]["failed"] for r in s.intervals)
    summary = json.dumps({"requests": requests, "config": s.config, "shard": record}, indent=2)
    startup = f"# sending 15 GET req/s with concurrency=1 to {s.urls[0]} (shard {s.index} of {s.count}) ...\n"
    return startup + (summary[: len(summary) // 2] if cut else summary) + "\n"


def refusal(*logs: tuple[str, str]) -> str:
    """The one-line UsageError read_pods raises for logs of more than one run."""
    with pytest.raises(UsageError) as raised:
        read_pods(logs)
    message = str(raised.value)
    assert "\n" not in message and message.startswith("merge: the logs hold more than one run")
    assert message.endswith("; merge one run's logs at a time (kubectl logs -l job-name=JOB --prefix --tail=-1 "
                            "| soak merge)")
    return message


def test_shards_of_runs_with_different_settings_are_refused() -> None:
    a, b = shard(0, 2, 1_000.0, [tally_of([1])]), shard(1, 2, 1_000.0, [tally_of([1])], qps=60)
    assert "the logs hold more than one run: shard 1 (b.log) ran with qps 60, shard 0 (a.log) with qps 30; " \
        in refusal(("a.log", shard_log(a)), ("b.log", shard_log(b)))
    slow = shard(1, 2, 1_000.0, [tally_of([1])], interval_s=20)
    assert ": shard 1 (b.log) ran with interval 20s, shard 0 (a.log) with interval 10s; " \
        in refusal(("a.log", shard_log(a)), ("b.log", shard_log(slow)))


def test_shards_of_runs_with_different_shard_counts_are_refused() -> None:
    a, b = shard(0, 2, 1_000.0, [tally_of([1])]), shard(1, 3, 1_000.0, [tally_of([1])])
    assert ": shard 1 (b.log) is one of 3, shard 0 (a.log) one of 2; " in refusal(("a.log", shard_log(a)),
                                                                                   ("b.log", shard_log(b)))


def test_one_shard_twice_from_two_runs_is_refused_with_both_starts() -> None:
    first, again = shard(0, 2, 1_800_000_000.0, [tally_of([1])]), shard(0, 2, 1_800_003_600.0, [tally_of([1])])
    message = refusal(("a.log", shard_log(first)), ("b.log", shard_log(again)))
    assert ": shard 0 appears twice (started " in message
    assert f"{rfc3339(1_800_000_000.0)} in a.log and {rfc3339(1_800_003_600.0)} in b.log); " in message
    cut = shard(0, 2, 1_800_003_600.0, [tally_of([1])])
    assert "in a.log and cut off before its summary in b.log); " in refusal(("a.log", shard_log(first)),
                                                                              ("b.log", shard_log(cut, cut=True)))


def test_the_same_log_twice_is_one_shard() -> None:
    log = shard_log(shard(0, 2, 1_000.0, [tally_of([1])]))
    found = read_pods([("a.log", log), ("copy.log", log)])
    assert [s.index for s in found.shards] == [0]
    assert found.notes == ["copy.log: shard 0 appears twice, the same log; this copy is skipped"]


def test_shards_that_started_further_apart_than_one_jobs_pods_are_refused() -> None:
    """One Job's pods come up within about a minute: with 10 s intervals, up to 70 s apart."""
    a, b = shard(0, 2, 1_000.0, [tally_of([1])]), shard(1, 2, 1_080.0, [tally_of([1])])
    message = refusal(("a.log", shard_log(a)), ("b.log", shard_log(b)))
    assert (f": shard 1 (b.log) started {rfc3339(1_080.0)}, shard 0 (a.log) {rfc3339(1_000.0)}: more than 1m10s "
            "apart; ") in message
    for late in (1_010.0, 1_020.0, 1_070.0):  # pods that came up seconds apart, on later boundaries
        found = read_pods([("a.log", shard_log(a)), ("b.log", shard_log(shard(1, 2, late, [tally_of([1])])))])
        assert [s.index for s in found.shards] == [0, 1], f"{late - 1_000} s late is the same run's pod"


def test_kubectl_pod_names_say_which_jobs_the_runs_are() -> None:
    a, b = shard(0, 2, 1_000.0, [tally_of([1])]), shard(1, 2, 1_000.0, [tally_of([1])], qps=60)
    text = "".join(f"[pod/soak-{job}-{s.index}-x7k2p/soak] {line}\n" for job, s in [(29400000, a), (29400060, b)]
                   for line in shard_log(s).splitlines())
    assert refusal(("stdin", text)).startswith("merge: the logs hold more than one run (jobs soak-29400000 and "
                                               "soak-29400060): shard 1 (pod/soak-29400060-1-x7k2p/soak) ran with "
                                               "qps 60, shard 0 (pod/soak-29400000-0-x7k2p/soak) with qps 30; ")


def test_logs_joined_without_prefixes_are_each_a_shard() -> None:
    shards = [shard(i, 3, 1_000.0, [tally_of([i + 1])]) for i in range(3)]
    joined = shard_log(shards[0]) + "soak: a warning on stderr\n" + shard_log(shards[1]) + shard_log(shards[2])
    second = len(shard_log(shards[0]).splitlines()) + 2  # after the warning, which goes with the first
    third = second + len(shard_log(shards[1]).splitlines())
    parts = split_runs(joined, "all.log")
    assert [source for source, _ in parts] == ["all.log line 1", f"all.log line {second}", f"all.log line {third}"]
    assert "".join(text for _, text in parts) == joined
    found = read_pods([("-", joined)])
    assert [s.index for s in found.shards] == [0, 1, 2] and found.notes == [] and found.incomplete == []
    assert [s.source for s in found.shards] == ["stdin line 1", f"stdin line {second}", f"stdin line {third}"]
    summaries_only = "".join(log.split("\n", 1)[1] for log in map(shard_log, shards))
    assert [s.index for s in read_pods([("s.log", summaries_only)]).shards] == [0, 1, 2]
    cut_then_whole = shard_log(shards[0], cut=True) + shard_log(shards[1])
    found = read_pods([("x.log", cut_then_whole)])
    assert [s.index for s in found.shards] == [1] and found.incomplete == [0]
    assert split_runs(shard_log(shards[0]), "one.log") == [("one.log", shard_log(shards[0]))]


GONE = object()  # a key deleted rather than changed


def damaged(path: tuple[str | int, ...], value: object) -> str:
    """Shard 1's log with the value at `path` in its summary changed (or, for GONE, deleted)."""
    summary = json.loads(shard_log(shard(1, 2, 1_000.0, [tally_of([1] * 5, errors=2)])).split("\n", 1)[1])
    parent = summary
    for key in path[:-1]:
        parent = parent[key]
    if value is GONE:
        del parent[path[-1]]
    else:
        parent[path[-1]] = value
    return f"# sending 15 GET req/s with concurrency=1 to http://127.0.0.1:9/ (shard 1 of 2) ...\n{json.dumps(summary)}\n"


TALLY = ("shard", "intervals", 0, "tally")


@pytest.mark.parametrize(("path", "value", "said"), [
    (("config", "interval"), "0s", 'config.interval: "0s" is not allowed; must be a duration like'),
    (("config", "qps"), None, "config.qps: null is not allowed; must be a number"),
    (("config", "mode"), "bench", 'config.mode: "bench" is not allowed; shards split soaks only'),
    (("config",), [], "config: [] is not allowed; must be an object"),
    (("shard", "startWall"), float("nan"), "shard.startWall: NaN is not allowed; must be a time in seconds since 1970"),
    (("shard", "startWall"), 1e308, "shard.startWall: 1e+308 is not allowed"),
    (("shard", "index"), 2, "shard.index: 2 is not allowed; must be below shard.count (2)"),
    (("shard", "count"), None, "shard.count: null is not allowed; must be a whole number from 1 to 1000"),
    (("shard", "endNs"), None, "shard.endNs: null is not allowed; must be a whole number, at least 0"),
    (("shard", "cpuSeconds"), GONE, "shard.cpuSeconds: missing"),
    (("shard", "urls"), "http://x/", 'shard.urls: "http://x/" is not allowed; must be a list of URLs'),
    (("shard", "connections"), {"HTTP/1.1": None}, 'shard.connections: {"HTTP/1.1": null} is not allowed'),
    (("shard", "sendLag"), {"hdr": "x"}, "shard.sendLag.max: missing"),
    (("shard", "intervals"), None, "shard.intervals: null is not allowed; must be a list"),
    (("shard", "intervals", 0), 1, "shard.intervals[0]: 1 is not allowed; must be an interval record"),
    (("shard", "intervals", 0, "startNs"), None, "shard.intervals[0].startNs: null is not allowed"),
    (("shard", "intervals", 0, "sendingEndNs"), "x", 'shard.intervals[0].sendingEndNs: "x" is not allowed'),
    (TALLY, {"good": 1}, "shard.intervals[0].tally.latency: null is not allowed"),
    ((*TALLY, "good"), "x", "shard.intervals[0].tally: not a tally record"),
    ((*TALLY, "bad"), -1, "shard.intervals[0].tally: a count below 0"),
    ((*TALLY, "errorGroups", 0, "url"), 5, "shard.intervals[0].tally.errorGroups: URL index 5 is not allowed; must "
                                           "be below the number of shard.urls (1)"),
    ((*TALLY, "errorGroups", 0, "count"), 3, "shard.intervals[0].tally.errorGroups: 3 failures is not allowed; must "
                                             "be the 2 failed"),
    ((*TALLY, "errorGroups", 0, "urls"), list(range(21)), "shard.intervals[0].tally: not a tally record: more than 20 "
                                                          "URLs in an error group"),
    ((*TALLY, "errorGroups", 0, "text"), None, "shard.intervals[0].tally: not a tally record"),
    ((*TALLY, "latency", "min"), -1, "shard.intervals[0].tally.latency.min: -1 is not allowed"),
    ((*TALLY, "latency", "sum"), 1e300, "shard.intervals[0].tally.latency.sum: 1e+300 is not allowed"),
    ((*TALLY, "latency", "hdr"), "HISTF", "shard.intervals[0].tally.latency: not a latency histogram record"),
])
def test_a_damaged_summary_is_named_and_not_merged(path: tuple[str | int, ...], value: object, said: str) -> None:
    """A summary damaged or edited in the log: its shard is left out like one cut off, and the note says why."""
    found = read_pods([("a.log", shard_log(shard(0, 2, 1_000.0, [tally_of([1])]))), ("b.log", damaged(path, value))])
    assert [s.index for s in found.shards] == [0] and found.incomplete == [1]
    assert len(found.notes) == 1 and found.notes[0].startswith("b.log: shard 1's summary cannot be merged: ")
    assert said in found.notes[0]
    merged = merge_shards(found.shards, found.expected, found.incomplete)
    assert merged.summary().shards == {"count": 2, "merged": [0], "missing": [], "incomplete": [1], "stopped": []}


def test_a_damaged_summary_without_a_startup_line_is_skipped_and_said() -> None:
    found = read_pods([("b.log", damaged(("shard", "index"), "one").split("\n", 1)[1])])
    assert found.shards == [] and found.incomplete == []
    assert found.notes == ['b.log: skipped: shard.index: "one" is not allowed; must be a whole number, at least 0']


# --- shards whose figures contradict each other -------------------------------------------------


def whole_log(s: ShardRun, **changes: object) -> str:
    """shard_log() with the run's figures a real summary has: its intervals added up, as the recorder adds them."""
    run = Tally()
    for record in s.intervals:
        run.merge(tally_from_record(record["tally"]))
    summary = {"requests": run.requests, "good": run.good, "bad": run.bad, "failed": run.failed,
               "skipped": run.skipped, "late": run.late, "hashChecked": 0, "hashMismatches": 0,
               "bytesIn": run.bytes_in, "bytesOut": run.bytes_out,
               "statusCodes": {str(c): n for c, n in sorted(run.statuses.items())}, "errors": dict(run.errors),
               "intervals": len(s.intervals), "histogram": {"unit": "ns", "hdr": run.latency.encode()}}
    log = shard_log(s)
    startup, text = log.split("\n", 1)
    return startup + "\n" + json.dumps({**summary, **json.loads(text), **changes}, indent=2) + "\n"


URLS = ["http://127.0.0.1:9/", "http://127.0.0.1:9/b"]  # tally_of's errors are on the second


def three_intervals() -> ShardRun:
    return replace(shard(1, 2, 1_000.0, [tally_of([1] * 5, errors=2, seed=k) for k in range(3)]), urls=URLS)


def other_shard() -> ShardRun:
    return replace(shard(0, 2, 1_000.0, [tally_of([1])]), urls=URLS)


def edited(s: ShardRun, interval: int, **changes: object) -> ShardRun:
    """The shard with keys of one interval's tally record changed, as someone editing the log would."""
    records = [json.loads(json.dumps(r)) for r in s.intervals]
    records[interval]["tally"].update(changes)
    return replace(s, intervals=records)


def contradictions_of(log: str) -> list[str]:
    """What read_pods says of shard 1's log beside a good shard 0; shard 1 must be left out."""
    found = read_pods([("a.log", whole_log(other_shard())), ("b.log", log)])
    assert [s.index for s in found.shards] == [0] and found.incomplete == [1], found.notes
    assert all(note.startswith("b.log: shard 1") for note in found.notes), found.notes
    assert found.notes[-1].startswith("b.log: shard 1's summary cannot be merged: its figures contradict each other (")
    return [note.removeprefix("b.log: shard 1, ") for note in found.notes[:-1]]


def test_a_shard_whose_figures_agree_is_merged() -> None:
    found = read_pods([("a.log", whole_log(other_shard())), ("b.log", whole_log(three_intervals()))])
    assert [s.index for s in found.shards] == [0, 1] and found.notes == []


def test_an_interval_tally_above_its_histogram_is_said_and_the_shard_left_out() -> None:
    """The issue's case: good + 1000 in one interval's record of the log, nothing else changed."""
    s = three_intervals()
    log = whole_log(s)
    startup, text = log.split("\n", 1)
    summary = json.loads(text)
    tally = summary["shard"]["intervals"][1]["tally"]
    good, responses = tally["good"], tally["good"] + tally["bad"]
    tally["good"] += 1000
    said = contradictions_of(f"{startup}\n{json.dumps(summary, indent=2)}\n")
    assert said == [f"interval 1: good + bad is {responses + 1000}, its latency histogram holds {responses}",
                    f"interval 1: good is {good + 1000}, its status codes 200-499 count {good}",
                    f"the run: requests is {summary['requests']}, its intervals and drain add up to "
                    f"{summary['requests'] + 1000}",
                    f"the run: good is {summary['good']}, its intervals and drain add up to {summary['good'] + 1000}"]


@pytest.mark.parametrize(("changes", "said"), [
    ({"good": 5, "bad": 0, "statuses": {"200": 4, "503": 1}}, "good is 5, its status codes 200-499 count 4"),
    ({"good": 5, "bad": 0, "statuses": {"200": 4, "503": 1}}, "bad is 0, its other status codes count 1"),
    ({"errors": {"timeout": 5}}, "failed is 2, its errors by kind add up to 5"),
    ({"hashChecked": 9}, "hashChecked is 9, more than its 5 responses"),
    ({"kernelClocked": 6}, "kernelClocked is 6, more than its 5 responses"),
    ({"hashChecked": 1, "hashMismatches": 2}, "hashMismatches is 2, more than the 1 checked"),
])
def test_each_contradiction_in_an_interval_is_a_line_naming_it(changes: dict, said: str) -> None:
    s = three_intervals()
    lines = contradictions_of(whole_log(edited(s, 2, **changes)))
    assert f"interval 2: {said}" in lines, lines


def test_intervals_out_of_order_are_a_contradiction() -> None:
    s = three_intervals()
    records = [json.loads(json.dumps(r)) for r in s.intervals]
    records[1]["startNs"], records[2]["startNs"] = records[2]["startNs"], records[1]["startNs"]
    records[1]["endNs"], records[2]["endNs"] = records[2]["endNs"], records[1]["endNs"]
    assert contradictions_of(whole_log(replace(s, intervals=records))) == [f"interval 2: starts at {10 * SECOND} ns, not after interval 1 "
                                                     f"({20 * SECOND} ns)"]


@pytest.mark.parametrize(("changes", "said"), [
    ({"requests": 1}, ["requests is 1, good + bad + failed is 21", "requests is 1, its intervals and drain add up to 21"]),
    ({"skipped": 3}, ["skipped is 3, its intervals and drain add up to 0"]),
    ({"statusCodes": {"200": 99}}, ['statusCodes is {"200": 99}, its intervals and drain add up to ']),
    ({"errors": {}}, ['errors is {}, its intervals and drain add up to {"timeout": 6}']),
    ({"intervals": 4}, ["intervals is 4, its intervals and drain add up to 3"]),
    ({"histogram": {"unit": "ns", "hdr": LatencyHistogram().encode()}},
     ["its latency histogram holds 0, its intervals' responses are 15"]),
])
def test_run_figures_that_are_not_their_intervals_sum_are_said(changes: dict, said: list[str]) -> None:
    lines = contradictions_of(whole_log(three_intervals(), **changes))
    assert len(lines) == len(said) and all(line.startswith(f"the run: {want}") for line, want in zip(lines, said)), lines


def test_many_contradictions_are_said_ten_and_counted() -> None:
    s = replace(shard(1, 2, 1_000.0, [tally_of([1] * 2, seed=k) for k in range(30)]), urls=URLS)
    records = [json.loads(json.dumps(r)) for r in s.intervals]
    for record in records:
        record["tally"]["kernelClocked"] = 3
    lines = contradictions_of(whole_log(replace(s, intervals=records)))
    assert lines[:10] == [f"interval {k}: kernelClocked is 3, more than its 2 responses" for k in range(10)]
    assert lines[10:] == ["b.log: shard 1: 20 more contradictions"]


def without(s: ShardRun, *keys: str, intervals: Sequence[int] | None = None) -> ShardRun:
    """The shard with `keys` taken out of its interval records' tallies, as an earlier version wrote them."""
    records = [json.loads(json.dumps(r)) for r in s.intervals]
    for index, record in enumerate(records):
        if intervals is None or index in intervals:
            for key in keys:
                del record["tally"][key]
    return replace(s, intervals=records)


def phased_shard(index: int) -> ShardRun:
    """A shard whose records carry phase timings and backend counts, as this version writes them."""
    tallies = []
    for _ in range(2):
        tally = phased()
        for ms in (1, 2, 3):
            result = Result(start_ns=0, connected_ns=1, headers_ns=ms * 1_000_000, end_ns=ms * 1_000_000 + 5,
                            status=200, backend="pod-a")
            tally.add(result, result.headers_ns, 0, backend="pod-a")
        tallies.append(tally)
    return replace(shard(index, 2, 1_000.0, tallies), urls=URLS)


def test_shards_of_two_versions_are_refused_naming_the_one_without_what_the_other_has() -> None:
    """A shard written before phases and backends were recorded, merged with one written after: the
    merged phases and backends counted one shard's responses, every other figure both (exit 0)."""
    new, old = phased_shard(0), without(phased_shard(1), "phases", "backends")
    for logs in ([("a.log", whole_log(new)), ("b.log", whole_log(old))],
                 [("b.log", whole_log(old)), ("a.log", whole_log(new))]):
        with pytest.raises(UsageError) as refused:
            read_pods(logs)
        assert str(refused.value) == (
            "merge: shard 1's records (b.log) have no phase timings nor backend counts, which shard 0's (a.log) have: "
            "an earlier version wrote it, and merged, their figures would contradict each other; merge logs of one "
            "version")
    only_phases = without(phased_shard(1), "phases")
    with pytest.raises(UsageError, match=r"^merge: shard 1's records \(b.log\) have no phase timings, which shard 0's"):
        read_pods([("a.log", whole_log(new)), ("b.log", whole_log(only_phases))])
    both_old = read_pods([("a.log", whole_log(without(new, "phases", "backends"))), ("b.log", whole_log(old))])
    assert [s.index for s in both_old.shards] == [0, 1]  # one version: merged as they are


def test_a_shard_whose_records_differ_in_what_they_carry_contradicts_itself() -> None:
    lines = contradictions_of(whole_log(without(phased_shard(1), "phases", intervals=[1])))
    assert lines == ["interval 1: its record has no phase timings, which interval 0's has"]
    lines = contradictions_of(whole_log(without(phased_shard(1), "phases", "backends", intervals=[0])))
    assert lines == ["interval 1: its record has phase timings and backend counts, which interval 0's has not"]


def test_a_merged_run_says_its_shards_engine_or_mixed() -> None:
    """The shard record's `engine` (runner.stats.record.run_record): theirs when they agree,
    `mixed` when not; a record from before the key was the Python engine's, the only one there was."""
    a, b = shard(0, 2, 1_000.0, [tally_of([1])]), shard(1, 2, 1_000.0, [tally_of([1])])
    assert merged_engine([a, b]) == "python"
    assert a.totals is not None and b.totals is not None
    a.totals["engine"] = b.totals["engine"] = "native"
    assert merged_engine([a, b]) == "native" == merged_info([a, b]).engine
    b.totals["engine"] = "python"
    assert merged_engine([a, b]) == "mixed"


def test_a_warmup_record_survives_json_and_the_shards_warmups_add_up() -> None:
    parts = [Warmup(tally_of([5] * 8, errors=1, seed=1), 10.0, 2 * SECOND, 2, {"HTTP/1.1": 2}),
             Warmup(tally_of([40] * 3, seed=2), 9.5, 3 * SECOND, 3, {"HTTP/1.1": 1})]
    records = [json.loads(json.dumps(warmup_record(w))) for w in parts]
    back = warmup_from_record(records[0])
    assert warmup_record(back) == warmup_record(parts[0])
    shards = [shard(i, 2, 1_000.0, [tally_of([1] * 10)]) for i in range(2)]
    for part, record in zip(shards, records, strict=True):
        assert part.totals is not None
        part.totals["warmup"] = record
    merged = merge_shards(shards).summary()
    assert merged.warmup is not None
    w = merged.warmup.tally
    assert (w.good + w.bad, w.failed) == (11, 1) and (w.good, w.bad) == (sum(p.tally.good for p in parts), sum(p.tally.bad for p in parts))
    assert merged.warmup.due == 19.5 and merged.warmup.span_ns == 3 * SECOND and merged.warmup.intervals == 3
    assert merged.warmup.connections == {"HTTP/1.1": 3}
    assert merged.warmup.tally.latency.max == max(p.tally.latency.max for p in parts)
    assert merged.tally.good + merged.tally.bad == 20, "the warm-ups stay out of the run's counts"


@pytest.mark.parametrize(("key", "value", "said"), [
    ("spanNs", -1, "shard.warmup.spanNs: -1 is not allowed"),
    ("due", "x", "shard.warmup.due: \"x\" is not allowed"),
    ("tally", {"good": 1}, "shard.warmup.tally"),
])
def test_a_damaged_warmup_record_is_named(key: str, value: object, said: str) -> None:
    record = {"index": 0, "count": 1, "startWall": 1_000.0, "urls": ["http://127.0.0.1:9/"], "endNs": 1,
              "sendingEndNs": 1, "stopReason": "iterations", "cpuSeconds": 1.0, "maxRssBytes": 1, "intervals": [],
              "warmup": {**warmup_record(Warmup(tally_of([1]), 1.0, SECOND, 1)), key: value}}
    with pytest.raises(ValueError, match="^" + re.escape(said)):
        check_run_record(record)
