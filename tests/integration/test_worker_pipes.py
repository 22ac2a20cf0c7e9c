"""Local workers report home over pipes, which nothing outside the run can break.

With a multiprocessing.Queue, whose named semaphores multiprocessing's resource tracker
follows, killing that tracker during a `--workers 2` run (an OOM kill would do it) made the
run end with `KeyError: '/mp-...'` tracebacks on stderr.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

from tests.conftest import REPO, Nginx, assert_counts_add_up, soak_command


def children(pid: int) -> list[tuple[int, str]]:
    """(pid, command line) of every process whose parent is `pid`, from /proc."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
            if int(fields[1]) == pid:
                cmdline = (stat.parent / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
                found.append((int(stat.parent.name), cmdline))
        except (OSError, IndexError, ValueError):
            continue  # it exited meanwhile
    return found


def test_killing_the_resource_tracker_leaves_the_run_whole(nginx: Nginx) -> None:
    command = soak_command("--workers", "2", "--qps", "20", "--concurrency", "2", "--interval", "500ms",
                           "--iterations", "4", nginx.url)
    with subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO) as process:
        try:
            deadline = time.monotonic() + 10
            trackers: list[int] = []
            while not trackers and time.monotonic() < deadline and process.poll() is None:
                trackers = [pid for pid, cmdline in children(process.pid) if "resource_tracker" in cmdline]
                time.sleep(0.05)
            time.sleep(0.5)  # the workers are running by now
            for pid in trackers:  # spawning a process starts one (the pipes give it nothing to follow)
                os.kill(pid, signal.SIGKILL)
            stdout, stderr = process.communicate(timeout=60)
        finally:
            process.kill()
    assert process.returncode == 0, stderr
    assert "Traceback" not in stderr and "KeyError" not in stderr, stderr
    summary = assert_counts_add_up(stdout)
    assert summary["requests"] > 0
