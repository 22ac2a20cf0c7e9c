"""What Prometheus metrics cost per request: the tally alone, and whole runs with and without them.

    python bench/metrics_cost.py [--requests 300000] [--rounds 3]
    python bench/metrics_cost.py --urls 5000,40000 [--qps 1000] [--iterations 10] [--rounds 3]

1. The metrics tally's record() (what the engine's sink adds per result when metricAddr or
   pushgateway is set), timed on its own for good responses, errors and skips.
2. `soak bench -n N -c 50 -k` against nginx with one worker on loopback (bench/nginx.sh),
   with and without --metricAddr, in alternation: the runner's CPU per request from the
   summary's process.cpuSeconds, and requests per second.

With --urls, instead: what the number of URLs costs. First, in this process, the CPU that
one push or scrape takes in its thread (collect() and the text format) with that many URLs
each answered once. Then for each count, a paced soak (--qps,
concurrency 10, 1 s intervals) to that many distinct URLs of nginx, three times: without
metrics; with --metricAddr, scraped once after the first interval (the lines of /metrics
that are samples, and how long the scrape took); and with --pushgateway to a real
prometheus-pushgateway on loopback (pushes it accepted, counted from its own
pushgateway_http_requests_total). Each prints the run's goal% (summary, and its lowest
interval), p99 (the summary's, and the worst interval's), how late sends left against the
schedule (the summary's sendLagUs: a stalled event loop shows there first), peak RSS, and
wall time; with --rounds, the medians of the rounds too.

Nothing is asserted: the machine is shared and noisy, so compare figures from the same run.
Load goes to 127.0.0.1 only, and every run is bounded by its request count.
"""

from __future__ import annotations

import argparse
import json
import re
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import timeit
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from prometheus_client import CollectorRegistry, generate_latest  # noqa: E402

from runner.load.model import Closed  # noqa: E402
from runner.load.result import Result  # noqa: E402
from runner.load.schedule import Schedule, Skips  # noqa: E402
from runner.metrics.collector import Gauges, SoakCollector  # noqa: E402
from runner.metrics.tally import MetricsTally, url_slots  # noqa: E402


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def tally_cost() -> dict[str, float]:
    """Nanoseconds per record() call, best of five, for each kind of result."""
    tally = MetricsTally(url_slots(["http://a.example/", "http://b.example/"]), Closed())
    kinds = {
        "good response": Result(url_index=1, start_ns=1_000, headers_ns=351_000, end_ns=400_000, status=200),
        "bad response": Result(url_index=1, start_ns=1_000, headers_ns=351_000, end_ns=400_000, status=503),
        "failure": Result(url_index=0, error="refused", error_text="connection refused"),
        "skip": Skips(Schedule(0, 1.0, 1), 0, 0, 1),  # any number of them: one record
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


@contextmanager
def nginx_on_loopback() -> Iterator[str]:
    """bench/nginx.sh with one worker on a free port; its URL."""
    port = free_port()
    nginx = subprocess.Popen(["bash", str(REPO / "bench" / "nginx.sh"), "1", str(port)], stderr=subprocess.DEVNULL)
    try:
        wait_for(port)
        yield f"http://127.0.0.1:{port}/"
    finally:
        nginx.send_signal(signal.SIGTERM)
        nginx.wait(timeout=10)


@contextmanager
def pushgateway() -> Iterator[str]:
    """Debian's prometheus-pushgateway on a free loopback port, metrics in memory; its URL."""
    port = free_port()
    gateway = subprocess.Popen(["prometheus-pushgateway", f"--web.listen-address=127.0.0.1:{port}",
                                "--persistence.file=", "--log.level=warn"],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_for(port)
        yield f"http://127.0.0.1:{port}"
    finally:
        gateway.terminate()
        gateway.wait(timeout=10)


def wait_for(port: int, seconds: float = 10) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"nothing listening on 127.0.0.1:{port}")


def pushes_accepted(gateway: str) -> int:
    """PUTs the Pushgateway answered with 202 so far, by its own count."""
    with urllib.request.urlopen(f"{gateway}/metrics", timeout=10) as response:
        text = response.read().decode()
    found = re.findall(r'^pushgateway_http_requests_total\{code="20\d",handler="push",method="put"\} (\S+)$', text,
                       re.MULTILINE)
    return int(sum(float(n) for n in found))


@dataclass
class ManyUrls:
    """One paced run's figures, to many URLs."""

    urls: int
    metrics: str
    goal: int
    lowest_goal: int
    p99_ms: float
    worst_p99_ms: float
    lag_p99_us: float
    lag_max_us: float
    rss_mib: float
    seconds: float
    extra: str

    @property
    def row(self) -> str:
        return (f"| {self.urls:,} | {self.metrics} | {self.goal}% | {self.lowest_goal}% | {self.p99_ms:.2f} "
                f"| {self.worst_p99_ms:.2f} | {self.lag_p99_us:,.0f} | {self.lag_max_us:,.0f} | {self.rss_mib:.0f} "
                f"| {self.seconds:.1f} | {self.extra} |")


def many_urls_run(urls: Path, count: int, metrics: str, qps: int, iterations: int,
                  gateway: str = "") -> ManyUrls:
    """A paced soak to `count` URLs; metrics "off", "metricAddr" (scraped once) or "pushgateway"."""
    args = [sys.executable, "-m", "runner", "--qps", str(qps), "--concurrency", "10", "--interval", "1s",
            "--iterations", str(iterations), "--latencyUnit", "us", "--urls", str(urls)]
    port = free_port()
    if metrics == "metricAddr":
        args += ["--metricAddr", f"127.0.0.1:{port}"]
    elif metrics == "pushgateway":
        args += ["--pushgateway", gateway, "--pushgatewayJob", f"bench-{count}"]
    before = pushes_accepted(gateway) if gateway else 0
    started = time.monotonic()
    process = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO)
    extra = ""
    if metrics == "metricAddr":
        extra = scrape_once(port, process)
    out, err = process.communicate(timeout=600)
    seconds = time.monotonic() - started
    lines = out.splitlines()
    summary = json.loads("\n".join(lines[lines.index("{"):]))
    if metrics == "pushgateway":
        extra = f"{pushes_accepted(gateway) - before} of {summary['intervals'] + 1} pushes accepted"
        complaints = [line for line in err.splitlines() if "pushgateway" in line]
        if complaints:
            extra += f"; {len(complaints)} stderr lines"
    return ManyUrls(count, metrics, summary["goalPercent"], min(i["goalPercent"] for i in summary["intervalStats"]),
                    summary["p99"] / 1000, max(i["p99"] for i in summary["intervalStats"]) / 1000,
                    summary["sendLagUs"]["p99"], summary["sendLagUs"]["max"],
                    summary["process"]["maxRssBytes"] / 2**20, seconds, extra)


def scrape_once(port: int, process: subprocess.Popen[str]) -> str:
    """Scrape /metrics once, 1.5 s after it opens (the run's start): its sample lines and how long it took."""
    wait_for(port, 120)
    time.sleep(1.5)
    started = time.monotonic()
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=300) as response:
            text = response.read().decode()
    except OSError as e:
        return f"scrape failed after {time.monotonic() - started:.1f} s: {e}"
    samples = sum(1 for line in text.splitlines() if line and not line.startswith("#"))
    return f"{samples:,} samples in /metrics, scraped in {time.monotonic() - started:.2f} s"


def push_work(count: int, pushes: int = 20) -> tuple[int, float]:
    """(samples, CPU ms) of what a push or a scrape does in its thread, collect() and the text format,
    for `count` URLs each answered once (best of `pushes`): the time it may hold the GIL."""
    slots = url_slots([f"http://127.0.0.1:8080/?n={n}" for n in range(count)])
    tally = MetricsTally(slots, Closed())
    for n in range(count):
        tally.record(Result(url_index=n, start_ns=0, headers_ns=300_000 + n, end_ns=400_000, status=200 + n % 400))
    registry = CollectorRegistry(auto_describe=False)
    registry.register(SoakCollector(tally, Gauges(), slots))
    times = []
    for _ in range(pushes):
        started = time.thread_time()
        text = generate_latest(registry)
        times.append((time.thread_time() - started) * 1e3)
    samples = sum(1 for line in text.decode().splitlines() if line and not line.startswith("#"))
    return samples, min(times)


def many_urls(counts: list[int], qps: int, iterations: int, rounds: int) -> None:
    print("| URLs | samples | CPU per push or scrape, best of 20 (ms) |\n|---|---|---|")
    for count in counts:
        samples, ms = push_work(count)
        print(f"| {count:,} | {samples:,} | {ms:.2f} |")
    print(f"\npaced soak, --qps {qps} -c 10, {iterations} intervals of 1 s, to N distinct URLs of nginx\n")
    print("| URLs | metrics | goal% | lowest interval goal% | p99 (ms) | worst interval p99 (ms) | send lag p99 (us) "
          "| send lag max (us) | peak RSS (MiB) | wall (s) | |\n|---|---|---|---|---|---|---|---|---|---|---|")
    runs: dict[tuple[int, str], list[ManyUrls]] = {}
    with nginx_on_loopback() as base, pushgateway() as gateway, tempfile.TemporaryDirectory() as tmp:
        for _ in range(rounds):
            for count in counts:
                urls = Path(tmp) / f"urls-{count}.txt"
                urls.write_text("".join(f"{base}?n={n}\n" for n in range(count)))
                for metrics in ("off", "metricAddr", "pushgateway"):
                    run = many_urls_run(urls, count, metrics, qps, iterations, gateway)
                    runs.setdefault((count, metrics), []).append(run)
                    print(run.row, flush=True)
    if rounds > 1:
        print(f"\nmedians of {rounds} rounds\n")
        print("| URLs | metrics | goal% | lowest interval goal% | p99 (ms) | worst interval p99 (ms) | send lag p99 "
              "(us) | send lag max (us) | peak RSS (MiB) | wall (s) | |\n|---|---|---|---|---|---|---|---|---|---|---|")
        for (count, metrics), found in runs.items():
            print(median_run(count, metrics, found).row)


def median_run(count: int, metrics: str, runs: list[ManyUrls]) -> ManyUrls:
    def median(field: str) -> float:
        return statistics.median(getattr(run, field) for run in runs)

    extras = list(dict.fromkeys(run.extra for run in runs))
    return ManyUrls(count, metrics, round(median("goal")), round(median("lowest_goal")), median("p99_ms"),
                    median("worst_p99_ms"), median("lag_p99_us"), median("lag_max_us"), median("rss_mib"),
                    median("seconds"), " / ".join(extras))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=300_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--urls", help="URL counts, comma-separated: measure what many URLs cost instead")
    parser.add_argument("--qps", type=int, default=1000)
    parser.add_argument("--iterations", type=int, default=10)
    args = parser.parse_args()
    if args.urls:
        many_urls([int(n) for n in args.urls.split(",")], args.qps, args.iterations, args.rounds)
        return

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
