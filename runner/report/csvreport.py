"""The latency CSV (`reportLatenciesCSV`): slow_cooker's `from, to, count` per bucket.

Rows are the buckets of the run's histogram recorded in the latency unit, as slow_cooker
records it: from the first bucket to the one holding the largest value, zero-count rows
included, no header.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import TextIO

from runner.report.base import Reporter
from runner.stats.histogram import LatencyHistogram
from runner.stats.runinfo import RunSummary


def csv_rows(histogram: LatencyHistogram) -> Iterator[str]:
    """`from, to, count` lines of a histogram recorded in the latency unit."""
    for low, high, count in histogram.buckets():
        yield f"{low}, {high}, {count}\n"


class CsvReporter(Reporter):
    """Writes the CSV at the end to a file opened before the run (runner.config.files.open_output),
    so a bad path fails early.

    A write that fails then (a full disk) is handed to `failed` with the output's `name`: the
    summary is out already, and the exit code tells it (outputs.py).
    """

    def __init__(self, file: TextIO, name: str = "reportLatenciesCSV",
                 failed: Callable[[str, OSError], None] | None = None) -> None:
        self._file = file
        self._name = name
        self._failed = failed

    def finish(self, summary: RunSummary) -> None:
        assert summary.in_unit is not None, "the recorder keeps a histogram in the unit when a CSV is asked for"
        try:
            with self._file:
                self._file.writelines(csv_rows(summary.in_unit))
        except OSError as e:
            if self._failed is None:
                raise
            self._failed(self._name, e)
