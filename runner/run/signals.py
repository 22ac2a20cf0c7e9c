"""SIGINT and SIGTERM as a run's events: how Ctrl-C and Kubernetes stop a run.

The run's driver (runner.run.soak.Soak) is told of each stop signal by name and handles it as
it handles any stop (its stop(): one way to stop, whoever asks); it never touches the process's
signal handling itself, so a test hands it signals of its own at moments of a scripted clock.
The local workers' parent (runner.run.workers) hears of them the same way, through
HandledSignals (it runs no event loop), and passes each on to its workers.
"""

from __future__ import annotations

import asyncio
import signal
from collections.abc import Callable
from typing import Any, Protocol

STOP_SIGNALS = {signal.SIGINT, signal.SIGTERM}  # how Ctrl-C and Kubernetes stop a run

# Told of each stop signal: its name (SIGTERM), and whether it arrived before the run could handle
# it (held while a local worker started: see ProcessSignals.install).
Handler = Callable[[str, bool], None]


class Signals(Protocol):
    """Where a run hears of stop signals from, while it runs."""

    def install(self, handle: Handler) -> None:
        """Tell `handle` of every stop signal from now until remove(), those already pending first."""
        ...

    def remove(self) -> None:
        ...


class ProcessSignals:
    """The process's own SIGINT and SIGTERM, handled on the running loop."""

    def install(self, handle: Handler) -> None:
        """Handle SIGINT and SIGTERM from here on.

        A local worker starts with them held (see workers.py). One that arrived while it was
        starting is taken here, before the engine's first step: delivered through the loop,
        it would be handled only after clients whose first sends were already due (a worker
        that started late) had sent them, and a stop before the first send must send nothing.
        """
        loop = asyncio.get_running_loop()
        for sig in STOP_SIGNALS:
            loop.add_signal_handler(sig, handle, sig.name, False)
        while (pending := signal.sigtimedwait(STOP_SIGNALS, 0)) is not None:
            handle(signal.Signals(pending.si_signo).name, True)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, STOP_SIGNALS)

    def remove(self) -> None:
        loop = asyncio.get_running_loop()
        for sig in STOP_SIGNALS:
            loop.remove_signal_handler(sig)


class HandledSignals:
    """The process's own SIGINT and SIGTERM, taken by signal handlers: for a process that runs no event
    loop while it waits (the local workers' parent, which passes them on to its workers)."""

    def __init__(self) -> None:
        self._previous: dict[signal.Signals, Any] = {}

    def install(self, handle: Handler) -> None:
        """Handle SIGINT and SIGTERM from here on, those held while the workers started first
        (runner.run.workers._spawn holds them), then let them through."""
        for sig in STOP_SIGNALS:
            self._previous[sig] = signal.signal(sig, lambda number, frame: handle(signal.Signals(number).name, False))
        while (pending := signal.sigtimedwait(STOP_SIGNALS, 0)) is not None:
            handle(signal.Signals(pending.si_signo).name, True)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, STOP_SIGNALS)

    def remove(self) -> None:
        """The handlers that were there before install()."""
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)
        self._previous.clear()
