"""Scale-out: a run split over pods (an Indexed Job) or local workers, and merged back exactly.

The pods are the rendered scale-out CronJob's exact command, run once per index with
JOB_COMPLETION_INDEX set as Kubernetes sets it, against real nginx; their logs go through
`soak merge` as `kubectl logs --prefix` prints them.
"""

from __future__ import annotations

import json
import os
import re
import resource
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import pytest
from hdrh.histogram import HdrHistogram

from runner.load.schedule import Schedule
from runner.load.shards import Shard, aligned_start, shard_of
from runner.report.slowcooker import rounded_goal, shown_percent
from runner.stats.figures import goal_percent
from tests.conftest import (
    Nginx,
    assert_counts_add_up,
    engine_line,
    parse_interval,
    run_soak,
    soak_command,
    split_engine_line,
)
from tests.support.pallet import assert_shipped_verdict, find, pod_command, render
from tests.support.shardlogs import shard_logs

SHARDS = 3
INTERVAL_S = 2  # the pods' interval in these tests


# --- the manifests --------------------------------------------------------------------------


def test_the_component_makes_an_indexed_job_with_the_count_in_one_place() -> None:
    job = find(render("scale-out"), "CronJob", "soak")["spec"]["jobTemplate"]["spec"]
    assert job["completionMode"] == "Indexed"
    assert job["completions"] == job["parallelism"] == SHARDS
    assert job["template"]["spec"]["containers"][0]["args"][0] == f"--shards={SHARDS}"
    # A failing pod fails its own index, never retried, and the others run on: no Job-wide
    # backoffLimit (it would end the Job at the first failure), every index may fail.
    assert job["backoffLimitPerIndex"] == 0 and "backoffLimit" not in job
    assert job["maxFailedIndexes"] == job["completions"]
    assert job["template"]["spec"]["restartPolicy"] == "Never", "backoffLimitPerIndex requires it"
    base = find(render("base"), "CronJob", "soak")["spec"]["jobTemplate"]["spec"]
    assert "completionMode" not in base and not any(a.startswith("--shards") for a in
                                                   base["template"]["spec"]["containers"][0]["args"])


# --- pods of an Indexed Job against nginx, merged ------------------------------------------


@dataclass
class PodRun:
    logs: list[str]  # each pod's stdout + stderr, as kubectl logs shows it
    shard_summaries: list[dict]
    logged: int  # requests nginx logged during the run

    @property
    def late(self) -> list[int]:
        """How many intervals after the first pod each pod started: all 0 unless the machine
        was too busy to start a pod before the boundary the others agreed on."""
        starts = [s["shard"]["startWall"] for s in self.shard_summaries]
        return [round((start - min(starts)) / INTERVAL_S) for start in starts]

    @property
    def apart(self) -> str:
        """What `soak merge` says on stderr of these pods' starts."""
        return apart_note(self.late)


def apart_note(late: list[int]) -> str:
    """merge's note on shards that started `late[i]` intervals after the first ("" if together)."""
    if not any(late):
        return ""
    said = ", ".join(f"shard {i}: {n} interval{'s' if n > 1 else ''} late" for i, n in enumerate(late) if n)
    return (f"soak merge: the shards did not start together ({said}); the first and last intervals hold only "
            "some shards' load\n")


def after_a_boundary(interval_s: float, margin_s: float = 0.1) -> None:
    """Wait until `margin_s` after a multiple of the interval: pods started now have almost a
    whole interval to come up before the boundary they agree on."""
    time.sleep((margin_s - time.time() % interval_s) % interval_s)


@pytest.fixture(scope="module")
def pods(nginx: Nginx, tmp_path_factory: pytest.TempPathFactory) -> PodRun:
    """The scale-out CronJob's command, once per index, at the same time, for three 2 s intervals."""
    root = tmp_path_factory.mktemp("pods")
    command, env = pod_command(render("scale-out"), root / "pod", nginx.url)
    before = nginx.requests_logged()
    after_a_boundary(INTERVAL_S)
    processes = [
        subprocess.Popen([*command, "--interval", f"{INTERVAL_S}s", "--iterations", "3", "--latencyUnit", "us"],
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=root,
                         env={**os.environ, "TZ": "UTC", **env, "JOB_COMPLETION_INDEX": str(index)})
        for index in range(SHARDS)
    ]
    logs = [p.communicate(timeout=60)[0] for p in processes]
    summaries = []
    for process, log in zip(processes, [_without_engine_line(log) for log in logs], strict=True):
        # stdout and stderr as kubectl logs shows them: a run that does not exit 0 says why last, on stderr
        body, after = log.rpartition("\n}\n")[0] + "\n}\n", log.rpartition("\n}\n")[2]
        summaries.append(assert_counts_add_up(body))
        assert_shipped_verdict(summaries[-1], process.returncode, log)
        assert all(line.startswith("soak: ") for line in after.splitlines()), after
    return PodRun(logs, summaries, nginx.requests_logged() - before)


def shipped_merge(done: subprocess.CompletedProcess[str]) -> str:
    """A merge of the pods' logs judged by the shipped thresholds (assert_shipped_verdict): its stderr,
    without the line an inconclusive verdict (exit 9, a machine too busy for the pods) ends it with."""
    assert_shipped_verdict(assert_counts_add_up(done.stdout), done.returncode, done.stderr)
    said = done.stderr.splitlines(keepends=True)
    if done.returncode == 9:
        assert said[-1].startswith("soak merge: inconclusive: ") and said[-1].endswith(" (exit code 9)\n"), said
        return "".join(said[:-1])
    return done.stderr


def _without_engine_line(log: str) -> str:
    """A pod's log (stdout and stderr in one stream) without the line its run starts with, which
    must be exactly the one a default run prints (the engine `auto` takes)."""
    said, rest = split_engine_line(log)
    assert said == engine_line(), log
    return rest


def merge(*texts: str, files: list[Path] | None = None) -> subprocess.CompletedProcess[str]:
    """`soak merge`, reading `texts` on stdin (or the files given)."""
    return subprocess.run(soak_command("merge", *(str(f) for f in files or [])), input="".join(texts),
                          capture_output=True, text=True, timeout=60, env={**os.environ, "TZ": "UTC"})


def merge_saved(outputs: list[str], into: Path) -> subprocess.CompletedProcess[str]:
    """`soak merge` of the shards' outputs, each saved first to a file of its own, as a user saves pods' logs."""
    files = [into / f"shard-{index}.log" for index in range(len(outputs))]
    for file, out in zip(files, outputs, strict=True):
        file.write_text(out)
    return merge(files=files)


def prefixed(index: int, log: str) -> str:
    """A pod's log as `kubectl logs --prefix` prints it."""
    return "".join(f"[pod/soak-29400000-{index}-x7k2p/soak] {line}\n" for line in log.splitlines())


def test_each_pod_sends_its_share_from_the_same_instant(pods: PodRun) -> None:
    concurrency = [2, 2, 1]  # configuration.json's 5 clients over 3 pods: the remainder to the first
    for index, (log, summary) in enumerate(zip(pods.logs, pods.shard_summaries, strict=True)):
        sending = _without_engine_line(log).splitlines()[0]  # the merge below reads the logs as they are
        assert f"with concurrency={concurrency[index]} " in sending
        assert sending.endswith(f"(shard {index} of {SHARDS}) ...")
        assert summary["shard"]["index"] == index and summary["shard"]["count"] == SHARDS
    # On one instant, recorded exactly (not a few us apart); a pod that came up after the others'
    # boundary (a busy machine) starts exactly a whole interval later.
    starts = [s["shard"]["startWall"] for s in pods.shard_summaries]
    for start, late in zip(starts, pods.late, strict=True):
        assert start - min(starts) == late * INTERVAL_S
        assert abs(start - round(start / INTERVAL_S) * INTERVAL_S) < 0.001, "on a multiple of the interval"


def test_merged_totals_are_the_sum_and_match_what_nginx_saw(pods: PodRun) -> None:
    done = merge(*(prefixed(i, log) for i, log in enumerate(pods.logs)))
    assert shipped_merge(done) == pods.apart
    merged = assert_counts_add_up(done.stdout)
    for key in ("requests", "good", "bad", "failed", "skipped", "bytesIn"):
        assert merged[key] == sum(s[key] for s in pods.shard_summaries), key
    assert merged["requests"] == pods.logged and merged["requests"] + merged["skipped"] == 600
    due = sum(i["t"] for i in merged["intervalStats"])
    assert merged["goalPercent"] == shown_percent(goal_percent(merged["good"] + merged["bad"], due))
    assert merged["shards"] == {"count": SHARDS, "merged": [0, 1, 2], "missing": [], "incomplete": [], "stopped": []}
    assert done.stdout.splitlines()[0].startswith("# sending 100 GET req/s with concurrency=5 to http://127.0.0.1:")
    assert "shard" not in merged, "the merged run is the whole run, not a shard"


def test_merged_lines_add_up_the_pods_lines_of_the_same_time(pods: PodRun) -> None:
    """Merged line k holds each pod's line for the same stretch of time, added exactly: the
    merged run is as accurate as its pods (how accurate that is, is the benchmark's to say)."""
    done = merge(*(prefixed(i, log) for i, log in enumerate(pods.logs)))
    lines = [parse_interval(line) for line in done.stdout.splitlines() if line[:1].isdigit()]
    own = [[parse_interval(line) for line in log.splitlines() if line[:1].isdigit()] for log in pods.logs]
    assert len(lines) == 3 + max(pods.late)
    for k, line in enumerate(lines):
        sending = [i for i in range(SHARDS) if 0 <= k - pods.late[i] < 3]  # each a third of 200 a 2 s interval
        assert line.interval == "2s" and line.target == rounded_goal(200 * len(sending) / SHARDS), k
        for column in ("good", "bad", "failed"):
            assert getattr(line, column) == sum(getattr(own[i][k - pods.late[i]], column) for i in sending), k


def test_merged_percentiles_are_those_of_the_union_of_histograms(pods: PodRun) -> None:
    """Never averaged percentiles: the merged ones are the union's, from its buckets."""
    done = merge(*(prefixed(i, log) for i, log in enumerate(pods.logs)))
    merged = assert_counts_add_up(done.stdout)
    union = HdrHistogram(1, 3_600_000_000_000, 3)
    for summary in pods.shard_summaries:
        union.add(HdrHistogram.decode(summary["histogram"]["hdr"]))
    top = round(max(s["max"] for s in pods.shard_summaries) * 1000)  # the exact max, in ns (us to 3 decimals)
    wanted = {"p50": 50, "p75": 75, "p90": 90, "p95": 95, "p99": 99, "p999": 99.9}
    expected = {key: round(min(union.get_value_at_percentile(p), top) / 1000, 3) for key, p in wanted.items()}
    assert {key: merged[key] for key in wanted} == expected
    assert merged["max"] == max(s["max"] for s in pods.shard_summaries)
    assert merged["min"] == min(s["min"] for s in pods.shard_summaries)
    averaged = sum(s["p99"] for s in pods.shard_summaries) / SHARDS
    assert merged["p99"] == expected["p99"], f"not the average of the pods' p99s ({averaged})"


def assert_goal_broken(done: subprocess.CompletedProcess[str]) -> str:
    """The merged verdict: a shard's load not accounted for breaks configuration.json's goal% rule
    (the exit code is 5, the missing part, whatever the verdict). Only when a pod's own delay (a busy
    machine's) may have cost the goal what it missed is it inconclusive, and then merge's last line
    on stderr says so. stderr without that line."""
    (goal,) = [line for line in done.stdout.splitlines() if line.startswith("# threshold run goal% >= 95: ")]
    said = done.stderr.splitlines(keepends=True)
    if goal.endswith(" INCONCLUSIVE"):
        assert "the client's own delay may have changed goal%: it may have cost " in goal, goal
        assert said[-1].startswith("soak merge: inconclusive: run goal% >= 95 broke only where the client's own "
                                   "delay may have changed its figure"), done.stderr
        return "".join(said[:-1])
    assert goal.endswith(" BROKEN"), goal
    return done.stderr


SHIPPED_THRESHOLDS = '"thresholds": ["errors% <= 1", "goal% >= 95", "4xx% <= 1"],'  # configuration.json's, in each pod's config


def test_a_missing_pod_is_reported_not_dropped_silently(pods: PodRun) -> None:
    """Exit 5, part of the run missing, whatever the verdict on the rest (it was that verdict's 3)."""
    done = merge(prefixed(0, pods.logs[0]), prefixed(2, pods.logs[2]))
    assert done.returncode == 5, done.stderr
    stderr = assert_goal_broken(done)  # the missing third stays in the goal: the shipped goal% threshold breaks
    assert stderr == "soak merge: shard 1 of 3: no output found, not merged\n"
    merged = assert_counts_add_up(done.stdout)
    assert merged["shards"]["missing"] == [1] and merged["shards"]["merged"] == [0, 2]
    assert merged["requests"] == pods.shard_summaries[0]["requests"] + pods.shard_summaries[2]["requests"]


def test_a_missing_pod_fails_the_merge_without_thresholds_too(pods: PodRun) -> None:
    """A pod deleted mid-run (eviction, preemption) left no output: its merge exited 0 when no
    threshold judged the run, so the run passed with a third of its load never sent."""
    unjudged = [log.replace(SHIPPED_THRESHOLDS, '"thresholds": [],') for log in pods.logs]
    assert all(SHIPPED_THRESHOLDS in log for log in pods.logs)
    done = merge(prefixed(0, unjudged[0]), prefixed(1, unjudged[1]))
    late = [n - min(pods.late[:2]) for n in pods.late[:2]]  # pods that came up late on a busy machine
    assert (done.returncode, done.stderr) == (5, "soak merge: shard 2 of 3: no output found, not merged\n"
                                              + apart_note(late))
    assert not any(line.startswith("# threshold") for line in done.stdout.splitlines())
    assert assert_counts_add_up(done.stdout)["shards"]["missing"] == [2]
    whole = merge(*(prefixed(i, log) for i, log in enumerate(unjudged)))
    assert whole.returncode == 0, whole.stderr


def test_a_pod_stopped_by_a_signal_fails_the_merge(nginx: Nginx, tmp_path: Path) -> None:
    """A pod evicted mid-run (SIGTERM) prints its summary and exits 7; merged with the others it
    exited 0, a run that passed with part of a shard's load never sent (issue 20, point 8); then 7,
    with a goal that counted only the pods still sending, so goal% read 99.9% "ok" (issue 32). Its
    share stays in the goal to the run's end, as a missing pod's does, and the merge says which pod
    stopped and when, first and last on stderr: part of the run is missing, exit 5."""
    after_a_boundary(1)
    processes = [subprocess.Popen(soak_command("--qps", "20", "--interval", "1s", "--iterations", "6", "--shards",
                                               "2", "--shard", str(index), "--thresholds", "goal% >= 95", nginx.url),
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                  env={**os.environ, "TZ": "UTC"}) for index in range(2)]
    try:
        stopped = processes[1]
        assert stopped.stdout is not None
        head = ""
        while not (line := stopped.stdout.readline())[:1].isdigit():  # its first interval line
            assert line, "shard 1 ended before its first interval"
            head += line
        stopped.send_signal(signal.SIGTERM)
        outputs = [p.communicate(timeout=60) for p in processes]
    finally:
        for process in processes:
            process.kill()
    outputs[1] = (head + line + outputs[1][0], outputs[1][1])
    assert processes[1].returncode in (3, 7), outputs[1][1]  # 3: its own goal% broken by a busy machine
    done = merge_saved([out for out, _ in outputs], tmp_path)
    assert done.returncode == 5, done.stderr
    merged = assert_counts_add_up(done.stdout)
    assert merged["shards"]["merged"] == [0, 1] and "signal SIGTERM" in merged["stopReason"]
    (stop,) = merged["shards"]["stopped"]
    assert stop["shard"] == 1 and stop["stopReason"] == "signal SIGTERM" and stop["notSentSeconds"] >= 1
    said = [line for line in done.stderr.splitlines() if not line.startswith("soak merge: the shards did not start")]
    early = re.fullmatch(r"soak merge: shard 1 of 2 stopped by SIGTERM after ([0-9.]+m?s) of 6s, ([0-9.]+m?s) before "
                         r"the others: its share of the rest was not sent, and stays in the goal", said[0])
    assert early is not None, done.stderr
    assert said[-1] == (f"soak merge: stopped by SIGTERM before its planned end: shard 1 of 2 after {early[1]} of 6s: "
                        "its share of the rest was not sent while the others went on, and stays in the goal")
    verdict = [line for line in done.stdout.splitlines() if line.startswith("# threshold")]
    # Not ok: BROKEN, or INCONCLUSIVE where a busy machine saturated the client in every interval.
    assert verdict[0].startswith("# threshold run goal% >= 95: ") and not verdict[0].endswith(" ok"), verdict
    assert verdict[-1] == (f"# thresholds judged with shard 1 of 2 stopped by SIGTERM after {early[1]} of 6s, "
                           f"{early[2]} before the others: its share of the rest counts as due and not sent")
    starts = {s["shard"]["startWall"] for s in (assert_counts_add_up(out) for out, _ in outputs)}
    if len(starts) == 1:  # started together (a busy machine may start one an interval late): every shard's goal
        assert sum(s["t"] for s in merged["intervalStats"]) == pytest.approx(20 * 6, abs=0.01)


def test_a_truncated_pod_log_is_reported_as_incomplete(pods: PodRun, tmp_path: Path) -> None:
    cut = pods.logs[2][: pods.logs[2].index("\n{\n") + 40]  # cut inside its JSON summary
    files = []
    for index, log in enumerate([pods.logs[0], pods.logs[1], cut]):
        files.append(tmp_path / f"pod-{index}.log")
        files[-1].write_text(log)
    done = merge(files=files)
    assert done.returncode == 5, done.stderr  # shard 2's share is unaccounted for: goal% breaks too
    assert_goal_broken(done)
    assert f"{files[2]}: shard 2's log has no complete summary (cut off?)" in done.stderr
    assert "shard 2 of 3: its output has no usable summary (cut off or damaged), not merged" in done.stderr
    merged = assert_counts_add_up(done.stdout)
    assert merged["shards"]["incomplete"] == [2] and merged["shards"]["merged"] == [0, 1]


def test_pods_logs_joined_without_prefixes_merge_as_with_them(pods: PodRun) -> None:
    """`cat pod-0.log pod-1.log pod-2.log | soak merge`: each pod's log in the text is one shard."""
    joined = merge(*pods.logs)
    assert shipped_merge(joined) == pods.apart
    prefixed_output = merge(*(prefixed(i, log) for i, log in enumerate(pods.logs))).stdout
    assert assert_counts_add_up(joined.stdout) == assert_counts_add_up(prefixed_output)
    assert assert_counts_add_up(joined.stdout)["shards"]["merged"] == [0, 1, 2]


REFUSED = "; merge one run's logs at a time (kubectl logs -l job-name=JOB --prefix --tail=-1 | soak merge)\n"


def another_run(log: str, index: int, *, later_s: float = 0, qps: int | None = None) -> str:
    """The pod's log as if from another run: started `later_s` later, or with another qps, and another Job's pod."""
    summary = log[log.index("\n{\n"):]
    start = float(summary.split('"startWall": ', 1)[1].split(",", 1)[0])
    changed = summary.replace(f'"startWall": {start},', f'"startWall": {start + later_s},')
    if qps is not None:
        assert changed.count('"qps": 100,') == 1  # in the config
        changed = changed.replace('"qps": 100,', f'"qps": {qps},')
    return "".join(f"[pod/soak-29400060-{index}-b8q4z/soak] {line}\n"
                   for line in (log[: log.index("\n{\n")] + changed).splitlines())


def test_logs_of_two_runs_are_refused_saying_what_differs(pods: PodRun) -> None:
    """`kubectl logs -l app=soak` brings the earlier runs' pods too: mixed, they are no run at all."""
    today = [prefixed(i, log) for i, log in enumerate(pods.logs)]
    other_qps = merge(today[0], another_run(pods.logs[1], 1, qps=300), today[2])
    assert other_qps.returncode == 2 and other_qps.stdout == ""
    assert other_qps.stderr == ("soak: merge: the logs hold more than one run (jobs soak-29400000 and soak-29400060): "
                                "shard 1 (pod/soak-29400060-1-b8q4z/soak) ran with qps 300, shard 0 "
                                f"(pod/soak-29400000-0-x7k2p/soak) with qps 100{REFUSED}")
    yesterday = merge(*today, another_run(pods.logs[0], 0, later_s=-86_400))
    assert yesterday.returncode == 2
    assert yesterday.stderr.startswith("soak: merge: the logs hold more than one run (jobs soak-29400000 and "
                                       "soak-29400060): shard 0 appears twice (started ")
    assert " in pod/soak-29400060-0-b8q4z/soak and " in yesterday.stderr and yesterday.stderr.endswith(REFUSED)
    an_hour_apart = merge(today[0], today[1], another_run(pods.logs[2], 2, later_s=3_600))
    assert an_hour_apart.returncode == 2
    assert "shard 2 (pod/soak-29400060-2-b8q4z/soak) started " in an_hour_apart.stderr
    assert ": more than 1m2s apart" + REFUSED in an_hour_apart.stderr


def test_a_pod_one_interval_late_is_still_merged(pods: PodRun) -> None:
    late = another_run(pods.logs[2], 2, later_s=2)
    done = merge(prefixed(0, pods.logs[0]), prefixed(1, pods.logs[1]), late)
    assert shipped_merge(done) == apart_note([*pods.late[:2], pods.late[2] + 1])
    merged = assert_counts_add_up(done.stdout)
    assert merged["shards"]["merged"] == [0, 1, 2]


@pytest.mark.parametrize(("old", "new", "said"), [
    ('"interval": "2s",', '"interval": "0s",', 'config.interval: "0s" is not allowed'),
    ('"startWall": ', '"startWall": NaN, "was": ', "shard.startWall: NaN is not allowed"),
    ('"tally": {"good": ', '"tally": {"good": null, "was": ', "shard.intervals[2].tally: not a tally record"),
    ('"cpuSeconds": ', '"cpuSeconds": null, "was": ', "shard.cpuSeconds: null is not allowed"),
])
def test_a_damaged_summary_is_one_line_naming_it_not_a_traceback(pods: PodRun, tmp_path: Path, old: str, new: str,
                                                                   said: str) -> None:
    files = [tmp_path / f"pod-{index}.log" for index in range(SHARDS)]
    for index, log in enumerate(pods.logs):
        files[index].write_text(new.join(log.rsplit(old, 1)) if index == 1 else log)  # the last: in the shard record
    done = merge(files=files)
    assert done.returncode == 5, done.stderr  # shard 1's share is unaccounted for: goal% breaks too
    damage, dropped = assert_goal_broken(done).splitlines()
    assert damage.startswith(f"soak merge: {files[1]}: shard 1's summary cannot be merged: ") and said in damage
    assert dropped == "soak merge: shard 1 of 3: its output has no usable summary (cut off or damaged), not merged"
    assert assert_counts_add_up(done.stdout)["shards"]["incomplete"] == [1]
    alone = merge(files=[files[1]])
    assert alone.returncode == 2 and "Traceback" not in alone.stderr
    assert alone.stderr.splitlines()[-1] == "soak: merge: no shard's summary found in the input: nothing to merge"


def test_a_pod_whose_figures_contradict_each_other_is_named_and_left_out(pods: PodRun, tmp_path: Path) -> None:
    """One interval's good count raised by 1,000 in a pod's log, its histogram and status codes left
    as they were: merged, the made-up responses went into the run's totals and verdict without a
    word. Each contradiction is one line naming the pod, the shard and the interval, the shard is
    left out as a damaged one is, and the exit code is 5."""
    lines = pods.logs[1].splitlines(keepends=True)
    at = next(i for i, line in enumerate(lines) if line.lstrip().startswith('{"iter": 1, "startNs": '))
    found = re.search(r'"tally": \{"good": (\d+), "bad": (\d+),', lines[at])
    assert found is not None, lines[at]
    good, bad = int(found[1]), int(found[2])
    lines[at] = lines[at].replace(found[0], f'"tally": {{"good": {good + 1000}, "bad": {bad},', 1)
    files = [tmp_path / f"pod-{index}.log" for index in range(SHARDS)]
    for index, log in enumerate([pods.logs[0], "".join(lines), pods.logs[2]]):
        files[index].write_text(log)
    done = merge(files=files)
    assert done.returncode == 5, done.stderr
    said = [line.removeprefix(f"soak merge: {files[1]}: shard 1") for line in done.stderr.splitlines()]
    summary = pods.shard_summaries[1]
    assert said[:5] == [
        f", interval 1: good + bad is {good + bad + 1000}, its latency histogram holds {good + bad}",
        f", interval 1: good is {good + 1000}, its status codes 200-499 count {good}",
        f", the run: requests is {summary['requests']}, its intervals and drain add up to {summary['requests'] + 1000}",
        f", the run: good is {summary['good']}, its intervals and drain add up to {summary['good'] + 1000}",
        "'s summary cannot be merged: its figures contradict each other (4 contradictions)",
    ]
    assert said[5] == "soak merge: shard 1 of 3: its output has no usable summary (cut off or damaged), not merged"
    merged = assert_counts_add_up(done.stdout)
    assert merged["shards"]["incomplete"] == [1] and merged["shards"]["merged"] == [0, 2]
    assert merged["good"] == pods.shard_summaries[0]["good"] + pods.shard_summaries[2]["good"]


def test_texts_from_the_logs_reach_the_terminal_escaped(pods: PodRun) -> None:
    """A log is text anyone may have written: an ESC in a shard's URL, or in a pod's name that a note
    or a refusal quotes, reached the terminal raw through `soak merge` (a live run escapes them)."""
    url = pods.shard_summaries[0]["shard"]["urls"][0]
    crafted = [log.replace(json.dumps(url), json.dumps(url + "\x1b[2J\x07")) for log in pods.logs]
    assert all(crafted[i] != pods.logs[i] for i in range(SHARDS))
    cut = crafted[2][: crafted[2].index("\n{\n") + 40]  # cut inside its summary: a note names the pod
    named = "".join(f"[pod/soak-29400000-2-\x1b[31m/soak] {line}\n" for line in cut.splitlines())
    done = merge(prefixed(0, crafted[0]), prefixed(1, crafted[1]), named)
    assert done.returncode == 5, done.stderr
    assert "\x1b" not in done.stdout + done.stderr and "\x07" not in done.stdout + done.stderr
    assert f"to {url}\\x1b[2J\\x07 ..." in done.stdout.splitlines()[0]
    assert "soak merge: pod/soak-29400000-2-\\x1b[31m/soak: shard 2's log has no complete summary (cut off?)" \
        in done.stderr.splitlines()
    later = re.sub(r'"startWall": ([0-9.]+)', lambda m: f'"startWall": {float(m[1]) + 3600}', crafted[0], count=1)
    refused = merge(prefixed(0, crafted[0]), "".join(f"[pod/soak-1-\x1b[31m/soak] {line}\n"
                                                      for line in later.splitlines()))
    assert refused.returncode == 2 and refused.stdout == ""
    assert "\x1b" not in refused.stderr and "pod/soak-1-\\x1b[31m/soak" in refused.stderr, refused.stderr


def test_stdin_that_is_not_utf8_is_read_anyway() -> None:
    """A stray byte in the logs (a target's garbled error text) must not stop a merge under a strict locale."""
    done = subprocess.run(soak_command("merge"), input=b"\xff\n", capture_output=True, timeout=60,
                          env={**os.environ, "TZ": "UTC", "PYTHONIOENCODING": "utf-8:strict"})
    assert done.returncode == 2 and b"Traceback" not in done.stderr
    assert done.stderr.decode().splitlines()[-1] == ("soak: merge: no shard's summary found in the input: "
                                                     "nothing to merge")


def test_pods_started_an_interval_apart_merge_to_a_true_goal(nginx: Nginx) -> None:
    """Shard 0 comes up before a boundary, shards 1 and 2 just after it: they start (at least)
    one 2 s interval later. Each interval's goal is the share of the shards sending in it, so
    the goals add up to the sends due, made or skipped (it read 33% and 66% for the edge
    intervals, and 74% for a run whose every request was sent on time)."""
    after_a_boundary(INTERVAL_S, 0.2)  # shard 0 starts at the next boundary, B
    flags = ["--shards", "3", "--qps", "60", "--concurrency", "3", "--interval", "2s", "--iterations", "2"]
    env = {**os.environ, "TZ": "UTC"}
    first = subprocess.Popen(soak_command(*flags, "--shard", "0", nginx.url), stdout=subprocess.PIPE, text=True,
                             env=env)
    time.sleep(INTERVAL_S)  # now after B: shards 1 and 2 start at B + 2 s, or later on a busy machine
    rest = [subprocess.Popen(soak_command(*flags, "--shard", str(i), nginx.url), stdout=subprocess.PIPE, text=True,
                             env=env) for i in (1, 2)]
    logs = [p.communicate(timeout=60)[0] for p in (first, *rest)]
    starts = [assert_counts_add_up(log)["shard"]["startWall"] for log in logs]
    late = [round((start - min(starts)) / INTERVAL_S) for start in starts]
    assert late[0] == 0 and late[1] >= 1 and late[2] >= 1
    done = merge(*logs)
    assert done.returncode == 0, done.stderr
    assert done.stderr == apart_note(late)
    merged = assert_counts_add_up(done.stdout)  # the goals add up to the due sends: 240
    assert merged["requests"] + merged["skipped"] == 240
    assert merged["goalPercent"] == shown_percent(goal_percent(merged["good"] + merged["bad"], 240))
    lines = [parse_interval(line) for line in done.stdout.splitlines() if line[:1].isdigit()]
    sending = [sum(1 for i in range(3) if 0 <= k - late[i] < 2) for k in range(len(lines))]
    assert [line.target for line in lines] == [40 * n for n in sending]  # [40, 120, 80] when 1 interval late


def test_nothing_to_merge_is_one_line_and_exit_2() -> None:
    done = merge("# sending 100 GET req/s with concurrency=5 to http://127.0.0.1:9/ ...\nnot a summary\n")
    assert done.returncode == 2
    assert done.stderr.splitlines()[-1] == "soak: merge: no shard's summary found in the input: nothing to merge"


# --- long runs: merged in bounded memory ----------------------------------------------------


LONG_INTERVALS = 5_000
# The address space `soak merge` of two such shards gets. Every merged interval's decoded
# histograms (some 270 KB each) were kept until the summary: 2.7 GB for these two shards, a
# MemoryError under this limit. Streamed, the merge holds one interval per shard: it passes
# in 200 MB.
MERGE_ADDRESS_SPACE = 768 * 2**20


@pytest.fixture(scope="module")
def long_shards(nginx: Nginx, tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    """Two real shards' logs of 5,000 one-millisecond intervals each (about 5 MB each): the interval
    records of a long soak's pod (an hour of 1 s intervals is 3,600), printed by the same code."""
    return shard_logs(nginx.url, tmp_path_factory.mktemp("long"), shards=2, intervals=LONG_INTERVALS)


def _limited_address_space() -> None:
    """In the merge's process, before it runs: allocations past the limit fail (MemoryError)."""
    resource.setrlimit(resource.RLIMIT_AS, (MERGE_ADDRESS_SPACE, MERGE_ADDRESS_SPACE))


def test_a_long_run_merges_in_the_memory_of_one_interval_per_shard(long_shards: list[Path]) -> None:
    done = subprocess.run(soak_command("merge", *map(str, long_shards)), capture_output=True, text=True,
                          timeout=600, env={**os.environ, "TZ": "UTC"}, preexec_fn=_limited_address_space)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "Traceback" not in done.stderr and "MemoryError" not in done.stderr
    merged = assert_counts_add_up(done.stdout)
    shards = [assert_counts_add_up(log.read_text()) for log in long_shards]
    assert merged["shards"] == {"count": 2, "merged": [0, 1], "missing": [], "incomplete": [], "stopped": []}
    for key in ("requests", "good", "bad", "failed", "skipped"):
        assert merged[key] == sum(s[key] for s in shards), key
    late = round(abs(shards[1]["shard"]["startWall"] - shards[0]["shard"]["startWall"]) * 1000)  # in 1 ms intervals
    assert merged["intervals"] == LONG_INTERVALS + late == len(merged["intervalStats"])


# --- local workers --------------------------------------------------------------------------


def test_workers_split_the_run_and_print_one_merged_output(nginx: Nginx) -> None:
    before = nginx.requests_logged()
    run = run_soak("--qps", "300", "--concurrency", "4", "--interval", "2s", "--iterations", "3", "--workers", "2",
                   nginx.url, timeout=60)
    assert run.returncode == 0, run.stderr
    summary = assert_counts_add_up(run.stdout)
    assert run.lines[0] == f"# sending 300 GET req/s with concurrency=4 to {nginx.url} ..."
    lines = [parse_interval(line) for line in run.interval_lines]
    assert [line.target for line in lines] == [600, 600, 600]
    assert summary["requests"] == nginx.requests_logged() - before
    assert summary["requests"] + summary["skipped"] == 1800
    assert "shard" not in summary and summary["config"]["workers"] == 2


def test_a_worker_that_dies_fails_the_run_and_its_share_shows_as_missing(nginx: Nginx) -> None:
    """A worker killed (the OOM killer's SIGKILL) mid-run: the others finish, the output says
    which worker failed and how, its share stays in the goal, and the exit code is 5, so the
    Job shows Failed (it was 0, with stopReason "iterations")."""
    process = subprocess.Popen(soak_command("--qps", "100", "--concurrency", "2", "--interval", "1s",
                                            "--iterations", "3", "--workers", "2", nginx.url),
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               env={**os.environ, "TZ": "UTC"})
    assert process.stdout is not None
    first = process.stdout.readline()
    first += process.stdout.readline()
    while not (line := process.stdout.readline())[:1].isdigit():  # the first interval line
        first += line
    children = subprocess.run(["pgrep", "-P", str(process.pid), "-f", "spawn_main"], capture_output=True,
                              text=True).stdout.split()
    assert len(children) == 2, children
    os.kill(int(children[1]), signal.SIGKILL)
    out, err = process.communicate(timeout=30)
    assert process.returncode == 5, err
    summary = assert_counts_add_up(first + line + out)
    assert list(summary["failedWorkers"]) in (["0"], ["1"])
    assert f"worker {list(summary['failedWorkers'])[0]} failed: exited with code -9 before its summary" in err
    assert summary["goalPercent"] < 90  # half the load went missing for two of three intervals


def test_workers_stop_together_on_sigterm(nginx: Nginx) -> None:
    before = nginx.requests_logged()
    process = subprocess.Popen(soak_command("--qps", "100", "--concurrency", "2", "--interval", "1s",
                                            "--iterations", "600", "--workers", "2", nginx.url),
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               env={**os.environ, "TZ": "UTC"})
    assert process.stdout is not None
    lines = []
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        line = process.stdout.readline()
        lines.append(line)
        if line[:1].isdigit():
            break
    sent = time.monotonic()
    process.send_signal(signal.SIGTERM)
    out, err = process.communicate(timeout=15)
    assert time.monotonic() - sent < 5, "the workers and the parent stop promptly"
    assert process.returncode == 7, err  # stopped before its planned end (it was 0: a run cut short passed)
    summary = assert_counts_add_up("".join(lines) + out)
    assert summary["stopReason"] == "signal SIGTERM"
    assert summary["requests"] == nginx.requests_logged() - before


def test_bad_splits_are_one_line_and_exit_2() -> None:
    cases = [
        (["--shards", "3", "--concurrency", "2"], "soak: concurrency: 2 is not allowed; must be at least shards x workers "
                                                  "(3 x 1), so that every process has its share"),
        (["--shards", "3", "--shard", "3"], "soak: shard: 3 is not allowed; must be from 0 to 2 (shards: 3)"),
        (["--workers", "2", "--concurrency", "1"], "soak: concurrency: 1 is not allowed; must be at least shards x "
                                                   "workers (1 x 2), so that every process has its share"),
        # A share of 0 read as no limit: shard 2 of a 2-request run sent for the whole run.
        (["--shards", "3", "--concurrency", "3", "--totalRequests", "2"],
         "soak: totalRequests: 2 is not allowed; must be at least shards x workers (3 x 1), so that every process "
         "has its share"),
        (["--workers", "3", "--concurrency", "3", "--loadModel", "open", "--maxInFlight", "2"],
         "soak: maxInFlight: 2 is not allowed; must be at least shards x workers (1 x 3), so that every process "
         "has its share"),
        (["--shards", "2", "--noLatencySummary"],
         "soak: noLatencySummary: true is not allowed with shards: soak merge needs each shard's summary"),
    ]
    for flags, message in cases:
        run = run_soak(*flags, "--iterations", "1", "http://127.0.0.1:9/", timeout=30)
        assert (run.returncode, run.stderr) == (2, message + "\n"), flags
    bad_index = run_soak("--shards", "2", "--iterations", "1", "http://127.0.0.1:9/",
                         env={"JOB_COMPLETION_INDEX": "x"}, timeout=30)
    assert bad_index.stderr == "soak: JOB_COMPLETION_INDEX: 'x' is not allowed; must be a whole number\n"


# --- the split's arithmetic -------------------------------------------------------------------


@pytest.mark.parametrize(("shards", "workers"), [(1, 1), (3, 1), (1, 4), (2, 3), (5, 2)])
def test_every_send_belongs_to_exactly_one_client_of_one_process(shards: int, workers: int) -> None:
    concurrency = 11
    owners: dict[int, tuple[int, int, int]] = {}
    fewest = min(Shard(i, shards, w, workers).share(concurrency) for i in range(shards) for w in range(workers))
    for index in range(shards):
        for worker in range(workers):
            shard = Shard(index, shards, worker, workers)
            schedule = Schedule(0, 100.0, shard.share(concurrency), stride=shard.stride, offset=shard.offset)
            for client in range(schedule.clients):
                for k in range(50):
                    n = schedule.send_number(client, k)
                    assert n not in owners, (n, owners.get(n))
                    owners[n] = (index, worker, client)
    # Each process's first 50 x (its clients) sends are listed: every send up to the fewest's reach is owned.
    assert set(range(50 * fewest * shards * workers)) <= set(owners), "no send is left out"


@pytest.mark.parametrize(("total", "shards", "workers"), [(5, 3, 1), (10, 2, 3), (7, 1, 4), (100, 3, 3), (3, 3, 1)])
def test_whole_numbers_split_exactly(total: int, shards: int, workers: int) -> None:
    parts = [Shard(i, shards, w, workers).share(total) for i in range(shards) for w in range(workers)]
    assert sum(parts) == total and max(parts) - min(parts) <= 1
    pods = [sum(Shard(i, shards, w, workers).share(total) for w in range(workers)) for i in range(shards)]
    assert pods == [Shard(i, shards).share(total) for i in range(shards)], "a pod's workers hold the pod's part"


def test_last_due_by_respects_the_stride() -> None:
    shard = Shard(1, 3, 1, 2)  # process 1 + 3*1 = 4 of 6
    schedule = Schedule(0, 60.0, 2, stride=shard.stride, offset=shard.offset)
    for client in range(2):
        for now in range(0, 3_000_000_000, 7_000_001):
            k = schedule.last_due_by(client, now)
            brute = max((j for j in range(200) if schedule.due_ns(schedule.send_number(client, j)) <= now), default=-1)
            assert k == brute, (client, now)


def test_aligned_start_is_the_next_multiple_of_the_interval() -> None:
    assert aligned_start(1_000.0, 60) == 1_020.0
    assert aligned_start(1_020.0, 60) == 1_020.0
    assert aligned_start(1_000.5, 2) == 1_002.0
    assert {aligned_start(t, 60) for t in (1_000.0, 1_003.0, 1_019.9)} == {1_020.0}, "pods started seconds apart agree"


def test_shard_of_reads_the_indexed_jobs_index() -> None:
    assert shard_of(3, None, environ={"JOB_COMPLETION_INDEX": "2"}) == Shard(2, 3)
    assert shard_of(3, 1, environ={"JOB_COMPLETION_INDEX": "2"}) == Shard(1, 3), "a flag wins"
    assert shard_of(1, None, environ={}) == Shard(0, 1)
    assert shard_of(2, None, 3, 1, environ={"JOB_COMPLETION_INDEX": "1"}) == Shard(1, 2, 1, 3)
    assert shard_of(1, None, environ={"JOB_COMPLETION_INDEX": "4"}) == Shard(0, 1), "an unsplit Indexed Job"
    assert shard_of(2, None, environ={"JOB_COMPLETION_INDEX": ""}) == Shard(0, 2)


def test_the_merged_run_is_judged_by_the_runs_thresholds(pods: PodRun) -> None:
    """The pods' thresholds apply to the whole run: judged on the merged figures, exit 3 if broken."""
    assert all(SHIPPED_THRESHOLDS in log for log in pods.logs)
    judged = [log.replace(SHIPPED_THRESHOLDS, '"thresholds": ["p50 < 1ns", "errors% <= 0"],') for log in pods.logs]
    done = merge(*(prefixed(i, log) for i, log in enumerate(judged)))
    assert done.returncode == 3, done.stderr
    verdict = [line for line in done.stdout.splitlines() if line.startswith("# threshold")]
    assert verdict[0].startswith("# threshold run p50 < 1ns: ") and verdict[0].endswith(" BROKEN")
    assert verdict[1] == "# threshold run errors% <= 0: 0% ok"
    assert assert_counts_add_up(done.stdout)["thresholds"]["passed"] is False


def test_a_capacity_search_split_over_pods_merges(nginx: Nginx, tmp_path: Path) -> None:
    """Each shard of a stopAtBrokenRule run stops itself at the first interval that breaks its rule;
    their merge judged the merged intervals with the same rule and stopped "the run" by sending
    itself SIGTERM: exit 143 after the first interval line, no verdict, no summary, no word."""
    after_a_boundary(1)
    processes = [subprocess.Popen(soak_command("--qps", "20", "--interval", "1s", "--iterations", "5", "--shards", "2",
                                               "--shard", str(index), "--intervalThresholds", "p99 < 1ns",
                                               "--stopAtBrokenRule", nginx.url),
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                  env={**os.environ, "TZ": "UTC"}) for index in range(2)]
    try:
        outputs = [p.communicate(timeout=60) for p in processes]
    finally:
        for process in processes:
            process.kill()
    assert [p.returncode for p in processes] == [3, 3], [err for _, err in outputs]
    done = merge_saved([out for out, _ in outputs], tmp_path)
    assert done.returncode == 3, (done.returncode, done.stderr)
    merged = assert_counts_add_up(done.stdout)
    assert merged["shards"]["merged"] == [0, 1]
    assert merged["stopReason"] == "threshold interval p99 < 1ns"
    assert merged["thresholds"]["stoppedEarly"] == "interval p99 < 1ns broken in interval 0"
    assert "lastGoodRate" in merged and any(line.startswith("# capacity: ") for line in done.stdout.splitlines())


def test_the_shards_warmups_are_merged_apart_from_the_run(nginx: Nginx, tmp_path: Path) -> None:
    """Each pod warms up before its share of the run and keeps what its warm-up measured in its
    summary's warmup section; `soak merge` dropped those sections, so the merged run hid the
    warm-up's requests (which nginx saw). Now the merged warmup section is the pods' added up,
    and it stays out of the run's counts as each pod's did."""
    after_a_boundary(1)
    before = nginx.requests_logged()
    processes = [subprocess.Popen(soak_command("--warmup", "2s", "--qps", "10", "--interval", "1s", "--iterations", "2",
                                               "--shards", "2", "--shard", str(index), nginx.url),
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                  env={**os.environ, "TZ": "UTC"}) for index in range(2)]
    outputs = [p.communicate(timeout=60) for p in processes]
    assert [p.returncode for p in processes] == [0, 0], [err for _, err in outputs]
    pods = [assert_counts_add_up(out) for out, _ in outputs]
    done = merge_saved([out for out, _ in outputs], tmp_path)
    assert done.returncode == 0, done.stderr
    merged = assert_counts_add_up(done.stdout)
    warmup = merged["warmup"]
    for key in ("requests", "good", "skipped", "intervals"):
        assert warmup[key] == (sum if key != "intervals" else max)(p["warmup"][key] for p in pods), (key, warmup)
    assert warmup["requests"] + warmup["skipped"] == 20  # 2 s at 10 req/s, over both pods
    assert warmup["max"] == max(p["warmup"]["max"] for p in pods)
    assert merged["requests"] == sum(p["requests"] for p in pods)
    assert nginx.requests_logged() - before == warmup["requests"] + merged["requests"]


def test_workers_warm_up_together_and_print_one_merged_warmup(nginx: Nginx) -> None:
    """A warm-up with local workers was refused. Now each worker warms up its share on the run's
    grid, and the parent prints one merged warm-up line per interval, as one process would: the
    lines' goals are the whole run's rate, and the merged warmup section and the run add up to
    what nginx logged, each apart."""
    before = nginx.requests_logged()
    run = run_soak("--warmup", "2s", "--qps", "20", "--concurrency", "4", "--interval", "1s", "--iterations", "2",
                   "--workers", "2", nginx.url, timeout=60)
    assert run.returncode == 0, run.stderr
    summary = assert_counts_add_up(run.stdout)
    marked = [line[len("# warmup "):] for line in run.lines if line.startswith("# warmup ")]
    warmup = summary["warmup"]
    assert len(marked) == warmup["intervals"] == 2, run.stdout
    assert [parse_interval(line).target for line in marked] == [20, 20]
    assert sum(parse_interval(line).requests for line in marked) <= warmup["requests"]  # the rest came back later
    assert warmup["requests"] + warmup["skipped"] == 40 and summary["requests"] + summary["skipped"] == 40
    assert [parse_interval(line).target for line in run.interval_lines] == [20, 20]
    assert nginx.requests_logged() - before == warmup["requests"] + summary["requests"]
    first_run_line = next(i for i, line in enumerate(run.lines) if line[:1].isdigit())
    assert all(i < first_run_line for i, line in enumerate(run.lines) if line.startswith("# warmup "))
