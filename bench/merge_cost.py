"""What `soak merge`, `soak plot` and `soak compare` cost on long shards' logs: peak RSS and wall time.

    python bench/merge_cost.py [--intervals 5000,10000] [--shards 2] [--repo PATH]

For each count, the real runner makes the logs of one run split over --shards processes, each
of that many 1 ms intervals (their interval records are a long soak's: an hour of 1 s intervals
is 3,600), against soak's demo target on loopback. Then, each in its own process: `soak merge`
of every shard's log, `soak plot` of shard 0's, and `soak compare` of shard 0's with shard
1's. For each: the logs' size, the process's peak RSS (its own, from wait4) and wall time.
`--repo` runs another checkout's runner on the same logs too, for a before/after (a checkout
that keeps every interval needs about 270 KB per interval and shard, over 5 GB for 10,000:
keep its counts small on a shared machine).

Nothing is asserted: the machine is shared and noisy, so compare figures from the same run.
Load goes to 127.0.0.1 only; every run is bounded by its iterations and a timeout.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from runner.run.demo_target import start_target, stop_target  # noqa: E402
from tests.support.shardlogs import shard_logs  # noqa: E402

TIMEOUT_S = 600


@dataclass(frozen=True)
class Cost:
    """One command's run: its exit code, peak resident memory and wall time."""

    code: int
    peak_rss_mb: float
    seconds: float


def measured(command: list[str], cwd: Path) -> Cost:
    """Run `command` in `cwd` (its runner is that checkout's) and take its own rusage with wait4."""
    started = time.monotonic()
    with open(os.devnull, "w") as null:
        child = subprocess.Popen(command, cwd=cwd, stdout=null, stderr=null, env={**os.environ, "TZ": "UTC"})
    deadline = started + TIMEOUT_S
    while True:
        pid, status, usage = os.wait4(child.pid, os.WNOHANG)
        if pid:
            break
        if time.monotonic() > deadline:
            child.kill()
            pid, status, usage = os.wait4(child.pid, 0)
            break
        time.sleep(0.05)
    child.returncode = os.waitstatus_to_exitcode(status)  # reaped here: Popen must not wait for it again
    return Cost(child.returncode, usage.ru_maxrss / 1024, time.monotonic() - started)


def commands(logs: list[Path], out: Path) -> dict[str, list[str]]:
    runner = [sys.executable, "-m", "runner"]
    return {
        "merge": [*runner, "merge", *map(str, logs)],
        "plot": [*runner, "plot", str(logs[0]), "-o", str(out / "shard-0.png")],
        "compare": [*runner, "compare", str(logs[0]), str(logs[1])],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--intervals", default="5000,10000", help="interval counts, comma-separated")
    parser.add_argument("--shards", type=int, default=2)
    parser.add_argument("--repo", type=Path, help="another checkout whose runner reads the same logs, for comparison")
    args = parser.parse_args()
    checkouts = [("this", REPO)] + ([("repo", args.repo.resolve())] if args.repo else [])
    target, url = start_target()
    try:
        print("| runner | intervals x shards | logs (MB) | command | exit | peak RSS (MB) | wall (s) |")
        print("|---|---|---|---|---|---|---|")
        for count in (int(n) for n in args.intervals.split(",")):
            with tempfile.TemporaryDirectory() as scratch:
                directory = Path(scratch)
                logs = shard_logs(url, directory, shards=args.shards, intervals=count)
                size = sum(log.stat().st_size for log in logs) / 1e6
                for name, checkout in checkouts:
                    for command, argv in commands(logs, directory).items():
                        cost = measured(argv, checkout)
                        print(f"| {name} | {count} x {args.shards} | {size:.1f} | {command} | {cost.code} | "
                              f"{cost.peak_rss_mb:,.0f} | {cost.seconds:.1f} |", flush=True)
    finally:
        stop_target(target)
    load = os.getloadavg()
    print(f"\nload average at the end: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")


if __name__ == "__main__":
    main()
