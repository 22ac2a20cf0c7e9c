"""The latency CSV (`reportLatenciesCSV`): slow_cooker's `from, to, count` per bucket.

Rows are the buckets of the run's histogram as slow_cooker would have recorded it in the
latency unit: from the first bucket to the one holding the largest value, zero-count rows
included, no header.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TextIO

from runner.histogram import LatencyHistogram
from runner.report import UNIT_NS, RunInfo, RunSummary


def csv_rows(histogram: LatencyHistogram, unit: str) -> Iterator[str]:
    """`from, to, count` lines, values in the unit."""
    in_unit = histogram if UNIT_NS[unit] == 1 else histogram.in_unit(UNIT_NS[unit])
    for low, high, count in in_unit.buckets():
        yield f"{low}, {high}, {count}\n"


class CsvReporter:
    """Writes the CSV at the end to a file opened before the run, so a bad path fails early."""

    def __init__(self, file: TextIO) -> None:
        self._file = file

    def start(self, info: RunInfo) -> None:
        """Nothing until the end."""

    def interval(self, info: RunInfo, interval: object) -> None:
        """Nothing until the end."""

    def finish(self, summary: RunSummary) -> None:
        with self._file:
            self._file.writelines(csv_rows(summary.tally.latency, summary.info.settings.latency_unit))
