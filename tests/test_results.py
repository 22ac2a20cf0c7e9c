"""Loading a finished run from whatever was kept: our logs, slow_cooker's, cut off, mangled.

The loader's promise: it never fails on content, it never makes a figure up (what it
rebuilds or estimates is said, in `notes` and in `figures.estimated`), and what it reads
from a damaged file agrees with what the whole file says.
"""

from __future__ import annotations

import dataclasses
import json
import random
import re
from collections.abc import Iterator

import pytest

from runner.core.errors import UsageError
from runner.readback.logscan import scan
from runner.readback.results import IntervalFigures, LoadedRun, load_run, read_run
from runner.stats.histogram import LatencyHistogram
from tests.conftest import GOLDEN, Nginx
from tests.runlogs import SLOW_COOKER_LOGS, mixed_log, split_log, summary_text

MS = 1_000_000
US = 1_000


@pytest.fixture(scope="module")
def ours(nginx: Nginx) -> str:
    """A real run of ours, stdout and stderr merged as `kubectl logs` shows them."""
    return mixed_log(nginx.url)


def golden(name: str) -> str:
    return (GOLDEN / name).read_text()


def columns(intervals: tuple[IntervalFigures, ...] | list[IntervalFigures]) -> list[tuple]:
    """What an interval line shows, without what only intervalStats know (skipped, errors by kind,
    latencies finer than whole units): t as a float, latencies truncated as the line prints them."""
    def printed(i: IntervalFigures) -> IntervalFigures:
        whole = {k: int(v) for k in ("min", "p50", "p95", "p99", "p999", "max") if (v := getattr(i, k)) is not None}
        return dataclasses.replace(i, skipped=None, errors=None, t=None if i.t is None else float(i.t), **whole)
    return [dataclasses.astuple(printed(i)) for i in intervals]


def interval_rows(text: str) -> list[list[str]]:
    """The interval lines' columns, split on spaces: an oracle independent of the loader's regex."""
    return [line.split() for line in text.splitlines() if re.match(r"^\d{4}-\d\d-\d\dT", line)]


def assert_one_line_notes(run: LoadedRun) -> None:
    assert all(isinstance(n, str) and n and "\n" not in n and "\r" not in n for n in run.notes), run.notes


# --- slow_cooker's own logs ------------------------------------------------------------------


@pytest.mark.parametrize("name", SLOW_COOKER_LOGS)
def test_every_slow_cooker_log_loads_with_every_interval(name: str) -> None:
    text = golden(name)
    run = load_run(text, name)
    rows = interval_rows(text)
    assert run.slow_cooker
    assert [i.iter for i in run.intervals] == list(range(len(rows)))
    assert [(i.good, i.bad, i.failed) for i in run.intervals] == [tuple(map(int, r[2].split("/"))) for r in rows]
    assert all(i.p999 is None for i in run.intervals)  # its p999 column is its max
    f = run.figures
    assert f.requests == sum(i.good + i.bad + i.failed for i in run.intervals)
    assert f.intervals == len(rows)
    assert f.duration_seconds == sum(i.seconds for i in run.intervals)
    # Its summary's percentiles, but not its p999 (its max); max from the interval lines.
    summary = json.loads(text[text.index("{"):text.rindex("}") + 1])
    assert {k: f.latency_ns[k] for k in ("p50", "p75", "p90", "p95", "p99")} == \
        {k: summary[k] * MS for k in ("p50", "p75", "p90", "p95", "p99")}
    assert "p999" not in f.latency_ns
    assert f.latency_ns["max"] == max(i.max for i in run.intervals) * MS
    assert f.estimated == {"mean"}
    assert "slow_cooker log: its p999 (column and summary) is its max, so p999 is not known" in run.notes
    assert "the latency unit is not in the file; assumed ms (--assumeUnit changes it)" in run.notes
    assert_one_line_notes(run)


@pytest.mark.parametrize(("name", "requests", "rate", "target"), [
    ("100qps-ms.log", 999, 99.9, "http://127.0.0.1:39533/ok"),
    ("100qps-us.log", 600, 100.0, "http://127.0.0.1:39533/ok"),
    ("faults-timeout-1s.log", 203, 25.375, "http://127.0.0.1:39533/mixed"),
    ("url-list-3.log", 240, 40.0, "urls.txt"),
    ("with-csv-us.log", 395, 98.75, "http://127.0.0.1:39533/ok"),
    ("seed-pallet.log", 360000, 100.0, "http://nginx.nginx.svc.cluster.local"),
])
def test_slow_cooker_figures_come_from_its_lines(name: str, requests: int, rate: float, target: str) -> None:
    """Its startup line's rate is already the total; the achieved rate is requests over the intervals' time."""
    run = load_run(golden(name), name)
    assert run.figures.requests == requests
    assert run.figures.rate_achieved == rate
    assert run.startup is not None and run.startup.target == target
    assert run.figures.rate_target == run.startup.rate


def test_slow_cooker_error_lines_are_the_failures_of_the_interval_after_them() -> None:
    """faults-timeout-1s.log: one stderr line per failure, before the interval that counts it."""
    run = load_run(golden("faults-timeout-1s.log"), "faults")
    assert [sum((i.errors or {}).values()) for i in run.intervals] == [i.failed for i in run.intervals] == [4, 8, 5, 7]
    assert run.intervals[0].errors == {"EOF": 1, "context deadline exceeded (Client.Timeout exceeded while awaiting "
                                                 "headers)": 3}
    assert "24 error lines from stderr, each read as a failure of the interval line after it" in run.notes
    assert "2 error lines after the last interval line, in no interval" in run.notes


def test_a_unit_can_be_assumed_for_logs_that_do_not_say() -> None:
    run = load_run(golden("100qps-us.log"), "us", assumed_unit="us")
    assert run.latency_unit == "us"
    assert run.figures.latency_ns["p50"] == 468 * US and run.figures.latency_ns["max"] == 2120 * US
    assert "the latency unit is not in the file; assumed us (--assumeUnit changes it)" in run.notes


def test_the_pasted_seed_log_reads_despite_its_collapsed_spaces() -> None:
    run = load_run(golden("seed-pallet.log"), "seed")
    assert len(run.intervals) == 60
    assert run.intervals[0] == IntervalFigures("2024-03-21T19:01:01Z", 0, 5995, 0, 0, 6000, 99, "1m0s", 0, 1, 1, 2,
                                               None, 14, 0, errors=None)
    assert run.figures.latency_ns["max"] == 26 * MS


# --- our own output -------------------------------------------------------------------------


def test_our_log_loads_from_its_summary_and_agrees_with_its_lines(ours: str) -> None:
    run = load_run(ours, "ours")
    lines_only = load_run(split_log(ours)[0], "lines")
    summary = json.loads(split_log(ours)[1])
    assert not run.slow_cooker and not lines_only.slow_cooker
    assert run.summary == summary and run.latency_unit == "us"
    assert len(run.intervals) == 4
    assert columns(run.intervals) == columns(lines_only.intervals)
    assert [i.skipped for i in run.intervals] == [s["skipped"] for s in summary["intervalStats"]]
    assert [i.errors for i in run.intervals] == [s["errors"] for s in summary["intervalStats"]]
    f, g = run.figures, lines_only.figures
    assert (f.requests, f.good, f.bad, f.failed) == (g.requests, g.good, g.bad, g.failed) == \
        (summary["requests"], summary["good"], summary["bad"], summary["failed"])
    assert f.good > 0 and f.bad > 0 and f.failed > 0
    assert f.goal_percent == g.goal_percent == summary["goalPercent"]
    assert f.duration_seconds == g.duration_seconds == summary["durationSeconds"]
    assert f.rate_achieved == g.rate_achieved == summary["rate"]["achieved"]
    assert f.estimated == frozenset() and g.estimated == {"p50", "p75", "p90", "p95", "p99", "p999", "mean"}
    assert not [n for n in run.notes if "disagree" in n or "skipped" in n], run.notes


def test_our_stderr_lines_count_the_failures_of_each_interval(ours: str) -> None:
    run = load_run(split_log(ours)[0], "lines")
    assert all(i.errors == {"connection refused": i.failed} for i in run.intervals), run.intervals
    assert "4 error lines from stderr, each read as a failure of the interval line after it" in run.notes


def test_our_summary_alone_loads_the_same_run(ours: str) -> None:
    run = load_run(ours, "log")
    alone = load_run(split_log(ours)[1], "summary.json")
    assert alone.intervals == run.intervals and alone.figures == run.figures
    assert alone.notes == ()


def test_percentiles_come_from_the_histogram_finer_than_the_unit(ours: str) -> None:
    """The summary's p50 is whole microseconds; its histogram knows it to 0.1%, in nanoseconds."""
    run = load_run(ours, "log")
    summary = json.loads(split_log(ours)[1])
    for key in ("p50", "p75", "p90", "p95", "p99", "p999", "min", "max"):
        ns = run.figures.latency_ns[key]
        assert summary[key] * US <= ns < (summary[key] + 1) * US * 1.002, key
    assert run.figures.latency_ns["mean"] == summary["mean"] * US


def test_without_a_histogram_the_summary_keys_are_used() -> None:
    run = load_run(summary_text("ms"), "hand.json")
    assert run.figures.latency_ns == {"p50": 2 * MS, "p75": 3 * MS, "p90": 4 * MS, "p95": 5 * MS, "p99": 10 * MS,
                                      "p999": 20 * MS, "min": 1 * MS, "mean": 2.5 * MS, "max": 40 * MS}


def test_a_damaged_histogram_is_said_and_the_keys_are_used() -> None:
    text = json.dumps(json.loads(summary_text("ms")) | {"histogram": {"unit": "ns", "hdr": "HISTFAAAbroken"}})
    run = load_run(text, "hand.json")
    assert run.figures.latency_ns["p50"] == 2 * MS
    assert "the JSON summary's histogram cannot be read; its percentile keys are used instead" in run.notes


def test_lines_that_disagree_with_interval_stats_are_noted_and_the_stats_win(ours: str) -> None:
    head, summary = split_log(ours)
    first = interval_rows(head)[0]
    changed = head.replace(f" {first[2]} ", " 999/0/0 ", 1)
    run = load_run(changed + summary, "edited")
    assert run.intervals[0].good == int(first[2].split("/")[0])
    note = next(n for n in run.notes if "disagree" in n)
    assert note.startswith("the interval lines disagree with the JSON summary's intervalStats, which are used: "
                           f"iter 0 good: 999 in the line, {run.intervals[0].good} in the summary")


def test_a_log_cut_at_the_top_says_its_lines_are_fewer(ours: str) -> None:
    lines = ours.splitlines(keepends=True)
    first_interval = next(i for i, line in enumerate(lines) if interval_rows(line))
    run = load_run("".join(lines[first_interval + 2:]), "tail")
    assert len(run.intervals) == 4
    assert "the file has 3 of the 4 interval lines; all 4 are in the JSON summary's intervalStats, which are used" \
        in run.notes
    lines_only = load_run("".join(lines[first_interval + 2:]).split("{")[0], "tail")
    assert "the interval lines start at iter 1: the earlier ones are not in the file" in lines_only.notes


# --- cut off anywhere --------------------------------------------------------------------------


def bhash_ends(text: str) -> Iterator[int]:
    """For each interval line, the offset just after the space that follows its bhash column."""
    offset = 0
    for line in text.splitlines(keepends=True):
        m = re.match(r"^\d{4}-\d\d-\d\dT.*\] +\d+ +\d+ ", line)
        if m:
            yield offset + m.end()
        offset += len(line)


def test_a_log_cut_anywhere_loads_what_is_there_and_says_so(ours: str) -> None:
    """Every cut: at each character, so at every line boundary, mid-line and mid-JSON."""
    whole = load_run(ours, "whole")
    json_start = ours.index("\n{\n") + 1
    json_end = ours.index("\n}\n", json_start) + 2
    complete_at = list(bhash_ends(ours))
    for cut in range(len(ours) + 1):
        run = load_run(ours[:cut], "cut")
        assert_one_line_notes(run)
        assert not run.slow_cooker
        shown = sum(1 for end in complete_at if end <= cut)
        expected = len(whole.intervals) if cut > json_start else shown
        assert columns(run.intervals) == columns(whole.intervals[:expected]), cut
        for key, value in (run.summary or {}).items():
            assert whole.summary is not None and whole.summary[key] == value, (cut, key)
        if cut < json_end:
            assert any(w in n for n in run.notes for w in ("cut off", "no JSON summary", "nothing in it")), \
                (cut, run.notes)
        requests = (run.summary or {}).get("requests", sum(i.good + i.bad + i.failed for i in run.intervals))
        assert run.figures.requests == (requests if run.usable else None), cut


def test_a_cut_summary_keeps_its_whole_keys_and_rebuilds_the_rest(ours: str) -> None:
    cut = ours.index('  "goalPercent"')
    run = load_run(ours[:cut + 5], "cut")
    assert run.summary is not None and list(run.summary)[-1] == "skipped"
    assert run.figures.requests == json.loads(split_log(ours)[1])["requests"]
    assert run.latency_unit == "us"  # latencyUnit is among the kept keys
    assert any(n.startswith("JSON summary cut off at line ") and n.endswith("whole keys before it") for n in run.notes)
    assert "not in the JSON summary, so from the 4 intervals: goal%, target rate, achieved rate, duration, intervals" \
        in run.notes


def test_a_cut_inside_a_nested_key_says_which(ours: str) -> None:
    cut = ours.index('"achieved"')
    run = load_run(ours[:cut], "cut")
    assert run.summary is not None and "rate" not in run.summary and list(run.summary)[-1] == "goalPercent"
    line = ours[:ours.index('"rate"')].count("\n") + 1
    assert f'JSON summary cut off at line {line} inside "rate": kept the 17 whole keys before it' in run.notes


def test_a_log_cut_before_its_summary_rebuilds_everything_from_the_lines(ours: str) -> None:
    head = split_log(ours)[0]
    run = load_run(head, "cut")
    assert run.summary is None
    assert "no JSON summary (the log was cut off, or the run had noLatencySummary): figures from 4 intervals" \
        in run.notes
    assert "estimated from the intervals' percentiles, not measured: p50, p75, p90, p95, p99, p999, mean" in run.notes
    # The lines do not say their unit (the summary does): ms is assumed, and said.
    assert run.latency_unit == "ms" and "the latency unit is not in the file; assumed ms (--assumeUnit changes it)" \
        in run.notes
    assert run.figures.latency_ns["min"] == min(i.min for i in run.intervals) * MS


def test_a_last_line_cut_before_its_bhash_ends_is_not_read(ours: str) -> None:
    """`... 2265      1` might be bhash 1 or the start of 10: only the space after it says it is whole."""
    head = split_log(ours)[0]
    last = head.rstrip("\n").splitlines()[-1]
    cut = head.rstrip("\n")[: -len(last) + last.index("]") + 8]
    run = load_run(cut, "cut")
    assert len(run.intervals) == 3
    assert any(n.startswith(f"line {cut.count(chr(10)) + 1}: the last line is cut off, skipped: ") for n in run.notes)


# --- garbage, stderr and the ways logs get saved ------------------------------------------------


GARBAGE = ["hello world", "#### not a header", "2026-11-30T01:10:32Z     garbage 1/2/3", "{oops", "[1, 2, 3",
           "Traceback (most recent call last):", "\x00\x01binary\x7f", "]", "x" * 500, "# sending lots"]


@pytest.mark.parametrize("seed", range(8))
def test_garbage_lines_anywhere_are_skipped_noted_and_change_nothing(ours: str, seed: int) -> None:
    rng = random.Random(seed)
    lines = ours.splitlines(keepends=True)
    inserted = sorted(rng.sample(range(len(lines)), 3))
    for offset, position in enumerate(inserted):
        lines.insert(position + offset, rng.choice(GARBAGE) + "\n")
    clean, dirty = load_run(ours, "clean"), load_run("".join(lines), "dirty")
    assert dirty.intervals == clean.intervals and dirty.figures == clean.figures and dirty.summary == clean.summary
    noted = [n for n in dirty.notes if n.startswith("line ")]
    assert len(noted) == 3, dirty.notes
    assert [int(n.split(":")[0].split()[1]) for n in noted] == [p + i + 1 for i, p in enumerate(inserted)]


@pytest.mark.parametrize("name", SLOW_COOKER_LOGS)
def test_garbage_in_slow_cooker_logs_changes_nothing(name: str) -> None:
    text = golden(name)
    lines = text.splitlines(keepends=True)
    dirty = "".join(line + ("garbage line\n" if i % 3 == 0 else "") for i, line in enumerate(lines))
    clean, loaded = load_run(text, name), load_run(dirty, name)
    assert loaded.intervals == clean.intervals and loaded.figures == clean.figures
    assert sum(1 for n in loaded.notes if n.startswith("line ")) == min(5, (len(lines) + 2) // 3)


def test_stderr_lines_inside_the_summary_are_read_past(ours: str) -> None:
    head, summary = split_log(ours)
    lines = summary.splitlines(keepends=True)
    lines.insert(5, 'GET "http://127.0.0.1:1/": connection refused (3 times)\n')
    lines.insert(30, 'Get "http://127.0.0.1:1/": EOF\n')
    run = load_run(head + "".join(lines), "mixed")
    assert run.summary == json.loads(summary)
    assert "2 error lines after the last interval line, in no interval" in run.notes


def test_grouped_error_lines_count_toward_their_interval() -> None:
    """soak's grouped forms (several URLs, and the rest of the errors in one line) are error lines too."""
    found = scan('GET "http://h/1": connection refused (2 times)\n'
                 'GET 3 URLs, e.g. "http://h/1": connection refused (6 times)\n'
                 'GET more than 20 URLs, e.g. "http://h/1": closed: cut (received 3 bytes, expected 1001) (numbers vary) '
                 '(40 times)\n'
                 '... and 5 more errors (15 times)\n'
                 "2026-11-30T01:10:32Z    0    200/0/63 200 100% 2s   0 [  0   1   2    2 ]    2      0 +\n")
    assert found.soak_errors == 4 and found.skipped == 0
    assert found.intervals[0].errors == {"connection refused": 8, "other errors": 15,
                                         "closed: cut (received 3 bytes, expected 1001) (numbers vary)": 40}


def test_an_indented_mangled_line_inside_the_summary_breaks_it_there(ours: str) -> None:
    head, summary = split_log(ours)
    lines = summary.splitlines(keepends=True)
    lines.insert(12, "   mangled\n")
    run = load_run(head + "".join(lines), "mangled")
    assert run.summary is not None and len(run.summary) == 11  # the keys on the 11 lines after its "{"
    assert any(n.startswith(f"JSON summary broken at line {head.count(chr(10)) + 13}") for n in run.notes)
    assert run.figures.requests == json.loads(summary)["requests"]  # rebuilt from the lines


def test_kubectl_timestamps_and_windows_line_ends_are_read_through(ours: str) -> None:
    stamped = "".join(f"2026-11-30T01:10:{i % 60:02d}.123456789Z {line}\r\n" for i, line in
                      enumerate(ours.splitlines()))
    run, clean = load_run(stamped, "stamped"), load_run(ours, "clean")
    assert run.intervals == clean.intervals and run.figures == clean.figures
    assert f"{len(ours.splitlines())} lines began with a timestamp from kubectl logs --timestamps, removed" \
        in run.notes


def test_a_one_line_summary_as_jq_c_writes_it() -> None:
    compact = json.dumps(json.loads(summary_text("us")))
    run = load_run("# sending 100 GET req/s with concurrency=5 to http://x/ ...\n" + compact + "\n", "jq")
    assert run.summary == json.loads(compact) and run.latency_unit == "us"


def test_of_two_runs_in_one_file_the_last_is_read(ours: str) -> None:
    text = golden("100qps-ms.log") + ours
    run = load_run(text, "two")
    assert not run.slow_cooker and len(run.intervals) == 4
    first = len(golden("100qps-ms.log").splitlines()) + 1
    assert f"line {first}: another run starts here; only the last run in the file is read" in run.notes


def test_a_bench_summary_with_ab_lines_loads_its_requests_per_second() -> None:
    bench = {"requestsPerSecond": 1234.56, "timeTakenSeconds": 0.81}
    text = ("Benchmarking 127.0.0.1 (be patient).....done\n\n\nServer Software:        nginx\n"
            + summary_text("ms", goalPercent=None, rate={"target": None, "achieved": 1234.5}, bench=bench))
    run = load_run(text, "bench.log")
    assert run.figures.bench_rps == 1234.56 and run.figures.goal_percent is None
    assert run.figures.rate_target is None and run.figures.rate_achieved == 1234.5
    assert "2 lines of ab's report skipped: the JSON summary holds its figures" in run.notes


def test_bench_interval_stats_have_no_goal() -> None:
    stats = [{"iter": 0, "end": "2026-01-01T00:00:01Z", "interval": "1s", "good": 10, "bad": 0, "failed": 0,
              "skipped": 0, "t": None, "goalPercent": None, "min": 1, "p50": 1, "p95": 2, "p99": 2, "p999": 2,
              "max": 2, "bhash": 0, "errors": {}}]
    run = load_run(summary_text("ms", intervalStats=stats), "bench.json")
    assert len(run.intervals) == 1 and run.intervals[0].t is None and run.intervals[0].goal_percent is None


# --- never crash ------------------------------------------------------------------------------


def mangled(text: str, rng: random.Random) -> str:
    """One of the ways a saved log gets damaged."""
    lines = text.splitlines(keepends=True)
    how = rng.randrange(6)
    if how == 0 and lines:  # lines lost
        del lines[rng.randrange(len(lines))]
    elif how == 1 and lines:  # lines repeated
        i = rng.randrange(len(lines))
        lines.insert(i, lines[i])
    elif how == 2:  # characters changed
        chars = list(text)
        for _ in range(rng.randrange(1, 10)):
            if chars:
                chars[rng.randrange(len(chars))] = rng.choice("{}[]\",: 0123456789ab\n\x00é")
        return "".join(chars)
    elif how == 3:  # lines shuffled
        rng.shuffle(lines)
    elif how == 4:  # cut off
        return text[: rng.randrange(len(text) + 1)]
    else:  # random bytes spliced in
        at = rng.randrange(len(text) + 1)
        return text[:at] + bytes(rng.randrange(256) for _ in range(40)).decode("latin-1") + text[at:]
    return "".join(lines)


@pytest.mark.parametrize("name", [*SLOW_COOKER_LOGS, "ours"])
def test_mangled_copies_always_load(ours: str, name: str) -> None:
    text = ours if name == "ours" else golden(name)
    rng = random.Random(name)
    for _ in range(300):
        damaged = text
        for _ in range(rng.randrange(1, 4)):
            damaged = mangled(damaged, rng)
        run = load_run(damaged, name)
        assert_one_line_notes(run)
        assert run.latency_unit in ("ms", "us", "ns")
        assert run.usable or "nothing in it is soak's or slow_cooker's output" in run.notes


def test_nothing_usable_is_said() -> None:
    for text in ("", "\n\n", "hello\nworld\n", "\x00" * 100, "{}", "[]", '{"a": 1}'):
        run = load_run(text, "junk")
        assert not run.usable and run.figures.requests is None
        assert "nothing in it is soak's or slow_cooker's output" in run.notes


def test_read_run_reads_files_and_says_when_it_cannot(tmp_path) -> None:
    path = tmp_path / "run.log"
    path.write_bytes(golden("100qps-ms.log").encode() + b"\xff\xfe bad utf-8\n")
    assert len(read_run(str(path)).intervals) == 5
    with pytest.raises(UsageError, match=r"^/no/such/file: No such file or directory$"):
        read_run("/no/such/file")
    with pytest.raises(UsageError, match=r": Is a directory$"):
        read_run(str(tmp_path))


def test_the_histogram_min_is_never_below_the_summary_min_it_rounds_under() -> None:
    """50,010 ns falls in an HDR bucket whose lowest value is under 50 us; the summary's exact
    min, truncated to 50 us, bounds it from below (this was a flaky failure of the test above)."""
    histogram = LatencyHistogram()
    histogram.record(50_010)
    histogram.record(80_000)
    text = summary_text("us", min=50, histogram={"unit": "ns", "hdr": histogram.encode()})
    latency = load_run(text, "s.json").figures.latency_ns
    assert 50_000 <= latency["min"] <= 50_010
    assert latency["max"] >= 80_000 and latency["p50"] >= latency["min"]
