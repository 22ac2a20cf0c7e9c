"""Loading a finished run from whatever was kept: our logs, slow_cooker's, cut off, mangled.

The loader's promise: it never fails on content, it never makes a figure up (what it
rebuilds or estimates is said, in `notes` and in `figures.estimated`), and what it reads
from a damaged file agrees with what the whole file says.
"""

from __future__ import annotations

import json
import random

import pytest

from runner.readback.results import load_run
from tests.support.runlogs import (
    GARBAGE,
    MS,
    SLOW_COOKER_LOGS,
    US,
    assert_one_line_notes,
    bhash_ends,
    columns,
    golden,
    interval_rows,
    mangled,
    split_log,
)


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
    """The summary's p50 is in microseconds to three decimals (it was truncated to whole ones); its
    histogram knows it to 0.1%, in nanoseconds, and never less than the key (capped at the max)."""
    run = load_run(ours, "log")
    summary = json.loads(split_log(ours)[1])
    for key in ("p50", "p75", "p90", "p95", "p99", "p999", "min", "max"):
        ns = run.figures.latency_ns[key]
        floor_ns = round(summary[key] * US)  # 128.383 * 1000 is 128383.00000000001 in floats
        assert floor_ns <= ns < (summary[key] + 1) * US * 1.002, key
    assert run.figures.latency_ns["mean"] == summary["mean"] * US


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
    assert run.summary is not None and list(run.summary)[-1] == "late"
    assert run.figures.requests == json.loads(split_log(ours)[1])["requests"]
    assert run.latency_unit == "us"  # latencyUnit is among the kept keys
    assert any(n.startswith("JSON summary cut off at line ") and n.endswith("whole keys before it") for n in run.notes)
    assert "not in the JSON summary, so from the 4 intervals: goal%, target rate, achieved rate, duration, intervals" \
        in run.notes


def test_a_cut_inside_a_nested_key_says_which(ours: str) -> None:
    cut = ours.index('"achieved"')
    run = load_run(ours[:cut], "cut")
    assert run.summary is not None and "rate" not in run.summary and list(run.summary)[-1] == "clientSaturated"
    line = ours[:ours.index('"rate"')].count("\n") + 1
    assert f'JSON summary cut off at line {line} inside "rate": kept the 20 whole keys before it' in run.notes


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
    lines = head.splitlines()
    at = max(i for i, line in enumerate(lines) if line[:1].isdigit())  # the last interval line (notes may follow)
    last = lines[at]
    cut = "\n".join(lines[:at] + [last[: last.index("]") + 8]])
    run = load_run(cut, "cut")
    assert len(run.intervals) == 3
    assert any(n.startswith(f"line {cut.count(chr(10)) + 1}: the last line is cut off, skipped: ") for n in run.notes)


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


def test_stderr_lines_inside_the_summary_are_read_past(ours: str) -> None:
    head, summary = split_log(ours)
    lines = summary.splitlines(keepends=True)
    lines.insert(5, 'GET "http://127.0.0.1:1/": connection refused (3 times)\n')
    lines.insert(30, 'Get "http://127.0.0.1:1/": EOF\n')
    run = load_run(head + "".join(lines), "mixed")
    assert run.summary == json.loads(summary)
    assert "2 error lines after the last interval line, in no interval" in run.notes


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


def test_of_two_runs_in_one_file_the_last_is_read(ours: str) -> None:
    text = golden("100qps-ms.log") + ours
    run = load_run(text, "two")
    assert not run.slow_cooker and len(run.intervals) == 4
    # ours starts at its `# sending` line (the engine line its stderr began with may come first)
    sending = next(i for i, line in enumerate(ours.splitlines()) if line.startswith("# sending"))
    first = len(golden("100qps-ms.log").splitlines()) + 1 + sending
    assert f"line {first}: another run starts here; only the last run in the file is read" in run.notes


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
