"""What a short `soak bench` costs from the process's start to its exit, part by part (issue 22).

    python bench/startup_cost.py [-n 1 -n 20000] [-c 100] [--url URL] [--bytecode cached,compiled]
    python bench/startup_cost.py --cpu [--rounds 11] [--url URL] [--bytecode cached] [--against DIR|SOAK ...]

Each row runs `soak bench -n N -c C --engine native URL` (no keep-alive) under
`valgrind --tool=callgrind` and counts the user-space instructions of each part of the process,
the engine's thread included: a harness (this file, `--parts`) runs the CLI as `python -m runner`
would, with a marker call between the parts, and callgrind dumps its counts at each marker
(`--dump-before=os_sched_get_priority_max`: nothing in soak calls it). The parts:

- interpreter start: the process up to the harness's first line (Python's own start, site);
- imports: `runner.cli` and the command's module, as the CLI imports them before it parses;
- config: the argument parser, the flags and the settings validated, the URLs read;
- build: the run's parts built, its reporters, the event loop started, up to Soak.run;
- run: Soak.run up to its end (Soak._finish): the engine's sends;
- end: the last interval, the summary and the reporters' output, up to the CLI's return;
- exit: the interpreter's finalisation.

Beside it, the whole process as `python -m runner` runs it, without the harness. The CLI's
imports are counted twice over: with the bytecode cached (`PYTHONPYCACHEPREFIX` set to a
directory filled by one run first, as an installed package or the image has it compiled at
install) and compiled on every run (`PYTHONDONTWRITEBYTECODE=1` and nothing cached for the
tree: what a checkout on a machine that sets it pays). Python's hashing is seeded alike, so a
count repeats to within a few hundred thousand instructions. Nothing is asserted; load goes
to 127.0.0.1 only (bench/run.py's nginx, unless --url names another loopback server).

With --cpu (issue 34: `soak --help` and `soak bench -n 1` each within 100 ms of CPU), each
command's CPU time instead, user and system as the kernel counts them for the child (wait4,
in microseconds), beside `python -c pass`, `python -c 'import asyncio'` (the floor of a run driven
on asyncio), hey's and ab's one request: rounds of every command
in turn, so a swing of the shared machine's load falls on all of them alike; the median of the
rounds, their range, and the load average before the first and after the last. `--against DIR`
adds soak's two commands from another checkout of this repository (main's, extracted with
`git archive`), run with that tree first on the path, for before and after in the same minutes;
`--against PATH/bin/soak` an installed soak as users run it (pip compiled its bytecode, and no
editable install's finder loads at the interpreter's start). Repeat it for several.
Beside each soak command, the modules it loaded that a plain run or a --help need not (asyncio,
jsonschema, the engines...), counted in a second pass so the timed runs are not touched.
"""

from __future__ import annotations

import os
import sys

TYPE_CHECKING = False
if TYPE_CHECKING:  # the harness imports nothing before its first marker that the CLI would not
    from collections.abc import Callable
    from pathlib import Path
    from typing import Any

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PARTS = ("interpreter start", "imports", "config", "build", "run", "end", "exit")
MARKER = "os_sched_get_priority_max"


def mark() -> None:
    """One marker: callgrind dumps what was counted since the last one (see --dump-before)."""
    os.sched_get_priority_max(os.SCHED_OTHER)


def run_in_parts(argv: list[str]) -> int:
    """The CLI as `python -m runner ARGV` runs it, with a marker between each two parts."""
    mark()  # the interpreter has started
    sys.path.insert(0, REPO)
    import runner.cli
    import runner.commands.bench
    import runner.commands.execute
    import runner.run.soak

    mark()  # the imports
    execute = runner.commands.execute
    soak = runner.run.soak.Soak

    def marked(function: Callable[..., Any]) -> Callable[..., Any]:
        def call(*args: Any, **kwargs: Any) -> Any:
            mark()
            return function(*args, **kwargs)

        return call

    execute.execute = marked(execute.execute)  # config ends (bench's main imports it when it runs)
    run = soak.run

    async def marked_run(self: Any) -> Any:
        mark()  # build ends
        return await run(self)

    soak.run = marked_run  # type: ignore[method-assign]
    soak._finish = marked(soak._finish)  # type: ignore[method-assign]  # the run ends
    code = runner.cli.main(argv)
    mark()  # the end
    return code


def callgrind(command: list[str], env: dict[str, str], directory: Path) -> list[int]:
    """Instructions between markers (all of them, when there are none), in order, the last to the exit."""
    import subprocess

    out = directory / "callgrind.out"
    done = subprocess.run(["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}",
                           f"--dump-before={MARKER}", *command], capture_output=True, text=True, timeout=1800,
                          env={**env, "PYTHONHASHSEED": "0"})
    if done.returncode != 0:
        raise SystemExit(f"callgrind failed on {' '.join(command)}: {done.stderr[-2000:]}")
    dumps = sorted(directory.glob("callgrind.out.*"), key=lambda p: int(p.suffix[1:]))
    counts = [_totals(path) for path in [*dumps, out]]
    for path in [*dumps, out]:
        path.unlink()
    return counts


def _totals(path: Path) -> int:
    import re

    found = re.search(r"^totals: (\d+)", path.read_text(errors="replace"), re.MULTILINE)
    return int(found.group(1)) if found else 0


def environments(cache: Path) -> dict[str, dict[str, str]]:
    """The two ways to find the CLI's bytecode: cached (filled by a first run) and compiled each time."""
    base = {k: v for k, v in os.environ.items() if k not in ("PYTHONDONTWRITEBYTECODE", "PYTHONPYCACHEPREFIX")}
    return {"cached": {**base, "PYTHONPYCACHEPREFIX": str(cache)},
            "compiled": {**base, "PYTHONDONTWRITEBYTECODE": "1"}}


def table(url: str, counts: list[int], concurrency: int, modes: list[str]) -> None:
    """Print one markdown table per mode: each part's instructions for each -n."""
    import subprocess
    import tempfile
    from pathlib import Path

    with tempfile.TemporaryDirectory(prefix="soak-startup-") as directory:
        envs = environments(Path(directory) / "pycache")
        for mode in modes:
            env = envs[mode]
            if mode == "cached":  # fill the cache, then count
                subprocess.run([sys.executable, "-m", "runner", "bench", "-n", "1", url], env=env, check=True,
                               capture_output=True, cwd=REPO)
            rows: dict[int, tuple[list[int], int]] = {}
            for n in counts:
                args = ["bench", "-n", str(n), "-c", str(min(concurrency, n)), "--engine", "native", url]
                parts = callgrind([sys.executable, __file__, "--parts", "--", *args], env, Path(directory))
                whole = callgrind([sys.executable, "-m", "runner", *args], env, Path(directory))
                rows[n] = (parts, sum(whole))
            _print(mode, rows)


def _print(mode: str, rows: dict[int, tuple[list[int], int]]) -> None:
    names = list(rows)
    print(f"\n### bytecode {mode}: user-space instructions (millions)\n")
    print("| part | " + " | ".join(f"-n {n:,}" for n in names) + " |")
    print("|---|" + "---|" * len(names))
    for i, part in enumerate(PARTS):
        print(f"| {part} | " + " | ".join(_cell(rows[n][0], i) for n in names) + " |")
    print("| all parts (harness) | " + " | ".join(f"{sum(rows[n][0]) / 1e6:.1f}" for n in names) + " |")
    print("| whole process, `python -m runner` | " + " | ".join(f"{rows[n][1] / 1e6:.1f}" for n in names) + " |")


def _cell(parts: list[int], i: int) -> str:
    if len(parts) != len(PARTS):
        return "?"
    return f"{parts[i] / 1e6:.1f}"


# What `soak --help` must not load (issue 34), and what else is worth seeing loaded or not.
WATCHED = ("asyncio", "jsonschema", "runner.load.native", "runner.load.engine", "runner.load.httpx_transport",
           "httpx",
           "hdrh", "prometheus_client", "yaml", "ssl", "xml.etree", "runner.stats", "runner.readback")
# Run as `python -c LISTER ARGS...`: the CLI as `python -m runner ARGS` runs it, then the modules it loaded
# into the file SOAK_MODULES names (stdout and stderr are the command's own), whatever its exit.
LISTER = ("import os, sys\n"
          "def listed():\n"
          "    with open(os.environ['SOAK_MODULES'], 'w') as out: out.write('\\n'.join(sorted(sys.modules)))\n"
          "import atexit; atexit.register(listed)\n"
          "import runpy; runpy.run_module('runner', run_name='__main__', alter_sys=True)\n")


class Soak:
    """One soak to time: a checkout (run as `python -m runner` with it first on the path) or an
    installed `soak` program (run as it is, its bytecode compiled by pip at install). A plain
    class: the harness (--parts) loads nothing before its first marker that the CLI would not."""

    def __init__(self, label: str, program: list[str], python: str, tree: str | None) -> None:
        self.label = label
        self.program = program  # what runs `soak`
        self.python = python  # the interpreter that lists its modules (LISTER)
        self.tree = tree  # put first on the path

    @classmethod
    def of(cls, path: str) -> Soak:
        path = os.path.abspath(path)
        if os.path.isdir(path):
            return cls(path, [sys.executable, "-m", "runner"], sys.executable, path)
        return cls(path, [path], os.path.join(os.path.dirname(path), "python"), None)

    def env(self, env: dict[str, str]) -> dict[str, str]:
        return {**env, "PYTHONPATH": self.tree} if self.tree else env

    @property
    def cwd(self) -> str:
        """Its checkout; for an installed soak, a directory with no `runner` that `python -c` would find first."""
        return self.tree or "/"


Row = tuple[list[str], "Soak | None"]


def cpu_commands(url: str, soaks: list[Soak]) -> dict[str, Row]:
    """Each row's command and the soak it runs (None: not soak)."""
    rows: dict[str, Row] = {"python -c pass": ([sys.executable, "-c", "pass"], None),
                            # The floor of any run driven on asyncio (every run is, the native engine's too).
                            "python -c 'import asyncio'": ([sys.executable, "-c", "import asyncio"], None)}
    for soak in soaks:
        prefix = "" if soak.tree == REPO else f"{soak.label}: "
        rows[prefix + "soak --help"] = ([*soak.program, "--help"], soak)
        rows[prefix + "soak bench -n 1"] = ([*soak.program, "bench", "-n", "1", url], soak)
    rows["hey -n 1 -c 1"] = (["hey", "-n", "1", "-c", "1", url], None)
    rows["ab -n 1"] = (["ab", "-q", "-n", "1", url], None)
    return rows


def cpu_ms(command: list[str], env: dict[str, str], soak: Soak | None) -> float:
    """One run's CPU, user and system, in milliseconds: the child's own (wait4)."""
    import subprocess

    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                               env=soak.env(env) if soak else env, cwd=soak.cwd if soak else REPO)
    _, status, usage = os.wait4(process.pid, 0)
    if status != 0:
        raise SystemExit(f"{' '.join(command)} failed: {status}")
    return (usage.ru_utime + usage.ru_stime) * 1000


def loaded(soak: Soak, args: list[str], env: dict[str, str]) -> set[str]:
    """The modules `soak ARGS` loads (LISTER), in a run of its own."""
    import subprocess
    import tempfile

    with tempfile.NamedTemporaryFile("r", prefix="soak-modules-") as names:
        subprocess.run([soak.python, "-c", LISTER, *args], capture_output=True, timeout=60,
                       env={**soak.env(env), "SOAK_MODULES": names.name}, cwd=soak.cwd)
        return set(names.read().split())


def watched(modules: set[str]) -> str:
    """WATCHED's that `modules` holds (a package counts when any of its modules is there), and how many in all."""
    found = [w for w in WATCHED if any(m == w or m.startswith(w + ".") for m in modules)]
    return f"{len(modules)}: " + (", ".join(found) or "none of them")


def cpu_table(url: str, rounds: int, modes: list[str], soaks: list[Soak]) -> dict[str, dict[str, float]]:
    """Print one markdown table per bytecode mode: each command's CPU, median of the rounds; return the
    medians (ms) by mode and command, for a caller that states a target in them (bench/run.py)."""
    import statistics
    import subprocess
    import tempfile
    from pathlib import Path

    rows = cpu_commands(url, soaks)
    medians: dict[str, dict[str, float]] = {}
    with tempfile.TemporaryDirectory(prefix="soak-startup-") as directory:
        envs = environments(Path(directory) / "pycache")
        for mode in modes:
            env = envs[mode]
            for command, soak in rows.values():  # the cache filled, the programs found, before any is timed
                subprocess.run(command, env=soak.env(env) if soak else env, cwd=soak.cwd if soak else REPO,
                               capture_output=True, timeout=60)
            times: dict[str, list[float]] = {name: [] for name in rows}
            load_before = os.getloadavg()
            for _ in range(rounds):
                for name, (command, soak) in rows.items():
                    times[name].append(cpu_ms(command, env, soak))
            load_after = os.getloadavg()
            print(f"\n### bytecode {mode}: CPU (user + system) per process, ms, {rounds} rounds interleaved\n")
            print(f"load average before: {_load(load_before)}; after: {_load(load_after)}\n")
            print("| command | median | min | max | modules loaded: of them, " + ", ".join(WATCHED) + " |")
            print("|---|---|---|---|---|")
            for name, (command, soak) in rows.items():
                shown = watched(loaded(soak, command[len(soak.program):], env)) if soak else ""
                values = times[name]
                print(f"| {name} | {statistics.median(values):.1f} | {min(values):.1f} | {max(values):.1f} | {shown} |")
            medians[mode] = {name: statistics.median(values) for name, values in times.items()}
    return medians


def _load(load: tuple[float, float, float]) -> str:
    return ", ".join(f"{figure:.2f}" for figure in load)


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--parts":
        sys.exit(run_in_parts(sys.argv[3:] if sys.argv[2:3] == ["--"] else sys.argv[2:]))
    import argparse

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("-n", type=int, action="append", help="requests (repeat: one column each; 1 and 20000)")
    parser.add_argument("-c", type=int, default=100, help="concurrency (at most -n)")
    parser.add_argument("--url", help="a loopback server to send to (default: nginx started here)")
    parser.add_argument("--bytecode", default=None, help="cached, compiled, or both (default: both; --cpu: cached)")
    parser.add_argument("--cpu", action="store_true", help="CPU time per process instead of instructions per part")
    parser.add_argument("--rounds", type=int, default=11, help="--cpu: rounds of every command in turn")
    parser.add_argument("--against", metavar="DIR|SOAK", action="append", default=[],
                        help="--cpu: also soak's commands from this checkout, or this installed soak (repeat)")
    args = parser.parse_args()
    counts = args.n or [1, 20_000]
    modes = (args.bytecode or ("cached" if args.cpu else "cached,compiled")).split(",")
    soaks = [*map(Soak.of, args.against), Soak.of(REPO)]

    def measure(url: str) -> None:
        if args.cpu:
            cpu_table(url, args.rounds, modes, soaks)
        else:
            table(url, counts, args.c, modes)

    if args.url:
        measure(args.url)
        return
    sys.path.insert(0, os.path.join(REPO, "bench"))
    from run import nginx

    with nginx(workers=1) as url:
        measure(url)


if __name__ == "__main__":
    main()
