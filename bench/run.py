"""Benchmark soak's two engines against wrk, ab and hey, side by side, in one run.

    python bench/run.py [--rounds 5] [--seconds 10] [--soak-seconds 60] [--long-requests 1200000]
                        [--only SECTIONS] [--repo PATH]

It installs what it needs (nginx, ab, wrk, hey from Debian, as root), starts nginx with one
worker on a free loopback port, and measures soak's native engine (`--engine native`: C, its
own thread) and its Python engine (`--engine python`: asyncio and httpx) beside
the other tools (soak from this checkout, its bytecode compiled once as an installed soak's
is). Where a target of issue 22 compares the native engine with a tool, the two
run in interleaved pairs (A B A B, --rounds of them), each pair's ratio printed with `uptime`
beside it, and the median of the ratios is the figure: the machine is shared, so only
figures from the same minutes are compared.

0. new connections (no keep-alive) at c=100: soak bench on each engine against ab, -n 20,000
   and the seed's -n 100,000: requests per second, mean Connect time, CPU per request;
1. throughput at c=5 and c=50: requests per second, and requests per client CPU-second
   (the client's user + system time, its own: wait4's for the child), soak at bench's default
   1 s intervals (issue 34's target is stated at them);
2. callgrind: user-space instructions per keep-alive request at c=50, a run of 5,000 requests
   minus a run of 500, divided by 4,500 (the native engine: 50,000 minus 5,000; wrk: by
   duration), the one figure that repeats on a shared machine; the engine thread's share beside it;
3. the fixed costs beside those per request (issue 34): an interval close and the run's end in
   the main thread (callgrind split by thread, and thread_time), and a 1 s-interval bench's
   requests per CPU-second against a 70 s-interval one's, in --rounds interleaved pairs
   (bench/native_cost.py's section 5; it measures the checkout it sits in, whatever --repo says);
4. start-up (issue 34): CPU of `soak --help` and `soak bench -n 1`, 11 rounds of each beside
   hey's and ab's one request and `python -c pass` (bench/startup_cost.py --cpu);
5. a 100 req/s soak for --soak-seconds from 5 clients: client CPU after start-up (soak's
   summary's process.cpuSeconds, from its run's start; hey's whole CPU, a few ms of it its
   start), RSS after 5 s and at the end, achieved rate and p50/p99, next to hey at that rate;
6. how late sends leave against the schedule at 100, 1,000 and 10,000 req/s, default and
   precise pacing (from the runner's own sendLagUs), on each engine;
7. RSS at the start and at the end of a long paced run (--long-requests requests);
8. HTTPS (issue 34), against nginx with TLS on another loopback port (a self-signed certificate
   for 127.0.0.1 made with `openssl req`, soak's --caBundle; wrk and hey verify nothing):
   keep-alive at c=50, requests per client CPU-second, the native engine and `wrk -t1` in
   interleaved pairs; and 100 req/s from 5 clients for --soak-seconds, the native engine's CPU
   after start-up and hey's in interleaved pairs, the Python engine once beside them;
9. rate shapes (issue 34): CPU per request of `--stages 10s:100,50s:100` and of `--warmup 10s`
   beside a plain 100 req/s run of the same length, all on the native engine, interleaved
   (the 10 s and 50 s scale with --soak-seconds).

Beside them runs bench/minimal_client.py, a Python client that does nothing but send and
frame responses: the floor of any Python client on the machine, in the same minutes.

It prints markdown tables and the ratios the targets are stated in. Nothing here is
asserted. Load goes to 127.0.0.1 only, and every load is bounded in time or count.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
DEBIAN_PACKAGES = {"nginx": "nginx", "ab": "apache2-utils", "wrk": "wrk", "hey": "hey"}
PAGE = b"x" * 611 + b"\n"  # 612 bytes, nginx's default page size in the seed's ab run
HUGE = "100000000"  # a request count no timed run reaches: the time limit ends it
ENGINES = ("native", "python")
PYTHON_REQUESTS = 10_000  # at most, a no-keep-alive run of the Python engine (no_keep_alive)
NATIVE, PYTHON = (f"soak --engine {engine}" for engine in ENGINES)


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
    run_cpu_s: float | None = None  # soak's: its CPU from its run's start (process.cpuSeconds), start-up left out

    @property
    def per_cpu_s(self) -> float:
        return self.requests / self.cpu_s if self.cpu_s else 0.0

    @property
    def per_run_cpu_s(self) -> float:
        """Requests per CPU-second after start-up (soak), or of the whole process (any other tool)."""
        cpu = self.cpu_s if self.run_cpu_s is None else self.run_cpu_s
        return self.requests / cpu if cpu else 0.0


# --- setup -------------------------------------------------------------------------------


def install_tools() -> None:
    missing = [package for tool, package in DEBIAN_PACKAGES.items() if not shutil.which(tool) and not
               Path(f"/usr/sbin/{tool}").exists()]
    if missing:
        print(f"installing {' '.join(missing)} from Debian", file=sys.stderr)
        subprocess.run(["apt-get", "update", "-qq"], check=True)
        subprocess.run(["apt-get", "install", "-y", "-qq", *missing], check=True, stdout=subprocess.DEVNULL)


def bytecode_as_installed(repo: Path) -> None:
    """Let every soak this run starts read compiled bytecode, as an installed soak does.

    `pip install .` (the image) compiles soak's source once; a checkout run with
    PYTHONDONTWRITEBYTECODE=1, as this machine's environment sets it, compiles all of it again at
    every start: about 60 ms of CPU, 2% of a 10 s keep-alive run, that no user pays. The checkout's
    __pycache__ directories are ignored by git.
    """
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(repo / "runner")], check=True)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def tls_files() -> Iterator[tuple[Path, Path]]:
    """A self-signed certificate for 127.0.0.1 and its key (openssl req), for nginx, and as soak's CA bundle."""
    with tempfile.TemporaryDirectory(prefix="soak-bench-tls-") as directory:
        cert, key = Path(directory) / "cert.pem", Path(directory) / "key.pem"
        subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
                        "-keyout", str(key), "-out", str(cert), "-days", "2", "-subj", "/CN=127.0.0.1",
                        "-addext", "subjectAltName=IP:127.0.0.1"], check=True, capture_output=True)
        os.chmod(directory, 0o755)
        os.chmod(key, 0o644)
        yield cert, key


@contextmanager
def nginx(workers: int = 1, tls: tuple[Path, Path] | None = None) -> Iterator[str]:
    """nginx on a free loopback port with `workers` workers and no access log; yields its URL
    (https, with TLS 1.2 and 1.3 and `tls`'s certificate and key, when given)."""
    with tempfile.TemporaryDirectory(prefix="soak-bench-") as directory:
        root = Path(directory)
        os.chmod(root, 0o755)
        (root / "www").mkdir()
        (root / "www" / "index.html").write_bytes(PAGE)
        port = free_port()
        user = "user root;" if os.geteuid() == 0 else ""
        ssl = "" if tls is None else (f" ssl; ssl_certificate {tls[0]}; ssl_certificate_key {tls[1]}; "
                                      "ssl_protocols TLSv1.2 TLSv1.3")
        (root / "nginx.conf").write_text(
            f"daemon off; worker_processes {workers}; pid {root}/nginx.pid; error_log {root}/error.log; {user}\n"
            "events { worker_connections 4096; }\n"
            f"http {{ access_log off; keepalive_requests 100000000; client_body_temp_path {root}; "
            f"proxy_temp_path {root}; fastcgi_temp_path {root}; uwsgi_temp_path {root}; scgi_temp_path {root};\n"
            f"  server {{ listen 127.0.0.1:{port}{ssl}; root {root}/www; }} }}\n"
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
            yield f"{'http' if tls is None else 'https'}://127.0.0.1:{port}/"
        finally:
            process.terminate()
            process.wait(timeout=10)


def timed(command: list[str], timeout: float) -> tuple[str, float, float, float]:
    """Run a command: (stdout, CPU seconds, wall seconds, peak RSS MiB), the tool's own.

    The child is reaped with wait4, so its CPU and peak RSS are its own (ru_maxrss survives
    exec) and the CPU is in microseconds: /usr/bin/time prints it in 10 ms steps, 2% of a
    -n 20,000 run.
    """
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        started = time.perf_counter()
        process = subprocess.Popen(command, stdout=out, stderr=err, text=True)
        watchdog = threading.Timer(timeout, process.kill)  # bounded in time, whatever the tool does
        watchdog.start()
        try:
            _, status, usage = os.wait4(process.pid, 0)
        finally:
            watchdog.cancel()
        wall = time.perf_counter() - started
        process.returncode = os.waitstatus_to_exitcode(status)  # reaped here: Popen must not wait for it
        out.seek(0)
        err.seek(0)
        if process.returncode != 0:
            raise SystemExit(f"{' '.join(command)} failed ({process.returncode}): {err.read().strip()[-500:]}")
        return out.read(), usage.ru_utime + usage.ru_stime, wall, usage.ru_maxrss / 1024


def soak_command(*args: str) -> list[str]:
    return [sys.executable, "-m", "runner", *args]


MINIMAL = "minimal Python client"


def minimal_client(url: str, *args: str, timeout: float) -> tuple[dict, float, float, float]:
    """bench/minimal_client.py timed: (its JSON line, CPU s, wall s, peak RSS MiB)."""
    out, cpu, wall, rss = timed([sys.executable, str(Path(__file__).with_name("minimal_client.py")), url, *args],
                                timeout)
    return json.loads(out), cpu, wall, rss


def ab_connect_mean(out: str) -> float:
    """The mean of the Connect row of an ab-style report ("Connect:  min mean [+/-sd] median max"), in ms."""
    return float(re.search(r"^Connect:\s+\d+\s+(\d+)", out, re.MULTILINE).group(1))  # type: ignore[union-attr]


# --- 0. new connections: no keep-alive --------------------------------------------------------


def soak_bench(url: str, *args: str, engine: str, timeout: float,
               soak: str | None = None) -> tuple[Measured, dict, str]:
    """`soak bench ARGS URL` on one engine, timed: its figures, its summary, its output. `soak`: an
    executable to run (another checkout's, for a before and after), else this tree's."""
    command = [soak, "bench"] if soak is not None else soak_command("bench")
    out, cpu, wall, rss = timed([*command, *args, "--engine", engine, url], timeout)
    summary = summary_of(out)
    return Measured(soak or f"soak --engine {engine}", summary["requests"] / wall, cpu, wall, summary["requests"], rss,
                    run_cpu_s=summary["process"]["cpuSeconds"]), summary, out


def ab_run(url: str, *args: str, timeout: float) -> tuple[Measured, str]:
    out, cpu, wall, rss = timed(["ab", "-q", *args, url], timeout)
    done = int(re.search(r"Complete requests:\s+(\d+)", out).group(1))  # type: ignore[union-attr]
    return Measured("ab -k" if "-k" in args else "ab", done / wall, cpu, wall, done, rss), out


@dataclass
class Pair:
    """One round of two tools run back to back, and the load average after it."""

    a: Measured
    b: Measured
    uptime: str


def no_keep_alive(url: str, clients: int, requests: int, rounds: int) -> tuple[list[Pair], list[Measured]]:
    """The native engine and ab in `rounds` interleaved pairs, then the Python engine and the
    minimal client once each: `requests` requests over `clients` connections, a new one for each."""
    limit = 600
    args = ("-c", str(clients), "-n", str(requests))
    pairs = []
    for _ in range(rounds):
        native, _, _ = soak_bench(url, *args, engine="native", timeout=limit)
        ab, _ = ab_run(url, *args, timeout=limit)
        pairs.append(Pair(native, ab, uptime()))
    # The Python engine (httpx) makes a few hundred new connections a second: a share of the run
    # does for its per-request figures, where all of -n 100,000 would outlast the limit.
    python_args = ("-c", str(clients), "-n", str(min(requests, PYTHON_REQUESTS)))
    python, _, _ = soak_bench(url, *python_args, engine="python", timeout=limit)
    figures, cpu, wall, rss = minimal_client(url, *args, "--new", timeout=limit)
    return pairs, [python, Measured(MINIMAL, figures["requests"] / wall, cpu, wall, figures["requests"], rss)]


def uptime() -> str:
    """The load average now, as `uptime` says it: beside every figure, for the machine is shared."""
    out = subprocess.run(["uptime"], capture_output=True, text=True).stdout
    return out.split("load average:")[-1].strip()


def median_ratio(pairs: list[Pair], figure: str) -> float:
    return statistics.median(getattr(p.a, figure) / getattr(p.b, figure) for p in pairs)


def cpu_per_request_us(m: Measured) -> float:
    return 1e6 * m.cpu_s / m.requests if m.requests else 0.0


def run_cpu_per_request_us(m: Measured) -> float:
    """CPU per request after start-up (soak), or of the whole process (any other tool)."""
    return 1e6 / m.per_run_cpu_s if m.per_run_cpu_s else 0.0


def summary_of(output: str) -> dict:
    lines = output.splitlines()
    return json.loads("\n".join(lines[lines.index("{"):]))


# --- 1. throughput -------------------------------------------------------------------------


def wrk_run(url: str, clients: int, seconds: int) -> Measured:
    out, cpu, wall, rss = timed(["wrk", "-t1", f"-c{clients}", f"-d{seconds}s", url], seconds * 3 + 30)
    done = int(re.search(r"(\d+) requests in", out).group(1))  # type: ignore[union-attr]
    return Measured("wrk -t1", done / wall, cpu, wall, done, rss)


def throughput(url: str, clients: int, seconds: int, rounds: int) -> tuple[list[Pair], list[Measured]]:
    """Every tool as fast as it can go at `clients` connections, keep-alive, for `seconds`: the
    native engine and wrk in `rounds` interleaved pairs, then the others once each."""
    limit = seconds * 3 + 30
    args = ("-k", "-c", str(clients), "-t", str(seconds), "-n", HUGE)  # bench's default 1 s intervals, as users run it
    pairs = []
    for _ in range(rounds):
        native, _, _ = soak_bench(url, *args, engine="native", timeout=limit)
        pairs.append(Pair(native, wrk_run(url, clients, seconds), uptime()))
    others = [soak_bench(url, *args, engine="python", timeout=limit)[0]]
    others.append(ab_run(url, "-k", "-c", str(clients), "-t", str(seconds), "-n", HUGE, timeout=limit)[0])
    out, cpu, wall, rss = timed(["hey", "-c", str(clients), "-z", f"{seconds}s", url], limit)
    done = sum(int(n) for n in re.findall(r"\[\d{3}\]\s+(\d+) responses", out))
    others.append(Measured("hey", done / wall, cpu, wall, done, rss))
    figures, cpu, wall, rss = minimal_client(url, "-c", str(clients), "-t", str(seconds), timeout=limit)
    others.append(Measured(MINIMAL, figures["requests"] / wall, cpu, wall, figures["requests"], rss))
    return pairs, others


# --- 2. instructions per request (callgrind) ---------------------------------------------------


def instructions(command: list[str], timeout: float = 900) -> tuple[int, str]:
    """User-space instructions of a whole command, as callgrind counts them, and its stdout."""
    whole, _, out = instructions_and_threads(command, timeout)
    return whole, out


def instructions_and_threads(command: list[str], timeout: float = 900) -> tuple[int, int, str]:
    """(the whole command's instructions, those of the threads it started, its stdout): the
    native engine's thread is the only one soak starts, so the second is the engine's own."""
    with tempfile.TemporaryDirectory() as directory:
        profile = Path(directory) / "callgrind.out"
        done = subprocess.run(["valgrind", "--tool=callgrind", f"--callgrind-out-file={profile}", *command],
                              capture_output=True, text=True, timeout=timeout,
                              env={**os.environ, "PYTHONHASHSEED": "0"})
        found = re.search(r"Collected : (\d+)", done.stderr)
        if done.returncode != 0 or found is None:
            raise SystemExit(f"callgrind failed on {' '.join(command[:4])}: {done.stderr[-2000:]}")
        annotated = subprocess.run(["callgrind_annotate", "--inclusive=yes", "--threshold=100", str(profile)],
                                   capture_output=True, text=True).stdout
    thread = re.search(r"^\s*([\d,]+) .*:start_thread ", annotated, re.MULTILINE)
    return int(found.group(1)), int(thread.group(1).replace(",", "")) if thread else 0, done.stdout


NATIVE_BIG, NATIVE_SMALL = 50_000, 5_000  # the native engine's runs for its instructions per request


def per_request_instructions(url: str, big: int = 5000, small: int = 500, repeats: int = 3) -> list[tuple[str, float]]:
    """(client, instructions per keep-alive request at c=50): a run of `big` requests minus one of
    `small` (soak and the minimal client: medians of `repeats`, Python's start and end move by
    about a million instructions run to run; ab once, it repeats; wrk by duration)."""
    def soak_runs(engine: str, n: int) -> tuple[int, int]:
        whole, thread, _ = instructions_and_threads(soak_command("bench", "-k", "-c", "50", "-n", str(n),
                                                                 "--interval", "1h", "--engine", engine, url))
        return whole, thread

    # The native engine's runs are ten times longer: its whole process costs about 1,000 M
    # instructions, most of them Python's start and end, which move by tens of millions run to
    # run (a run of 5,000 once counted fewer than one of 500), about 6,000 a request at 4,500.
    native = {n: [soak_runs("native", n) for _ in range(repeats)] for n in (NATIVE_BIG, NATIVE_SMALL)}

    def soak(engine: str, n: int) -> int:
        return instructions(soak_command("bench", "-k", "-c", "50", "-n", str(n), "--interval", "1h",
                                         "--engine", engine, url))[0]

    def minimal(n: int) -> int:
        return instructions([sys.executable, str(Path(__file__).with_name("minimal_client.py")), url, "-c", "50",
                             "-n", str(n)])[0]

    def ab(n: int) -> int:
        return instructions(["ab", "-q", "-k", "-c", "50", "-n", str(n), url])[0]

    def difference(count: object, times: int) -> float:
        runs = {n: statistics.median(count(n) for _ in range(times)) for n in (big, small)}  # type: ignore[operator]
        return (runs[big] - runs[small]) / (big - small)

    def median_of(n: int, which: int) -> float:
        return statistics.median(run[which] for run in native[n])

    apart = NATIVE_BIG - NATIVE_SMALL
    rows = [(f"{NATIVE} (n={NATIVE_BIG:,} minus n={NATIVE_SMALL:,})",
             (median_of(NATIVE_BIG, 0) - median_of(NATIVE_SMALL, 0)) / apart),
            (f"{NATIVE}, its engine thread alone (the same runs)",
             (median_of(NATIVE_BIG, 1) - median_of(NATIVE_SMALL, 1)) / apart),
            (PYTHON, difference(lambda n: soak("python", n), 1))]
    (i1, out1), (i4, out4) = (instructions(["wrk", "-t1", "-c50", f"-d{d}s", url]) for d in (1, 4))
    r1, r4 = (int(re.search(r"(\d+) requests in", out).group(1)) for out in (out1, out4))  # type: ignore[union-attr]
    rows.append((f"wrk -t1 ({r4:,} minus {r1:,} requests)", (i4 - i1) / (r4 - r1)))
    rows.append(("ab -k", difference(ab, 1)))
    rows.append((MINIMAL, difference(minimal, repeats)))
    return rows


# --- 3. a 100 req/s soak -------------------------------------------------------------------


@dataclass
class Steady:
    """One 100 req/s run: its figures, CPU after start-up, RSS after 5 s and at the end."""

    m: Measured
    cpu_after_start_s: float
    rss_early_mib: float
    rss_end_mib: float


def soak_steady(url: str, engine: str, seconds: int, *extra: str, shape: tuple[str, ...] = ()) -> Steady:
    """soak at 100 req/s from 5 clients for `seconds` on one engine, its RSS sampled once a second;
    `shape`: the rate's settings instead of a constant 100 req/s for `seconds` (stages, say)."""
    rate = shape or ("--qps", "100", "--duration", f"{seconds}s")
    command = soak_command(*rate, "--concurrency", "5", "--interval", "10s", "--latencyUnit", "us", "--engine", engine,
                           *extra, url)
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    started = time.monotonic()
    samples = []
    while process.poll() is None and time.monotonic() < started + seconds + 60:
        samples.append(rss_mib(process.pid))
        time.sleep(1)
    out, err = process.communicate(timeout=60)
    wall = time.monotonic() - started
    if "\n{\n" not in out:
        raise SystemExit(f"soak --engine {engine} at 100 req/s printed no summary (exit {process.returncode}): "
                         f"{err[-2000:]}")
    summary = summary_of(out)
    samples = [x for x in samples if x] or [0.0]
    cpu = summary["process"]["cpuSeconds"]
    m = Measured(f"soak --engine {engine}", summary["rate"]["achieved"], cpu, wall, summary["requests"],
                 max(samples), summary["p50"] / 1000, summary["p99"] / 1000)
    return Steady(m, cpu, samples[min(5, len(samples) - 1)], samples[-1])


def hey_steady(url: str, seconds: int) -> Measured:
    out, cpu, wall, rss = timed(["hey", "-c", "5", "-q", "20", "-z", f"{seconds}s", url], seconds + 60)
    done = sum(int(n) for n in re.findall(r"\[\d{3}\]\s+(\d+) responses", out))
    p50 = float(re.search(r"50% in ([\d.]+) secs", out).group(1)) * 1000  # type: ignore[union-attr]
    p99 = float(re.search(r"99% in ([\d.]+) secs", out).group(1)) * 1000  # type: ignore[union-attr]
    return Measured("hey -q 20 -c 5", done / seconds, cpu, wall, done, rss, p50, p99)


def steady(url: str, seconds: int, rounds: int) -> tuple[list[tuple[Steady, Measured, str]], Steady, Measured]:
    """100 req/s from 5 clients for `seconds`: the native engine and hey in `rounds` interleaved
    pairs, then the Python engine and the minimal client once each."""
    pairs = []
    for _ in range(rounds):
        native = soak_steady(url, "native", seconds)
        pairs.append((native, hey_steady(url, seconds), uptime()))
    python = soak_steady(url, "python", seconds)
    figures, cpu, wall, rss = minimal_client(url, "-c", "5", "-t", str(seconds), "--qps", "100", timeout=seconds + 60)
    floor = Measured(MINIMAL, figures["requests"] / seconds, cpu, wall, figures["requests"], rss,
                     figures["p50_ms"], figures["p99_ms"])
    return pairs, python, floor


def all_intervals_at_goal(url: str, seconds: int) -> tuple[int, int]:
    """(intervals at 100% goal, intervals) of a 100 req/s run with 5 s intervals."""
    out, *_ = timed(soak_command("--qps", "100", "--concurrency", "5", "--interval", "5s", "--duration",
                                 f"{seconds}s", url), seconds + 60)
    stats = summary_of(out)["intervalStats"]
    return sum(1 for s in stats if s["goalPercent"] == 100), len(stats)


# --- 4. send lag ---------------------------------------------------------------------------


def send_lag(url: str, qps: int, precise: bool, seconds: int, engine: str) -> tuple[dict[str, float], float]:
    """The runner's own sendLagUs at `qps` on one engine, and its CPU share of one core."""
    clients = max(5, qps // 200)
    args = ["--qps", str(qps), "--concurrency", str(clients), "--interval", f"{seconds}s", "--iterations", "1",
            "--engine", engine, url]
    out, cpu, wall, _ = timed(soak_command(*args, *(["--precisePacing"] if precise else [])), seconds + 60)
    return summary_of(out)["sendLagUs"], cpu / wall


# --- 5. memory over a long run -------------------------------------------------------------


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
    parser.add_argument("--rounds", type=int, default=5, help="interleaved pairs where the native engine meets a tool")
    parser.add_argument("--steady-rounds", type=int, default=2, help="interleaved pairs of the 100 req/s runs")
    parser.add_argument("--seconds", type=int, default=10, help="length of each throughput and lag run")
    parser.add_argument("--soak-seconds", type=int, default=60, help="length of the 100 req/s runs")
    parser.add_argument("--long-requests", type=int, default=1_200_000, help="requests in the memory run")
    parser.add_argument("--seed-requests", type=int, default=100_000, help="requests in the seed's ab experiment")
    parser.add_argument("--only", default=",".join(SECTIONS), help=f"sections to run, of {','.join(SECTIONS)}")
    parser.add_argument("--repo", type=Path, default=REPO, help="the checkout whose runner is measured (a before)")
    args = parser.parse_args()
    install_tools()
    os.chdir(args.repo)
    bytecode_as_installed(args.repo)
    print(f"Machine: {machine()}; load average at the start {uptime()}\n")
    only = args.only.split(",")
    with nginx(workers=1) as url:
        if "connections" in only:
            report_no_keep_alive(url, 100, 20_000, args.rounds, "No keep-alive, c=100, 20,000 requests")
        if "seed" in only:
            seed = args.seed_requests
            report_no_keep_alive(url, 100, seed, args.rounds, f"The seed's experiment: -c 100 -n {seed:,}")
        if "throughput" in only:
            report_throughput(url, args.seconds, args.rounds)
        if "callgrind" in only:
            report_instructions(url)
        if "closes" in only:
            report_closes(url, args.seconds, args.rounds)
        if "startup" in only:
            report_startup(url)
        if "steady" in only:
            report_steady(url, args.soak_seconds, args.steady_rounds)
        if "lag" in only:
            report_lag(url, args.seconds)
        if "memory" in only:
            report_memory(url, args.long_requests)
        if "shapes" in only:
            report_shapes(url, args.soak_seconds, args.steady_rounds)
    if "https" in only:
        with tls_files() as (cert, key), nginx(workers=1, tls=(cert, key)) as url:
            report_https(url, cert, args.seconds, args.soak_seconds, args.rounds, args.steady_rounds)


SECTIONS = ("connections", "seed", "throughput", "callgrind", "closes", "startup", "steady", "lag", "memory", "shapes",
            "https")


def met(ok: bool) -> str:
    return "yes" if ok else "no"


def report_no_keep_alive(url: str, clients: int, requests: int, rounds: int, title: str) -> None:
    print(f"## {title}\n")
    pairs, others = no_keep_alive(url, clients, requests, rounds)
    print(f"| round | {NATIVE} req/s | ab req/s | req/s x ab's | {NATIVE} CPU/req, whole (after start-up) (us) | "
          "ab CPU/req (us) | CPU/req x ab's, whole (after start-up) | load average after |")
    print("|---|---|---|---|---|---|---|---|")
    for r, p in enumerate(pairs, 1):
        a, b = cpu_per_request_us(p.a), cpu_per_request_us(p.b)
        run = run_cpu_per_request_us(p.a)
        print(f"| {r} | {p.a.rps:,.0f} | {p.b.rps:,.0f} | {ratio(p.a.rps, p.b.rps)} | {a:.1f} ({run:.1f}) | {b:.1f} | "
              f"{ratio(a, b)} ({ratio(run, b)}) | {p.uptime} |")
    print("\n| client, once after the pairs | requests | req/s | client CPU per request, whole (after start-up) (us) | "
          "x ab's (median) |")
    print("|---|---|---|---|---|")
    ab_cpu = statistics.median(cpu_per_request_us(p.b) for p in pairs)
    for m in others:
        each, after_start = cpu_per_request_us(m), run_cpu_per_request_us(m)
        print(f"| {m.tool} | {m.requests:,} | {m.rps:,.0f} | {each:.1f} ({after_start:.1f}) | {ratio(each, ab_cpu)} |")
    cpu_x = statistics.median(cpu_per_request_us(p.a) / cpu_per_request_us(p.b) for p in pairs)
    run_x = statistics.median(run_cpu_per_request_us(p.a) / cpu_per_request_us(p.b) for p in pairs)
    rps_x = median_ratio(pairs, "rps")
    print("\n| target (medians of the pairs' ratios) | figure | met |")
    print("|---|---|---|")
    print(f"| client CPU per request <= 1.0x ab's (whole process) | {cpu_x:.2f}x | {met(cpu_x <= 1.0)} |")
    print(f"| the same, soak's from its run's start | {run_x:.2f}x | {met(run_x <= 1.0)} |")
    print(f"| req/s >= 0.95x ab's (soak's over its whole process's wall time) | {rps_x:.2f}x | {met(rps_x >= 0.95)} |")
    print("\nWhole: the process's own (wait4), Python's start and exit included; after "
          "start-up: soak's summary's process.cpuSeconds.\n", flush=True)


def print_wrk_pairs(pairs: list[Pair]) -> None:
    """The keep-alive table of soak's rounds beside wrk's, one row a pair, plain HTTP and HTTPS alike."""
    print(f"| round | {NATIVE} req/s | {NATIVE} req/CPU-s, whole (after start-up) | wrk req/s | wrk req/CPU-s | "
          "req/CPU-s x wrk's, whole (after start-up) | load average after |")
    print("|---|---|---|---|---|---|---|")
    for r, p in enumerate(pairs, 1):
        print(f"| {r} | {p.a.rps:,.0f} | {p.a.per_cpu_s:,.0f} ({p.a.per_run_cpu_s:,.0f}) | {p.b.rps:,.0f} | "
              f"{p.b.per_cpu_s:,.0f} | {ratio(p.a.per_cpu_s, p.b.per_cpu_s)} "
              f"({ratio(p.a.per_run_cpu_s, p.b.per_cpu_s)}) | {p.uptime} |")


def report_throughput(url: str, seconds: int, rounds: int) -> None:
    print(f"## Throughput, keep-alive, {seconds} s each\n")
    for clients in (50, 5):
        pairs, others = throughput(url, clients, seconds, rounds if clients == 50 else 1)
        print(f"### c={clients}\n")
        print_wrk_pairs(pairs)
        wrk_cpu = statistics.median(p.b.per_cpu_s for p in pairs)
        print("\n| client, once after the pairs | req/s | requests per client CPU-second, whole (after start-up) | "
              "x wrk's (median) |")
        print("|---|---|---|---|")
        for m in others:
            print(f"| {m.tool} | {m.rps:,.0f} | {m.per_cpu_s:,.0f} ({m.per_run_cpu_s:,.0f}) | "
                  f"{ratio(m.per_cpu_s, wrk_cpu)} |")
        if clients == 50:
            x = median_ratio(pairs, "per_cpu_s")
            run_x = statistics.median(p.a.per_run_cpu_s / p.b.per_cpu_s for p in pairs)
            print("\n| target (median of the pairs' ratios) | figure | met |")
            print("|---|---|---|")
            print(f"| requests per client CPU-second >= 1.2x wrk -t1's (whole process) | {x:.2f}x | {met(x >= 1.2)} |")
            print(f"| the same, soak's from its run's start | {run_x:.2f}x | {met(run_x >= 1.2)} |")
        print("\nWhole: the process's own (wait4), Python's start and exit included; after "
              "start-up: soak's summary's process.cpuSeconds.\n", flush=True)


def report_instructions(url: str) -> None:
    print("## User-space instructions per keep-alive request, c=50 (callgrind)\n")
    rows = per_request_instructions(url)
    wrk = next(cost for name, cost in rows if name.startswith("wrk"))
    print("| client (n=5,000 run minus n=500 run, / 4,500, unless it says; whole process) | instructions per request "
          "| x wrk's |")
    print("|---|---|---|")
    for name, cost in rows:
        print(f"| {name} | {cost:,.0f} | {ratio(cost, wrk)} |")
    native, thread = rows[0][1], rows[1][1]
    print(f"\n| target | figure | met |\n|---|---|---|\n| instructions per request <= 0.5x wrk's | "
          f"{native / wrk:.2f}x | {met(native <= 0.5 * wrk)} |")
    print(f"| the engine thread alone <= 0.45x wrk's (issue 34) | {thread / wrk:.2f}x | {met(thread <= 0.45 * wrk)} |")
    print(f"\nLoad average after: {uptime()}\n", flush=True)


def report_closes(url: str, seconds: int, rounds: int) -> None:
    """The fixed costs beside the per-request ones: an interval close and the run's end, in the main thread."""
    from native_cost import interval_costs  # bench/ is first on the path

    print("## Interval closes and the run's end, `soak bench -k -c 50` on the native engine "
          "(bench/native_cost.py's section 5)")
    ratio_1s = interval_costs(url, rounds, seconds)
    print("\n| target (median of the rounds' ratios) | figure | met |\n|---|---|---|")
    print(f"| a 1 s-interval bench not measurably costlier per request than a 70 s one: requests per CPU-second, "
          f"1s x 70s >= 0.97x | {ratio_1s:.3f}x | {met(ratio_1s >= 0.97)} |")
    print(f"\nLoad average after: {uptime()}\n", flush=True)


def report_startup(url: str, rounds: int = 11) -> None:
    """CPU of `soak --help` and `soak bench -n 1` beside hey's and ab's one request (bench/startup_cost.py --cpu)."""
    from startup_cost import Soak, cpu_table

    print("## Start-up: CPU per process (bench/startup_cost.py --cpu), bytecode compiled once as installed")
    medians = cpu_table(url, rounds, ["cached"], [Soak.of(str(Path.cwd()))])["cached"]
    print("\n| target (median of the rounds) | figure (ms) | met |\n|---|---|---|")
    for command in ("soak --help", "soak bench -n 1"):
        ms = next(ms for name, ms in medians.items() if name.endswith(command))  # --repo: named by its tree
        print(f"| `{command}`: CPU <= 100 ms | {ms:.1f} | {met(ms <= 100)} |")
    print(f"\nLoad average after: {uptime()}\n", flush=True)


def report_steady(url: str, seconds: int, rounds: int) -> None:
    print(f"## 100 req/s, 5 clients, {seconds} s\n")
    pairs, python, floor = steady(url, seconds, rounds)
    print(f"| round | {NATIVE} CPU after start-up (s) | hey CPU (s) | x hey's | {NATIVE} RSS after 5 s / at the end "
          "(MiB) | native p50 / p99 (ms) | hey p50 / p99 (ms) | load average after |")
    print("|---|---|---|---|---|---|---|---|")
    for r, (n, hey, load) in enumerate(pairs, 1):
        print(f"| {r} | {n.cpu_after_start_s:.3f} | {hey.cpu_s:.3f} | {ratio(n.cpu_after_start_s, hey.cpu_s)} | "
              f"{n.rss_early_mib:.1f} / {n.rss_end_mib:.1f} | {n.m.p50_ms:.3f} / {n.m.p99_ms:.3f} | "
              f"{hey.p50_ms:.3f} / {hey.p99_ms:.3f} | {load} |")
    hey_cpu = statistics.median(hey.cpu_s for _, hey, _ in pairs)
    print("\n| client, once after the pairs | achieved req/s | CPU (s) | x hey's (median) | RSS after 5 s / at the end "
          "(MiB) | p50 / p99 (ms) |")
    print("|---|---|---|---|---|---|")
    print(f"| {python.m.tool} (after start-up) | {python.m.rps:.2f} | {python.cpu_after_start_s:.3f} | "
          f"{ratio(python.cpu_after_start_s, hey_cpu)} | {python.rss_early_mib:.1f} / {python.rss_end_mib:.1f} | "
          f"{python.m.p50_ms:.3f} / {python.m.p99_ms:.3f} |")
    print(f"| {floor.tool} (whole process) | {floor.rps:.2f} | {floor.cpu_s:.3f} | {ratio(floor.cpu_s, hey_cpu)} | - | "
          f"{floor.p50_ms:.3f} / {floor.p99_ms:.3f} |")
    x = statistics.median(n.cpu_after_start_s / hey.cpu_s for n, hey, _ in pairs)
    growth = max(n.rss_end_mib - n.rss_early_mib for n, _, _ in pairs)
    print("\n| target (median of the pairs' ratios) | figure | met |")
    print("|---|---|---|")
    print(f"| CPU after start-up <= 0.5x hey's | {x:.2f}x | {met(x <= 0.5)} |")
    print(f"| RSS flat (end minus after 5 s, the larger of the rounds) | {growth:+.1f} MiB | {met(growth <= 1.0)} |")
    at_goal, intervals = all_intervals_at_goal(url, min(seconds, 30))
    print(f"\nIntervals at 100% goal (5 s intervals, engine auto): {at_goal} of {intervals}.\n", flush=True)


def report_lag(url: str, seconds: int) -> None:
    print(f"## Send lag against the schedule, {seconds} s each (transport fast: native's client, httpx on Python)\n")
    print("| engine | req/s | pacing | p50 (us) | p99 (us) | max (us) | client CPU (% of a core) |")
    print("|---|---|---|---|---|---|---|")
    for engine in ENGINES:
        for qps in (100, 1_000, 10_000):
            for precise in (False, True):
                lag, cpu = send_lag(url, qps, precise, seconds, engine)
                print(f"| {engine} | {qps:,} | {'precise' if precise else 'default'} | {lag['p50']} | {lag['p99']} | "
                      f"{lag['max']} | {100 * cpu:.1f} |", flush=True)
    print()


def report_memory(url: str, requests: int) -> None:
    early, late, done, rate = long_run_memory(url, requests)
    print("## Memory over a long run (20,000 req/s, 50 clients, engine auto: native)\n")
    print("| requests | achieved req/s | RSS after 5 s (MiB) | RSS at the end (MiB) |")
    print("|---|---|---|---|")
    print(f"| {done:,} | {rate:,.0f} | {early:.1f} | {late:.1f} |\n", flush=True)



def report_shapes(url: str, seconds: int, rounds: int) -> None:
    """Issue 34's stages and warm-up rows: CPU per request of each beside a plain run of the same
    length on the native engine, interleaved (plain, stages, warm-up, plain, ...)."""
    first = seconds // 6
    stages = f"{first}s:100,{seconds - first}s:100"
    shapes = {"plain": ((), ()), f"--stages {stages}": (("--stages", stages), ()),
              f"--warmup {first}s": ((), ("--warmup", f"{first}s"))}
    print(f"## Rate shapes, 100 req/s, 5 clients, {seconds} s, engine native\n")
    print("| round | shape | requests | CPU after start-up (s) | CPU per request (us) | x plain's "
          "| load average after |")
    print("|---|---|---|---|---|---|---|")
    ratios: dict[str, list[float]] = {name: [] for name in shapes if name != "plain"}
    for r in range(1, rounds + 1):
        plain_us = 0.0
        for name, (shape, extra) in shapes.items():
            run = soak_steady(url, "native", seconds, *extra, shape=shape)
            us = run.cpu_after_start_s / max(run.m.requests, 1) * 1e6
            plain_us = us if name == "plain" else plain_us
            if name != "plain":
                ratios[name].append(us / plain_us)
            print(f"| {r} | `{name}` | {run.m.requests:,} | {run.cpu_after_start_s:.3f} | {us:.1f} | "
                  f"{ratio(us, plain_us)} | {uptime()} |", flush=True)
    print("\n| target (median of the rounds' ratios) | figure | met |\n|---|---|---|")
    for name, xs in ratios.items():
        x = statistics.median(xs)
        print(f"| `{name}`: CPU per request within 1.2x of the plain run's | {x:.2f}x | {met(x <= 1.2)} |")
    print(flush=True)


def report_https(url: str, cert: Path, seconds: int, soak_seconds: int, rounds: int, steady_rounds: int) -> None:
    """Issue 34's HTTPS rows: keep-alive c=50 beside wrk -t1, and 100 req/s beside hey, interleaved."""
    ca = ("--caBundle", str(cert))
    print(f"## HTTPS (nginx with TLS 1.3, one worker), keep-alive c=50, {seconds} s each\n")
    limit = seconds * 3 + 30
    args = ("-k", "-c", "50", "-t", str(seconds), "-n", HUGE, "--interval", f"{seconds + 60}s", *ca)
    pairs = []
    for _ in range(rounds):
        native, summary, _ = soak_bench(url, *args, engine="native", timeout=limit)
        pairs.append(Pair(native, wrk_run(url, 50, seconds), uptime()))
    print_wrk_pairs(pairs)
    python = soak_bench(url, *args, engine="python", timeout=limit)[0]
    wrk_cpu = statistics.median(p.b.per_cpu_s for p in pairs)
    print(f"\n{python.tool}, once after the pairs: {python.rps:,.0f} req/s, {python.per_cpu_s:,.0f} per CPU-second "
          f"({ratio(python.per_cpu_s, wrk_cpu)} wrk's median)")
    x = median_ratio(pairs, "per_cpu_s")
    run_x = statistics.median(p.a.per_run_cpu_s / p.b.per_cpu_s for p in pairs)
    print("\n| target (median of the pairs' ratios) | figure | met |\n|---|---|---|")
    print(f"| HTTPS keep-alive c=50: requests per client CPU-second >= 1.0x wrk -t1's (whole process) | {x:.2f}x | "
          f"{met(x >= 1.0)} |")
    print(f"| the same, soak's from its run's start | {run_x:.2f}x | {met(run_x >= 1.0)} |\n", flush=True)

    print(f"## HTTPS, 100 req/s, 5 clients, {soak_seconds} s\n")
    steady_pairs = []
    for _ in range(steady_rounds):
        native_steady = soak_steady(url, "native", soak_seconds, *ca)
        steady_pairs.append((native_steady, hey_steady(url, soak_seconds), uptime()))
    print(f"| round | {NATIVE} CPU after start-up (s) | hey CPU (s) | x hey's | native p50 / p99 (ms) | "
          "hey p50 / p99 (ms) | load average after |")
    print("|---|---|---|---|---|---|---|")
    for r, (n, hey, load) in enumerate(steady_pairs, 1):
        print(f"| {r} | {n.cpu_after_start_s:.3f} | {hey.cpu_s:.3f} | {ratio(n.cpu_after_start_s, hey.cpu_s)} | "
              f"{n.m.p50_ms:.3f} / {n.m.p99_ms:.3f} | {hey.p50_ms:.3f} / {hey.p99_ms:.3f} | {load} |")
    python_steady = soak_steady(url, "python", soak_seconds, *ca)
    hey_cpu = statistics.median(hey.cpu_s for _, hey, _ in steady_pairs)
    print(f"\n{python_steady.m.tool}, once after the pairs: {python_steady.cpu_after_start_s:.3f} s after start-up, "
          f"{ratio(python_steady.cpu_after_start_s, hey_cpu)} hey's median ({uptime()})")
    x = statistics.median(n.cpu_after_start_s / hey.cpu_s for n, hey, _ in steady_pairs)
    print("\n| target (median of the pairs' ratios) | figure | met |\n|---|---|---|")
    print(f"| HTTPS 100 req/s: CPU after start-up <= 0.8x hey's | {x:.2f}x | {met(x <= 0.8)} |\n", flush=True)


if __name__ == "__main__":
    main()
