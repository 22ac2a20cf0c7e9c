"""What parsing one response costs the native parser, in user-space instructions.

    python bench/parser_cost.py [--big 100000] [--small 10000]

Each row parses nginx's answer for its 612-byte page (tests/support/responses.py) over and
over, as on a keep-alive connection, under `valgrind --tool=callgrind`; a run of --big
responses minus a run of --small, divided by the difference, is the cost of one response,
start-up excluded. Instruction counts are the one figure that repeats on a shared machine.

- native: runner/load/native/response.c, built with gcc -O2 into bench/native_parse.c's
  driver: a fresh parser fed the whole response in one read;
- native, portable: the same built as where there is no SSE2 (-DSOAK_PORTABLE, unsigned
  char: arm64's scans, counted on this machine).

(The rows for httptools and the Python fast transport's framing went with them, issue 34;
bench/README.md keeps their last figures.) Nothing is asserted and no load is sent anywhere.
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.support.responses import NGINX_RESPONSE  # noqa: E402

NATIVE = REPO / "runner" / "load" / "native"


def instructions(command: list[str]) -> int:
    """User-space instructions a command executes, as callgrind counts them."""
    done = subprocess.run(["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", *command],
                          capture_output=True, text=True, check=False)
    found = re.search(r"Collected : (\d+)", done.stderr)
    if done.returncode != 0 or found is None:
        raise SystemExit(f"callgrind failed on {command[0]}: {done.stderr[-2000:]}")
    return int(found.group(1))


def per_response(command: list[str], big: int, small: int) -> float:
    return (instructions([*command, str(big)]) - instructions([*command, str(small)])) / (big - small)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--big", type=int, default=100_000, help="responses in the longer run")
    parser.add_argument("--small", type=int, default=10_000, help="responses in the shorter run")
    args = parser.parse_args()
    for tool in ("valgrind", "gcc"):
        if shutil.which(tool) is None:
            raise SystemExit(f"{tool} is not installed: apt-get install -y {tool}")
    with tempfile.TemporaryDirectory() as tmp:
        response = Path(tmp) / "response"
        response.write_bytes(NGINX_RESPONSE)
        driver, portable = Path(tmp) / "native_parse", Path(tmp) / "native_parse_portable"
        for built, flags in ((driver, []), (portable, ["-DSOAK_PORTABLE", "-funsigned-char"])):
            subprocess.run(["gcc", "-std=c11", "-O2", *flags, "-I", str(NATIVE), str(REPO / "bench" / "native_parse.c"),
                            str(NATIVE / "response.c"), "-o", str(built)], check=True)
        rows = [
            ("native (response.c)", per_response([str(driver), str(response)], args.big, args.small)),
            ("native, portable scans (as without SSE2: arm64)",
             per_response([str(portable), str(response)], args.big, args.small)),
        ]
    head = NGINX_RESPONSE.index(b"\r\n\r\n") + 4
    print(f"# user-space instructions per response: nginx's {len(NGINX_RESPONSE)}-byte answer ({head}-byte head), "
          f"callgrind, n={args.big} minus n={args.small}")
    native = rows[0][1]
    for name, cost in rows:
        print(f"{name:50} {cost:10,.0f}  {cost / native:6.1f}x")


if __name__ == "__main__":
    main()
