"""Response bytes replayed into the native parser, and what may be asked of its answers without
a second parser to compare them with.

`native_parser` builds the C parser's test binding (runner/load/native) from the sources
into a temporary directory, so a test always runs the code in the tree, however the
package was installed. `native` feeds it reads as the engine feeds it each read.

`reading` is the answer with everything that depends on where the reads fell taken out
(positions become offsets into the whole stream), so that two feeds of the same bytes can be
compared field for field: however a socket cuts a response, what the parser makes of it is
the same (a bound checked after each read is the one exception: `BOUND_TEXTS`).
`broken_rules` lists what a reading breaks of rules that hold for any bytes whatever (bytes
add up, a close ends everything, a failure has a kind); neither needs to know what the bytes
should have come to, which is the contract table's (tests/support/contract.py).
"""

from __future__ import annotations

import importlib.util
import shlex
import sysconfig
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from runner.load import failures
from runner.load.transport import MAX_HEAD_BYTES
from tests.support.cbuild import OUTPUT, compiled

REPO = Path(__file__).resolve().parents[2]
# The backendHeader (the pallet's) whose value every replay keeps.
BACKEND = "X-Soak-Backend"
BACKEND_MAX = 64  # SOAK_BACKEND_MAX: the bytes of its value kept
BLANKS = " \t\x85\xa0"  # what is taken off either end of a kept value (str.strip() of a latin-1 value)
# The failures whose place depends on where reads end: a bound is checked after each read.
BOUND_TEXTS = (failures.head_too_large(MAX_HEAD_BYTES), failures.framing_too_large(MAX_HEAD_BYTES))

# What a build for a machine without SSE2 (arm64, the other platform the image and wheels are
# built for) differs in that the parser could notice: the portable scans (-DSOAK_PORTABLE) and,
# as arm64's ABI has it, an unsigned plain char. The tests build this beside the native one.
PORTABLE = ("-DSOAK_PORTABLE", "-funsigned-char")


def native_parser(build_dir: Path, defines: tuple[str, ...] = ()) -> ModuleType:
    """runner.load.native._response, compiled from the tree's sources into `build_dir`.

    With the compiler and flags this Python was built with (sysconfig), not through setup.py:
    the test is of the C code, and a setup.py run would need the build system's own
    setuptools (pyproject's build-system), which a test environment need not have.
    `defines` go to the compiler: PORTABLE builds the parser as on a machine without SSE2.
    """
    native_dir = REPO / "runner" / "load" / "native"
    compiler = shlex.split(sysconfig.get_config_var("CC") or "cc")
    flags = ["-shared", "-fPIC", "-O2", *defines, f"-I{sysconfig.get_paths()['include']}", "-o", OUTPUT]
    sources = [str(native_dir / "_response.c"), str(native_dir / "response.c")]
    # Compiled once per test run (tests/support/cbuild.py); `build_dir` keeps a failure's output.
    target, done = compiled([*compiler, *flags, *sources], f"_response{sysconfig.get_config_var('EXT_SUFFIX')}")
    if not target.exists():
        output = f"{done.stdout}{done.stderr}" if done is not None else ""
        (build_dir / "compiler.log").write_text(output)
        pytest.fail("the native parser did not build (it needs a C compiler and the Python headers: "
                    f"apt-get install -y gcc python3-dev):\n{output}")
    spec = importlib.util.spec_from_file_location("runner.load.native._response", target)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def native(parser: ModuleType, method: str, chunks: list[bytes], eof: bool = False) -> dict[str, Any]:
    """What the parser says of `chunks`, fed one read each, then the close if `eof`."""
    return parser.parse(method, chunks, MAX_HEAD_BYTES, eof, BACKEND)  # type: ignore[no-any-return]


@dataclass(frozen=True)
class Reading:
    """What the parser made of a stream, nothing in it depending on where the reads fell."""

    outcome: str  # pending, done or failed
    kind: str  # a failure's: protocol or closed
    text: str
    status: int
    head_done: bool  # the final head was read (a timeout names the phase by it)
    header_bytes: int  # of a response that is done: its head(s) and framing
    body_bytes: int
    content_length: int
    consumed: int  # bytes the parser took, the reads' counts added up
    wire_bytes: int  # ... as it counts them itself
    head_at: int | None  # offset in the stream where the final head ended
    end_at: int | None  # offset where the response ended
    by_close: bool  # the close ended it
    keep_alive: bool  # the server keeps the connection
    server: str
    server_cut: bool
    gzip: bool
    backend: str


def _offset(chunks: list[bytes], at: tuple[int, int] | None) -> int | None:
    if at is None:
        return None
    index, offset = at
    return sum(map(len, chunks[:index])) + offset


def reading(parser: ModuleType, method: str, chunks: list[bytes], eof: bool = False) -> Reading:
    """`native`'s answer, its positions made offsets into the whole stream."""
    said = native(parser, method, chunks, eof)
    return Reading(said["outcome"], said["kind"], said["text"], said["status"], said["head_done"],
                   said["header_bytes"], said["body_bytes"], said["content_length"], sum(said["consumed"]),
                   said["wire_bytes"], _offset(chunks, said["head_at"]), _offset(chunks, said["end_at"]),
                   said["end_at"] is not None and said["end_at"][0] == len(chunks), said["keep_alive"],
                   said["server"], said["server_cut"], said["gzip"], said["backend"])


def differing(one: Reading, other: Reading) -> list[str]:
    """The fields in which two readings differ, each as `name: one != other`."""
    return [f"{name}: {getattr(one, name)!r} != {getattr(other, name)!r}" for name in Reading.__dataclass_fields__
            if getattr(one, name) != getattr(other, name)]


def same_whatever_the_reads(whole: Reading, other: Reading) -> list[str]:
    """How `other` (the same bytes, read otherwise) differs from `whole`.

    Where either failed at a bound, the other may only have failed at the same bound or still
    wait: a bound is checked after each read (a head or a run of framing is held to it once it
    is all in, whatever a single read brought), so reads of other sizes may pass it or not."""
    if whole.text in BOUND_TEXTS or other.text in BOUND_TEXTS:
        texts = {whole.text, other.text} - {""}
        if len(texts) == 1 and {whole.outcome, other.outcome} <= {"failed", "pending"}:
            return []
        return [f"at a bound: {whole.outcome} {whole.text!r} != {other.outcome} {other.text!r}"]
    return differing(whole, other)


def broken_rules(r: Reading, method: str, data: bytes, eof: bool) -> list[str]:
    """The rules `r`, the reading of `data` (then the close, if `eof`), breaks; [] when none.

    Each holds for any bytes at all, so none needs to know what they should have come to."""
    return [rule for rule, kept in _rules(r, method, data, eof) if not kept]


def _rules(r: Reading, method: str, data: bytes, eof: bool) -> list[tuple[str, bool]]:
    done, failed, pending = r.outcome == "done", r.outcome == "failed", r.outcome == "pending"
    return [
        ("an outcome is pending, done or failed", done or failed or pending),
        # A run counts failures by kind and prints the text: a kind it does not know is lost.
        ("a failure has a known kind, its text starts with it, and nothing else has either",
         r.kind in ("protocol", "closed") and r.text.startswith(f"{r.kind}: ") if failed else r.kind == r.text == ""),
        ("only the close fails as closed", r.kind != "closed" or eof),
        ("the close ends every response: done or failed, never waiting", not (eof and pending)),
        ("what the parser took adds up to what it counts, and no more than it was fed",
         r.consumed == r.wire_bytes <= len(data)),
        # Else bytes would be lost between reads: the engine hands the parser only what it has not taken.
        ("a response still waiting took every byte", not pending or r.wire_bytes == len(data)),
        ("a response is done only after its final head, at an end within what was taken",
         not done or (r.head_done and r.end_at is not None and r.head_at is not None
                      and r.head_at <= r.end_at == r.wire_bytes)),
        ("a final status is 200 to 999 (1xx are interim, 101 fails)", not done or 200 <= r.status <= 999),
        # The engine counts header and body bytes per response: every byte up to its end is one or the other.
        ("a response's bytes add up: head and framing, then body (none after HEAD)",
         not done or r.header_bytes + (0 if method == "HEAD" else r.body_bytes) == r.end_at),
        ("the body is never more than the bytes taken", r.body_bytes <= r.wire_bytes),
        ("a response ended by the close took every byte and is not kept",
         not r.by_close or (done and eof and r.wire_bytes == len(data) and not r.keep_alive)),
        ("only a response that is done keeps the connection", not r.keep_alive or done),
        ("Server is cut at 256 bytes, and said to be", len(r.server) <= 256 and (not r.server_cut or len(r.server) == 256)),
        ("Server and the backendHeader are bytes of the stream, blanks off either end",
         all(value.encode("latin-1") in data and (value == value.strip(BLANKS) or cut)
             for value, cut in ((r.server, r.server_cut), (r.backend, len(r.backend) == BACKEND_MAX)))),
        ("the backendHeader's value is cut at 64 bytes", len(r.backend) <= BACKEND_MAX),
        ("gzip is said only where the stream names it", not r.gzip or b"gzip" in data.lower()),
    ]
