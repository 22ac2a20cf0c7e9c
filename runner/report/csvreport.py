"""The latency CSV (`reportLatenciesCSV`): slow_cooker's `from, to, count` per bucket.

Rows are the buckets of the run's histogram recorded in the latency unit, as slow_cooker
records it: from the first bucket to the one holding the largest value, zero-count rows
included, no header.
"""

from __future__ import annotations

import errno
import fcntl
import os
import stat
from collections.abc import Callable, Iterator
from typing import TextIO

from runner.core.errors import UsageError
from runner.report.base import Reporter
from runner.stats.histogram import LatencyHistogram
from runner.stats.runinfo import RunSummary


def csv_rows(histogram: LatencyHistogram) -> Iterator[str]:
    """`from, to, count` lines of a histogram recorded in the latency unit."""
    for low, high, count in histogram.buckets():
        yield f"{low}, {high}, {count}\n"


def open_csv(path: str) -> TextIO:
    """Open (create, empty) the CSV file now, so a bad path stops the run before any load is sent.

    Opened without blocking, so a FIFO that no one reads is refused (ENXIO) instead of holding
    the start for ever; writes then block as usual.
    """
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NONBLOCK | os.O_CLOEXEC, 0o666)
    except OSError as e:
        raise _unusable(path, e) from None
    fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) & ~os.O_NONBLOCK)
    return os.fdopen(fd, "w", encoding="utf-8")


def check_csv_path(path: str) -> None:
    """Refuse, as open_csv would, a path the CSV cannot be written to, leaving no trace: an existing
    file is opened without being emptied, and a new one is made and removed at once.

    `soak validate` says "valid" only for what a run accepts; a run checks the same way first.
    Only the kernel knows whether a file can be made: /proc/x.csv is in a directory that exists,
    is not read-only and allows root to write, and still cannot hold a new file.
    """
    try:
        fd = os.open(path, os.O_WRONLY | os.O_NONBLOCK | os.O_CLOEXEC)  # no O_CREAT, no O_TRUNC
    except FileNotFoundError:
        _try_creating(path)
    except OSError as e:
        raise _unusable(path, e) from None
    else:
        os.close(fd)


def _try_creating(path: str) -> None:
    """The file does not exist: make it (only if it still does not) and remove it again, as the test."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NONBLOCK | os.O_CLOEXEC, 0o600)
    except FileExistsError:  # a dangling symlink (open_csv would make its target), or made meanwhile
        _check_directory_for(path)
        return
    except OSError as e:
        raise _unusable(path, e) from None
    os.close(fd)
    try:
        os.unlink(path)
    except OSError:
        pass  # an empty file left where the run will write its CSV anyway


def _check_directory_for(path: str) -> None:
    """Whether the directory of a path that exists only as a dangling link would let open_csv create it."""
    directory = os.path.dirname(path) or "."
    try:
        mode = os.stat(directory).st_mode
        if not stat.S_ISDIR(mode):
            raise OSError(errno.ENOTDIR, os.strerror(errno.ENOTDIR))
        if os.statvfs(directory).f_flag & os.ST_RDONLY:
            raise OSError(errno.EROFS, os.strerror(errno.EROFS))
        if not os.access(directory, os.W_OK | os.X_OK):
            raise OSError(errno.EACCES, os.strerror(errno.EACCES))
    except OSError as e:
        # open() says ENOENT for a missing directory too, naming the file's path
        raise _unusable(path, e) from None


def _unusable(path: str, error: OSError) -> UsageError:
    return UsageError(f"reportLatenciesCSV: {path}: {error.strerror or error}")


class CsvReporter(Reporter):
    """Writes the CSV at the end to a file opened before the run, so a bad path fails early.

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
