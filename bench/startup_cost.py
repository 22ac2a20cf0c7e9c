"""What a short `soak bench` costs from the process's start to its exit, part by part (issue 22).

    python bench/startup_cost.py [-n 1 -n 20000] [-c 100] [--url URL] [--bytecode cached,compiled]

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
    import runner.run.soak

    mark()  # the imports
    bench = runner.commands.bench
    soak = runner.run.soak.Soak

    def marked(function: Callable[..., Any]) -> Callable[..., Any]:
        def call(*args: Any, **kwargs: Any) -> Any:
            mark()
            return function(*args, **kwargs)

        return call

    bench.execute = marked(bench.execute)  # config ends
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


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--parts":
        sys.exit(run_in_parts(sys.argv[3:] if sys.argv[2:3] == ["--"] else sys.argv[2:]))
    import argparse

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("-n", type=int, action="append", help="requests (repeat: one column each; 1 and 20000)")
    parser.add_argument("-c", type=int, default=100, help="concurrency (at most -n)")
    parser.add_argument("--url", help="a loopback server to send to (default: nginx started here)")
    parser.add_argument("--bytecode", default="cached,compiled", help="cached, compiled, or both")
    args = parser.parse_args()
    counts, modes = args.n or [1, 20_000], args.bytecode.split(",")
    if args.url:
        table(args.url, counts, args.c, modes)
        return
    sys.path.insert(0, os.path.join(REPO, "bench"))
    from run import nginx

    with nginx(workers=1) as url:
        table(url, counts, args.c, modes)


if __name__ == "__main__":
    main()
