"""What Prometheus metrics cost per request: the tally alone, and whole runs with and without them.

    python bench/metrics_cost.py [--requests 300000] [--rounds 3]

1. The metrics tally's record() (what the engine's sink adds per result when metricAddr or
   pushgateway is set), timed on its own for good responses, errors and skips.
2. `soak bench -n N -c 50 -k` against nginx with one worker on loopback (bench/nginx.sh),
   with and without --metricAddr, in alternation: the runner's CPU per request from the
   summary's process.cpuSeconds, and requests per second.

Nothing is asserted: the machine is shared and noisy, so compare figures from the same run.
Load goes to 127.0.0.1 only, and every run is bounded by its request count.
"""

from __future__ import annotations

import argparse
import json
import signal
import socket
import statistics
import subprocess
import sys
import time
import timeit
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from runner.metrics import MetricsTally  # noqa: E402
from runner.result import Result  # noqa: E402


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def tally_cost() -> dict[str, float]:
    """Nanoseconds per record() call, best of five, for each kind of result."""
    tally = MetricsTally(2)
    kinds = {
        "good response": Result(url_index=1, start_ns=1_000, headers_ns=351_000, end_ns=400_000, status=200),
        "bad response": Result(url_index=1, start_ns=1_000, headers_ns=351_000, end_ns=400_000, status=503),
        "failure": Result(url_index=0, error="refused", error_text="connection refused"),
        "skip": Result(skipped=True),
    }
    costs = {}
    for name, result in kinds.items():
        times = timeit.repeat(lambda r=result: tally.record(r), number=200_000, repeat=5)  # type: ignore[misc]
        costs[name] = min(times) / 200_000 * 1e9
    empty = min(timeit.repeat(lambda: None, number=200_000, repeat=5)) / 200_000 * 1e9
    costs["(a call doing nothing)"] = empty
    return costs


def bench_run(url: str, requests: int, metrics: bool) -> tuple[float, float]:
    """(CPU microseconds per request, requests per second) of one bench run."""
    args = [sys.executable, "-m", "runner", "bench", "-n", str(requests), "-c", "50", "-k", url]
    if metrics:
        args[4:4] = ["--metricAddr", f"127.0.0.1:{free_port()}"]
    done = subprocess.run(args, capture_output=True, text=True, timeout=600, cwd=REPO, check=True)
    lines = done.stdout.splitlines()
    summary = json.loads("\n".join(lines[lines.index("{"):]))
    return summary["process"]["cpuSeconds"] / summary["requests"] * 1e6, summary["bench"]["requestsPerSecond"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=300_000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()

    print("| result kind | record() ns |\n|---|---|")
    for name, ns in tally_cost().items():
        print(f"| {name} | {ns:.0f} |")

    port = free_port()
    nginx = subprocess.Popen(["bash", str(REPO / "bench" / "nginx.sh"), "1", str(port)], stderr=subprocess.DEVNULL)
    try:
        time.sleep(1.0)
        url = f"http://127.0.0.1:{port}/"
        found: dict[bool, list[tuple[float, float]]] = {False: [], True: []}
        for _ in range(args.rounds):
            for metrics in (False, True):
                found[metrics].append(bench_run(url, args.requests, metrics))
    finally:
        nginx.send_signal(signal.SIGTERM)
        nginx.wait(timeout=10)
    print(f"\nsoak bench -n {args.requests} -c 50 -k, nginx with one worker; medians of {args.rounds} rounds\n")
    print("| metrics | CPU us per request | req/s |\n|---|---|---|")
    for metrics, runs in found.items():
        cpu = statistics.median(r[0] for r in runs)
        rps = statistics.median(r[1] for r in runs)
        print(f"| {'--metricAddr' if metrics else 'off'} | {cpu:.2f} | {rps:,.0f} |")


if __name__ == "__main__":
    main()
