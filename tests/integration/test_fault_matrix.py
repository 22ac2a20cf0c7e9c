"""Every fault a server can commit, for both transports and both load models: counted, named, survived.

Each case aims a short, bounded run (2 intervals of 500 ms, 5-200 req/s, on loopback only) at
one misbehaving server of tests/support/faultserver.py and checks what must hold at any load:

- the run ends by itself with exit code 0 (8 when not one response came back, with its line last
  on stderr) and no traceback; stderr holds error lines only;
- every interval line parses, agrees with the summary's intervalStats, and its failures
  add up to its errors; no interval has counted more sends than were due by its end;
- the summary's good + bad + failed = requests, and requests + skipped = the sends due;
- every failure is of the kind the case names, with its text; where the request reaches
  the server, the server received no more requests than were counted.

No case asserts how many requests were made: that depends on the client keeping pace.
The only names that are not loopback addresses end in `.invalid` (RFC 6761: never
resolves) and `.test`, looked up inside a mount namespace whose resolver is a silent
socket on 127.0.0.0/8.
"""

from __future__ import annotations

import asyncio
import os
import random
import re
import socket
import subprocess
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

from runner.load import failures
from runner.load.fnv import fnv1a64
from runner.load.request import Request
from runner.load.transport import MAX_HEAD_BYTES, TransportOptions
from tests.conftest import (
    REPO,
    Run,
    assert_counts_add_up,
    exit_for,
    failure_lines,
    parse_interval,
    run_soak,
    soak_command,
)
from tests.support.dnsserver import can_unshare, with_resolver
from tests.support.faultserver import (
    GZIP_PLAIN,
    OK_BODY,
    FaultServer,
    refused_port,
    reset_at_accept_server,
    unaccepting_port,
)

pytestmark = pytest.mark.usefixtures("transport")

# Two intervals, so that the books are checked across a boundary; short, since no case is about
# time: the faults are the same in a second of sending as in two.
INTERVAL_MS, ITERATIONS = 500, 2
INTERVALS = ("--interval", f"{INTERVAL_MS}ms", "--iterations", str(ITERATIONS))
ERROR_LINE = re.compile(r'^[A-Z]+ "(?P<url>[^"]+)": (?P<text>.+) \((?P<count>\d+) times?\)$')
MiB = 1 << 20
CLOSED_TEXT = re.escape("closed: Server disconnected without sending a response.")
RESET_TEXT = "connection reset by peer"
SHORT_TIMEOUT = ("--timeout", "500ms")
HASHED = ("--compress", "--hashSampleRate", "1")


@dataclass(frozen=True)
class Case:
    """One fault: where to aim, what every request must end as, and how to run it.

    `target` is a path on a FaultServer, or one of the servers `_target_url` makes.
    `kinds`: the failure kinds allowed (every request fails, as one of them); empty: every
    request is a good response. `text`: a regular expression every error text matches.
    """

    target: str
    kinds: frozenset[str] = frozenset()
    text: str = ""
    flags: tuple[str, ...] = ()
    qps: int = 20
    concurrency: int = 2


def fails(target: str, kinds: str, text: str, *flags: str, qps: int = 20, concurrency: int = 2) -> Case:
    return Case(target, frozenset(kinds.split()), text, flags, qps, concurrency)


CASES = {
    # At accept: the connection is reset, often before a request is even written. The clients of
    # the report (5), at the rate that makes 200 new connections in the run's second, so that some
    # reset lands between the connect and the write: that race is what used to crash a client.
    "reset at accept": fails("reset-server", "reset closed", f"{RESET_TEXT}|{CLOSED_TEXT}", qps=200, concurrency=5),
    "reset at accept, noReuse": fails("reset-server", "reset closed", f"{RESET_TEXT}|{CLOSED_TEXT}", "--noReuse",
                                      qps=200, concurrency=5),
    "reset at accept, 2 workers": fails("reset-server", "reset closed", f"{RESET_TEXT}|{CLOSED_TEXT}",
                                        "--workers", "2", qps=200, concurrency=6),
    "reset mid-body": fails("/reset-mid-body", "reset", RESET_TEXT),
    "close before response": fails("/close", "closed", CLOSED_TEXT),
    "100 then 200": Case("/interim/100"),
    "lone 102 then close": fails("/interim/102-close", "closed", CLOSED_TEXT),
    "lone 102 then stall": fails("/interim/102-stall", "timeout", "timeout: no response headers within 500ms",
                                 *SHORT_TIMEOUT),
    "101 switching protocols": fails("/switch", "protocol", re.escape(failures.SWITCHED_PROTOCOLS)),
    "endless headers": fails("/endless-headers", "protocol", re.escape(failures.head_too_large(MAX_HEAD_BYTES))),
    "endless chunk-size line": fails("/endless-chunk-line", "protocol",
                                     re.escape(failures.framing_too_large(MAX_HEAD_BYTES))),
    "bad chunking": fails("/bad-chunking", "protocol", r"protocol: .*chunk.*"),
    "huge bodies": Case(f"/big/{4 * MiB}", flags=("--timeout", "30s")),
    "slow trickle, in time": Case("/trickle/10/20"),  # 10 bytes, one every 20 ms
    "slow trickle, past the timeout": fails("/trickle/100/20", "timeout", "timeout: no complete body within 500ms",
                                            *SHORT_TIMEOUT),
    "refused": fails("refused", "refused", "connection refused"),
    "connect never answered": fails("unaccepting", "timeout", r"timeout: connect to 127\.0\.0\.1:\d+ not made within 500ms",
                                    *SHORT_TIMEOUT),
    "TLS handshake never answered": fails("silent-tls", "timeout",
                                          r"timeout: TLS handshake with 127\.0\.0\.1:\d+ not finished within 500ms",
                                          *SHORT_TIMEOUT),
    # A low rate: each lookup of the name goes to the machine's real resolver.
    "DNS failure": fails("dns", "dns", "dns: .+", qps=5, concurrency=1),
    # compress with hashSampleRate: only a body that says gzip is inflated, and one that lies fails.
    "compress, plain body hashed": Case("/ok", flags=(*HASHED, "--hashValue", str(fnv1a64(OK_BODY)))),
    "compress, gzip body hashed": Case("/gzip", flags=(*HASHED, "--hashValue", str(fnv1a64(GZIP_PLAIN)))),
    "compress, body that claims gzip": fails("/gzip-lie", "protocol", re.escape(failures.GZIP_TEXT) + r" \(.+\)",
                                             *HASHED),
}


@pytest.mark.parametrize("model", ["closed", "open"])
@pytest.mark.parametrize("case", list(CASES.values()), ids=list(CASES))
def test_fault(case: Case, model: str) -> None:
    with ExitStack() as stack:
        url, server = _target_url(case.target, stack)
        run = run_soak("--qps", str(case.qps), "--concurrency", str(case.concurrency), *INTERVALS,
                       "--loadModel", model, *case.flags, url, timeout=120)
        summary = check_books(run, case.qps)
        if server is not None and case.target.startswith("/"):
            assert server.wait_idle(), "the server still has a connection open after the runner exited"
            counted = summary["requests"] - summary["errors"].get("cancelled", 0)
            assert counted <= server.seen() <= summary["requests"], "requests the run did not count reached the server"
    if not case.kinds:
        assert summary["good"] == summary["requests"] > 0 and summary["errors"] == {}, summary["errors"]
        assert run.stderr == ""
        if "--hashValue" in case.flags:
            assert summary["hashChecked"] == summary["requests"] and summary["hashMismatches"] == 0
        return
    assert summary["failed"] == summary["requests"] > 0
    assert set(summary["errors"]) <= case.kinds, summary["errors"]
    texts = {m["text"] for m in error_lines(run)}
    assert texts, run.stderr
    for text in texts:
        assert re.fullmatch(case.text, text), f"error text {text!r} does not match {case.text!r}"


@contextmanager
def _fault_server(on_accept: str = "serve") -> Iterator[FaultServer]:
    server = FaultServer(on_accept).start()
    try:
        yield server
    finally:
        server.stop()


def _target_url(target: str, stack: ExitStack) -> tuple[str, FaultServer | None]:
    """The URL for a case's target, with whatever serves it kept open on `stack`."""
    if target.startswith("/"):
        server = stack.enter_context(_fault_server())
        return server.url(target), server
    if target == "reset-server":
        return f"http://127.0.0.1:{stack.enter_context(reset_at_accept_server())}/", None
    if target == "silent-tls":
        server = stack.enter_context(_fault_server("silent"))
        return f"https://127.0.0.1:{server.port}/", server
    if target == "refused":
        closed = stack.enter_context(refused_port())
        return f"http://127.0.0.1:{closed.getsockname()[1]}/", None
    if target == "unaccepting":
        listener, filler = unaccepting_port()
        stack.enter_context(listener)
        stack.enter_context(filler)
        return f"http://127.0.0.1:{listener.getsockname()[1]}/", None
    assert target == "dns", target
    return "http://no-such-host.invalid:8080/", None


def due_by(qps: int, ms: int) -> int:
    """How many sends are due before `ms` into the run: send n is due at n / qps s."""
    return -(-qps * ms // 1000)


def check_books(run: Run, qps: int) -> dict:
    """The run ended well and its books balance, in every interval line and in the summary."""
    assert "Traceback" not in run.stderr, run.stderr
    error_lines(run)
    summary = assert_counts_add_up(run.stdout)
    assert run.returncode == exit_for(summary), run.stderr
    due = due_by(qps, INTERVAL_MS * ITERATIONS)
    assert summary["requests"] + summary["skipped"] == due, (summary["requests"], summary["skipped"], due)
    counted = 0
    for line, stats in zip(run.interval_lines, summary["intervalStats"], strict=True):
        fields = parse_interval(line)
        assert (fields.good, fields.bad, fields.failed) == (stats["good"], stats["bad"], stats["failed"]), line
        assert sum(stats.get("errors", {}).values()) == stats["failed"], stats
        # Results count where they end, skips where they were due: never before they were due.
        counted += fields.requests + stats["skipped"]
        assert counted <= due_by(qps, INTERVAL_MS * (fields.iteration + 1)), (line, stats)
    return summary


def error_lines(run: Run) -> list[re.Match[str]]:
    """stderr as error lines; anything else on it fails the test."""
    found = []
    for line in failure_lines(run.stderr):
        m = ERROR_LINE.match(line)
        assert m, f"unexpected stderr line: {line!r}\n{run.stderr}"
        found.append(m)
    return found


# --- Names the resolver never answers, and names that cannot be looked up ---------------


def silent_resolver() -> socket.socket:
    """A UDP socket on port 53 of a free address of 127.83.0.0/16 that never answers: where the
    namespace's resolv.conf points. Port 53 is one per address, and other tests (other xdist
    processes, other runs on the machine) may hold one, so the address is chosen at random."""
    chooser = random.Random()
    for _ in range(50):
        silent = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        try:
            silent.bind((f"127.83.{chooser.randrange(256)}.{chooser.randrange(1, 255)}", 53))
            return silent
        except OSError:
            silent.close()
    raise RuntimeError("no free address of 127.83.0.0/16 for a silent resolver")


@pytest.mark.skipif(not can_unshare(), reason="needs root and unshare --mount, to give the run a silent resolver")
@pytest.mark.parametrize("model", ["closed", "open"])
def test_dns_lookup_never_answered(model: str, tmp_path: Path) -> None:
    """A DNS server that never answers: the timeout names the lookup, not the response headers.

    The run gets its own /etc/resolv.conf (bind-mounted in a private mount namespace)
    naming a UDP socket on loopback that reads queries and never answers them. Lookups
    still blocked when the run ends must not hold the process up either.
    """
    resolv = tmp_path / "resolv.conf"
    with silent_resolver() as silent:
        # Each lookup waits 30 s (the resolver's most) for an answer: far past the run's end.
        resolv.write_text(f"nameserver {silent.getsockname()[0]}\noptions timeout:30 attempts:1\n")
        command = soak_command("--qps", "20", "--concurrency", "2", *INTERVALS, "--loadModel", model,
                               *SHORT_TIMEOUT, "http://soak-never-answered.test/")
        started = time.monotonic()
        done = subprocess.run(with_resolver(resolv, command), capture_output=True, text=True, timeout=60, cwd=REPO,
                              env={**os.environ, "TZ": "UTC"})
        took = time.monotonic() - started
        silent.setblocking(False)
        assert silent.recv(512), "the run's lookups did not reach the silent resolver"
    run = Run(done.returncode, done.stdout, done.stderr)
    summary = check_books(run, 20)
    assert summary["errors"] == {"timeout": summary["requests"]}
    texts = {m["text"] for m in error_lines(run)}
    assert texts == {"timeout: DNS lookup of soak-never-answered.test not answered within 500ms"}
    # A 1 s run; lookups still waiting for their 30 s once it is over must not keep it from exiting.
    assert took < 25, f"the run took {took:.1f} s to exit"


@pytest.mark.parametrize("host", ["a" * 64 + ".invalid", "a..b"], ids=["label over 63", "empty label"])
def test_a_host_name_the_idna_codec_refuses_is_a_dns_failure(transport: str, host: str) -> None:
    """Such names are refused up front by validation; a transport meeting one anyway fails the
    send as `dns`, saying why, instead of raising UnicodeError out of the client.

    Straight at the transport, since the command line no longer lets such a URL through.
    """
    from runner.load.clients import TRANSPORTS

    if transport == "native":  # the native engine takes no such name: a name it cannot resolve refuses it
        pytest.skip("straight at a Python transport; the native engine has none")
    options = TransportOptions(timeout_ns=2_000_000_000, no_reuse=False, compress=False, max_connections=1)

    async def send() -> tuple[str, str]:
        session = TRANSPORTS[transport](options).session()
        try:
            result = await session.send(Request("GET", f"http://{host}/", (), b""), False)
        finally:
            await session.aclose()
        return result.error, result.error_text

    assert asyncio.run(send()) == ("dns", f"dns: {host} is not a valid host name (label empty or too long)")


def test_the_head_limit_is_httpcores() -> None:
    """Both transports refuse a head over MAX_HEAD_BYTES; httpx's limit is httpcore's, so they must agree."""
    from httpcore._async.http11 import AsyncHTTP11Connection

    assert AsyncHTTP11Connection.MAX_INCOMPLETE_EVENT_SIZE == MAX_HEAD_BYTES
