"""The latency CSV, checked byte for byte against slow_cooker's own (tests/golden/latencies-us.csv)."""

from __future__ import annotations

import io
import json
from pathlib import Path

from hdrh.histogram import HdrHistogram

from runner.config.settings import merge, settings_from
from runner.load.model import Closed
from runner.report.csvreport import CsvReporter, csv_rows
from runner.report.summary import percentile_keys
from runner.stats.figures import Latency
from runner.stats.histogram import LatencyHistogram
from runner.stats.recorder import Tally
from runner.stats.runinfo import RunInfo, RunSummary

GOLDEN = Path(__file__).resolve().parents[1] / "golden"
GOLDEN_CSV = GOLDEN / "latencies-us.csv"
GOLDEN_LOG = GOLDEN / "with-csv-us.log"


def golden_rows() -> list[tuple[int, int, int]]:
    rows = []
    for line in GOLDEN_CSV.read_text().splitlines():
        low, high, count = (int(field) for field in line.split(", "))
        rows.append((low, high, count))
    return rows


def golden_histogram() -> LatencyHistogram:
    """The run behind the golden CSV: each row's `from` (us) recorded `count` times, in ns."""
    histogram = LatencyHistogram()
    for low, _, count in golden_rows():
        if count:
            histogram.record(low * 1000, count)
    return histogram


def golden_histogram_in_unit() -> LatencyHistogram:
    """The same run recorded in microseconds, as the recorder keeps it for the CSV."""
    histogram = LatencyHistogram.for_unit(1000)
    for low, _, count in golden_rows():
        if count:
            histogram.record(low, count)
    return histogram


def golden_summary() -> dict[str, int]:
    lines = GOLDEN_LOG.read_text().splitlines()
    return json.loads("\n".join(lines[lines.index("{"):]))


def test_golden_files_are_what_we_think() -> None:
    rows = golden_rows()
    assert len(rows) == 2145
    assert sum(count for _, _, count in rows) == 395  # 195 + 200 responses in with-csv-us.log
    assert rows[0] == (0, 0, 0) and rows[-1] == (2240, 2241, 1)
    assert list(golden_summary()) == ["p50", "p75", "p90", "p95", "p99", "p999"]


def test_csv_reproduces_slow_cookers_byte_for_byte() -> None:
    produced = "".join(csv_rows(golden_histogram_in_unit()))
    assert produced == GOLDEN_CSV.read_text()


def test_summary_percentiles_match_slow_cookers() -> None:
    histogram = golden_histogram()
    ours = percentile_keys(Latency.of(histogram), "us")
    theirs = golden_summary()
    for key in ("p50", "p75", "p90", "p95", "p99"):  # slow_cooker truncates them to the unit; ours keep 3 decimals
        assert int(ours[key]) == theirs[key], key
    assert (ours["p50"], ours["p99"]) == (594.431, 1385.471)


def test_p999_is_capped_at_the_true_max_where_slow_cookers_is_its_bucket_top() -> None:
    """slow_cooker's p999 is the highest value of the max's bucket (2241 us, more than any latency
    it saw); ours is capped at the true max (2240 us), in the same bucket."""
    histogram = golden_histogram()
    ours = percentile_keys(Latency.of(histogram), "us")["p999"]
    theirs = golden_summary()["p999"]
    assert ours == histogram.max / 1000 == 2240
    assert theirs == 2241
    assert ours <= theirs
    micro = HdrHistogram(1, 3_600_000_000, 3)
    assert micro.get_lowest_equivalent_value(int(ours)) == micro.get_lowest_equivalent_value(theirs)


def test_rows_are_in_the_unit_and_end_at_the_max_bucket() -> None:
    histogram = LatencyHistogram.for_unit(1_000_000)
    for ms in (1, 2, 7):
        histogram.record(ms)
    rows = [line for line in csv_rows(histogram)]
    assert rows == ["0, 0, 0\n", "1, 1, 1\n", "2, 2, 1\n", "3, 3, 0\n", "4, 4, 0\n", "5, 5, 0\n", "6, 6, 0\n",
                    "7, 7, 1\n"]


def test_rows_in_nanoseconds_are_the_histogram_itself() -> None:
    histogram = LatencyHistogram()
    for ns in (3, 3, 5):
        histogram.record(ns)
    assert list(csv_rows(histogram)) == ["0, 0, 0\n", "1, 1, 0\n", "2, 2, 0\n", "3, 3, 2\n", "4, 4, 0\n",
                                              "5, 5, 1\n"]


def test_rows_of_wide_buckets() -> None:
    histogram = LatencyHistogram.for_unit(1_000_000)
    histogram.record(3_000)  # 3000 ms: buckets are 2 ms wide there
    rows = list(csv_rows(histogram))
    assert rows[-1] == "3000, 3001, 1\n"
    assert rows[2047] == "2047, 2047, 0\n" and rows[2048] == "2048, 2049, 0\n"
    assert sum(int(row.split(", ")[2]) for row in rows) == 1


def test_empty_histogram_writes_nothing() -> None:
    assert list(csv_rows(LatencyHistogram.for_unit(1000))) == []


def test_csv_reporter_writes_the_run_histogram_at_finish_and_closes() -> None:
    settings = settings_from(merge({"latencyUnit": "us"}))
    tally = Tally()
    tally.latency = golden_histogram()
    info = RunInfo(settings, ["http://a/"], None, 0, 1_700_000_000.0)
    summary = RunSummary(info, 2, 4_000_000_000, 4_000_000_000, tally, None, None, golden_histogram_in_unit(), "iterations", 0.1, 1)

    class Keep(io.StringIO):
        def close(self) -> None:
            self.kept = self.getvalue()
            super().close()

    out = Keep()
    reporter = CsvReporter(out)
    reporter.start(info)
    reporter.interval(info, object())
    assert out.getvalue() == ""  # nothing until the end
    reporter.finish(summary)
    assert out.closed
    assert out.kept == GOLDEN_CSV.read_text()


def test_the_recorders_unit_histogram_truncates_exactly() -> None:
    """A latency just under a unit boundary stays under it, however its ns bucket lies."""
    from runner.load.result import Result
    from runner.load.schedule import Grid
    from runner.stats.recorder import Recorder

    recorder = Recorder(Grid(0, 10**9), Closed(), unit_ns=1_000_000)
    for latency in (2_999_999, 3_000_000, 999_999, 9_000_000):
        recorder.record(Result(start_ns=1, headers_ns=1 + latency, end_ns=2 + latency, status=200))
    assert recorder.in_unit is not None
    rows = [(low, count) for low, _, count in recorder.in_unit.buckets() if count]
    assert rows == [(0, 1), (2, 1), (3, 1), (9, 1)]
