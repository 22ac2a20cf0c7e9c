"""Benchmark soak's HTTP client against wrk, ab and hey, side by side, in one run.

    python bench/run.py [--seconds 10] [--soak-seconds 60] [--long-requests 1200000] [--only SECTIONS] [--repo PATH]

It installs what it needs (nginx, ab, wrk, hey from Debian, as root), starts nginx with one
worker on a free loopback port, and measures, each tool on its own:

0. new connections (no keep-alive) at c=100: soak bench against ab, -n 20,000 and the seed's
   -n 100,000: requests per second, mean Connect time from each report, CPU per request;
1. throughput at c=5 and c=50: requests per second, and requests per client CPU-second
   (the client's user + system time, from /usr/bin/time, so a tool's CPU is its own);
2. a 100 req/s soak for --soak-seconds: client CPU, peak RSS, achieved rate and the p50/p99 it
   reports, next to hey at the same rate;
3. how late sends leave against the schedule at 100, 1,000 and 10,000 req/s, default and
   precise pacing (from the runner's own sendLagUs);
4. RSS at the start and at the end of a long paced run (--long-requests requests), to show
   that memory stays flat.

Beside soak runs bench/minimal_client.py, a Python client that does nothing but send and
frame responses: the floor of any Python client on the machine, in the same minutes.

It prints a markdown table of figures and the ratios the targets are stated in. Nothing
here is asserted: the machine is shared and noisy, so compare figures from the same run.
Load goes to 127.0.0.1 only, and every load is bounded in time.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
DEBIAN_PACKAGES = {"nginx": "nginx", "ab": "apache2-utils", "wrk": "wrk", "hey": "hey"}
PAGE = b"x" * 611 + b"\n"  # 612 bytes, nginx's default page size in the seed's ab run
HUGE = "100000000"  # a request count no timed run reaches: the time limit ends it


@dataclass
class Measured:
    """One tool's figures in one scenario."""

    tool: str
    rps: float = 0.0
    cpu_s: float = 0.0
    wall_s: float = 0.0
    requests: int = 0
    rss_mib: float = 0.0
    p50_ms: float | None = None
    p99_ms: float | None = None

    @property
    def per_cpu_s(self) -> float:
        return self.requests / self.cpu_s if self.cpu_s else 0.0


# --- setup -------------------------------------------------------------------------------


def install_tools() -> None:
    missing = [package for tool, package in DEBIAN_PACKAGES.items() if not shutil.which(tool) and not
               Path(f"/usr/sbin/{tool}").exists()]
    if missing:
        print(f"installing {' '.join(missing)} from Debian", file=sys.stderr)
        subprocess.run(["apt-get", "update", "-qq"], check=True)
        subprocess.run(["apt-get", "install", "-y", "-qq", *missing], check=True, stdout=subprocess.DEVNULL)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def nginx(workers: int = 1) -> Iterator[str]:
    """nginx on a free loopback port with `workers` workers and no access log; yields its URL."""
    with tempfile.TemporaryDirectory(prefix="soak-bench-") as directory:
        root = Path(directory)
        os.chmod(root, 0o755)
        (root / "www").mkdir()
        (root / "www" / "index.html").write_bytes(PAGE)
        port = free_port()
        user = "user root;" if os.geteuid() == 0 else ""
        (root / "nginx.conf").write_text(
            f"daemon off; worker_processes {workers}; pid {root}/nginx.pid; error_log {root}/error.log; {user}\n"
            "events { worker_connections 4096; }\n"
            f"http {{ access_log off; keepalive_requests 100000000; client_body_temp_path {root}; "
            f"proxy_temp_path {root}; fastcgi_temp_path {root}; uwsgi_temp_path {root}; scgi_temp_path {root};\n"
            f"  server {{ listen 127.0.0.1:{port}; root {root}/www; }} }}\n"
        )
        binary = shutil.which("nginx") or "/usr/sbin/nginx"
        process = subprocess.Popen([binary, "-c", str(root / "nginx.conf"), "-p", str(root)])
        try:
            for _ in range(100):
                try:
                    socket.create_connection(("127.0.0.1", port), timeout=0.1).close()
                    break
                except OSError:
                    time.sleep(0.05)
            yield f"http://127.0.0.1:{port}/"
        finally:
            process.terminate()
            process.wait(timeout=10)


def timed(command: list[str], timeout: float) -> tuple[str, float, float, float]:
    """Run a command under /usr/bin/time: (stdout, CPU seconds, wall seconds, peak RSS MiB).

    /usr/bin/time is the tool's parent, so the CPU and peak RSS it reports are the tool's
    own (ru_maxrss survives exec: measured from this Python process it would be ours).
    """
    with tempfile.NamedTemporaryFile("r", suffix=".time") as report:
        done = subprocess.run(["/usr/bin/time", "-o", report.name, "-f", "%U %S %e %M", *command],
                              capture_output=True, text=True, timeout=timeout)
        if done.returncode != 0:
            raise SystemExit(f"{' '.join(command)} failed ({done.returncode}): {done.stderr.strip()[-500:]}")
        user, system, wall, rss_kib = report.read().split()[-4:]
    return done.stdout, float(user) + float(system), float(wall), int(rss_kib) / 1024


def soak_command(*args: str) -> list[str]:
    return [sys.executable, "-m", "runner", *args]


MINIMAL = "minimal Python client"


def minimal_client(url: str, *args: str, timeout: float) -> tuple[dict, float, float, float]:
    """bench/minimal_client.py under /usr/bin/time: (its JSON line, CPU s, wall s, peak RSS MiB)."""
    out, cpu, wall, rss = timed([sys.executable, str(Path(__file__).with_name("minimal_client.py")), url, *args],
                                timeout)
    return json.loads(out), cpu, wall, rss


def ab_connect_mean(out: str) -> float:
    """The mean of the Connect row of an ab-style report ("Connect:  min mean [+/-sd] median max"), in ms."""
    return float(re.search(r"^Connect:\s+\d+\s+(\d+)", out, re.MULTILINE).group(1))  # type: ignore[union-attr]


# --- 0. new connections: no keep-alive --------------------------------------------------------


def no_keep_alive(url: str, clients: int, requests: int) -> list[tuple[Measured, float | None]]:
    """soak bench, ab and the minimal client, `requests` requests over `clients` connections, a new
    connection for each.

    Returns each tool's figures and the mean Connect time (ms) its report gives (None: no report).
    """
    limit = 600
    rows: list[tuple[Measured, float | None]] = []
    out, cpu, wall, rss = timed(soak_command("bench", "-c", str(clients), "-n", str(requests), url), limit)
    done = summary_of(out)["requests"]
    rows.append((Measured("soak bench (fast)", done / wall, cpu, wall, done, rss), ab_connect_mean(out)))
    out, cpu, wall, rss = timed(["ab", "-q", "-c", str(clients), "-n", str(requests), url], limit)
    done = int(re.search(r"Complete requests:\s+(\d+)", out).group(1))  # type: ignore[union-attr]
    rows.append((Measured("ab", done / wall, cpu, wall, done, rss), ab_connect_mean(out)))
    figures, cpu, wall, rss = minimal_client(url, "-c", str(clients), "-n", str(requests), "--new", timeout=limit)
    rows.append((Measured(MINIMAL, figures["requests"] / wall, cpu, wall, figures["requests"], rss), None))
    return rows


def summary_of(output: str) -> dict:
    lines = output.splitlines()
    return json.loads("\n".join(lines[lines.index("{"):]))


# --- 1. throughput -------------------------------------------------------------------------


def throughput(url: str, clients: int, seconds: int) -> list[Measured]:
    """Every tool as fast as it can go at `clients` connections, keep-alive, for `seconds`."""
    results = []
    limit = seconds * 3 + 30
    for transport in ("fast", "httpx"):
        out, cpu, wall, rss = timed(soak_command("bench", "-k", "-c", str(clients), "-t", str(seconds), "-n", HUGE,
                                                 "--transport", transport, url), limit)
        done = summary_of(out)["requests"]
        results.append(Measured(f"soak bench ({transport})", done / wall, cpu, wall, done, rss))
    out, cpu, wall, rss = timed(["wrk", "-t1", f"-c{clients}", f"-d{seconds}s", url], limit)
    done = int(re.search(r"(\d+) requests in", out).group(1))  # type: ignore[union-attr]
    results.append(Measured("wrk -t1", done / wall, cpu, wall, done, rss))
    out, cpu, wall, rss = timed(["ab", "-q", "-k", "-c", str(clients), "-t", str(seconds), "-n", HUGE, url], limit)
    done = int(re.search(r"Complete requests:\s+(\d+)", out).group(1))  # type: ignore[union-attr]
    results.append(Measured("ab -k", done / wall, cpu, wall, done, rss))
    out, cpu, wall, rss = timed(["hey", "-c", str(clients), "-z", f"{seconds}s", url], limit)
    done = sum(int(n) for n in re.findall(r"\[\d{3}\]\s+(\d+) responses", out))
    results.append(Measured("hey", done / wall, cpu, wall, done, rss))
    figures, cpu, wall, rss = minimal_client(url, "-c", str(clients), "-t", str(seconds), timeout=limit)
    results.append(Measured(MINIMAL, figures["requests"] / wall, cpu, wall, figures["requests"], rss))
    return results


# --- 2. a 100 req/s soak -------------------------------------------------------------------


def steady(url: str, seconds: int) -> list[Measured]:
    """100 req/s from 5 clients for `seconds`: soak (each transport) and hey at the same rate."""
    results = []
    for transport in ("fast", "httpx"):
        out, cpu, wall, rss = timed(soak_command("--qps", "100", "--concurrency", "5", "--interval", "10s",
                                                 "--duration", f"{seconds}s", "--latencyUnit", "us",
                                                 "--transport", transport, url), seconds + 60)
        summary = summary_of(out)
        results.append(Measured(f"soak ({transport})", summary["rate"]["achieved"], cpu, wall, summary["requests"],
                                rss, summary["p50"] / 1000, summary["p99"] / 1000))
    out, cpu, wall, rss = timed(["hey", "-c", "5", "-q", "20", "-z", f"{seconds}s", url], seconds + 60)
    done = sum(int(n) for n in re.findall(r"\[\d{3}\]\s+(\d+) responses", out))
    p50 = float(re.search(r"50% in ([\d.]+) secs", out).group(1)) * 1000  # type: ignore[union-attr]
    p99 = float(re.search(r"99% in ([\d.]+) secs", out).group(1)) * 1000  # type: ignore[union-attr]
    results.append(Measured("hey -q 20 -c 5", done / seconds, cpu, wall, done, rss, p50, p99))
    figures, cpu, wall, rss = minimal_client(url, "-c", "5", "-t", str(seconds), "--qps", "100", timeout=seconds + 60)
    results.append(Measured(MINIMAL, figures["requests"] / seconds, cpu, wall, figures["requests"], rss,
                            figures["p50_ms"], figures["p99_ms"]))
    return results


def all_intervals_at_goal(url: str, seconds: int) -> tuple[int, int]:
    """(intervals at 100% goal, intervals) of a 100 req/s run with 5 s intervals."""
    out, *_ = timed(soak_command("--qps", "100", "--concurrency", "5", "--interval", "5s", "--duration",
                                 f"{seconds}s", url), seconds + 60)
    stats = summary_of(out)["intervalStats"]
    return sum(1 for s in stats if s["goalPercent"] == 100), len(stats)


# --- 3. send lag ---------------------------------------------------------------------------


def send_lag(url: str, qps: int, precise: bool, seconds: int) -> tuple[dict[str, float], float]:
    """The runner's own sendLagUs at `qps`, and its CPU share of one core."""
    clients = max(5, qps // 200)
    args = ["--qps", str(qps), "--concurrency", str(clients), "--interval", f"{seconds}s", "--iterations", "1", url]
    out, cpu, wall, _ = timed(soak_command(*args, *(["--precisePacing"] if precise else [])), seconds + 60)
    return summary_of(out)["sendLagUs"], cpu / wall


# --- 4. memory over a long run -------------------------------------------------------------


def long_run_memory(url: str, requests: int) -> tuple[float, float, int, float]:
    """RSS (MiB) early and at the end of a paced run of `requests` requests, the requests, the rate."""
    qps = 20_000
    seconds = max(10, requests // qps)
    process = subprocess.Popen(soak_command("--qps", str(qps), "--concurrency", "50", "--interval", "5s",
                                            "--duration", f"{seconds}s", url),
                               stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    samples = []
    deadline = time.monotonic() + seconds + 60
    while process.poll() is None and time.monotonic() < deadline:
        samples.append(rss_mib(process.pid))
        time.sleep(1)
    out, _ = process.communicate(timeout=60)
    summary = summary_of(out)
    samples = [s for s in samples if s]
    return samples[min(5, len(samples) - 1)], samples[-1], summary["requests"], summary["rate"]["achieved"]


def rss_mib(pid: int) -> float:
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return 0.0
    found = re.search(r"VmRSS:\s+(\d+) kB", status)
    return int(found.group(1)) / 1024 if found else 0.0


# --- the report ----------------------------------------------------------------------------


def machine() -> str:
    cpu = "unknown CPU"
    try:
        cpu = re.search(r"model name\s*:\s*(.+)", Path("/proc/cpuinfo").read_text()).group(1)  # type: ignore[union-attr]
    except (OSError, AttributeError):
        pass
    nginx_version = subprocess.run([shutil.which("nginx") or "/usr/sbin/nginx", "-v"], capture_output=True,
                                   text=True).stderr.strip()
    return (f"{os.cpu_count()} CPUs ({cpu}), Linux {platform.release()}, Python {platform.python_version()}, "
            f"{nginx_version} with 1 worker on loopback, 612-byte page")


def ratio(a: float, b: float) -> str:
    return f"{a / b:.2f}x" if b else "-"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=int, default=10, help="length of each throughput and lag run")
    parser.add_argument("--soak-seconds", type=int, default=60, help="length of the 100 req/s runs")
    parser.add_argument("--long-requests", type=int, default=1_200_000, help="requests in the memory run")
    parser.add_argument("--seed-requests", type=int, default=100_000, help="requests in the seed's ab experiment")
    parser.add_argument("--only", default=",".join(SECTIONS), help=f"sections to run, of {','.join(SECTIONS)}")
    parser.add_argument("--repo", type=Path, default=REPO, help="the checkout whose runner is measured (a before)")
    args = parser.parse_args()
    install_tools()
    os.chdir(args.repo)
    print(f"Machine: {machine()}\n")
    only = args.only.split(",")
    with nginx(workers=1) as url:
        if "connections" in only:
            report_no_keep_alive(url, 100, 20_000, "No keep-alive, c=100, 20,000 requests")
        if "seed" in only:
            seed = args.seed_requests
            report_no_keep_alive(url, 100, seed, f"The seed's experiment: -c 100 -n {seed:,}")
        if "throughput" in only:
            report_throughput(url, args.seconds)
        if "steady" in only:
            report_steady(url, args.soak_seconds)
        if "lag" in only:
            report_lag(url, args.seconds)
        if "memory" in only:
            report_memory(url, args.long_requests)


SECTIONS = ("connections", "seed", "throughput", "steady", "lag", "memory")


def report_no_keep_alive(url: str, clients: int, requests: int, title: str) -> None:
    print(f"## {title}\n")
    print("| client | req/s | mean Connect (ms) | client CPU per request (us) | client CPU (s) |")
    print("|---|---|---|---|---|")
    rows = no_keep_alive(url, clients, requests)
    for m, connect in rows:
        shown = "-" if connect is None else f"{connect:.0f}"
        print(f"| {m.tool} | {m.rps:,.0f} | {shown} | {1e6 * m.cpu_s / m.requests:.0f} | {m.cpu_s:.2f} |")
    (soak, soak_connect), (ab, ab_connect), (floor, _) = rows
    soak_connect = soak_connect or 0.0
    ab_connect = ab_connect or 0.0
    print()
    print(f"| target | figure | {MINIMAL} | met |")
    print("|---|---|---|---|")
    print(f"| req/s >= 0.9x ab's | {ratio(soak.rps, ab.rps)} | {ratio(floor.rps, ab.rps)} | "
          f"{'yes' if soak.rps >= 0.9 * ab.rps else 'no'} |")
    connect_ratio = f"{soak_connect / ab_connect:.2f}x" if ab_connect else f"{soak_connect:.0f} ms against 0"
    met = soak_connect <= 2 * max(ab_connect, 0.5)  # ab prints whole ms: 0 means under half of one
    print(f"| mean Connect <= 2x ab's | {connect_ratio} | - | {'yes' if met else 'no'} |")
    print()


def report_throughput(url: str, seconds: int) -> None:
    print(f"## Throughput, keep-alive, {seconds} s each\n")
    print("| client | c | req/s | requests per client CPU-second | client CPU (s) |")
    print("|---|---|---|---|---|")
    by_c = {}
    for clients in (5, 50):
        rows = throughput(url, clients, seconds)
        by_c[clients] = {m.tool: m for m in rows}
        for m in rows:
            print(f"| {m.tool} | {clients} | {m.rps:,.0f} | {m.per_cpu_s:,.0f} | {m.cpu_s:.2f} |")
    print()
    fast, wrk, hey, floor = (by_c[50][name] for name in ("soak bench (fast)", "wrk -t1", "hey", MINIMAL))
    print(f"| target at c=50 | figure | {MINIMAL} | met |")
    print("|---|---|---|---|")
    print(f"| req per client CPU-s >= 0.8x wrk's | {ratio(fast.per_cpu_s, wrk.per_cpu_s)} | "
          f"{ratio(floor.per_cpu_s, wrk.per_cpu_s)} | {'yes' if fast.per_cpu_s >= 0.8 * wrk.per_cpu_s else 'no'} |")
    print(f"| req per client CPU-s >= 1.5x hey's | {ratio(fast.per_cpu_s, hey.per_cpu_s)} | "
          f"{ratio(floor.per_cpu_s, hey.per_cpu_s)} | {'yes' if fast.per_cpu_s >= 1.5 * hey.per_cpu_s else 'no'} |")
    print(f"| max req/s >= 0.9x wrk's | {ratio(fast.rps, wrk.rps)} | {ratio(floor.rps, wrk.rps)} | "
          f"{'yes' if fast.rps >= 0.9 * wrk.rps else 'no'} |")
    print()


def report_steady(url: str, seconds: int) -> None:
    print(f"## 100 req/s, 5 clients, {seconds} s\n")
    print("| client | achieved req/s | p50 (ms) | p99 (ms) | client CPU (% of a core) | peak RSS (MiB) |")
    print("|---|---|---|---|---|---|")
    rows = steady(url, seconds)
    for m in rows:
        print(f"| {m.tool} | {m.rps:.2f} | {m.p50_ms:.3f} | {m.p99_ms:.3f} | {100 * m.cpu_s / m.wall_s:.2f} | "
              f"{m.rss_mib:.1f} |")
    at_goal, intervals = all_intervals_at_goal(url, min(seconds, 30))
    print(f"\nIntervals at 100% goal (5 s intervals): {at_goal} of {intervals}.")
    fast, hey, floor = rows[0], rows[-2], rows[-1]
    share = 100 * fast.cpu_s / fast.wall_s
    print(f"soak (fast) at 100 req/s: {share:.2f}% of a core (target at most 2.5%; slow_cooker 1.6%; "
          f"{MINIMAL} {100 * floor.cpu_s / floor.wall_s:.2f}%): {'met' if share <= 2.5 else 'not met'}.")
    print(f"soak (fast) p50 minus hey's: {(fast.p50_ms or 0.0) - (hey.p50_ms or 0.0):+.3f} ms "
          "(hey prints latencies to 0.1 ms).\n")


def report_lag(url: str, seconds: int) -> None:
    print(f"## Send lag against the schedule, {seconds} s each (fast transport)\n")
    print("| req/s | pacing | p50 (us) | p99 (us) | max (us) | client CPU (% of a core) |")
    print("|---|---|---|---|---|---|")
    for qps in (100, 1_000, 10_000):
        for precise in (False, True):
            lag, cpu = send_lag(url, qps, precise, seconds)
            print(f"| {qps:,} | {'precise' if precise else 'default'} | {lag['p50']} | {lag['p99']} | {lag['max']} | "
                  f"{100 * cpu:.1f} |")
    print()


def report_memory(url: str, requests: int) -> None:
    early, late, done, rate = long_run_memory(url, requests)
    print("## Memory over a long run (20,000 req/s, 50 clients)\n")
    print("| requests | achieved req/s | RSS after 5 s (MiB) | RSS at the end (MiB) |")
    print("|---|---|---|---|")
    print(f"| {done:,} | {rate:,.0f} | {early:.1f} | {late:.1f} |\n")


if __name__ == "__main__":
    main()
