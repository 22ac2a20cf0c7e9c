"""Stopping a process for a while (SIGSTOP, as a frozen or unscheduled pod is), and when it was."""

from __future__ import annotations

import signal
import subprocess
import time


def freeze(process: subprocess.Popen, seconds: float) -> tuple[int, int]:
    """Stop `process` for `seconds`, then let it go on: (stopped, resumed), Unix times in ns.

    Each time is read once its signal is sent: read before, it could be 50 ms early, a busy
    machine running this process again only that long after it read the clock."""
    process.send_signal(signal.SIGSTOP)
    stopped_ns = time.time_ns()
    time.sleep(seconds)
    resumed_ns = time.time_ns()
    process.send_signal(signal.SIGCONT)
    return stopped_ns, resumed_ns
