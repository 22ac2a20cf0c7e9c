"""Keep-alive c=50 at bench's default 1 s intervals: two soaks (a before and an after) beside wrk -t1.

    python bench/keepalive_pairs.py --before /work/main/.venv/bin/soak --after .venv/bin/soak --rounds 8

Each round runs wrk, one soak, wrk, the other soak (which soak goes first alternates from round to
round), each for --seconds against one nginx worker on loopback, and divides each soak's requests
per CPU-second (the whole process's, from wait4, start-up included; and from its run's start, the
summary's process.cpuSeconds) by the wrk run's just before it. The load average is printed with
every round: the machine is shared, so only ratios taken in the same minutes mean anything.
Both soaks read bytecode compiled at their first start (a one-request bench before the rounds), as
an installed soak does. Issue 34's target: the after's whole-process ratio >= 1.2x.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench.run import HUGE, Measured, nginx, soak_bench, uptime, wrk_run  # noqa: E402

CLIENTS = 50


def soak_run(soak: str, url: str, seconds: int) -> Measured:
    """`soak bench -k -c 50 -t SECONDS` at its default interval, timed by wait4."""
    return soak_bench(url, "-k", "-c", str(CLIENTS), "-t", str(seconds), "-n", HUGE, engine="native",
                      timeout=seconds * 3 + 30, soak=soak)[0]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", required=True, help="the soak executable measured first as the before")
    parser.add_argument("--after", required=True, help="the soak executable measured as the after")
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--seconds", type=int, default=10)
    args = parser.parse_args()
    ratios: dict[str, list[tuple[float, float]]] = {"before": [], "after": []}
    print("| round | soak | req/CPU-s whole (from the run's start) | wrk req/CPU-s just before | x wrk's, whole "
          "(from the run's start) | load average after |")
    print("|---|---|---|---|---|---|")
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)  # each soak reads bytecode, as an installed one does
    with nginx() as url:
        for soak in (args.before, args.after):  # the first start writes it
            soak_bench(url, "-n", "1", engine="native", timeout=60, soak=soak)
        for round_ in range(1, args.rounds + 1):
            order = ("before", "after") if round_ % 2 else ("after", "before")
            for which in order:
                wrk = wrk_run(url, CLIENTS, args.seconds)
                soak = soak_run(getattr(args, which), url, args.seconds)
                whole, run = soak.per_cpu_s / wrk.per_cpu_s, soak.per_run_cpu_s / wrk.per_cpu_s
                ratios[which].append((whole, run))
                print(f"| {round_} | {which} | {soak.per_cpu_s:,.0f} ({soak.per_run_cpu_s:,.0f}) | "
                      f"{wrk.per_cpu_s:,.0f} | {whole:.3f}x ({run:.3f}x) | {uptime()} |", flush=True)
    print()
    for which, pairs in ratios.items():
        wholes, runs = [w for w, _ in pairs], [r for _, r in pairs]
        print(f"{which}: x wrk's whole median {statistics.median(wholes):.3f} ({min(wholes):.3f}-{max(wholes):.3f}), "
              f"from the run's start {statistics.median(runs):.3f} ({min(runs):.3f}-{max(runs):.3f})")
    after_over_before = [a[0] / b[0] for a, b in zip(ratios["after"], ratios["before"], strict=True)]
    print(f"after / before, whole, per round: median {statistics.median(after_over_before):.3f} "
          f"({min(after_over_before):.3f}-{max(after_over_before):.3f})")


if __name__ == "__main__":
    main()
