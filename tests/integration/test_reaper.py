"""Nothing a test starts outlives the test run (tests/support/reaper.py), shown with real processes.

A "run" here is a Python process (or a real pytest session) that starts a daemon-like child with
reaper.spawn, in a directory of runs of the test's own (SOAK_TEST_RUNS), so the machine's real
runs are neither used nor touched. The run is then killed with SIGKILL, as a CI job, the OOM
killer or xdist's crash handling kills, and what was left is looked for.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from tests.conftest import REPO
from tests.support.reaper import alive, started_at

# A daemon that outlives its starter: it ignores SIGTERM (the parent-death signal, the sweep's first
# signal), as a daemon slow to shut down does, and has a child in its session, as nginx has workers.
DAEMON = r"""
import os, signal, sys, time
signal.signal(signal.SIGTERM, signal.SIG_IGN if sys.argv[1] == "stubborn" else signal.SIG_DFL)
child = os.fork()
if child == 0:
    time.sleep(120)
    os._exit(0)
print("daemon", os.getpid(), child, flush=True)
time.sleep(120)
"""

# The run: starts the daemon as the fixtures start theirs, owning a state directory, then waits.
RUN = r"""
import sys, time
from pathlib import Path
from tests.support import reaper
state = Path(sys.argv[3])
state.mkdir()
(state / "data").write_text("state")
reaper.spawn([sys.executable, "-c", sys.argv[1], sys.argv[2]], "daemon-like", owns=[state])
time.sleep(120)
"""


def start_run(runs: Path, state: Path, kind: str) -> tuple[subprocess.Popen[str], list[tuple[int, int | None]]]:
    """The run, and its daemon and the daemon's child (pid, start time), once the daemon is up."""
    env = {key: value for key, value in os.environ.items() if key != "SOAK_TEST_RUN"}
    run = subprocess.Popen([sys.executable, "-c", RUN, DAEMON, kind, str(state)], stdout=subprocess.PIPE, text=True,
                           cwd=REPO, env={**env, "SOAK_TEST_RUNS": str(runs), "PYTHONPATH": str(REPO)})
    assert run.stdout is not None
    _, daemon, child = run.stdout.readline().split()
    return run, [(int(pid), started_at(int(pid))) for pid in (daemon, child)]


def kill(run: subprocess.Popen[str]) -> None:
    run.send_signal(signal.SIGKILL)
    run.wait(timeout=30)


def gone_within(processes: list[tuple[int, int | None]], seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while any(alive(*process) for process in processes) and time.monotonic() < deadline:
        time.sleep(0.05)
    return not any(alive(*process) for process in processes)


# pytest as the project runs it (pyproject.toml's addopts), with the plugin, on a folder of the test's.
PYTEST = [sys.executable, "-m", "pytest", "-p", "tests.support.reaper", "-p", "no:cacheprovider", "-p", "no:cloudcoil"]


def session_start(runs: Path, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    """A real pytest session, with the plugin, in a folder of its own: its start sweeps."""
    (tmp_path / "next").mkdir(exist_ok=True)
    (tmp_path / "next" / "pytest.ini").write_text("[pytest]\n")
    (tmp_path / "next" / "test_nothing.py").write_text("def test_nothing():\n    pass\n")
    env = {key: value for key, value in os.environ.items() if key != "SOAK_TEST_RUN"}
    return subprocess.run([*PYTEST, str(tmp_path / "next")], capture_output=True, text=True, timeout=120, cwd=REPO,
                          env={**env, "SOAK_TEST_RUNS": str(runs), "SOAK_TEST_GRACE_S": "1", "PYTHONPATH": str(REPO)})


def test_a_killed_runs_daemon_is_reaped_at_the_next_session_start(tmp_path: Path) -> None:
    runs, state = tmp_path / "runs", tmp_path / "state"
    run, daemon = start_run(runs, state, "stubborn")
    try:
        (pidfile,) = runs.glob("*/daemons/*.json")  # written down while it runs
        assert "swept" not in session_start(runs, tmp_path).stdout  # a live run's daemons are not another's to stop
        assert all(alive(*process) for process in daemon)
        kill(run)
        assert not gone_within(daemon, 1.0), "the stubborn daemon outlived its run, as a real one can"
        started = time.monotonic()
        done = session_start(runs, tmp_path)
        assert done.returncode == 0, done.stdout + done.stderr
        assert "soak tests: swept what an earlier run left: daemon-like (pid" in done.stdout, done.stdout
        assert gone_within(daemon, 0.0), "the daemon and its child, stopped by the sweep (SIGKILL after the grace)"
        assert time.monotonic() - started < 60
        assert not state.exists() and not pidfile.exists() and list(runs.iterdir()) == []
    finally:
        for pid, started_ticks in daemon:
            if alive(pid, started_ticks):
                os.kill(pid, signal.SIGKILL)
        if run.poll() is None:
            kill(run)


def test_a_daemon_gets_sigterm_as_soon_as_its_starter_is_killed(tmp_path: Path) -> None:
    """Not waiting for the next run: the kernel signals it (parent-death signal) at once."""
    runs, state = tmp_path / "runs", tmp_path / "state"
    run, daemon = start_run(runs, state, "plain")
    try:
        kill(run)
        assert gone_within(daemon[:1], 10.0), "the daemon, signalled when its starter died"
    finally:
        for pid, started_ticks in daemon:
            if alive(pid, started_ticks):
                os.kill(pid, signal.SIGKILL)


TORN_DOWN = r"""
import subprocess, sys, time
from pathlib import Path
import pytest
from tests.support import reaper

@pytest.fixture
def daemon():
    process = reaper.spawn([sys.executable, "-c", "import time; time.sleep(120)"], "sleeper")
    yield process
    reaper.stop(process)
    Path(__file__).parent.joinpath("torn-down").write_text(str(process.returncode))

def test_waits(daemon):
    Path(__file__).parent.joinpath("ready").write_text(str(daemon.pid))
    time.sleep(120)
"""


def test_sigterm_to_a_run_runs_its_teardowns(tmp_path: Path) -> None:
    """`timeout`'s SIGTERM ends a pytest run as Ctrl-C does: the fixtures stop their daemons."""
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    (tmp_path / "test_waits.py").write_text(TORN_DOWN)
    env = {key: value for key, value in os.environ.items() if key != "SOAK_TEST_RUN"}
    run = subprocess.Popen([*PYTEST, str(tmp_path / "test_waits.py")], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           text=True, cwd=REPO,
                           env={**env, "SOAK_TEST_RUNS": str(tmp_path / "runs"), "PYTHONPATH": str(REPO)})
    try:
        deadline = time.monotonic() + 60
        while not (tmp_path / "ready").exists() and run.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert (tmp_path / "ready").exists(), run.stdout.read() if run.stdout else ""
        run.send_signal(signal.SIGTERM)
        output, _ = run.communicate(timeout=60)
    finally:
        if run.poll() is None:
            kill(run)  # type: ignore[arg-type]
    assert (tmp_path / "torn-down").read_text() == str(-signal.SIGTERM), output
    assert run.returncode == 2 and "KeyboardInterrupt" in output, output  # pytest's exit for an interrupted run
    assert not (tmp_path / "runs").exists() or list((tmp_path / "runs").iterdir()) == []
