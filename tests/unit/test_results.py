"""Loading a finished run from whatever was kept: our logs, slow_cooker's, cut off, mangled.

The loader's promise: it never fails on content, it never makes a figure up (what it
rebuilds or estimates is said, in `notes` and in `figures.estimated`), and what it reads
from a damaged file agrees with what the whole file says.
"""

from __future__ import annotations

import json

import pytest

from runner.core.errors import UsageError
from runner.readback.logscan import scan
from runner.readback.results import IntervalRow, load_run, read_run
from runner.stats.histogram import LatencyHistogram
from tests.conftest import GOLDEN
from tests.support.runlogs import MS, SLOW_COOKER_LOGS, US, assert_one_line_notes, golden, interval_rows, summary_text

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
    assert run.intervals[0] == IntervalRow("2024-03-21T19:01:01Z", 0, 5995, 0, 0, 6000, 99, "1m0s", 0, 1, 1, 2,
                                               None, 14, 0, errors=None)
    assert run.figures.latency_ns["max"] == 26 * MS


# --- our own output -------------------------------------------------------------------------










def test_without_a_histogram_the_summary_keys_are_used() -> None:
    run = load_run(summary_text("ms"), "hand.json")
    assert run.figures.latency_ns == {"p50": 2 * MS, "p75": 3 * MS, "p90": 4 * MS, "p95": 5 * MS, "p99": 10 * MS,
                                      "p999": 20 * MS, "min": 1 * MS, "mean": 2.5 * MS, "max": 40 * MS}


def test_a_damaged_histogram_is_said_and_the_keys_are_used() -> None:
    text = json.dumps(json.loads(summary_text("ms")) | {"histogram": {"unit": "ns", "hdr": "HISTFAAAbroken"}})
    run = load_run(text, "hand.json")
    assert run.figures.latency_ns["p50"] == 2 * MS
    assert "the JSON summary's histogram cannot be read; its percentile keys are used instead" in run.notes






# --- cut off anywhere --------------------------------------------------------------------------














# --- garbage, stderr and the ways logs get saved ------------------------------------------------






@pytest.mark.parametrize("name", SLOW_COOKER_LOGS)
def test_garbage_in_slow_cooker_logs_changes_nothing(name: str) -> None:
    text = golden(name)
    lines = text.splitlines(keepends=True)
    dirty = "".join(line + ("garbage line\n" if i % 3 == 0 else "") for i, line in enumerate(lines))
    clean, loaded = load_run(text, name), load_run(dirty, name)
    assert loaded.intervals == clean.intervals and loaded.figures == clean.figures
    assert sum(1 for n in loaded.notes if n.startswith("line ")) == min(5, (len(lines) + 2) // 3)




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






def test_a_one_line_summary_as_jq_c_writes_it() -> None:
    compact = json.dumps(json.loads(summary_text("us")))
    run = load_run("# sending 100 GET req/s with concurrency=5 to http://x/ ...\n" + compact + "\n", "jq")
    assert run.summary == json.loads(compact) and run.latency_unit == "us"




def test_a_bench_summary_with_ab_lines_loads_its_requests_per_second() -> None:
    bench = {"requestsPerSecond": 1234.56, "timeTakenSeconds": 0.81}
    text = ("Benchmarking 127.0.0.1 (be patient).....done\n\n\nServer Software:        nginx\n"
            + summary_text("ms", goalPercent=None, rate={"target": None, "achieved": 1234.5}, bench=bench))
    run = load_run(text, "bench.log")
    assert run.figures.bench_rps == 1234.56 and run.figures.goal_percent is None
    assert run.figures.rate_target is None and run.figures.rate_achieved == 1234.5
    assert run.notes == (), "ab's report is expected in a bench log: nothing to say about it"


@pytest.mark.parametrize("name", ["ab-nginx.txt", "ab-nginx-stderr.txt", "ab-faults.txt"])
def test_every_line_of_real_ab_output_is_known_as_abs(name: str) -> None:
    found = scan((GOLDEN / name).read_text())
    assert found.skipped == 0 and found.ab_lines == sum(1 for line in (GOLDEN / name).read_text().splitlines()
                                                         if line.strip())


def test_ab_lines_are_noted_where_no_bench_summary_explains_them() -> None:
    run = load_run((GOLDEN / "ab-nginx.txt").read_text() + (GOLDEN / "100qps-ms.log").read_text(), "mixed.log")
    assert "39 lines of ab's report skipped: only the JSON summary of `soak bench` is read, and there is none" \
        in run.notes


def test_bench_interval_stats_have_no_goal() -> None:
    stats = [{"iter": 0, "end": "2026-01-01T00:00:01Z", "interval": "1s", "good": 10, "bad": 0, "failed": 0,
              "skipped": 0, "t": None, "goalPercent": None, "min": 1, "p50": 1, "p95": 2, "p99": 2, "p999": 2,
              "max": 2, "bhash": 0, "errors": {}}]
    run = load_run(summary_text("ms", intervalStats=stats), "bench.json")
    assert len(run.intervals) == 1 and run.intervals[0].t is None and run.intervals[0].goal_percent is None


# --- never crash ------------------------------------------------------------------------------






def test_nothing_usable_is_said() -> None:
    for text in ("", "\n\n", "hello\nworld\n", "\x00" * 100, "{}", "[]", '{"a": 1}'):
        run = load_run(text, "junk")
        assert not run.usable and run.figures.requests is None
        assert "nothing in it is soak's or slow_cooker's output" in run.notes


def test_read_run_reads_files_and_says_when_it_cannot(tmp_path) -> None:
    path = tmp_path / "run.log"
    path.write_bytes(golden("100qps-ms.log").encode() + b"\xff\xfe bad utf-8\n")
    assert len(read_run(str(path)).intervals) == 5
    with pytest.raises(UsageError, match=r"^/no/such/file: no such file$"):
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


def test_a_summary_whose_latencies_have_three_decimals_reads_back_in_order() -> None:
    """Issue 32: the summary's keys are no longer truncated to the unit but kept to three decimals
    of it, so its min (123.6 us, in ms: 0.124) can be over the exact min by half a microsecond, and
    over the histogram's p50 when every latency shares a bucket. Read back, min stays the lowest."""
    histogram = LatencyHistogram()
    for _ in range(10):
        histogram.record(123_600)
    text = summary_text("ms", min=0.124, histogram={"unit": "ns", "hdr": histogram.encode()})
    latency = load_run(text, "s.json").figures.latency_ns
    assert latency["min"] <= latency["p50"] <= latency["max"]
    assert abs(latency["min"] - 123_600) < 500


WARMED_LOG = """\
# sending 20 GET req/s with concurrency=5 to http://127.0.0.1:35137/ ...
#                    iter   good/b/f t   goal%  min [p50 p95 p99  p999]  max bhash change
# warmup 2026-12-01T13:32:49Z    0     20/0/0 20 100% 1s   0 [  0 900 1500 1500 ]  1500      0 +
# warmup GET "http://127.0.0.1:35137/": refused (3 times)
# warmup 2026-12-01T13:32:50Z    1     20/0/0 20 100% 1s   0 [  0   0   1    1 ]    1      0 -
2026-12-01T13:32:51Z    0      5/0/0 5 100% 1s   0 [  0   1   1    1 ]    1      0 +
2026-12-01T13:32:52Z    1     15/0/0 15 100% 1s   0 [  0   0   1    1 ]    1      0 +
"""


def test_a_warmups_lines_are_not_read_back_as_the_runs() -> None:
    # As a warmed-up run prints them (runner.report.slowcooker.WARMUP_MARK), stderr merged in.
    found = scan(WARMED_LOG)
    assert [(row.iter, row.good) for row in found.intervals] == [(0, 5), (1, 15)]
    assert (found.skipped, found.soak_errors) == (0, 0)
    loaded = load_run(WARMED_LOG, "warmed.log")
    assert [row.good for row in loaded.intervals] == [5, 15]
    assert not any("warmup" in note for note in loaded.notes)


@pytest.mark.parametrize("digits", [20, 400])
@pytest.mark.parametrize("source", ["line", "intervalStats"])
def test_a_figure_beyond_64_bits_leaves_its_row_out_with_a_note(digits: int, source: str) -> None:
    """A made-up max of hundreds of digits overflowed the run-wide estimate's floats: `soak compare`,
    `plot` and `merge` ended in an OverflowError traceback. No run counts beyond 64 bits: the row is
    left out, said in a note, and the rest of the run reads as before."""
    big = "9" * digits
    line = "2026-12-01T10:20:{s}Z    {i}    100/0/0 100 100% 1s   0 [  0   0   2    2 ]    {m}      0 \n"
    if source == "line":
        text = line.format(s=43, i=0, m=big) + line.format(s=44, i=1, m=2)
    else:
        entry = {"end": "2026-12-01T10:20:44Z", "iter": 0, "good": 100, "bad": 0, "failed": 0, "t": 100, "goalPercent": 100,
                 "interval": "1s", "min": 0, "p50": 0, "p95": 0, "p99": 2, "p999": 2, "max": 2, "bhash": 0}
        text = json.dumps({"p50": 0, "intervalStats": [entry | {"max": int(big)}, entry | {"iter": 1}]}) + "\n"
    run = load_run(text, "big.log")
    if source == "line":
        assert [i.iter for i in run.intervals] == [1]
        assert any("iter 0 has a max beyond what any run counts" in note for note in run.notes), run.notes
    else:  # an entry that is no run's makes the summary's intervals unreadable, as any damaged entry does
        assert run.intervals == ()
        assert "the JSON summary's intervalStats[0] cannot be read; used the interval lines" in run.notes
    assert_one_line_notes(run)
