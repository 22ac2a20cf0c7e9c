"""Nothing a test starts outlives the test run: every daemon is written down, and swept if left.

A test run (pytest, or xdist's controller with its workers) has a directory under RUNS, named by
the process that began it (pid and start time, so a reused pid is not taken for it), shared with
its workers through the environment (RUN_ENV). A daemon started with `spawn` (nginx, HAProxy,
Prometheus, the Pushgateway, dockerd, a server in a subprocess):

- runs in a session of its own, so that what it starts (nginx's workers, dockerd's containerd)
  can be stopped with it;
- gets SIGTERM from the kernel as soon as the process that started it is gone, however that
  went (`setpriv --pdeathsig`: a SIGKILL, a killed xdist worker, a crash);
- is written down in the run's directory (a pidfile: its pid and start time, who started it,
  the directories it owns) until `stopped` crosses it off.

The fixtures that start daemons stop them in their teardown, which pytest runs after a failure,
a timeout of the test's own, Ctrl-C, and (this plugin makes it a KeyboardInterrupt) SIGTERM.
What a killed run could not stop, a daemon that ignores its SIGTERM or left its session (a
container's shim), is swept at the next session start, and at the end of the run that lost a
worker: for each pidfile whose starter is gone, the daemon's session gets SIGTERM, then SIGKILL,
so does every process whose command line names a directory it owned, and those directories are
unmounted and removed. Registered as a plugin by tests/conftest.py.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import pytest

RUNS = Path(os.environ.get("SOAK_TEST_RUNS") or Path(tempfile.gettempdir()) / "soak-test-runs")  # another: a test's
RUN_ENV = "SOAK_TEST_RUN"  # this run's directory, for its xdist workers (and what they start)
SETPRIV = shutil.which("setpriv")  # util-linux, in every Debian: sets the parent-death signal, then execs
GRACE_S = float(os.environ.get("SOAK_TEST_GRACE_S") or 10)  # from a swept daemon's SIGTERM to its SIGKILL


def started_at(pid: int) -> int | None:
    """The process's start time (clock ticks since boot, /proc/pid/stat), None if there is none."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat.rsplit(")", 1)[1].split()
    return None if fields[0] == "Z" else int(fields[19])  # a zombie has ended: only its parent's wait is due


def alive(pid: int, started: int | None) -> bool:
    """Whether the process `pid` that started at `started` still runs (not another that got its pid)."""
    return started is not None and started_at(pid) == started


def _me() -> tuple[int, int | None]:
    return os.getpid(), started_at(os.getpid())


def run_directory() -> Path:
    """This run's directory: the one the environment names, or a new one named after this process."""
    named = os.environ.get(RUN_ENV)
    if named:
        return Path(named)
    pid, started = _me()
    directory = RUNS / f"{pid}-{started}"
    (directory / "daemons").mkdir(parents=True, exist_ok=True)
    os.environ[RUN_ENV] = str(directory)
    return directory


def spawn(argv: Sequence[str], what: str, owns: Iterable[Path] = (), **popen: Any) -> subprocess.Popen[Any]:
    """subprocess.Popen(argv, **popen) for a daemon: in its own session, signalled when its starter
    ends, written down until `stopped`. `owns`: directories it keeps its state in, removed by a sweep."""
    command = list(argv)
    if SETPRIV is not None and threading.current_thread() is threading.main_thread():
        command = [SETPRIV, "--pdeathsig", "TERM", "--", *command]  # the signal goes with the thread that forks
    process: subprocess.Popen[Any] = subprocess.Popen(command, start_new_session=True, **popen)
    owner, owner_started = _me()
    record = {"pid": process.pid, "started": started_at(process.pid), "what": what, "owner": owner,
              "ownerStarted": owner_started, "owns": [str(path) for path in owns]}
    pidfile = _pidfile(process.pid)
    pidfile.with_suffix(".tmp").write_text(json.dumps(record))
    pidfile.with_suffix(".tmp").replace(pidfile)
    return process


def stopped(process: subprocess.Popen[Any]) -> None:
    """Cross a daemon that has been stopped (and waited for) off the run's list."""
    _pidfile(process.pid).unlink(missing_ok=True)


def stop(process: subprocess.Popen[Any], timeout: float = 10) -> None:
    """SIGTERM, and SIGKILL to its whole session if it is not gone within `timeout`; then crossed off."""
    try:
        process.terminate()
        process.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        _signal_session(process.pid, signal.SIGKILL)
        process.wait(timeout=timeout)
    finally:
        if process.returncode is not None:
            stopped(process)


def _pidfile(pid: int) -> Path:
    return run_directory() / "daemons" / f"{pid}.json"


# --- the sweep ----------------------------------------------------------------------------------


def sweep(grace_s: float = GRACE_S, runs: Path = RUNS) -> list[str]:
    """Stop what each test run's gone processes left running, and remove their runs' directories.

    A daemon whose starter is gone is stopped with its session; a run's directory goes once the
    run that made it is gone and nothing of it is left. Returns what was swept, one line each."""
    swept: list[str] = []
    for directory in sorted(runs.glob("*-*")) if runs.is_dir() else []:
        pid, _, started = directory.name.partition("-")
        for pidfile in sorted((directory / "daemons").glob("*.json")):
            try:
                record = json.loads(pidfile.read_text())
            except (OSError, ValueError):
                continue  # being written, or already swept by another process
            if alive(record["owner"], record["ownerStarted"]):
                continue
            swept.append(_reap(record, grace_s))
            pidfile.unlink(missing_ok=True)
        run_alive = pid.isdigit() and started.isdigit() and alive(int(pid), int(started))
        if not run_alive and not any((directory / "daemons").glob("*.json")):
            shutil.rmtree(directory, ignore_errors=True)
    return swept


def _reap(record: dict[str, Any], grace_s: float) -> str:
    """Stop one daemon left behind, with its session and whatever names its directories."""
    owns = [Path(path) for path in record["owns"]]
    targets = _session(record["pid"]) if alive(record["pid"], record["started"]) else set()
    targets |= _naming(owns)
    for sig, wait_s in ((signal.SIGTERM, grace_s), (signal.SIGKILL, 5.0)):
        for pid, started in targets:
            if alive(pid, started):
                _kill(pid, sig)
        deadline = time.monotonic() + wait_s
        while any(alive(*target) for target in targets) and time.monotonic() < deadline:
            time.sleep(0.05)
    for path in owns:
        unmount_everything_under(path, including_it=True)
        shutil.rmtree(path, ignore_errors=True)
    return f"{record['what']} (pid {record['pid']}): {len(targets)} process(es) stopped, {len(owns)} directory(ies) removed"


def _processes() -> Iterable[tuple[int, list[str]]]:
    """Every process (pid, its /proc/pid/stat fields after the command name)."""
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                yield int(entry.name), (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue


def _session(leader: int) -> set[tuple[int, int | None]]:
    """The processes of the session `leader` leads (fields: state ppid pgrp session ...)."""
    return {(pid, int(fields[19])) for pid, fields in _processes() if int(fields[3]) == leader}


def _naming(paths: Sequence[Path]) -> set[tuple[int, int | None]]:
    """The processes whose command line names one of `paths` (a shim that left its daemon's session)."""
    if not paths:
        return set()
    found: set[tuple[int, int | None]] = set()
    for pid, fields in _processes():
        try:
            command = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
        except OSError:
            continue
        if pid != os.getpid() and any(str(path) in command for path in paths):
            found.add((pid, int(fields[19])))
    return found


def _kill(pid: int, sig: signal.Signals) -> None:
    try:
        os.kill(pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def _signal_session(leader: int, sig: signal.Signals) -> None:
    for pid, started in _session(leader):
        if alive(pid, started):
            _kill(pid, sig)


def unmount_everything_under(directory: Path, including_it: bool) -> None:
    """Unmount what is mounted under `directory` (dockerd's network namespaces, on nsfs), deepest
    first, and `directory` itself if asked: left mounted, it could not be removed."""
    try:
        with open("/proc/self/mounts") as mounts:
            points = [line.split()[1] for line in mounts]
    except OSError:
        return
    inside = sorted({p for p in points if p.startswith(f"{directory}/")}, key=len, reverse=True)
    for point in [*inside, *([str(directory)] if including_it and str(directory) in points else [])]:
        subprocess.run(["umount", "--lazy", point], capture_output=True, timeout=60)


# --- the plugin ---------------------------------------------------------------------------------


def _terminated(signum: int, frame: object) -> None:
    raise KeyboardInterrupt(f"signal {signal.Signals(signum).name}")


def pytest_configure(config: pytest.Config) -> None:
    """SIGTERM (`timeout`'s, a CI runner's) ends the run as Ctrl-C does: fixtures' teardowns run.
    A pytest started by a test (tests/integration/test_reaper.py) is a run of its own."""
    if signal.getsignal(signal.SIGTERM) is signal.SIG_DFL and threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, _terminated)
    if not _worker(config):
        os.environ.pop(RUN_ENV, None)
    run_directory()


def pytest_sessionstart(session: pytest.Session) -> None:
    _report(session.config, sweep(), "swept what an earlier run left")


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session: pytest.Session) -> None:
    """At the end of the run (its controller, under xdist), after every teardown: what a killed worker left."""
    if not _worker(session.config):
        _report(session.config, sweep(), "swept what a killed worker left")


def pytest_unconfigure(config: pytest.Config) -> None:
    """The run's directory goes with the run (its builds too), unless a daemon is still written there."""
    directory = run_directory()
    if not _worker(config) and not any((directory / "daemons").glob("*.json")):
        shutil.rmtree(directory, ignore_errors=True)


def _worker(config: pytest.Config) -> bool:
    """Whether this process is an xdist worker (the controller began the run, and ends it)."""
    return hasattr(config, "workerinput")


def _report(config: pytest.Config, swept: list[str], what: str) -> None:
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    if swept and reporter is not None:
        reporter.write_line(f"soak tests: {what}: " + "; ".join(swept))
