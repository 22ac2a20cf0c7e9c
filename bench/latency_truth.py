"""How far the latency soak reports is from the truth, against a server whose latency is known.

    python bench/latency_truth.py [--delay-ms 2] [--seconds 10] [--repo PATH]

tests/support/delayserver.py answers each request DELAY ms after the kernel received it and
keeps what each answer really took (on a busy machine its thread can be late: what it kept
is still the truth). soak's reported p50 is set beside the server's p50, at 100 req/s (5
clients) and at saturation (`soak bench -k -c 20`, where the client is the limit and its
event loop is always behind), for the native engine (its own HTTP/1.1 client, kernel receive
timestamps where the platform has them) and the Python engine on httpx (the loop's clock; issue 34
retired the Python fast transport, which had the kernel's timestamps too). The difference is what the client adds:
two loopback transits, plus whatever scheduling delay its clock did not exclude.

Nothing is asserted: the machine is shared; compare figures from the same run. `--repo`
runs another checkout's runner (for a before/after) against this checkout's server.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from tests.support.delayserver import DelayServer  # noqa: E402


def summary_of(output: str) -> dict:
    lines = output.splitlines()
    return json.loads("\n".join(lines[lines.index("{"):]))


def run(repo: Path, url: str, args: list[str], seconds: int) -> dict:
    done = subprocess.run([sys.executable, "-m", "runner", *args, "--latencyUnit", "us", url], cwd=repo,
                          capture_output=True, text=True, timeout=seconds + 60)
    return summary_of(done.stdout)


# (transport, engine) pairs measured: the native engine's own client, and httpx on the Python engine.
CLIENTS = (("fast", "native"), ("httpx", "python"))


def measure(repo: Path, delay_ms: float, scenario: str, transport: str, engine: str,
            seconds: int) -> tuple[float, float, int]:
    """(reported p50 ms, true p50 ms, responses) of one run against a fresh server."""
    with DelayServer(delay_ms) as server:
        if scenario == "100 req/s":
            args = ["--qps", "100", "--concurrency", "5", "--interval", f"{seconds}s", "--iterations", "1"]
        else:
            args = ["bench", "-k", "-c", "20", "-t", str(seconds), "-n", "100000000"]
        summary = run(repo, server.url, [*args, "--transport", transport, "--engine", engine], seconds)
        truth = statistics.median(server.served_ns) / 1e6
        return summary["p50"] / 1000, truth, len(server.served_ns)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--delay-ms", type=float, default=2.0)
    parser.add_argument("--seconds", type=int, default=10)
    parser.add_argument("--repo", type=Path, default=REPO, help="the checkout whose runner is measured")
    args = parser.parse_args()
    print(f"## Reported latency against a server that answers in {args.delay_ms} ms ({args.seconds} s each)\n")
    print("| load | transport | engine | responses | server's p50 (ms, the truth) | reported p50 (ms) | "
          "reported - truth (ms) |")
    print("|---|---|---|---|---|---|---|")
    for scenario in ("100 req/s", "saturation (bench -k -c 20)"):
        for transport, engine in CLIENTS:
            reported, truth, count = measure(args.repo, args.delay_ms, scenario, transport, engine, args.seconds)
            print(f"| {scenario} | {transport} | {engine} | {count:,} | {truth:.3f} | {reported:.3f} | "
                  f"{reported - truth:+.3f} |")
    print()


if __name__ == "__main__":
    main()
