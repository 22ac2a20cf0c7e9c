"""The latency CSV (`reportLatenciesCSV`): slow_cooker's `from, to, count` per bucket.

Rows are the buckets of the run's histogram recorded in the latency unit, as slow_cooker
records it: from the first bucket to the one holding the largest value, zero-count rows
included, no header.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TextIO

from runner.histogram import LatencyHistogram
from runner.report import Reporter, RunSummary


def csv_rows(histogram: LatencyHistogram) -> Iterator[str]:
    """`from, to, count` lines of a histogram recorded in the latency unit."""
    for low, high, count in histogram.buckets():
        yield f"{low}, {high}, {count}\n"


class CsvReporter(Reporter):
    """Writes the CSV at the end to a file opened before the run, so a bad path fails early."""

    def __init__(self, file: TextIO) -> None:
        self._file = file

    def finish(self, summary: RunSummary) -> None:
        assert summary.in_unit is not None, "the recorder keeps a histogram in the unit when a CSV is asked for"
        with self._file:
            self._file.writelines(csv_rows(summary.in_unit))
