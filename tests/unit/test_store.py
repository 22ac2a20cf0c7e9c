"""The resultsStore's pure parts: store URLs, where each thing goes, records and index entries read
back from a store anyone may have written to, ranges, and the directory store itself (files only).

The S3 store and the writer against real stores are in tests/integration/test_results_store.py.
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest

from runner.config.storeurl import is_store_url, parse_store_url, store_url_problem
from runner.core.errors import UsageError
from runner.store.backends import DirStore, StoreError
from runner.store.layout import (
    from_stamp,
    index_after,
    index_key,
    name_part,
    new_run_name,
    run_key,
    shard_key,
    shard_of,
    stamp,
)
from runner.store.record import (
    KINDS,
    encoded,
    entry_from,
    index_entry,
    make_record,
    record_from,
    shown_command,
    verdict_word,
)
from runner.store.runs import Selection, history_line, selection

# --- store URLs -------------------------------------------------------------------------------


@pytest.mark.parametrize("url", ["file:///data/soak", "file://localhost/data", "file:///d", "s3://soak-records",
                                 "s3://soak-records/", "s3://soak.records/a/b", "S3://soak-records/x",
                                 "s3://abc/%20x"])
def test_store_urls_that_are_taken(url: str) -> None:
    assert store_url_problem(url) == ""


@pytest.mark.parametrize(("url", "problem"), [
    ("ftp://host/x", "has the scheme ftp:, which is no store this version writes to"),
    ("gs://bucket", "has the scheme gs:, which is no store"),
    ("http://minio:9000/bucket", "has the scheme http:, which is no store"),
    ("data", "is not a store URL"),
    ("/data/soak", "is not a store URL"),
    ("file:data", "is not a store URL: file:// then the directory"),
    ("file://data/soak", "names the host 'data': a file store is a directory on this machine"),
    ("file:///", "names no directory"),
    ("s3://", "names no bucket"),
    ("s3:///prefix", "names no bucket"),
    ("s3://Bucket", "names the bucket 'Bucket', which is no S3 bucket name"),
    ("s3://ab", "names the bucket 'ab', which is no S3 bucket name"),
    ("s3://a..b", "which is no S3 bucket name"),
    ("s3://-abc", "which is no S3 bucket name"),
    ("s3://key:secret@bucket/x", "user names and passwords do not go in the URL"),
    ("s3://bucket/x?since=1d", "a store URL has no query or fragment"),
    ("s3://bucket/x#y", "a store URL has no query or fragment"),
    ("s3://bucket/x y", "is not a store URL"),
])
def test_store_urls_that_are_refused_say_why(url: str, problem: str) -> None:
    assert problem in store_url_problem(url)


def test_a_query_is_a_commands_range_and_is_left_out_of_the_store() -> None:
    assert store_url_problem("s3://bucket/x?since=1d", query=True) == ""
    parsed = parse_store_url("s3://bucket/a/b/?run=x")
    assert (parsed.scheme, parsed.bucket, parsed.prefix) == ("s3", "bucket", "a/b/")
    assert parse_store_url("s3://bucket").prefix == ""
    assert parse_store_url("file:///data/soak/").path == "/data/soak"
    assert is_store_url("s3://x") and is_store_url("file:///x") and not is_store_url("run.log")


# --- layout ---------------------------------------------------------------------------------


def test_stamps_sort_as_the_times_they_say() -> None:
    rng = random.Random(35)
    times = sorted(rng.uniform(0, 4e9) for _ in range(2000)) + [0.0, 1e9, 1e9 + 1e-6]
    times.sort()
    stamps = [stamp(t) for t in times]
    assert stamps == sorted(stamps)
    assert all(abs(from_stamp(s) - t) < 1e-5 for s, t in zip(stamps, times, strict=True))


def test_a_range_starts_its_listing_just_before_its_first_instant() -> None:
    start = 1_764_583_200.0
    keys = sorted(index_key(t, "soak", "r") for t in (start - 1e-6, start, start + 1))
    assert [key for key in keys if key > index_after(start)] == keys[1:]


@pytest.mark.parametrize("name", ["soak", "soak-28400460", "a/b", "..", ".", "a b", "x%y", "ü"])
def test_a_name_is_one_part_of_a_key(name: str) -> None:
    part = name_part(name)
    assert "/" not in part and part not in (".", "..") and part


def test_shard_keys_read_back_and_sort_in_shard_order() -> None:
    keys = [shard_key("soak", "r", i, 12) for i in range(12)]
    assert keys == sorted(keys)
    assert [shard_of(key) for key in keys] == [(i, 12) for i in range(12)]
    assert shard_of(run_key("soak", "r")) is None
    assert shard_of("runs/soak/r/shard-003-of-003.json") is None  # an index past the count is no shard
    assert run_key("soak", "r").startswith("runs/soak/r/")


def test_a_run_given_no_name_is_named_by_its_start() -> None:
    name = new_run_name(1_764_583_200.0)
    assert name.startswith("20251201T100000Z-") and name != new_run_name(1_764_583_200.0)


# --- records and index entries --------------------------------------------------------------


def _summary(**more: Any) -> dict[str, Any]:
    return {"p50": 1, "p99": 2, "requests": 10, "start": "2026-12-01T10:00:00.000Z", **more}


def _record(kind: str = "run", code: int = 0, **summary: Any) -> dict[str, Any]:
    return make_record(kind, "soak", "soak-1", (1, 3) if kind == "shard" else None, code, ["", "1 of 1 kept"],
                       ["soak", "--qps", "5"], _summary(**summary), {"run": {}})


def test_a_record_and_its_entry_read_back() -> None:
    record = _record("merged", 5, shards={"count": 3, "merged": [0, 1], "missing": [2], "incomplete": []})
    assert record_from(encoded(record)) == json.loads(encoded(record))
    entry = entry_from(encoded(index_entry(record, "runs/soak/soak-1/run.json", 2_500_000.0, 99.5)), "index/x.json")
    assert (entry.job, entry.run, entry.kind, entry.exit_code, entry.verdict) == ("soak", "soak-1", "merged", 5,
                                                                                 "incomplete")
    assert (entry.p99_ms, entry.goal_percent, entry.shards, entry.missing) == (2.5, 99.5, 3, (2,))
    assert history_line(entry) == ("2026-12-01T10:00:00.000Z  soak  soak-1  incomplete (exit 5)  p99 2.5ms  "
                                   "goal% 99.5%  2 of 3 shards (missing 2)")
    assert record["said"] == ["1 of 1 kept"]


def _entry(**changes: Any) -> bytes:
    value = index_entry(_record(), "runs/soak/soak-1/run.json", 1e6, 100.0)
    for key, new in changes.items():
        if new is ...:
            value.pop(key)
        else:
            value[key] = new
    return json.dumps(value).encode()


@pytest.mark.parametrize(("data", "said"), [
    (b"", "not JSON"),
    (b"\xff\xfe", "not JSON"),
    (b"[1, 2]", "not a JSON object"),
    (b'{"soakIndex": 2}', "not a soak index entry of version 1"),
    (b"[" * 60_000, "not JSON"),
    (b" " * 70_000, "70000 bytes, more than one can be"),
    (_entry(start="yesterday"), "start: \"yesterday\" is not a time"),
    (_entry(start="2026-12-01T10:00:00"), "has no time zone"),
    (_entry(start=...), "start: null is not a text"),
    (_entry(job=""), "job: \"\" is not a text"),
    (_entry(run=7), "run: 7 is not a text"),
    (_entry(kind="shard-ish"), "kind: \"shard-ish\" is none of run, shard, merged"),
    (_entry(exitCode=-1), "exitCode: -1 is not a whole number"),
    (_entry(exitCode=True), "exitCode: true is not a whole number"),
    (_entry(exitCode=3.0), "exitCode: 3.0 is not a whole number"),
    (_entry(p99Ms="fast"), "p99Ms: \"fast\" is not a number"),
    (_entry(p99Ms=float("nan")), "p99Ms: NaN is not a number"),
    (_entry(goalPercent=-3), "goalPercent: -3 is not a number"),
    (_entry(shards=[3]), "shards: [3] is not an object"),
    (_entry(shards={"count": 3, "missing": [3]}), "shards.missing: [3] is not a list of shard numbers"),
    (_entry(shards={"count": 0, "missing": []}), "count: 0 is not a whole number"),
    (_entry(record=None), "record: null is not a text"),
])
def test_a_damaged_or_crafted_index_entry_is_named_never_raised_through(data: bytes, said: str) -> None:
    with pytest.raises(ValueError, match=".") as caught:
        entry_from(data, "index/x.json")
    assert said in str(caught.value)
    assert "\n" not in str(caught.value)


def test_any_cut_of_an_entry_or_record_is_refused_in_one_line() -> None:
    for data, read in ((_entry(), lambda d: entry_from(d, "k")), (encoded(_record()), record_from)):
        for end in range(len(data)):
            with pytest.raises(ValueError) as caught:
                read(data[:end])
            assert "\n" not in str(caught.value)


@pytest.mark.parametrize(("change", "said"), [
    ({"soakRecord": 0}, "not a soak record of version 1"),
    ({"kind": "pod"}, "kind: \"pod\" is none of"),
    ({"summary": []}, "summary: [] is not an object"),
    ({"tallies": None}, "tallies: null is not an object"),
    ({"exitCode": 256}, "exitCode: 256 is not a whole number"),
    ({"start": "soon"}, "start: \"soon\" is not a time"),
])
def test_a_damaged_record_is_named(change: dict[str, Any], said: str) -> None:
    with pytest.raises(ValueError) as caught:
        record_from(json.dumps(_record() | change).encode())
    assert said in str(caught.value)


def test_every_kind_and_exit_code_has_a_word() -> None:
    assert KINDS == ("run", "shard", "merged")
    assert [verdict_word(code) for code in (0, 3, 5, 7, 8, 9, 6)] == [
        "passed", "broken", "incomplete", "interrupted", "no response", "inconclusive", "output lost"]


def test_the_command_and_the_record_hide_secrets() -> None:
    command = shown_command(["soak", "--header", "Authorization: Bearer abcdef", "http://u:pw1234@h/?token=zzzz9",
                             "--body", "password=hunter22"])
    shown = " ".join(command)
    assert "abcdef" not in shown and "pw1234" not in shown and "zzzz9" not in shown and "hunter22" not in shown
    assert b"pw1234" not in encoded({"url": "http://u:pw1234@h/"})


# --- ranges ---------------------------------------------------------------------------------


NOW = 1_764_583_200.0  # Monday 2025-12-01 10:00 UTC


def test_a_range_is_read_from_the_query() -> None:
    wanted = selection("s3://bucket/soak?since=8w&weekday=tue,Wed&job=checkout", now=NOW)
    assert wanted.start_from == NOW - 8 * 7 * 86400 and wanted.job == "checkout"
    assert wanted.weekdays == frozenset({1, 2}) and wanted.url.prefix == "soak/"
    day = selection("file:///d?from=2025-12-01&to=2025-12-02T00:00:00Z", now=NOW)
    assert (day.start_from, day.start_to) == (NOW - 10 * 3600, NOW + 14 * 3600)
    assert selection("file:///d", since="7d", job="j", now=NOW).start_from == NOW - 7 * 86400
    assert selection("file:///d?run=soak-1").run == "soak-1"


@pytest.mark.parametrize(("text", "said"), [
    ("file:///d?since=7days", "since '7days' is not an age"),
    ("file:///d?from=monday", "from 'monday' is not a time"),
    ("file:///d?weekday=someday", "weekday 'someday' is none of mon"),
    ("file:///d?color=red", "?color= is none of ?run="),
    ("file:///d?run=a&run=b", "?run= is given twice"),
    ("file:///d?=x", "is none of"),
    ("gs://bucket", "has the scheme gs:"),
])
def test_a_range_that_cannot_be_read_is_one_line(text: str, said: str) -> None:
    with pytest.raises(UsageError) as caught:
        selection(text, now=NOW)
    assert said in str(caught.value) and "\n" not in str(caught.value)


def test_what_a_range_wants() -> None:
    def entry(start: float, job: str = "soak", run: str = "r") -> Any:
        return entry_from(_entry(start=_rfc(start), job=job, run=run), "k")

    tuesdays = Selection(parse_store_url("file:///d"), "t", start_from=NOW - 14 * 86400, start_to=NOW,
                         weekdays=frozenset({1}))
    assert [tuesdays.wants(entry(NOW - days * 86400)) for days in (13, 6, 5, 20)] == [True, True, False, False]
    assert not Selection(parse_store_url("file:///d"), "t", job="x").wants(entry(NOW))
    assert Selection(parse_store_url("file:///d"), "t", run="r").wants(entry(NOW))


def _rfc(wall: float) -> str:
    from datetime import UTC, datetime

    return datetime.fromtimestamp(wall, UTC).isoformat()


# --- the directory store --------------------------------------------------------------------


def test_the_directory_store_puts_creates_and_lists(tmp_path: Path) -> None:
    store = DirStore(parse_store_url(f"file://{tmp_path}/records"))
    assert store.check() == ""  # a run makes the directory
    assert store.put("runs/a/x.json", b"1")
    assert store.check() == ""
    assert store.put("runs/a/x.json", b"2")  # overwritten
    assert not store.put("runs/a/x.json", b"3", create=True)  # create-only: it is there
    assert store.put("runs/b/y.json", b"4", create=True)
    assert store.get("runs/a/x.json") == b"2" and store.get("runs/a/none") is None
    assert list(store.keys("runs/")) == ["runs/a/x.json", "runs/b/y.json"]
    assert list(store.keys("runs/a/")) == ["runs/a/x.json"]
    assert list(store.keys("runs/", after="runs/a/x.json")) == ["runs/b/y.json"]
    assert list(store.keys("index/")) == []
    assert not [p for p in (tmp_path / "records").rglob("*") if p.name.startswith(".")]  # no temporary left


@pytest.mark.parametrize("key", ["../x", "a//b", "/abs", "a/./b", ""])
def test_the_directory_store_keeps_to_its_directory(tmp_path: Path, key: str) -> None:
    store = DirStore(parse_store_url(f"file://{tmp_path}"))
    with pytest.raises(StoreError):
        store.put(key, b"x")


def test_a_directory_store_that_cannot_be_written_says_why(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("not a directory")
    store = DirStore(parse_store_url(f"file://{tmp_path}/file/records"))
    assert store.check() == f"{tmp_path}/file is not a directory"
    with pytest.raises(StoreError, match="Not a directory"):
        store.put("runs/x.json", b"1")
