"""Outputs that cannot be written: the run survives, says so once, and its exit code tells.

Each was a traceback, an abort or a silent death: stdout on a full disk, stdout or stderr
closed (`soak >&-`: uvloop aborted with exit 134 when a socket got fd 1), stderr on a full
disk, the CSV on a full disk after the summary, and `soak ... | head` lost exit code 3.
/dev/full stands in for a full disk (every write: ENOSPC), as a symlink for the CSV.
"""

from __future__ import annotations

import array
import fcntl
import os
import signal
import subprocess
import termios
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import REPO, Nginx, Run, assert_counts_add_up, engine_line, run_soak, soak_command
from tests.support.faultserver import refused_port
from tests.support.liverun import LONG_RUN, LiveRun

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


def test_stderr_on_a_full_disk_loses_only_stderr(nginx: Nginx) -> None:
    """The run died silently at its first failure line. Now stdout is whole, and the exit code says
    an output was lost. Half the sends go to nginx: a run with no response at all would exit 8."""
    with open("/dev/full", "w") as full, refused_port() as refused:
        url = f"http://127.0.0.1:{refused.getsockname()[1]}/"
        run = soak_with(*SHORT, url, nginx.url, stderr=full.fileno())
    assert run.returncode == 6
    summary = assert_counts_add_up(run.stdout)
    assert 0 < summary["failed"] < summary["requests"] and summary["errors"] == {"refused": summary["failed"]}


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


def test_a_signalled_run_whose_csv_is_lost_exits_6_and_says_no_other_code(nginx: Nginx, tmp_path: Path) -> None:
    """Output lost (6) wins over a signal (7): stderr ended `... the results cover only that (exit code
    7)` from a run that exited 6. Now the signal's line names no code; the CSV's own line said 6's."""
    csv = tmp_path / "latencies.csv"
    csv.symlink_to("/dev/full")
    with LiveRun("--qps", "20", *LONG_RUN, "--reportLatenciesCSV", str(csv), nginx.url) as live:
        live.wait_for_first_interval()
        live.wait(live.send(signal.SIGTERM))
    assert live.process.returncode == 6, live.stderr
    said = live.stderr.splitlines()
    assert f"soak: reportLatenciesCSV: {csv}: {FULL}" in said
    assert said[-1].startswith("soak: stopped by SIGTERM before its planned end, after ") and \
        said[-1].endswith(": the results cover only that"), live.stderr
    assert_counts_add_up(live.stdout)


@pytest.mark.parametrize("workers", ["1", "2"])
@pytest.mark.parametrize(("thresholds", "code"), [((), 6), (BROKEN, 3)])
def test_a_reader_that_leaves_stops_the_run_and_it_is_no_pass(nginx: Nginx, workers: str, thresholds: tuple[str, ...],
                                                              code: int) -> None:
    """`soak ... | head`: exit code 0 lost a broken run's 3. Now the run stops as on a signal (far
    before its 3 minutes, or the timeout fails the test), says so in one line, and exits 6 (stdout
    could not be written: README's 0 is a run that went to its planned end), or 3 with its
    thresholds broken, as with stdout on a full disk. Issue 32: it exited 0."""
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
    assert stderr == engine_line() + "soak: stdout: closed by its reader\n"


def has_interval(stdout: bytes, index: int) -> bool:
    """Whether `stdout` holds the whole line of interval `index`."""
    lines = stdout.split(b"\n")[:-1]  # the last one may still be coming
    return any(line[:1].isdigit() and line.split()[1] == str(index).encode() for line in lines)


def blocked_writing(pid: int, read_end: int) -> bool:
    """Whether the process is blocked writing to the pipe, which holds what it wrote so far unread.

    The kernel says where a sleeping process waits (`anon_pipe_write`, `pipe_write` on older
    kernels); how many bytes are unread does not tell, as a pipe whose page was read in part
    takes fewer than its size before the writer has to wait."""
    unread = array.array("i", [0])
    fcntl.ioctl(read_end, termios.FIONREAD, unread)
    with open(f"/proc/{pid}/wchan") as wchan:
        return unread[0] > 0 and "pipe_write" in wchan.read()


@pytest.mark.parametrize("workers", ["1", "2"])
def test_a_sigterm_while_the_summary_waits_for_a_slow_pipe_cuts_nothing(nginx: Nginx, workers: str) -> None:
    """SIGTERM while the summary waits for a reader slow to read: the JSON stopped where the pipe
    was full, with exit 0 and nothing said (Python's text layer drops what a write interrupted by
    a signal did not take). Now the summary is written whole. The pipe is shrunk to 4 KiB and
    the summary is twice that, so the write is surely blocked in it when the signals come; the
    run had reached its planned end, so its exit code is its own: 0."""
    iterations = 20
    read_end, write_end = os.pipe()
    fcntl.fcntl(write_end, fcntl.F_SETPIPE_SZ, 4096)
    command = soak_command("--qps", "20", "--concurrency", "2", "--interval", "100ms", "--iterations",
                           str(iterations), "--workers", workers, nginx.url)
    process = subprocess.Popen(command, stdout=write_end, stderr=subprocess.PIPE, text=True, cwd=REPO,
                               env={**os.environ, "TZ": "UTC"})
    os.close(write_end)
    try:
        with os.fdopen(read_end, "rb") as reader:
            head = b""
            while not has_interval(head, iterations - 1):
                chunk = os.read(reader.fileno(), 512)
                assert chunk, f"the run ended before its last interval:\n{head.decode()}"
                head += chunk
            deadline = time.monotonic() + 60
            while not blocked_writing(process.pid, reader.fileno()):  # the summary waits for the reader
                assert time.monotonic() < deadline and process.poll() is None, head.decode()
                time.sleep(0.01)
            process.send_signal(signal.SIGTERM)
            time.sleep(0.2)
            process.send_signal(signal.SIGTERM)  # and another, as an impatient second stop would
            rest = reader.read()
        assert process.stderr is not None
        stderr = process.stderr.read()
        returncode = process.wait(timeout=60)
    finally:
        process.kill()
    assert returncode == 0, stderr
    assert stderr == engine_line()
    summary = assert_counts_add_up((head + rest).decode())  # the whole summary, parsed, and last
    assert summary["stopReason"] == "iterations" and summary["intervals"] == iterations
