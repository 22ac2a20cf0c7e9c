"""Long shards' logs from the real runner: a run split over processes, in many tiny intervals.

A long soak's shard (an hour of 1-second intervals, a day of 10-second ones) holds thousands
of interval records; so do a few seconds of 1 ms intervals, printed by the same code. The
processes are started together, as an Indexed Job's pods are, and send to loopback only;
each run is bounded by its iterations and by a timeout.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from tests.conftest import soak_command


def shard_logs(url: str, directory: Path, *, shards: int = 2, intervals: int = 5_000, interval: str = "1ms",
               qps: int = 2_000, timeout: float = 600, command: list[str] | None = None) -> list[Path]:
    """Each shard's stdout of one run of `intervals` intervals split over `shards` processes, as files.

    `command` replaces `python -m runner` (another checkout's, say); the processes' stderr
    goes to `pod-N.err` beside their logs, `pod-N.log`.
    """
    run = command or soak_command()
    flags = ["--shards", str(shards), "--interval", interval, "--iterations", str(intervals), "--qps", str(qps),
             "--concurrency", str(shards), "--latencyUnit", "us"]
    logs = [directory / f"pod-{i}.log" for i in range(shards)]
    processes = []
    for index, log in enumerate(logs):
        with log.open("w") as out, log.with_suffix(".err").open("w") as err:
            processes.append(subprocess.Popen([*run, *flags, "--shard", str(index), url], stdout=out, stderr=err,
                                              env={**os.environ, "TZ": "UTC"}))
    try:
        codes = [p.wait(timeout=timeout) for p in processes]
    finally:
        for p in processes:
            p.kill()  # only if still running: a process that has exited is left alone
            p.wait()
    assert codes == [0] * shards, [log.with_suffix(".err").read_text()[-2000:] for log in logs]
    return logs
