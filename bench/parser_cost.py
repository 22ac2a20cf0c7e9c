"""What parsing one response costs, in user-space instructions: the native parser against httptools.

    python bench/parser_cost.py [--big 100000] [--small 10000]

Each row parses nginx's answer for its 612-byte page (tests/support/responses.py) over and
over, as on a keep-alive connection, under `valgrind --tool=callgrind`; a run of --big
responses minus a run of --small, divided by the difference, is the cost of one response,
start-up excluded. Instruction counts are the one figure that repeats on a shared machine.

- native: runner/load/native/response.c, built with gcc -O2 into bench/native_parse.c's
  driver: a fresh parser fed the whole response in one read; and built as where there is no
  SSE2 (-DSOAK_PORTABLE, unsigned char: arm64's scans, counted on this machine);
- httptools: llhttp as the fast transport runs it, one HttpResponseParser fed the response
  again and again, with the three callbacks http1.py has (doing nothing);
- http1.Connection: the fast transport's whole framing per response on a kept-alive
  connection (send(), then data_received() of the response), its Result and Future
  included; a tenth as many responses, as it is slower to count.

Nothing is asserted and no load is sent anywhere.
"""

from __future__ import annotations

import argparse
import os
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

HTTPTOOLS = """
import sys, httptools
class Protocol:
    def on_headers_complete(self): pass
    def on_body(self, body): pass
    def on_message_complete(self): pass
data = open(sys.argv[1], "rb").read()
parser = httptools.HttpResponseParser(Protocol())
for _ in range(int(sys.argv[2])):
    parser.feed_data(data)
"""

CONNECTION = """
import sys
sys.path.insert(0, sys.argv[2])
from tests.support.replay import PythonTransport
data = open(sys.argv[1], "rb").read()
with PythonTransport() as transport:
    transport.keep_alive_responses(data, int(sys.argv[3]))
"""


def instructions(command: list[str]) -> int:
    """User-space instructions a command executes, as callgrind counts them (Python's hashing
    seeded alike, so that a count repeats)."""
    done = subprocess.run(["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", *command],
                          capture_output=True, text=True, check=False, env={**os.environ, "PYTHONHASHSEED": "0"})
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
            ("httptools (llhttp and 3 callbacks)",
             per_response([sys.executable, "-c", HTTPTOOLS, str(response)], args.big, args.small)),
            ("http1.Connection (the fast transport's framing)",
             per_response([sys.executable, "-c", CONNECTION, str(response), str(REPO)], args.big // 10,
                          args.small // 10)),
        ]
    head = NGINX_RESPONSE.index(b"\r\n\r\n") + 4
    print(f"# user-space instructions per response: nginx's {len(NGINX_RESPONSE)}-byte answer ({head}-byte head), "
          f"callgrind, n={args.big} minus n={args.small}")
    native = rows[0][1]
    for name, cost in rows:
        print(f"{name:50} {cost:10,.0f}  {cost / native:6.1f}x")


if __name__ == "__main__":
    main()
