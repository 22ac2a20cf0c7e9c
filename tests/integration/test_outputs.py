"""Outputs that cannot be written: the run survives, says so once, and its exit code tells.

Each was a traceback, an abort or a silent death: stdout on a full disk, stdout or stderr
closed (`soak >&-`: uvloop aborted with exit 134 when a socket got fd 1), stderr on a full
disk, the CSV on a full disk after the summary, and `soak ... | head` lost exit code 3.
/dev/full stands in for a full disk (every write: ENOSPC), as a symlink for the CSV.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import REPO, Nginx, Run, assert_counts_add_up, engine_line, run_soak, soak_command
from tests.support.faultserver import refused_port

SHORT = ("--qps", "20", "--concurrency", "2", "--interval", "300ms", "--iterations", "2")
BROKEN = ("--intervalThresholds", "max < 1ns")  # no response comes back within a nanosecond: broken at once
FULL = "No space left on device"


def soak_with(*args: str, before_exec: Callable[[], None] | None = None, stdout: int | None = subprocess.PIPE,
              stderr: int | None = subprocess.PIPE, timeout: float = 60) -> Run:
    """The CLI with its stdout and stderr as given (a file descriptor, or closed by `before_exec`)."""
    done = subprocess.run(soak_command(*args), stdout=stdout, stderr=stderr, text=True, timeout=timeout, cwd=REPO,
                          env={**os.environ, "TZ": "UTC"}, preexec_fn=before_exec)
    return Run(done.returncode, done.stdout or "", done.stderr or "")


def csv_rows(path: Path) -> int:
    """The requests the CSV counts: proof that the run went on to its end and wrote it."""
    return sum(int(line.rsplit(",", 1)[1]) for line in path.read_text().splitlines())


@pytest.mark.parametrize(("thresholds", "code"), [((), 6), (BROKEN, 3)])
def test_stdout_on_a_full_disk_is_one_line_and_exit_6(nginx: Nginx, tmp_path: Path, thresholds: tuple[str, ...],
                                                      code: int) -> None:
    """Was `OSError: [Errno 28]` and a traceback. Now the run goes on (the CSV is written at its end);
    broken thresholds still win: 3."""
    csv = tmp_path / "latencies.csv"
    with open("/dev/full", "w") as full:
        run = soak_with(*SHORT, *thresholds, "--reportLatenciesCSV", str(csv), nginx.url, stdout=full.fileno())
    assert run.returncode == code, run.stderr
    assert run.stderr == f"soak: stdout: {FULL}\n"
    assert csv_rows(csv) > 0


@pytest.mark.parametrize("closed", [(1,), (1, 2), (2,)], ids=["stdout", "stdout-and-stderr", "stderr"])
def test_closed_stdout_or_stderr_is_read_as_dev_null(nginx: Nginx, tmp_path: Path, closed: tuple[int, ...]) -> None:
    """`soak >&-`: a socket got fd 1, and uvloop aborted closing it (`uv__close: Assertion fd >
    STDERR_FILENO failed`, exit 134). Closed descriptors are opened on /dev/null first."""
    csv = tmp_path / "latencies.csv"

    def close() -> None:
        for fd in closed:
            os.close(fd)

    run = soak_with(*SHORT, "--reportLatenciesCSV", str(csv), nginx.url, before_exec=close)
    assert run.returncode == 0, run.stderr
    assert "Assertion" not in run.stderr and "Traceback" not in run.stderr
    assert csv_rows(csv) > 0
    if 1 not in closed:
        assert_counts_add_up(run.stdout)


def test_stderr_on_a_full_disk_loses_only_stderr(tmp_path: Path) -> None:
    """The run died silently at its first failure line. Now stdout is whole, and the exit code says
    an output was lost."""
    with open("/dev/full", "w") as full, refused_port() as refused:
        url = f"http://127.0.0.1:{refused.getsockname()[1]}/"
        run = soak_with(*SHORT, url, stderr=full.fileno())
    assert run.returncode == 6
    summary = assert_counts_add_up(run.stdout)
    assert summary["failed"] == summary["requests"] > 0


@pytest.mark.parametrize(("thresholds", "code"), [((), 6), (BROKEN, 3)])
def test_the_csv_on_a_full_disk_is_one_line_after_the_summary(nginx: Nginx, tmp_path: Path,
                                                              thresholds: tuple[str, ...], code: int) -> None:
    """Was a traceback after the summary. /dev/full through a symlink, as the CSV path."""
    csv = tmp_path / "latencies.csv"
    csv.symlink_to("/dev/full")
    run = run_soak(*SHORT, *thresholds, "--reportLatenciesCSV", str(csv), nginx.url)
    assert run.returncode == code, run.stderr
    assert run.stderr == f"soak: reportLatenciesCSV: {csv}: {FULL}\n"
    assert_counts_add_up(run.stdout)


@pytest.mark.parametrize("workers", ["1", "2"])
@pytest.mark.parametrize(("thresholds", "code"), [((), 0), (BROKEN, 3)])
def test_a_reader_that_leaves_stops_the_run_with_its_verdict(nginx: Nginx, workers: str, thresholds: tuple[str, ...],
                                                             code: int) -> None:
    """`soak ... | head`: exit code 0 lost a broken run's 3. Now the run stops as on a signal (far
    before its 3 minutes, or the timeout fails the test) and exits with its verdict, without a word."""
    command = soak_command("--qps", "20", "--concurrency", "2", "--interval", "300ms", "--iterations", "600",
                           "--workers", workers, *thresholds, nginx.url)
    with subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO) as process:
        assert process.stdout is not None and process.stderr is not None
        for line in process.stdout:
            if line[:1].isdigit():  # the first interval line: interval 0 closed and judged
                break
        process.stdout.close()  # the reader leaves, as head does
        try:
            stderr = process.stderr.read()
            returncode = process.wait(timeout=60)
        finally:
            process.kill()
    assert returncode == code, stderr
    assert stderr == engine_line()
