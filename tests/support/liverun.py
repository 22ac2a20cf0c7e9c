"""The CLI running in the background, its output collected as it comes: for tests that signal
a run, or look at it while it runs."""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable

from tests.conftest import REPO, Run, skip_if_native_refused, soak_command, split_engine_line
from tests.support import reaper

EXIT_WITHIN_S = 3.0  # from the signal to the process being gone


LONG_RUN = ("--interval", "1s", "--iterations", "600")  # ten minutes: only a signal ends it in a test


class LiveRun:
    """The CLI running in the background, its output collected as it comes."""

    def __init__(self, *args: str, wrap: Callable[[list[str]], list[str]] = list) -> None:
        """`wrap`: the command line as it is run, from the CLI's (in a namespace of the test's, say)."""
        # A daemon of the test run (tests/support/reaper.py): a run of ten minutes must not outlive it.
        self.process = reaper.spawn(
            wrap(soak_command(*args)), "soak (a live run)", stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            env={**os.environ, "TZ": "UTC"}, cwd=REPO,
        )
        self._out: list[str] = []
        self._err: list[str] = []
        self._first_interval = threading.Event()
        self._readers = [
            threading.Thread(target=self._read, args=(self.process.stdout, self._out, True), daemon=True),
            threading.Thread(target=self._read, args=(self.process.stderr, self._err, False), daemon=True),
        ]
        for reader in self._readers:
            reader.start()

    def _read(self, stream, into: list[str], watch: bool) -> None:  # type: ignore[no-untyped-def]
        for line in stream:
            into.append(line)
            if watch and line[:1].isdigit():
                self._first_interval.set()

    def wait_for_first_interval(self, timeout: float = 15.0) -> None:
        assert self._first_interval.wait(timeout), f"no interval line within {timeout}s:\n{self.stdout}{self.stderr}"

    def send(self, sig: signal.Signals) -> float:
        """Send `sig`; returns the moment it was sent (time.monotonic())."""
        assert self.process.poll() is None, "the run ended before it was signalled"
        sent = time.monotonic()
        self.process.send_signal(sig)
        return sent

    def wait(self, since: float, timeout: float = 15.0) -> float:
        """Wait for the process to exit; returns the seconds from `since` to the exit."""
        self.process.wait(timeout=timeout)
        elapsed = time.monotonic() - since
        for reader in self._readers:
            reader.join(timeout=5)
        return elapsed

    @property
    def stdout(self) -> str:
        return "".join(self._out)

    def finished(self) -> Run:
        """The run once it has exited, as run_soak returns one (its engine line checked and set apart)."""
        return Run(self.process.returncode, self.stdout, "".join(self._err))

    @property
    def stderr(self) -> str:
        """What the run said on stderr, its engine line (checked as Run checks it) left out."""
        return split_engine_line("".join(self._err))[1]

    def __enter__(self) -> LiveRun:
        return self

    def __exit__(self, *exc: object) -> None:
        running = self.process.poll() is None
        if running:
            self.process.kill()
            self.process.wait(timeout=10)
        reaper.stopped(self.process)
        if not running and exc[0] is not None:  # a test that needs what the native engine refuses: skipped on it
            for reader in self._readers:
                reader.join(timeout=5)
            skip_if_native_refused(self.process.returncode, "".join(self._err))


def wait_until(condition, timeout: float = 3.0) -> None:  # type: ignore[no-untyped-def]
    """Poll `condition` until it holds or `timeout` passes (a server may log a moment late)."""
    deadline = time.monotonic() + timeout
    while not condition() and time.monotonic() < deadline:
        time.sleep(0.05)
