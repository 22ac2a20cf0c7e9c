"""The resultsStore end to end: real runs against nginx, a real directory, and moto's S3 server on loopback.

A run leaves its record and an index entry; a split run's shards leave theirs, and the last one
merges them into the same record `soak merge` prints for their logs, naming a shard that was
killed (exit code 5); `soak history` lists what the index holds and names what it cannot read;
`soak compare` of store ranges prints the figures it prints for the same runs' logs; and a store
that is down, slow or refuses writes leaves the run's exit code and summary as they are without
one, plus one line.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hdrh.histogram import HdrHistogram

from runner.store.layout import INDEX, index_key, run_key
from runner.store.record import encoded, index_entry
from tests.conftest import Nginx, run_soak, soak_command, split_engine_line
from tests.support.faultserver import refused_port
from tests.support.pallet import JOB_NAME, pod_command, render
from tests.support.s3server import S3Server, moto_s3, refusing_server, silent_server

RUN = ("--qps", "45", "--concurrency", "3", "--interval", "1s", "--iterations", "2")
SHARDS = 3


@pytest.fixture(scope="module")
def s3() -> Iterator[S3Server]:
    with moto_s3() as server:
        yield server


_buckets = iter(range(10_000))


@pytest.fixture
def bucket(s3: S3Server) -> str:
    name = f"soak-records-{os.getpid()}-{next(_buckets)}"
    s3.create_bucket(name)
    return name


def _summary(stdout: str) -> dict[str, Any]:
    lines = stdout.splitlines()
    return json.loads("\n".join(lines[lines.index("{"):lines.index("}") + 1]))


def _store_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("soak: resultsStore ")]


# --- one run --------------------------------------------------------------------------------


def test_a_run_keeps_its_record_and_history_lists_it(nginx: Nginx, tmp_path: Path) -> None:
    store = f"file://{tmp_path}/records"
    done = run_soak(*RUN, "--thresholds", "errors% <= 1", "--resultsStore", store, "--resultsRun", "tuesday",
                    nginx.url)
    assert done.returncode == 0, done.stderr
    printed = _summary(done.stdout)
    assert printed["resultsStore"] == {"store": store, "record": "runs/soak/tuesday/run.json", "stored": True}
    record = json.loads((tmp_path / "records/runs/soak/tuesday/run.json").read_text())
    assert record["summary"] == {key: value for key, value in printed.items() if key != "resultsStore"}
    assert (record["kind"], record["exitCode"], record["verdict"], record["said"]) == (
        "run", 0, "passed", ["1 of 1 threshold kept"])
    assert record["command"][0] == "soak" and record["command"][-3:] == ["--resultsRun", "tuesday", nginx.url]
    [entry] = (tmp_path / "records/index").iterdir()
    assert json.loads(entry.read_text())["record"] == "runs/soak/tuesday/run.json"
    history = run_soak("history", store)
    assert history.returncode == 0 and history.stderr == ""
    [line] = history.stdout.splitlines()
    p99 = HdrHistogram.decode(printed["histogram"]["hdr"]).get_value_at_percentile(99) / 1e6
    assert line == (f"{record['start']}  soak  tuesday  passed (exit 0)  p99 {round(p99, 3):g}ms  "
                    f"goal% {printed['goalPercent']:g}%")


# --- shards ---------------------------------------------------------------------------------


def _shards(nginx: Nginx, s3: S3Server, bucket: str, *extra: str, kill: int | None = None) -> list[tuple[int, str]]:
    """Three shards of one run at once, each with the store; `kill`: that one is killed in its first interval."""
    time.sleep((0.1 - time.time() % 1) % 1)  # just after a second's boundary: all come up before the next
    processes = [subprocess.Popen(
        soak_command(*RUN, "--shards", str(SHARDS), "--thresholds", "errors% <= 1", "--resultsStore",
                     f"s3://{bucket}/soak", "--resultsRun", "soak-28400460", *extra, nginx.url),
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env={**os.environ, "TZ": "UTC", **s3.environ(), "JOB_COMPLETION_INDEX": str(index)})
        for index in range(SHARDS)]
    if kill is not None:
        time.sleep(1.5)  # a second to the common start, and into the first interval
        processes[kill].send_signal(signal.SIGKILL)
    outputs = [p.communicate(timeout=90) for p in processes]
    return [(p.returncode, out + err) for p, (out, err) in zip(processes, outputs, strict=True)]


def test_three_shards_leave_their_records_and_one_merged_as_soak_merge_merges_their_logs(
        nginx: Nginx, s3: S3Server, bucket: str, tmp_path: Path) -> None:
    shards = _shards(nginx, s3, bucket)
    assert [code for code, _ in shards] == [0, 0, 0], shards
    keys = s3.keys(bucket, "soak/")
    run = "soak/runs/soak/soak-28400460/"
    assert sorted(k for k in keys if k.startswith(run)) == [
        run + "run.json", *(run + f"shard-{i:03d}-of-003.json" for i in range(SHARDS))]
    assert len([k for k in keys if k.startswith("soak/index/")]) == 1
    merges = [line for _, log in shards for line in _store_lines(log)]
    assert merges and all(" merged 3 of the run's 3 shards into runs/soak/soak-28400460/run.json: passed (exit "
                          "code 0)" in line for line in merges), merges
    # The merged record is what soak merge prints for the pods' logs.
    files = []
    for index, (_, log) in enumerate(shards):
        files.append(tmp_path / f"pod-{index}.log")
        files[-1].write_text(split_engine_line(log)[1])
    by_hand = subprocess.run(soak_command("merge", *map(str, files)), capture_output=True, text=True, timeout=60,
                             env={**os.environ, "TZ": "UTC"})
    stored = _stored(s3, bucket, "soak/" + run_key("soak", "soak-28400460"))
    assert stored["summary"] == _summary(by_hand.stdout)
    assert stored["exitCode"] == by_hand.returncode == 0 and stored["kind"] == "merged"
    from_store = run_soak("merge", f"s3://{bucket}/soak?run=soak-28400460", env=s3.environ())
    assert (from_store.returncode, _summary(from_store.stdout)) == (0, _summary(by_hand.stdout))
    history = run_soak("history", f"s3://{bucket}/soak", env=s3.environ())
    [line] = history.stdout.splitlines()
    assert "  soak  soak-28400460  passed (exit 0)  " in line and line.endswith("  3 of 3 shards")


def test_a_killed_shard_is_named_missing_by_the_merged_record_exit_code_5(
        nginx: Nginx, s3: S3Server, bucket: str) -> None:
    shards = _shards(nginx, s3, bucket, "--resultsMergeWait", "3s", kill=2)
    assert [code for code, _ in shards[:2]] == [0, 0] and shards[2][0] == -signal.SIGKILL, shards
    [merged_by] = [line for _, log in shards for line in _store_lines(log) if " merged " in line]
    assert merged_by.endswith(" merged 2 of the run's 3 shards (not merged: shard 2) into "
                              "runs/soak/soak-28400460/run.json after waiting 3s: incomplete (exit code 5)")
    assert merged_by in shards[0][1], "the lowest shard present merges, once the wait is over"
    stored = _stored(s3, bucket, "soak/" + run_key("soak", "soak-28400460"))
    assert stored["exitCode"] == 5 and stored["summary"]["shards"] == {
        "count": 3, "merged": [0, 1], "missing": [2], "incomplete": [], "stopped": []}
    by_hand = run_soak("merge", f"s3://{bucket}/soak?run=soak-28400460", env=s3.environ())
    assert by_hand.returncode == 5 and "soak merge: shard 2 of 3: no output found, not merged" in by_hand.stderr
    assert _summary(by_hand.stdout) == stored["summary"]
    [line] = run_soak("history", f"s3://{bucket}/soak", env=s3.environ()).stdout.splitlines()
    assert " incomplete (exit 5) " in line and line.endswith("  2 of 3 shards (missing 2)")


def _stored(s3: S3Server, bucket: str, key: str) -> dict[str, Any]:
    import boto3

    client = boto3.client("s3", endpoint_url=s3.endpoint, region_name="us-east-1", aws_access_key_id="soak-test",
                          aws_secret_access_key="x")
    return json.loads(client.get_object(Bucket=bucket, Key=key)["Body"].read())


# --- history over many runs, and what it cannot read ----------------------------------------


def test_history_lists_200_runs_and_names_the_entries_it_cannot_read(
        nginx: Nginx, s3: S3Server, bucket: str) -> None:
    import boto3

    store = f"s3://{bucket}/many"
    done = run_soak(*RUN, "--resultsStore", store, "--resultsRun", "run-000", nginx.url, env=s3.environ())
    assert done.returncode == 0 and not _store_lines(done.stderr), done.stderr
    record = _stored(s3, bucket, "many/" + run_key("soak", "run-000"))
    client = boto3.client("s3", endpoint_url=s3.endpoint, region_name="us-east-1", aws_access_key_id="soak-test",
                          aws_secret_access_key="x")
    start = time.time() - 200 * 3600
    for n in range(1, 200):  # 199 more runs, an hour apart, made from the real one's record
        record |= {"run": f"run-{n:03d}", "start": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(start + n * 3600))}
        key = run_key("soak", record["run"])
        client.put_object(Bucket=bucket, Key="many/" + key, Body=encoded(record))
        entry = index_entry(record, key, 1.5e6 + n, 99.0)
        client.put_object(Bucket=bucket, Key="many/" + index_key(start + n * 3600, "soak", record["run"]),
                          Body=encoded(entry))
    client.put_object(Bucket=bucket, Key=f"many/{INDEX}20000101T000000.000000Z_soak_damaged.json", Body=b'{"soakI')
    crafted = f"{INDEX}20000101T000001.000000Z_soak_crafted.json"
    client.put_object(Bucket=bucket, Key=f"many/{crafted}", Body=json.dumps(
        {"soakIndex": 1, "start": "2000-01-01T00:00:01Z", "job": "soak", "run": "x", "kind": "run",
         "exitCode": "\x1b[2J0", "verdict": "passed", "record": "y"}).encode())
    history = run_soak("history", store, env=s3.environ())
    assert history.returncode == 0
    lines = history.stdout.splitlines()
    assert len(lines) == 200 and len({line.split("  ")[2] for line in lines}) == 200
    assert lines[0].split("  ")[2] == "run-001" and lines[-1].split("  ")[2] == "run-000"
    assert history.stderr.splitlines() == [
        f"soak history: {INDEX}20000101T000000.000000Z_soak_damaged.json: skipped, not an index entry this version "
        "reads: not JSON (Unterminated string starting at: line 1 column 2 (char 1))",
        f'soak history: {crafted}: skipped, not an index entry this version reads: exitCode: "\\u001b[2J0" is not '
        "a whole number from 0 to 255"]
    recent = run_soak("history", store, "--since", "3h", "--job", "soak", env=s3.environ())
    # run-197 started 3 h and some seconds ago
    assert [line.split("  ")[2] for line in recent.stdout.splitlines()] == ["run-198", "run-199", "run-000"]
    assert run_soak("history", store, "--job", "other", env=s3.environ()).stdout == ""


# --- compare and plot from a store ----------------------------------------------------------


def test_compare_of_store_ranges_prints_the_figures_of_the_runs_logs(nginx: Nginx, tmp_path: Path) -> None:
    store = f"file://{tmp_path}/records"
    logs, starts = [], []
    for name in ("monday", "tuesday"):
        done = run_soak(*RUN, "--latencyUnit", "us", "--resultsStore", store, "--resultsRun", name, nginx.url,
                        nginx.url + "echo")  # two URLs: each has its rows
        assert done.returncode == 0, done.stderr
        logs.append(tmp_path / f"{name}.log")
        logs[-1].write_text(done.stdout)
        starts.append(json.loads((tmp_path / f"records/runs/soak/{name}/run.json").read_text())["start"])
    from_logs = run_soak("compare", *map(str, logs))
    ranges = [f"{store}?from={starts[0]}&to={starts[1]}", f"{store}?from={starts[1]}"]
    from_store = run_soak("compare", *ranges)
    assert from_store.returncode == from_logs.returncode == 0, from_store.stderr
    figures = [[line.split() for line in done.stdout.splitlines()[1:]] for done in (from_store, from_logs)]
    assert figures[0] == figures[1] and len(figures[0]) > 20  # the same rows and figures; only the names differ
    assert [row[:3] for row in figures[0] if row[0] == nginx.url + "echo"][:2] == [
        [nginx.url + "echo", "requests", str(_summary(logs[0].read_text())["perUrl"][1]["requests"])],
        [nginx.url + "echo", "failed", "0"]]
    # A range of both runs is one column, its latencies from the two histograms merged.
    both = run_soak("compare", str(logs[0]), f"{store}?since=1h", "--latencyUnit", "us")
    histograms = [HdrHistogram.decode(_summary(log.read_text())["histogram"]["hdr"]) for log in logs]
    histograms[0].add(histograms[1])
    table = {line.split("  ")[0].strip(): line.split() for line in both.stdout.splitlines()[1:]}
    assert float(table["p99 (us)"][3]) == round(histograms[0].get_value_at_percentile(99) / 1e3, 3)
    assert int(table["requests"][2]) == sum(_summary(log.read_text())["requests"] for log in logs)
    assert int(table[f"{nginx.url} requests"][3]) == sum(_summary(log.read_text())["perUrl"][0]["requests"]
                                                         for log in logs)
    assert "2 runs added up" in both.stderr
    # plot draws a range's intervals one after another: the two runs' two intervals each.
    plotted = run_soak("plot", f"{store}?since=1h", "-o", str(tmp_path / "range.png"))
    assert plotted.returncode == 0 and (tmp_path / "range.png").read_bytes().startswith(b"\x89PNG")


def test_a_store_range_that_holds_no_run_is_one_line(tmp_path: Path) -> None:
    done = run_soak("compare", f"file://{tmp_path}?run=nothing", f"file://{tmp_path}")
    assert done.returncode == 2 and done.stderr == f"soak: file://{tmp_path}?run=nothing: no run in the store is " \
                                                   "what it asks for\n"
    done = run_soak("history", "ftp://host/records")
    assert done.returncode == 2 and done.stderr == ("soak: ftp://host/records has the scheme ftp:, which is no store "
                                                    "this version writes to: file:///DIR or s3://BUCKET/PREFIX\n")


# --- a store that is down, slow or refuses writes -------------------------------------------


BROKEN = ("--thresholds", "p99 < 1us")  # broken by any real response: exit code 3


def _same_run_plus_one_line(baseline: Any, done: Any, said: str) -> None:
    assert done.returncode == baseline.returncode == 3
    printed, alone = _summary(done.stdout), _summary(baseline.stdout)
    paced = {"drain"}  # answers after the last interval: the machine's pace, in either run or neither
    assert set(printed) - paced == (set(alone) - paced) | {"resultsStore"}
    assert printed["resultsStore"]["stored"] is False and said in printed["resultsStore"]["error"]
    assert printed["thresholds"]["passed"] is alone["thresholds"]["passed"] is False
    lines = done.stderr.splitlines()
    [line] = _store_lines(done.stderr)
    own = [x for x in lines if x != line and not x.startswith("# ")]  # "# " notes: the client's pace, any run's
    assert own == [x for x in baseline.stderr.splitlines() if not x.startswith("# ")]
    assert said in line


@pytest.fixture(scope="module")
def baseline(nginx: Nginx) -> Any:
    return run_soak(*RUN, *BROKEN, nginx.url)


def test_a_store_that_is_down_changes_nothing_but_one_line(nginx: Nginx, baseline: Any) -> None:
    port = refused_port()
    try:
        done = run_soak(*RUN, *BROKEN, "--resultsStore", "s3://soak-records/x", nginx.url,
                        env=S3Server(f"http://127.0.0.1:{port.getsockname()[1]}").environ())
    finally:
        port.close()
    _same_run_plus_one_line(baseline, done, "Connection refused")


def test_a_store_slower_than_the_wait_holds_the_run_no_longer(nginx: Nginx, baseline: Any) -> None:
    with silent_server() as server:
        began = time.monotonic()
        done = run_soak(*RUN, *BROKEN, "--resultsStore", "s3://soak-records/x", nginx.url, env=server.environ())
        took = time.monotonic() - began
    _same_run_plus_one_line(baseline, done, "no answer within")
    assert took < 2 + 10 + 15, "two 1 s intervals, the 10 s wait, and room for a busy machine"


def test_a_store_that_refuses_writes_changes_nothing_but_one_line(nginx: Nginx, baseline: Any, tmp_path: Path) -> None:
    with refusing_server() as server:
        done = run_soak(*RUN, *BROKEN, "--resultsStore", "s3://soak-records/x", nginx.url, env=server.environ())
    _same_run_plus_one_line(baseline, done, "HTTP 403 Forbidden AccessDenied")
    (tmp_path / "file").write_text("a file where the directory should be")
    done = run_soak(*RUN, *BROKEN, "--resultsStore", f"file://{tmp_path}/file/records", nginx.url)
    _same_run_plus_one_line(baseline, done, "Not a directory")


def test_a_bucket_that_does_not_exist_refuses_the_record(nginx: Nginx, s3: S3Server, baseline: Any) -> None:
    done = run_soak(*RUN, *BROKEN, "--resultsStore", "s3://no-such-bucket-here/x", nginx.url, env=s3.environ())
    _same_run_plus_one_line(baseline, done, "NoSuchBucket")


# --- validate -------------------------------------------------------------------------------


def test_validate_says_where_records_go_and_warns_of_a_bucket_that_is_not_there(s3: S3Server, bucket: str) -> None:
    there = run_soak("validate", "--resultsStore", f"s3://{bucket}/soak", "http://127.0.0.1/", env=s3.environ())
    assert there.returncode == 0 and there.stderr == ""
    assert f"keeps the run's record in the S3 bucket {bucket} at {s3.endpoint} (AWS_ENDPOINT_URL), under soak/runs/" \
           in there.stdout and "warning" not in there.stdout
    missing = run_soak("validate", "--resultsStore", "s3://no-such-bucket-here/soak", "http://127.0.0.1/",
                       env=s3.environ())
    assert missing.returncode == 0 and missing.stderr == ""
    assert missing.stdout.splitlines()[-1] == (
        "warning: resultsStore s3://no-such-bucket-here/soak: HTTP 404 Not Found NoSuchBucket: a run would still run, "
        "and say on stderr and in its summary that its record was not stored")
    wrong = run_soak("validate", "--resultsStore", "gs://bucket/soak", "http://127.0.0.1/")
    assert wrong.returncode == 2 and wrong.stdout == "" and wrong.stderr == (
        'soak: --resultsStore: "gs://bucket/soak" has the scheme gs:, which is no store this version writes to: '
        "file:///DIR or s3://BUCKET/PREFIX\n")


def test_a_damaged_record_is_left_out_of_its_range_with_a_line(nginx: Nginx, tmp_path: Path) -> None:
    store = f"file://{tmp_path}/records"
    done = run_soak(*RUN, "--resultsStore", store, "--resultsRun", "good", nginx.url)
    assert done.returncode == 0, done.stderr
    [entry] = (tmp_path / "records/index").iterdir()
    crafted = json.loads(entry.read_text()) | {"run": "bad", "record": "runs/soak/bad/run.json"}
    (entry.parent / entry.name.replace("_good", "_bad")).write_text(json.dumps(crafted))
    (tmp_path / "records/runs/soak/bad").mkdir(parents=True)
    (tmp_path / "records/runs/soak/bad/run.json").write_bytes(b'{"soakRecord": 1, "kind": "run", "job": [')
    both = run_soak("compare", f"{store}?run=good", f"{store}?since=1h")
    assert both.returncode == 0
    assert ("runs/soak/bad/run.json: skipped, not a record this version reads: not JSON (Expecting value: line 1 "
            "column 42 (char 41))") in both.stderr
    table = [line.split() for line in both.stdout.splitlines()]
    assert table[1][:4] == ["requests", table[1][1], table[1][1], "0.0%"], "the range is the good run alone"
    history = run_soak("history", store)
    assert len(history.stdout.splitlines()) == 2, "the index lists both; only reading the record finds it damaged"


def test_a_store_that_cannot_be_read_is_one_line(s3: S3Server) -> None:
    done = run_soak("history", "s3://no-such-bucket-here/soak", env=s3.environ())
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr == "soak: s3://no-such-bucket-here/soak: cannot be read: HTTP 404 Not Found NoSuchBucket\n"


# --- the pallet's own pods ------------------------------------------------------------------


def test_the_pallets_scaled_out_pods_with_the_results_volume_leave_one_verdict(nginx: Nginx, tmp_path: Path) -> None:
    """The rendered scale-out + results-pvc CronJob's command, once per index as the Indexed Job runs
    it (its Job's name from the pod's label, the volume here), shortened to two 1 s intervals."""
    command, env = pod_command(render("scale-out+results-pvc"), tmp_path / "pod", nginx.url)
    time.sleep((0.1 - time.time() % 1) % 1)
    processes = [subprocess.Popen([*command, "--interval", "1s", "--iterations", "2"], stdout=subprocess.PIPE,
                                  stderr=subprocess.STDOUT, text=True, cwd=tmp_path,
                                  env={**os.environ, "TZ": "UTC", **env, "JOB_COMPLETION_INDEX": str(index)})
                 for index in range(SHARDS)]
    logs = [p.communicate(timeout=120)[0] for p in processes]
    store = f"file://{tmp_path}/pod/var/lib/soak/results"
    files = []
    for index, log in enumerate(logs):
        files.append(tmp_path / f"pod-{index}.log")
        files[-1].write_text(split_engine_line(log)[1])
    by_hand = subprocess.run(soak_command("merge", *map(str, files)), capture_output=True, text=True, timeout=60,
                             env={**os.environ, "TZ": "UTC"})
    record = json.loads((tmp_path / f"pod/var/lib/soak/results/runs/soak/{JOB_NAME}/run.json").read_text())
    assert record["kind"] == "merged" and record["summary"] == _summary(by_hand.stdout)
    assert record["exitCode"] == by_hand.returncode
    [line] = run_soak("history", store).stdout.splitlines()
    assert f"  soak  {JOB_NAME}  {record['verdict']} (exit {by_hand.returncode})  " in line
    assert line.endswith("  3 of 3 shards")
