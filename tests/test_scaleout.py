"""Scale-out: a run split over pods (an Indexed Job) or local workers, and merged back exactly.

The pods are the rendered scale-out CronJob's exact command, run once per index with
JOB_COMPLETION_INDEX set as Kubernetes sets it, against real nginx; their logs go through
`soak merge` as `kubectl logs --prefix` prints them.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import pytest
from hdrh.histogram import HdrHistogram

from runner.schedule import Schedule
from runner.shards import Shard, aligned_start, shard_of
from tests.conftest import Nginx, assert_counts_add_up, parse_interval, run_soak, soak_command
from tests.pallet import find, pod_command, render

SHARDS = 3


# --- the manifests --------------------------------------------------------------------------


def test_the_component_makes_an_indexed_job_with_the_count_in_one_place() -> None:
    job = find(render("scale-out"), "CronJob", "soak")["spec"]["jobTemplate"]["spec"]
    assert job["completionMode"] == "Indexed"
    assert job["completions"] == job["parallelism"] == SHARDS
    assert job["template"]["spec"]["containers"][0]["args"][0] == f"--shards={SHARDS}"
    assert job["backoffLimit"] == 0
    base = find(render("base"), "CronJob", "soak")["spec"]["jobTemplate"]["spec"]
    assert "completionMode" not in base and not any(a.startswith("--shards") for a in
                                                   base["template"]["spec"]["containers"][0]["args"])


# --- pods of an Indexed Job against nginx, merged ------------------------------------------


@dataclass
class PodRun:
    logs: list[str]  # each pod's stdout + stderr, as kubectl logs shows it
    shard_summaries: list[dict]
    logged: int  # requests nginx logged during the run


@pytest.fixture(scope="module")
def pods(nginx: Nginx, tmp_path_factory: pytest.TempPathFactory) -> PodRun:
    """The scale-out CronJob's command, once per index, at the same time, for three 2 s intervals."""
    root = tmp_path_factory.mktemp("pods")
    command, env = pod_command(render("scale-out"), root / "pod", nginx.url)
    before = nginx.requests_logged()
    processes = [
        subprocess.Popen([*command, "--interval", "2s", "--iterations", "3", "--latencyUnit", "us"],
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=root,
                         env={**os.environ, "TZ": "UTC", **env, "JOB_COMPLETION_INDEX": str(index)})
        for index in range(SHARDS)
    ]
    logs = [p.communicate(timeout=60)[0] for p in processes]
    assert [p.returncode for p in processes] == [0] * SHARDS, logs
    return PodRun(logs, [assert_counts_add_up(log) for log in logs], nginx.requests_logged() - before)


def merge(*texts: str, files: list[Path] | None = None) -> subprocess.CompletedProcess[str]:
    """`soak merge`, reading `texts` on stdin (or the files given)."""
    return subprocess.run(soak_command("merge", *(str(f) for f in files or [])), input="".join(texts),
                          capture_output=True, text=True, timeout=60, env={**os.environ, "TZ": "UTC"})


def prefixed(index: int, log: str) -> str:
    """A pod's log as `kubectl logs --prefix` prints it."""
    return "".join(f"[pod/soak-29400000-{index}-x7k2p/soak] {line}\n" for line in log.splitlines())


def test_each_pod_sends_its_share_from_the_same_instant(pods: PodRun) -> None:
    concurrency = [2, 2, 1]  # configuration.json's 5 clients over 3 pods: the remainder to the first
    for index, (log, summary) in enumerate(zip(pods.logs, pods.shard_summaries, strict=True)):
        assert f"with concurrency={concurrency[index]} " in log.splitlines()[0]
        assert log.splitlines()[0].endswith(f"(shard {index} of {SHARDS}) ...")
        assert summary["shard"]["index"] == index and summary["shard"]["count"] == SHARDS
    starts = {s["shard"]["startWall"] for s in pods.shard_summaries}
    assert len(starts) == 1, "the pods start on one instant, recorded exactly (not a few us apart)"
    start = min(starts)
    assert abs(start - round(start / 2) * 2) < 0.001, "on a multiple of the interval"


def test_merged_totals_are_the_sum_and_match_what_nginx_saw(pods: PodRun) -> None:
    done = merge(*(prefixed(i, log) for i, log in enumerate(pods.logs)))
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""
    merged = assert_counts_add_up(done.stdout)
    for key in ("requests", "good", "bad", "failed", "skipped", "bytesIn"):
        assert merged[key] == sum(s[key] for s in pods.shard_summaries), key
    assert merged["requests"] == pods.logged == 600
    assert merged["goalPercent"] == 100 and merged["rate"]["achieved"] == 100
    assert merged["shards"] == {"count": SHARDS, "merged": [0, 1, 2], "missing": [], "incomplete": []}
    assert done.stdout.splitlines()[0].startswith("# sending 100 GET req/s with concurrency=5 to http://127.0.0.1:")
    assert "shard" not in merged, "the merged run is the whole run, not a shard"


def test_merged_lines_keep_the_single_process_accuracy(pods: PodRun) -> None:
    done = merge(*(prefixed(i, log) for i, log in enumerate(pods.logs)))
    lines = [parse_interval(line) for line in done.stdout.splitlines() if line[:1].isdigit()]
    assert len(lines) == 3
    for line in lines:
        assert line.target == 200 and line.interval == "2s"
        assert abs(line.requests - 200) <= 1, line
        assert line.goal_percent >= 99


def test_merged_percentiles_are_those_of_the_union_of_histograms(pods: PodRun) -> None:
    """Never averaged percentiles: the merged ones are the union's, from its buckets."""
    done = merge(*(prefixed(i, log) for i, log in enumerate(pods.logs)))
    merged = assert_counts_add_up(done.stdout)
    union = HdrHistogram(1, 3_600_000_000_000, 3)
    for summary in pods.shard_summaries:
        union.add(HdrHistogram.decode(summary["histogram"]["hdr"]))
    top = max(s["max"] for s in pods.shard_summaries) * 1000 + 999  # the exact max, in ns, to within the unit
    wanted = {"p50": 50, "p75": 75, "p90": 90, "p95": 95, "p99": 99, "p999": 99.9}
    expected = {key: min(union.get_value_at_percentile(p), top) // 1000 for key, p in wanted.items()}
    assert {key: merged[key] for key in wanted} == expected
    assert merged["max"] == max(s["max"] for s in pods.shard_summaries)
    assert merged["min"] == min(s["min"] for s in pods.shard_summaries)
    averaged = sum(s["p99"] for s in pods.shard_summaries) / SHARDS
    assert merged["p99"] == expected["p99"], f"not the average of the pods' p99s ({averaged})"


def test_a_missing_pod_is_reported_not_dropped_silently(pods: PodRun) -> None:
    done = merge(prefixed(0, pods.logs[0]), prefixed(2, pods.logs[2]))
    assert done.returncode == 0
    assert done.stderr == "soak merge: shard 1 of 3: no output found, not merged\n"
    merged = assert_counts_add_up(done.stdout)
    assert merged["shards"]["missing"] == [1] and merged["shards"]["merged"] == [0, 2]
    assert merged["requests"] == pods.shard_summaries[0]["requests"] + pods.shard_summaries[2]["requests"]


def test_a_truncated_pod_log_is_reported_as_incomplete(pods: PodRun, tmp_path: Path) -> None:
    cut = pods.logs[2][: pods.logs[2].index("\n{\n") + 40]  # cut inside its JSON summary
    files = []
    for index, log in enumerate([pods.logs[0], pods.logs[1], cut]):
        files.append(tmp_path / f"pod-{index}.log")
        files[-1].write_text(log)
    done = merge(files=files)
    assert done.returncode == 0, done.stderr
    assert f"{files[2]}: shard 2's log has no complete summary (cut off?)" in done.stderr
    assert "shard 2 of 3: its output was cut off before its summary, not merged" in done.stderr
    merged = assert_counts_add_up(done.stdout)
    assert merged["shards"]["incomplete"] == [2] and merged["shards"]["merged"] == [0, 1]


def test_nothing_to_merge_is_one_line_and_exit_2() -> None:
    done = merge("# sending 100 GET req/s with concurrency=5 to http://127.0.0.1:9/ ...\nnot a summary\n")
    assert done.returncode == 2
    assert done.stderr.splitlines()[-1] == "soak: merge: no shard's summary found in the input: nothing to merge"


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
    assert all(abs(line.requests - 600) <= 1 for line in lines), lines
    assert summary["requests"] == nginx.requests_logged() - before == 1800
    assert "shard" not in summary and summary["config"]["workers"] == 2


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
    assert process.returncode == 0, err
    summary = assert_counts_add_up("".join(lines) + out)
    assert summary["stopReason"] == "signal SIGTERM"
    assert summary["requests"] == nginx.requests_logged() - before


def test_bad_splits_are_one_line_and_exit_2() -> None:
    cases = [
        (["--shards", "3", "--concurrency", "2"], "soak: concurrency: 2 is not allowed; must be at least shards x workers "
                                                  "(3 x 1), so that every process has a client"),
        (["--shards", "3", "--shard", "3"], "soak: shard: 3 is not allowed; must be from 0 to 2 (shards: 3)"),
        (["--workers", "2", "--concurrency", "1"], "soak: concurrency: 1 is not allowed; must be at least shards x "
                                                   "workers (1 x 2), so that every process has a client"),
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
    assert all('"thresholds": [],' in log for log in pods.logs)
    judged = [log.replace('"thresholds": [],', '"thresholds": ["p50 < 1ns", "errors% <= 0"],') for log in pods.logs]
    done = merge(*(prefixed(i, log) for i, log in enumerate(judged)))
    assert done.returncode == 3, done.stderr
    verdict = [line for line in done.stdout.splitlines() if line.startswith("# threshold")]
    assert verdict[0].startswith("# threshold run p50 < 1ns: ") and verdict[0].endswith(" BROKEN")
    assert verdict[1] == "# threshold run errors% <= 0: 0% ok"
    assert assert_counts_add_up(done.stdout)["thresholds"]["passed"] is False
