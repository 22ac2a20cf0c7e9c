"""What the native engine costs against wrk, ab and hey, in one interleaved run on one nginx worker.

    python bench/native_cost.py [--rounds 2] [--seconds 10] [--steady-seconds 60] [--only SECTIONS]

Sections, each tool beside the native engine in alternation (A B A B), `uptime` printed
beside every round because the machine is shared and only same-round ratios count:

1. keep-alive c=50, as fast as each goes for --seconds: requests per client CPU-second
   (user + system, from /usr/bin/time, so a tool's CPU is its own; beside it, the native
   client's from its first send, Python's start-up left out), native against wrk -t1;
2. callgrind: user-space instructions per keep-alive request, c=50, a run of 5,000 requests
   minus a run of 500, divided by 4,500, medians of three runs each (Python's own start and
   end move by about a million instructions from run to run), and the engine thread's share
   alone (wrk: by duration, the difference in instructions over the difference in requests);
   the one figure that repeats on a shared machine;
3. no keep-alive, c=100, -n 20,000 and the seed's -n 100,000: client CPU per request (the
   native client's whole process, and from its first send), and requests per second from
   the first send, native against ab;
4. 100 req/s from 5 clients for --steady-seconds: client CPU after start-up, native against
   `hey -q 20 -c 5` (hey's start-up is a few ms of Go; the native client measures its own
   CPU from its first send, so Python's imports are left out);
5. interval closes and the run's end: `soak bench -k -c 50` under callgrind with
   `--separate-threads=yes`, a marker call before each interval's close and after its
   report, and around the run's end (Soak._finish: the last interval, the summary, the
   reports), so each is counted in the main thread alone (median and range per interval;
   the engine thread's instructions per request beside them); the same markers' main-thread
   CPU time (thread_time) in runs of --seconds not under callgrind; then `soak bench -k -c 50`
   for --seconds with `--interval 1s` and `--interval 70s` in alternation: requests per
   CPU-second of the whole process (wait4), the 1 s run against the 70 s one.

The native engine runs through its Python side (runner.load.native.engine, runner.stats.native
and runner.run.engines) with one interval per run (an hour), as `soak bench` would with
hour-long intervals: `python bench/native_cost.py --client ...` is that client on its own.
Nothing is asserted. Load goes to 127.0.0.1 only, every run bounded in count and time.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench.run import nginx, timed  # noqa: E402

HOUR_NS = 3_600_000_000_000


# --- the native client -----------------------------------------------------------------------


async def client(url: str, clients: int, requests: int, seconds: float, qps: float, keep_alive: bool) -> dict:
    """One run of the native engine; its figures, CPU from the first send on."""
    from runner.load.model import Bench, Closed, Load
    from runner.load.request import Request
    from runner.load.schedule import Grid, Schedule
    from runner.load.transport import TransportOptions
    from runner.run.engines import native_run

    bench = qps <= 0
    start = time.monotonic_ns() + 50_000_000
    end = start + int(seconds * 1e9) if seconds else None
    schedule = Schedule(start, qps if qps > 0 else 1.0, clients, end)
    load = Load([Request("GET", url, (), b"")], Bench() if bench else Closed(), total_requests=requests)
    options = TransportOptions(timeout_ns=10_000_000_000, no_reuse=not keep_alive, compress=False, max_connections=1)
    grid = Grid(start, HOUR_NS)
    engine, recorder = native_run(schedule, load, options, grid)
    if end is not None:
        recorder.drain_from(end)
    delay = (start - time.monotonic_ns()) / 1e9
    cpu_before = _cpu()
    await asyncio.sleep(max(delay, 0))
    cpu_start = _cpu()
    await engine.run()
    cpu = _cpu() - cpu_start
    interval = recorder.close(final=True)
    total = recorder.total
    return {"requests": total.requests, "good": total.good, "failed": total.failed,
            "cpu_s": cpu, "startup_cpu_s": cpu_start - cpu_before, "interval_good": interval.tally.good,
            "wall_s": (time.monotonic_ns() - start) / 1e9}


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def native_command(url: str, *, clients: int, requests: int = 0, seconds: float = 0, qps: float = 0,
                   keep_alive: bool = True) -> list[str]:
    return [sys.executable, str(Path(__file__).resolve()), "--client", url, "-c", str(clients), "-n", str(requests),
            "-t", str(seconds), "--qps", str(qps), *([] if keep_alive else ["--new"])]


def native(url: str, **how: object) -> tuple[dict, float, float]:
    """The native client under /usr/bin/time: (its figures, its whole CPU seconds, wall seconds)."""
    out, cpu, wall, _ = timed(native_command(url, **how), 900)  # type: ignore[arg-type]
    return json.loads(out), cpu, wall


def uptime() -> str:
    return subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()


# --- the sections ------------------------------------------------------------------------------


def keep_alive_throughput(url: str, rounds: int, seconds: int) -> None:
    print(f"\n## 1. keep-alive c=50, {seconds} s each, requests per client CPU-second\n")
    print("| round | native req/s | native req/CPU-s (after start-up) | wrk req/s | wrk req/CPU-s | native x wrk "
          "(after start-up) | uptime |")
    print("|---|---|---|---|---|---|---|")
    for r in range(rounds):
        figures, cpu, wall = native(url, clients=50, seconds=seconds)
        n_rate, n_cpu = figures["requests"] / figures["wall_s"], figures["requests"] / cpu
        n_run = figures["requests"] / figures["cpu_s"]
        out, wcpu, wwall, _ = timed(["wrk", "-t1", "-c50", f"-d{seconds}s", url], seconds * 3 + 30)
        done = int(re.search(r"(\d+) requests in", out).group(1))  # type: ignore[union-attr]
        w_rate, w_cpu = done / wwall, done / wcpu
        print(f"| {r + 1} | {n_rate:,.0f} | {n_cpu:,.0f} ({n_run:,.0f}) | {w_rate:,.0f} | {w_cpu:,.0f} | "
              f"{n_cpu / w_cpu:.2f}x ({n_run / w_cpu:.2f}x) | {uptime()} |", flush=True)


def per_request_instructions(url: str) -> None:
    print("\n## 2. user-space instructions per keep-alive request, c=50 (callgrind)\n")
    runs = {n: sorted(_client_instructions(url, n) for _ in range(3)) for n in (5000, 500)}
    whole = (runs[5000][1][0] - runs[500][1][0]) / 4500  # medians of three
    thread = (runs[5000][1][1] - runs[500][1][1]) / 4500
    (i1, r1), (i4, r4) = _wrk_instructions(url, 1), _wrk_instructions(url, 4)
    wrk_per = (i4 - i1) / (r4 - r1)
    print("| client | instructions per request | x wrk |")
    print("|---|---|---|")
    print(f"| native engine, whole process (n=5,000 minus n=500, medians of 3) | {whole:,.0f} | "
          f"{whole / wrk_per:.2f}x |")
    print(f"| native engine, its thread alone (the same runs) | {thread:,.0f} | {thread / wrk_per:.2f}x |")
    print(f"| wrk -t1 -c50 ({r4:,} minus {r1:,} requests) | {wrk_per:,.0f} | 1 |")
    print(f"\n{uptime()}", flush=True)


def _client_instructions(url: str, requests: int) -> tuple[int, int]:
    """(the whole process's instructions, the engine thread's) for one run of `requests`."""
    with tempfile.TemporaryDirectory() as directory:
        out = Path(directory) / "callgrind.out"
        done = subprocess.run(["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}",
                               *native_command(url, clients=50, requests=requests)], capture_output=True, text=True,
                              timeout=900, env={**os.environ, "PYTHONHASHSEED": "0"})
        found = re.search(r"Collected : (\d+)", done.stderr)
        annotated = subprocess.run(["callgrind_annotate", "--inclusive=yes", "--threshold=100", str(out)],
                                   capture_output=True, text=True).stdout
    thread = re.search(r"^\s*([\d,]+) .*:start_thread ", annotated, re.MULTILINE)
    if done.returncode != 0 or found is None or thread is None:
        raise SystemExit(f"callgrind failed on the native client: {done.stderr[-2000:]}")
    return int(found.group(1)), int(thread.group(1).replace(",", ""))


def _wrk_instructions(url: str, seconds: int) -> tuple[int, int]:
    done = subprocess.run(["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", "wrk", "-t1", "-c50",
                           f"-d{seconds}s", url], capture_output=True, text=True, timeout=600)
    found = re.search(r"Collected : (\d+)", done.stderr)
    requests = re.search(r"(\d+) requests in", done.stdout)
    if found is None or requests is None:
        raise SystemExit(f"callgrind failed on wrk: {done.stderr[-2000:]}")
    return int(found.group(1)), int(requests.group(1))


def new_connections(url: str, rounds: int, requests: int) -> None:
    print(f"\n## 3. no keep-alive, c=100, -n {requests:,}: client CPU per request\n")
    print("| round | native us/req (after start-up) | native req/s | ab us/req | ab req/s | native x ab (CPU) | "
          "uptime |")
    print("|---|---|---|---|---|---|---|")
    for r in range(rounds):
        figures, cpu, wall = native(url, clients=100, requests=requests, keep_alive=False)
        out, acpu, awall, _ = timed(["ab", "-q", "-c", "100", "-n", str(requests), url], 600)
        done = int(re.search(r"Complete requests:\s+(\d+)", out).group(1))  # type: ignore[union-attr]
        n_us, a_us = cpu / figures["requests"] * 1e6, acpu / done * 1e6
        n_run = figures["cpu_s"] / figures["requests"] * 1e6
        print(f"| {r + 1} | {n_us:.1f} ({n_run:.1f}) | {figures['requests'] / figures['wall_s']:,.0f} | {a_us:.1f} | "
              f"{done / awall:,.0f} | {n_us / a_us:.2f}x ({n_run / a_us:.2f}x) | {uptime()} |", flush=True)


def steady(url: str, rounds: int, seconds: int) -> None:
    print(f"\n## 4. 100 req/s, 5 clients, {seconds} s: client CPU after start-up\n")
    print("| round | native CPU s (after start-up) | native requests | hey CPU s | hey requests | native x hey | "
          "uptime |")
    print("|---|---|---|---|---|---|---|")
    for r in range(rounds):
        figures, _, _ = native(url, clients=5, seconds=seconds, qps=100)
        out, hcpu, _, _ = timed(["hey", "-c", "5", "-q", "20", "-z", f"{seconds}s", url], seconds + 60)
        done = sum(int(n) for n in re.findall(r"\[\d{3}\]\s+(\d+) responses", out))
        print(f"| {r + 1} | {figures['cpu_s']:.3f} | {figures['requests']:,} | {hcpu:.3f} | {done:,} | "
              f"{figures['cpu_s'] / hcpu:.2f}x | {uptime()} |", flush=True)


# --- 5. interval closes and the run's end -----------------------------------------------------

MARKER = "os_sched_get_priority_max"  # nothing in soak calls it: callgrind dumps its counts before each call
INTERVAL, BETWEEN, END = "interval", "between", "end"


def run_marked(argv: list[str]) -> int:
    """soak's CLI as `python -m runner ARGV` runs it, with a marker before each interval's close and after
    its report, and before and after the run's end; the parts' names, one a marker (each ends the part
    named), with the main thread's CPU time then (ns), to the file named by $SOAK_MARKS."""
    import runner.cli
    import runner.run.soak

    soak = runner.run.soak.Soak
    close, emit, finish = soak._close, soak._emit, soak._finish
    names: list[str] = []
    ending = False

    def mark(part: str) -> None:
        names.append(f"{part} {time.thread_time_ns()}")
        os.sched_get_priority_max(os.SCHED_OTHER)

    def marked_close(self: Any, *args: Any, **kwargs: Any) -> Any:
        if not ending:
            mark(BETWEEN)
        return close(self, *args, **kwargs)

    def marked_emit(self: Any, interval: Any) -> None:
        emit(self, interval)
        if not ending:
            mark(INTERVAL)

    def marked_finish(self: Any, *args: Any, **kwargs: Any) -> Any:
        nonlocal ending
        mark(BETWEEN)
        ending = True
        summary = finish(self, *args, **kwargs)
        mark(END)
        return summary

    soak._close, soak._emit, soak._finish = marked_close, marked_emit, marked_finish  # type: ignore[method-assign]
    code = runner.cli.main(argv)
    Path(os.environ["SOAK_MARKS"]).write_text("\n".join(names))
    return code


def _marked_run(url: str, interval: str, seconds: float) -> tuple[dict[str, list[int]], int, int]:
    """One `soak bench -k -c 50` under callgrind, split by thread: the main thread's instructions in each
    part (INTERVAL, END), the engine thread's whole, and the requests made."""
    args = ["bench", "-k", "-c", "50", "-n", "100000000", "-t", str(seconds), "--interval", interval, url]
    with tempfile.TemporaryDirectory() as directory:
        out, marks = Path(directory) / "callgrind.out", Path(directory) / "marks"
        done = subprocess.run(["valgrind", "--tool=callgrind", "--separate-threads=yes",
                               f"--callgrind-out-file={out}", f"--dump-before={MARKER}",
                               sys.executable, str(Path(__file__).resolve()), "--marked", *args],
                              capture_output=True, text=True, timeout=900,
                              env={**os.environ, "PYTHONHASHSEED": "0", "SOAK_MARKS": str(marks)})
        if done.returncode != 0:
            raise SystemExit(f"callgrind failed on soak bench: {done.stderr[-2000:]}")
        names = [line.split()[0] for line in marks.read_text().split("\n")]
        parts: dict[str, list[int]] = {INTERVAL: [], END: [], BETWEEN: []}
        for number, name in enumerate(names, 1):
            parts[name].append(_totals(Path(f"{out}.{number}-01")))
        engine = sum(_totals(path) for path in Path(directory).glob("callgrind.out*-02"))
    requests = json.loads(done.stdout[done.stdout.index("\n{") + 1:])["requests"]
    return parts, engine, requests


def _main_thread_cpu(url: str, interval: str, seconds: float) -> dict[str, list[int]]:
    """One `soak bench -k -c 50` with the same markers, not under callgrind: the main thread's CPU time
    (ns, thread_time) in each part."""
    args = ["bench", "-k", "-c", "50", "-n", "100000000", "-t", str(seconds), "--interval", interval, url]
    with tempfile.TemporaryDirectory() as directory:
        marks = Path(directory) / "marks"
        subprocess.run([sys.executable, str(Path(__file__).resolve()), "--marked", *args], capture_output=True,
                       text=True, timeout=seconds * 3 + 60, check=True, env={**os.environ, "SOAK_MARKS": str(marks)})
        lines = [line.split() for line in marks.read_text().split("\n")]
    parts: dict[str, list[int]] = {INTERVAL: [], END: [], BETWEEN: []}
    before = int(lines[0][1])
    for name, now in lines[1:]:
        parts[name].append(int(now) - before)
        before = int(now)
    return parts


def _totals(path: Path) -> int:
    found = re.search(r"^totals: (\d+)", path.read_text(errors="replace"), re.MULTILINE)
    return int(found.group(1)) if found else 0


def interval_costs(url: str, rounds: int, seconds: int) -> float:
    """Print what an interval close and a run's end cost the main thread, and a 1 s-interval bench's requests
    per CPU-second against a 70 s-interval one's; return the median of that ratio (issue 34: a 1 s-interval
    bench must not be measurably costlier per request)."""
    print("\n### Main-thread instructions (callgrind, split by thread)\n")
    print("| run | intervals | per interval, median (range) | run's end | engine thread per request | uptime |")
    print("|---|---|---|---|---|---|")
    for interval, span in (("1s", 8), ("70s", 8)):
        parts, engine, requests = _marked_run(url, interval, span)
        closes = sorted(parts[INTERVAL])
        middle = f"{closes[len(closes) // 2] / 1e6:.2f} M ({closes[0] / 1e6:.2f}-{closes[-1] / 1e6:.2f})" if closes \
            else "-"
        print(f"| bench -k -c 50 -t {span} --interval {interval} | {len(closes)} closed + the last | {middle} | "
              f"{sum(parts[END]) / 1e6:.2f} M | {engine / max(requests, 1):,.0f} ({requests:,} requests) | "
              f"{uptime()} |", flush=True)
    print(f"\n### The same, not under callgrind, {seconds} s: the main thread's CPU (thread_time)\n")
    print("| run | intervals | per interval, median (range) | run's end | uptime |")
    print("|---|---|---|---|---|")
    for r in range(rounds):
        parts = _main_thread_cpu(url, "1s", seconds)
        closes = sorted(parts[INTERVAL])
        print(f"| {r + 1}: --interval 1s | {len(closes)} closed + the last | {closes[len(closes) // 2] / 1e3:,.0f} us "
              f"({closes[0] / 1e3:,.0f}-{closes[-1] / 1e3:,.0f}) | {sum(parts[END]) / 1e6:.1f} ms | {uptime()} |",
              flush=True)
    print(f"\n### bench -k -c 50 for {seconds} s: requests per CPU-second, --interval 1s against 70s\n")
    print("| round | 1s: requests | 1s: req/CPU-s | 70s: requests | 70s: req/CPU-s | 1s x 70s | uptime |")
    print("|---|---|---|---|---|---|---|")
    ratios = []
    for r in range(rounds):
        figures = {}
        for interval in ("1s", "70s") if r % 2 == 0 else ("70s", "1s"):
            out, cpu, _, _ = timed([sys.executable, "-m", "runner", "bench", "-k", "-c", "50", "-n", "100000000",
                                    "-t", str(seconds), "--interval", interval, url], seconds * 3 + 60)
            requests = json.loads(out[out.index("\n{") + 1:])["requests"]
            figures[interval] = (requests, requests / cpu)
        ratios.append(figures["1s"][1] / figures["70s"][1])
        print(f"| {r + 1} | {figures['1s'][0]:,} | {figures['1s'][1]:,.0f} | {figures['70s'][0]:,} | "
              f"{figures['70s'][1]:,.0f} | {ratios[-1]:.3f}x | {uptime()} |", flush=True)
    median = sorted(ratios)[len(ratios) // 2]
    print(f"\nmedian 1s x 70s: {median:.3f}x")
    return median


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--seconds", type=int, default=10)
    parser.add_argument("--steady-seconds", type=int, default=60)
    parser.add_argument("--only", default="12345", help="which sections to run, e.g. 12")
    parser.add_argument("--client", metavar="URL", help="be the native client: one run against URL, figures as JSON")
    parser.add_argument("-c", type=int, default=50)
    parser.add_argument("-n", type=int, default=0)
    parser.add_argument("-t", type=float, default=0)
    parser.add_argument("--qps", type=float, default=0, help="0: bench (no pacing)")
    parser.add_argument("--new", action="store_true", help="a new connection for every request")
    parser.add_argument("--marked", nargs=argparse.REMAINDER, help="be soak's CLI with callgrind markers (section 5)")
    args = parser.parse_args()
    if args.marked is not None:
        sys.exit(run_marked(args.marked))
    if args.client:
        print(json.dumps(asyncio.run(client(args.client, args.c, args.n, args.t, args.qps, not args.new))))
        return
    print(f"# native engine against wrk, ab and hey; {uptime()}")
    with nginx(workers=1) as url:
        if "1" in args.only:
            keep_alive_throughput(url, args.rounds, args.seconds)
        if "2" in args.only:
            per_request_instructions(url)
        if "3" in args.only:
            for requests in (20_000, 100_000):
                new_connections(url, args.rounds, requests)
        if "4" in args.only:
            steady(url, args.rounds, args.steady_seconds)
        if "5" in args.only:
            print("\n## 5. interval closes and the run's end")
            interval_costs(url, args.rounds, args.seconds)


if __name__ == "__main__":
    main()
