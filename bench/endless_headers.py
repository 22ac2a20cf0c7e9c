"""Peak RSS of a run against a server that streams response headers forever, per client.

    python bench/endless_headers.py [--repo PATH] [--seconds 10] [--clients 4]

A loopback fault server (tests/support/faultserver.py, path /endless-headers) answers every request
with a status line and then header lines without end. A client that buffers the head
without a bound grows until the timeout ends the request; one that holds heads to a limit
fails the request at the limit and stays small. Each transport runs once, one interval of
`--seconds` with `--clients` clients at 10 req/s each and a timeout as long as the run; the
figure is the runner's own peak RSS (the summary's process.maxRssBytes). `fast` is the native
engine's client wherever it is built (engine auto), `httpx` the Python engine's.

`--repo` runs another checkout's runner (an older commit, for a before/after comparison);
the fault server is always this checkout's. Nothing is asserted. Load goes to 127.0.0.1 only,
and every run is bounded by its one interval.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from tests.support.faultserver import FaultServer  # noqa: E402

MB = 1_000_000


def run(repo: Path, transport: str, url: str, seconds: int, clients: int) -> dict:
    """The summary of one run of `repo`'s runner against `url`."""
    command = [sys.executable, "-m", "runner", "--transport", transport, "--qps", str(10 * clients),
               "--concurrency", str(clients), "--interval", f"{seconds}s", "--iterations", "1",
               "--timeout", f"{seconds}s", url]
    done = subprocess.run(command, capture_output=True, text=True, cwd=repo, timeout=seconds * 3 + 30)
    lines = done.stdout.splitlines()
    if "{" not in lines:
        raise SystemExit(f"{transport}: exit {done.returncode}, no summary:\n{done.stderr[-2000:]}")
    return json.loads("\n".join(lines[lines.index("{"):]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repo", type=Path, default=REPO, help="the checkout whose runner runs")
    parser.add_argument("--seconds", type=int, default=10)
    parser.add_argument("--clients", type=int, default=4)
    args = parser.parse_args()
    server = FaultServer().start()
    try:
        print(f"runner from {args.repo}, {args.clients} clients, {args.seconds} s, /endless-headers")
        print(f"{'transport':<10} {'peak RSS':>9} {'requests':>9}  errors")
        for transport in ("fast", "httpx"):
            summary = run(args.repo, transport, server.url("/endless-headers"), args.seconds, args.clients)
            rss = summary["process"]["maxRssBytes"] / MB
            errors = ", ".join(f"{kind} {count}" for kind, count in summary["errors"].items())
            print(f"{transport:<10} {rss:>6.1f} MB {summary['requests']:>9}  {errors}", flush=True)
    finally:
        server.stop()


if __name__ == "__main__":
    main()
