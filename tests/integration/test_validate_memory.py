"""`soak validate` holds `workers` against the memory limit it runs under, and the estimate is honest.

The limit is the process's cgroup's (memory.max, or v1's memory.limit_in_bytes). Two ways here:
a cgroup file tree the test makes, read through SOAK_CGROUP_ROOT (the reader's one hook for tests),
and a real cgroup the test creates as root, with a real limit the kernel enforces, that validate
and then real runs are started in: the workers validate says fit run to their end there, and
twice as many are killed, as the CronJob's pod would be (OOMKilled).
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from runner.report.plan import memory_needed_mib, workers_that_fit
from runner.run.memory import CGROUP_ROOT_ENV
from tests.conftest import Nginx, assert_counts_add_up, run_soak, soak_command

MI = 2**20
URL = "http://127.0.0.1:9/"


def memory_lines(stdout: str) -> list[str]:
    return [line for line in stdout.splitlines() if line.startswith("memory:")]


def fake_cgroup(root: Path, limit: str) -> Path:
    """A cgroup v2 tree whose root (as in a container with its own cgroup namespace) has `limit`."""
    root.mkdir(parents=True)
    (root / "cgroup.controllers").write_text("cpuset cpu io memory pids\n")
    (root / "memory.max").write_text(f"{limit}\n")
    return root


def test_validate_says_when_workers_do_not_fit_the_limit(tmp_path: Path) -> None:
    env = {CGROUP_ROOT_ENV: str(fake_cgroup(tmp_path / "cgroup", str(256 * MI)))}
    fit = workers_that_fit(256 * MI)
    ok = run_soak("validate", "--workers", str(fit), "--concurrency", str(fit), URL, env=env)
    assert ok.returncode == 0, ok.stderr
    assert memory_lines(ok.stdout) == [f"memory: {fit} workers and their parent need about {memory_needed_mib(fit)} "
                                       "MiB, within the 256 MiB this runs under (its cgroup's limit)"]
    over = run_soak("validate", "--workers", str(fit + 1), "--concurrency", str(fit + 1), URL, env=env)
    assert over.returncode == 0, over.stderr  # a warning: the run itself is not refused
    (line,) = memory_lines(over.stdout)
    assert line.startswith(f"memory: {fit + 1} workers and their parent need about {memory_needed_mib(fit + 1)} MiB, "
                           "MORE than the 256 MiB this runs under")
    assert line.endswith(f"(OOMKilled); at most {fit} workers fit, or raise the limit")


def test_without_a_limit_validate_says_nothing_of_memory(tmp_path: Path) -> None:
    env = {CGROUP_ROOT_ENV: str(fake_cgroup(tmp_path / "cgroup", "max"))}
    done = run_soak("validate", "--workers", "200", "--concurrency", "200", URL, env=env)
    assert done.returncode == 0 and memory_lines(done.stdout) == []


@pytest.fixture
def real_cgroup() -> Iterator[tuple[Path, str]]:
    """A memory cgroup of this test's own, as root: (its directory, the file its limit is written to)."""
    if os.geteuid() != 0:
        pytest.skip("making a cgroup with a memory limit needs root")
    v2 = Path("/sys/fs/cgroup")
    if "memory" in (v2 / "cgroup.subtree_control").read_text().split() if (v2 / "cgroup.subtree_control").exists() \
            else False:
        where, limit_file = v2 / f"soak-test-{os.getpid()}", "memory.max"
    elif (v2 / "memory").is_dir():
        where, limit_file = v2 / "memory" / f"soak-test-{os.getpid()}", "memory.limit_in_bytes"
    else:
        pytest.skip("no cgroup memory controller to make a child of here")
    where.mkdir()
    try:
        yield where, limit_file
    finally:
        empty(where)
        where.rmdir()


def empty(where: Path) -> None:
    """Wait for the processes this test started in the cgroup to end (the workers of a parent the kernel
    killed see their pipe close and stop), then kill any still there: a cgroup is removed only empty."""
    deadline = time.monotonic() + 60
    while (pids := (where / "cgroup.procs").read_text().split()) and time.monotonic() < deadline:
        time.sleep(0.2)
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(int(pid), signal.SIGKILL)
    while (where / "cgroup.procs").read_text().split() and time.monotonic() < deadline + 10:
        time.sleep(0.1)


def in_cgroup(where: Path, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """The CLI, started inside the cgroup (its shell moves itself in, then becomes the CLI)."""
    return subprocess.run(["sh", "-c", f'echo $$ > "{where}/cgroup.procs" && exec "$@"', "sh", *soak_command(*args)],
                          capture_output=True, text=True, timeout=timeout, env={**os.environ, "TZ": "UTC"})


def test_under_a_real_limit_validate_is_right_about_what_the_kernel_kills(real_cgroup: tuple[Path, str],
                                                                         nginx: Nginx) -> None:
    where, limit_file = real_cgroup
    limit = 160 * MI
    (where / limit_file).write_text(str(limit))
    fit = workers_that_fit(limit)
    assert fit >= 2
    many = 3 * fit  # well past the limit: what a process takes differs from one Python build to another
    said = in_cgroup(where, "validate", "--workers", str(many), "--concurrency", str(many), nginx.url)
    assert said.returncode == 0, said.stderr
    (line,) = memory_lines(said.stdout)
    assert "MORE than the 160 MiB this runs under" in line and f"at most {fit} workers fit" in line
    run = ("--qps", "60", "--interval", "1s", "--iterations", "3", nginx.url)
    kept = in_cgroup(where, "--workers", str(fit), "--concurrency", str(fit), *run)
    assert kept.returncode in (0, 3), kept.stderr  # ran to its end: not killed
    assert_counts_add_up(kept.stdout)
    killed = in_cgroup(where, "--workers", str(many), "--concurrency", str(many), *run)
    # the kernel kills a process of the cgroup: a worker (exit 5, "worker N failed") or the parent
    assert killed.returncode in (5, -9), (killed.returncode, killed.stderr[-2000:])
