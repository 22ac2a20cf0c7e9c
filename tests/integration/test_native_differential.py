"""The same runs through `--engine native` and `--engine python`: identical counts, identical failure kinds.

Issue 22: the Python engine is the reference the native one must match, run through the whole
CLI; issue 34: on httpx, the client it keeps for HTTP/2 and the platforms without the native
engine, so that the native engine is held to a client it shares no code with. Where httpx counts
a scenario differently, the difference is a row of tests/support/httpx_differs.py's
HTTPX_DIFFERS (shown in docs/development.md), which the scenario's comparison leaves out and
checks is still true. Each scenario is made so that what it counts does not depend on
the machine's pace: a count ends it (totalRequests), or every client is stuck on one request
when the signal comes. Then requests, good, bad, failed, the status codes and the errors by
kind must be the same number for number on both engines, except where a server's fault is
itself a race (a reset at accept lands before or after the request is written: `reset` or
`closed`), where the total and the set of kinds allowed must agree. Skipped sends are never
compared: how many a client skips is the machine's pace, on either engine.

The scenarios: every server of the fault matrix (tests/integration/test_fault_matrix.py) the
native engine can send to, compress and body
hashing among them; a gzip bomb, hashed; a backendHeader naming a header the parser reads for
itself (Content-Length, Server, Connection, Transfer-Encoding); HTTPS to nginx in
each load model, without keep-alive, with a connection lifetime, with a client certificate, and
unverified (every send a `tls` failure);
SIGTERM and SIGINT with requests in flight; totalRequests in each load model; local workers;
shards; a backendHeader, and a weighted list of two URLs (each URL's counts alike too); a
server that answers a large upload before it is all written; bytes after a response (`soak
bench`'s Total transferred, against ab's); a warm-up in each load model, with a connection
lifetime, and over HTTPS (its connections going on to the run).
"""

from __future__ import annotations

import re
import resource
import signal
import subprocess
import time
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import pytest

from runner.core.errors import EXIT_NO_RESPONSE, EXIT_OK
from runner.load.fnv import fnv1a64
from runner.load.native.engine import module
from tests.conftest import Nginx, Run, assert_counts_add_up, run_soak
from tests.integration.test_fault_matrix import CASES, Case, _target_url
from tests.support.abparse import parse_ab
from tests.support.balancer import HEADER, name, named_nginx
from tests.support.certs import Pki
from tests.support.faultserver import GZIP_PLAIN, OK_BODY, FaultServer
from tests.support.httpx_differs import HTTPX_DIFFERS
from tests.support.liverun import LONG_RUN, LiveRun
from tests.support.programs import program
from tests.support.tlsservers import TlsNginx

pytestmark = pytest.mark.skipif(module() is None, reason="the native engine is not built here")

ENGINES = ("native", "python")
# Each engine with the transport it is compared on: the Python engine sends with httpx.
ENGINE_FLAGS = {"native": ("--engine", "native"), "python": ("--transport", "httpx", "--engine", "python")}
RACES = {"reset at accept", "reset at accept, noReuse", "reset at accept, 2 workers"}  # reset or closed, by a race
REFUSED = re.compile(r"soak: engine: native cannot send this run: (.*); use engine: auto or python\n")
COUNTED = ("requests", "good", "bad", "failed", "statusCodes", "errors", "connectionsOpened", "connectionsClosed",
           "hashChecked", "hashMismatches")


def engine_run(engine: str, *args: str, timeout: float = 120, refusable: bool = True) -> Run:
    """A run on `engine` (ENGINE_FLAGS: the Python one on httpx), which must start and end well; skipped if the
    native engine refuses it (with its reason), unless it must not (`refusable` False: it fails)."""
    command = list(args[:1]) if args[:1] == ("bench",) else []  # a command first, then its flags
    run = run_soak(*command, *ENGINE_FLAGS[engine], *args[len(command):], timeout=timeout)
    refused = REFUSED.fullmatch(run.stderr) if run.returncode == 2 else None
    if refused is not None and refusable:
        pytest.skip(f"the native engine refuses this run: {refused.group(1)}")
    assert run.returncode in (EXIT_OK, EXIT_NO_RESPONSE), run.stderr  # a server that never answers: 8
    assert run.engine_said == f"soak: engine: {engine}\n"
    return run


def counted(run: Run) -> dict[str, Any]:
    """What the two engines must agree on, from a run's summary (whose books must balance)."""
    bench = any(line.startswith("Benchmarking ") for line in run.lines[:5])  # ab's report: no interval lines
    summary = run.summary if bench else assert_counts_add_up(run.stdout)
    return {key: summary.get(key) for key in COUNTED} | {"engine": summary["engine"]}


def assert_same(runs: dict[str, Run], race: bool = False, connections: bool = True, differs: str = "") -> None:
    """`connections` False: the connection counts may differ. A send cancelled at a hard stop:
    the Python engine makes its Result anew and forgets the connection, which C counts. Or the
    open model: it opens a connection for each request that finds none idle, so how many it
    opens is how many requests overlapped, which the machine's pace decides (with both cores
    kept busy: 4 on one engine and 6 on the other, for the same 137 requests). `differs`: the
    scenario's row of HTTPX_DIFFERS, whose keys must differ (the row is still true) and are
    then left out."""
    assert runs["native"].returncode == runs["python"].returncode
    native, python = (counted(runs[engine]) for engine in ENGINES)
    assert (native.pop("engine"), python.pop("engine")) == ENGINES
    if differs:
        keys = HTTPX_DIFFERS[differs].keys
        assert any(native[key] != python[key] for key in keys), f"no longer differs: {differs}"
        for key in keys:
            native.pop(key), python.pop(key)
    if race or not connections:
        for key in ("connectionsOpened", "connectionsClosed"):
            native.pop(key), python.pop(key)
    if race:  # the kinds a race decides may split differently; the totals may not
        assert {k: native[k] for k in ("requests", "failed")} == {k: python[k] for k in ("requests", "failed")}
        native.pop("errors"), python.pop("errors")
    assert native == python


@pytest.mark.parametrize("model", ["closed", "open"])
@pytest.mark.parametrize("case", list(CASES.values()), ids=list(CASES))
def test_every_fault_server_counts_the_same_on_both_engines(case: Case, model: str) -> None:
    requests = max(10, case.qps // 5)  # a fifth of a second at the case's rate, at least 10
    runs = {}
    for engine in ENGINES:
        with ExitStack() as stack:
            url, _ = _target_url(case.target, stack)
            runs[engine] = engine_run(engine, "--qps", str(case.qps), "--concurrency", str(case.concurrency),
                                      "--interval", "500ms", "--iterations", "0", "--duration", "100s",
                                      "--totalRequests", str(requests), "--loadModel", model, *case.flags, url)
    case_name = next(name for name, c in CASES.items() if c is case)
    closed = model == "closed"
    assert_same(runs, race=case_name in RACES, connections=closed,
                differs=case_name if closed and case_name in HTTPX_DIFFERS else "")
    summary = assert_counts_add_up(runs["native"].stdout)
    assert summary["requests"] == requests
    if case.kinds:
        assert summary["failed"] == requests and set(summary["errors"]) <= case.kinds, summary["errors"]
    else:
        assert summary["good"] == requests


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_a_signal_with_every_client_stuck_counts_the_same_on_both_engines(sig: signal.Signals) -> None:
    """Three clients each stuck on /stall when the signal comes: each engine sends three, and
    after the grace cancels and counts those three, whatever the load."""
    runs = {}
    for engine in ENGINES:
        server = FaultServer().start()
        try:
            with LiveRun(*ENGINE_FLAGS[engine], "--qps", "10", "--concurrency", "3",
                         "--timeout", "60s", *LONG_RUN, server.url("/stall")) as live:
                live.wait_for_first_interval(timeout=30)
                time.sleep(0.3)
                live.wait(live.send(sig), timeout=30)
            runs[engine] = live.finished()
            assert server.wait_idle() and server.seen("/stall") == 3
        finally:
            server.stop()
        assert runs[engine].returncode == EXIT_NO_RESPONSE, runs[engine].stderr  # all 3 stalled, then cut
        assert assert_counts_add_up(runs[engine].stdout)["stopReason"] == f"signal {sig.name}"
    assert_same(runs, connections=False)
    assert counted(runs["native"])["errors"] == {"cancelled": 3}


@pytest.mark.parametrize("how", [("--loadModel", "closed"), ("--loadModel", "open"), ("bench",)],
                         ids=["closed", "open", "bench"])
def test_total_requests_counts_the_same_on_both_engines(nginx: Nginx, how: tuple[str, ...]) -> None:
    if how == ("bench",):
        runs = {engine: engine_run(engine, "bench", "-n", "300", "-c", "4", nginx.url) for engine in ENGINES}
        assert counted(runs["native"])["good"] == 300
    else:
        runs = {engine: engine_run(engine, *how, "--qps", "500", "--concurrency", "4", "--interval", "1s",
                                   "--iterations", "0", "--duration", "100s", "--totalRequests", "137", nginx.url)
                for engine in ENGINES}
        assert counted(runs["native"])["good"] == 137
    assert_same(runs, connections=how != ("--loadModel", "open"))


def test_local_workers_count_the_same_on_both_engines(nginx: Nginx) -> None:
    runs = {engine: engine_run(engine, "--workers", "2", "--qps", "400", "--concurrency", "4", "--interval", "1s",
                               "--iterations", "0", "--duration", "100s", "--totalRequests", "120", nginx.url)
            for engine in ENGINES}
    assert_same(runs)
    assert counted(runs["native"])["good"] == 120


@pytest.mark.parametrize("shard", ["0", "1"])
def test_a_shard_counts_the_same_on_both_engines(nginx: Nginx, shard: str) -> None:
    """One shard of two, each sending its share of totalRequests."""
    runs = {engine: engine_run(engine, "--shards", "2", "--shard", shard, "--qps", "400", "--concurrency", "4",
                               "--interval", "1s", "--iterations", "0", "--duration", "100s", "--totalRequests", "80",
                               nginx.url, timeout=180)
            for engine in ENGINES}
    assert_same(runs)
    assert counted(runs["native"])["good"] > 0


@pytest.fixture(scope="module")
def named(tmp_path_factory: pytest.TempPathFactory) -> Iterator[list[str]]:
    """Two nginx, each naming itself in X-Backend (nginx-0, nginx-1): a URL per backend, so that
    which backend answers each send is the wheel's choice, the same on both engines."""
    with ExitStack() as stack:
        yield [stack.enter_context(named_nginx(tmp_path_factory.mktemp(f"named-{i}"), i)) for i in range(2)]


PER_URL = ("url", "requests", "good", "bad", "failed", "statusCodes", "errors", "backends", "backendsReached")


def counted_per_url(run: Run) -> dict[str, Any]:
    """counted(), with the backends, the connections opened and each URL's counts (perUrl) beside.
    Not the connections closed: the native engine counts a close when epoll reports it, an idle
    connection's too (stats.native.ConnectionCounts), the Python engine when a send sees it end
    (Result.connections_closed), so a server's close of an idle connection is one engine's count
    before it is the other's."""
    summary = run.summary
    return counted(run) | {key: summary.get(key) for key in ("backends", "backendsReached", "connectionsOpened")} | {
        "perUrl": [{key: entry.get(key) for key in PER_URL} for entry in summary["perUrl"]]}


def unskipped(runs: dict[str, Run]) -> bool:
    """Whether neither run skipped a send. The wheel gives send n its URL, so a send skipped under
    load (the closed model at 400 req/s) shifts the split between URLs, and each engine skips
    others (101 and 99 once, with both cores kept busy): URL by URL, the engines' counts are the
    same number for number only where both sent every send."""
    return all(run.summary["skipped"] == 0 for run in runs.values())


def test_backends_count_the_same_on_both_engines(named: list[str]) -> None:
    """backendHeader over two URLs, each a backend: 200 sends split by the wheel, every response
    named. Both engines count each backend, per run and per URL, and the connections a lifetime of
    7 requests opens, number for number; and the native engine does send it (no refusal)."""
    runs = {engine: engine_run(engine, "--qps", "400", "--concurrency", "4", "--interval", "1s",
                               "--iterations", "0", "--duration", "100s", "--totalRequests", "200",
                               "--backendHeader", HEADER, "--maxRequestsPerConnection", "7", *named, refusable=False)
            for engine in ENGINES}
    native, python = (counted_per_url(runs[engine]) for engine in ENGINES)
    assert (native.pop("engine"), python.pop("engine")) == ENGINES
    for counts in (native, python):  # each URL is its own backend
        per_url = [entry["requests"] for entry in counts["perUrl"]]
        assert counts["backends"] == {name(0): per_url[0], name(1): per_url[1]} and counts["backendsReached"] == 2
        assert sum(per_url) == 200
    if unskipped(runs):
        assert python["backends"] == {name(0): 100, name(1): 100}
        assert native == python


def test_a_weighted_list_counts_the_same_on_both_engines(named: list[str], tmp_path: Path) -> None:
    """3:1 over two URLs (the wheel a a b a), 120 sends, a rule scoped to each: both engines send the
    same URL at each send, so each URL's counts, and the scoped rules' verdicts, are the same."""
    urls = tmp_path / "urls.txt"
    urls.write_text(f"3 {named[0]}\n{named[1]}\n")
    port = named[1].rsplit(":", 1)[1].rstrip("/")
    rules = f"errors%{{url={named[0]}}} <= 0,errors%{{url=http://127.0.0.1:{port}/}} <= 0"
    runs = {engine: engine_run(engine, "--qps", "400", "--concurrency", "3", "--interval", "1s",
                               "--iterations", "0", "--duration", "100s", "--totalRequests", "120",
                               "--thresholds", rules, "--urls", str(urls), refusable=False) for engine in ENGINES}
    native, python = (counted_per_url(runs[engine]) for engine in ENGINES)
    assert (native.pop("engine"), python.pop("engine")) == ENGINES
    assert all(sum(entry["requests"] for entry in counts["perUrl"]) == 120 for counts in (native, python))
    if unskipped(runs):
        assert [entry["requests"] for entry in python["perUrl"]] == [90, 30]
        assert native == python
    verdicts = {engine: [(r["rule"], r["ok"], r.get("url")) for r in runs[engine].summary["thresholds"]["rules"]]
                for engine in ENGINES}
    assert verdicts["native"] == verdicts["python"] and len(verdicts["python"]) == 2


def failure_texts(run: Run) -> set[str]:
    """The failure texts of a run's stderr lines (`GET "url": text (n times)`)."""
    return {m[1] for m in re.finditer(r'^GET "[^"]+": (.+) \(\d+ times?\)$', run.stderr, re.MULTILINE)}


def test_a_gzip_bomb_fails_at_the_bound_the_same_on_both_engines(fault_server: FaultServer) -> None:
    """compress, every body hashed, 4 sends of a body that inflates to 256 MiB: each fails at the
    16 MiB bound as `protocol` with the same text on both engines (bodyhash's, handed to C), and
    the native engine sends it (no refusal)."""
    url = fault_server.url("/gzip-bomb/256")
    runs = {engine: engine_run(engine, "--qps", "20", "--concurrency", "2", "--interval", "1s", "--iterations", "0",
                               "--duration", "100s", "--totalRequests", "4", "--timeout", "60s", "--compress",
                               "--hashValue", "1", "--hashSampleRate", "1", url, timeout=300, refusable=False)
            for engine in ENGINES}
    assert_same(runs)
    assert counted(runs["native"])["errors"] == {"protocol": 4}
    assert failure_texts(runs["native"]) == failure_texts(runs["python"]) == {
        "protocol: gzip body inflates to more than 16 MiB"}


@pytest.mark.parametrize(("path", "value"), [("/gzip", None), ("/ok", OK_BODY), ("/gzip-lie", None)])
def test_hashed_bodies_count_the_same_on_both_engines(fault_server: FaultServer, path: str, value: bytes | None) -> None:
    """Every body hashed, with compress and without: a gzip body is inflated only with compress, so its
    hash matches hashValue (the plain text's) with it and not without; a body that claims gzip fails
    only with compress, as the same failure. The bhash counts (hashChecked, hashMismatches), the
    failures and their texts are the same on both engines."""
    url = fault_server.url(path)
    expected = fnv1a64(value if value is not None else GZIP_PLAIN)
    for compress in (("--compress",), ()):
        runs = {engine: engine_run(engine, "--qps", "100", "--concurrency", "2", "--interval", "1s",
                                   "--iterations", "0", "--duration", "100s", "--totalRequests", "20",
                                   "--hashValue", str(expected), "--hashSampleRate", "1", *compress, url,
                                   refusable=False) for engine in ENGINES}
        assert_same(runs)
        assert failure_texts(runs["native"]) == failure_texts(runs["python"])
        native = counted(runs["native"])
        if path == "/gzip-lie" and compress:
            assert native["errors"] == {"protocol": 20} and native["hashChecked"] == 0
        else:
            assert native["hashChecked"] == 20
            assert native["hashMismatches"] == (0 if compress or path == "/ok" else 20)


@pytest.mark.parametrize("header", ["Content-Length", "server", "Connection", "Transfer-Encoding"])
def test_a_backend_header_the_parser_reads_itself_counts_the_same_on_both_engines(
        fault_server: FaultServer, header: str, request: pytest.FixtureRequest) -> None:
    """backendHeader naming a header response.c reads for its own ends: the native engine keeps its
    value too (it once sent these runs on the Python engine), as httpx reads it, for every
    response: the fault server's /ok says Content-Length: 3, its /chunked Transfer-Encoding:
    chunked; nginx says Server: nginx/... and Connection: keep-alive."""
    if header in ("server", "Connection"):
        url = request.getfixturevalue("nginx").url
    else:
        url = fault_server.url("/chunked" if header == "Transfer-Encoding" else "/ok")
    runs = {engine: engine_run(engine, "--qps", "100", "--concurrency", "2", "--interval", "1s", "--iterations", "0",
                               "--duration", "100s", "--totalRequests", "20", "--backendHeader", header, url,
                               refusable=False) for engine in ENGINES}
    assert_same(runs)
    backends = {engine: runs[engine].summary["backends"] for engine in ENGINES}
    assert backends["native"] == backends["python"]
    assert list(backends["native"].values()) == [20], backends  # one value, every response named by it


EARLY_BODY = 16 << 20  # more than a loopback socket's buffers take before the server reads (4 MiB + its window)


def test_an_answer_before_the_body_is_written_counts_the_same_on_both_engines(tmp_path: Path) -> None:
    """/early/200 answers a 16 MiB POST as soon as its head has come and reads the body only 200 ms
    later, so the response is whole while most of the body is still unwritten. Neither engine
    reuses that connection (the server reads the rest of the body first, and would take a request
    written instead of it for body bytes): each send is a good response on a connection of its
    own, counted alike. And the native engine does not spin on the idle socket meanwhile (it did
    while it kept such a connection, until the next send): two sends 10 s apart take its process
    a few percent of a core, start-up included. The CPU is the child's own (RUSAGE_CHILDREN around
    a run the test waits for), held to a fifth of the run's wall time: a busy machine stretches
    the wall time, not the CPU the run needs (3-7% here), while a loop spinning for 10 s of the
    run's 11 gets more than a fifth of a core even with two spinning processes beside it."""
    body = tmp_path / "upload"
    body.write_bytes(b"b" * EARLY_BODY)
    runs, cpu, seen = {}, {}, {}
    for engine in ENGINES:
        server = FaultServer().start()
        try:
            before, began = resource.getrusage(resource.RUSAGE_CHILDREN), time.monotonic()
            runs[engine] = engine_run(engine, "--method", "POST", "--body", f"@{body}", "--qps", "0.1",
                                      "--concurrency", "1", "--interval", "1s", "--iterations", "0", "--duration",
                                      "100s", "--timeout", "2s", "--totalRequests", "2", server.url("/early/200"),
                                      refusable=False)
            after, wall = resource.getrusage(resource.RUSAGE_CHILDREN), time.monotonic() - began
            assert server.wait_idle()
            seen[engine] = server.seen("/early/200")
        finally:
            server.stop()
        cpu[engine] = (after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime) / wall
    assert_same(runs, differs="an answer before the body is written")
    assert {key: counted(runs["native"])[key] for key in ("good", "connectionsOpened")} == {
        "good": 2, "connectionsOpened": 2}
    assert seen == {"native": 2, "python": 2}
    assert cpu["native"] < 0.2, f"{cpu['native']:.0%} of a core for two sends 10 s apart"


def test_bytes_after_a_response_are_transferred_bytes_on_both_engines_as_in_ab() -> None:
    """/extra/100 writes 100 bytes after each response's body, in the same write, so they come in
    the read that ends the response. ab's Total transferred counts the bytes it read, these too;
    so does the native engine's `soak bench`, with keep-alive and without; httpx counts only the
    responses' own (a row of HTTPX_DIFFERS). Neither engine reuses a connection that sent what
    nobody asked for, so every send is good on both (httpx did, and failed the next send on it).
    ab without -k only: with it, ab waits for ever for the response it takes the bytes for."""
    server = FaultServer().start()
    try:
        url = server.url("/extra/100")
        done = subprocess.run([program("ab", "apt-get install -y apache2-utils"), "-n", "10", "-c", "1", url],
                              capture_output=True, text=True, timeout=60)
        ab = parse_ab(done.stdout)["bench"]["totalTransferred"]
        transferred = {}
        for keep_alive in ((), ("-k",)):
            runs = {engine: engine_run(engine, "bench", "-n", "10", "-c", "1", *keep_alive, url) for engine in ENGINES}
            assert_same(runs)
            transferred[keep_alive] = {engine: run.summary["bench"]["totalTransferred"] for engine, run in runs.items()}
    finally:
        server.stop()
    head = f"HTTP/1.1 200 OK\r\nContent-Length: {len(OK_BODY)}\r\n\r\n"  # what /extra/N writes before its body
    assert ab == 10 * (len(head) + len(OK_BODY) + 100)
    own = 10 * (len(head) + len(OK_BODY))  # the responses' own bytes: all httpx counts (HTTPX_DIFFERS)
    assert HTTPX_DIFFERS["bytes after a response"].keys == ("bench.totalTransferred",)
    assert transferred == {keep_alive: {"native": ab, "python": own} for keep_alive in ((), ("-k",))}


# Stage shapes (issue 34): the ramp reaches the native engine as its due times (Ramp.due_times), so
# both engines keep the one ramp: the same goal in every interval, every send it made due sent or
# skipped, and with a count, the same sends. Up, hold, down; fractional rates over odd spans;
# a pause at 0 in the middle; and a ramp split over two shards.
SHAPES = {
    "up, hold, down": ("--stages", "1s:20,1s:20,1s:0"),
    "fractions": ("--stages", "700ms:33.3,1300ms:5"),
    "a pause": ("--stages", "500ms:16,500ms:0,500ms:0,1s:24"),
}


def goals_and_sends(run: Run) -> tuple[list[float], int]:
    """Each interval's goal, and the sends the run made or skipped (the drain's included): what a
    ramp makes due, and what became of it, which must be all of it."""
    summary = assert_counts_add_up(run.stdout)
    goals = [s["t"] for s in summary["intervalStats"]]
    assert summary["requests"] + summary["skipped"] == round(sum(goals))  # every due send sent or skipped
    assert summary["stopReason"] == "stages"
    return goals, summary["requests"] + summary["skipped"]


@pytest.mark.parametrize("model", ["closed", "open"])
@pytest.mark.parametrize("shape", list(SHAPES.values()), ids=list(SHAPES))
def test_a_stage_shape_is_the_same_ramp_on_both_engines(nginx: Nginx, shape: tuple[str, ...], model: str) -> None:
    runs = {engine: engine_run(engine, *shape, "--interval", "500ms", "--concurrency", "3", "--loadModel", model,
                               nginx.url, refusable=False) for engine in ENGINES}
    native, python = (goals_and_sends(runs[engine]) for engine in ENGINES)
    assert native == python  # the same goal interval by interval, and the same sends due in all


@pytest.mark.parametrize("shard", ["0", "1"])
def test_a_ramps_count_and_shards_count_the_same_on_both_engines(nginx: Nginx, shard: str) -> None:
    """A count that ends the ramp in its middle, and one shard of two sending its share of it."""
    runs = {engine: engine_run(engine, "--stages", "2s:200,1s:200", "--shards", "2", "--shard", shard,
                               "--interval", "500ms", "--concurrency", "4", "--totalRequests", "90", nginx.url,
                               refusable=False) for engine in ENGINES}
    assert_same(runs)
    assert counted(runs["native"])["good"] == 45


HTTPS = {
    "closed": ("--loadModel", "closed"),
    "open": ("--loadModel", "open"),
    "noReuse": ("--noReuse",),
    "lifetime": ("--maxRequestsPerConnection", "7"),
    "client certificate": ("--clientCert", "CLIENT"),
    "unverified": ("--caBundle", "OTHER_CA"),
    "bench": ("bench",),
}


@pytest.mark.parametrize("how", list(HTTPS.values()), ids=list(HTTPS))
def test_https_counts_the_same_on_both_engines(tls_nginx: TlsNginx, pki: Pki, how: tuple[str, ...]) -> None:
    """HTTPS to nginx (TLS 1.3): the same counts, kinds and connections (opened and closed, and what
    each spoke) on both engines; the native engine sends it (no refusal); nginx saw each request."""
    files = {"CLIENT": str(pki.client_combined), "OTHER_CA": str(pki.other_ca)}
    flags = tuple(files.get(flag, flag) for flag in how)
    port = tls_nginx.mtls_port if "--clientCert" in how else tls_nginx.https_port
    url = tls_nginx.url(port)
    ca = () if "--caBundle" in how else ("--caBundle", str(pki.ca))
    runs = {}
    for engine in ENGINES:
        if how == ("bench",):
            runs[engine] = engine_run(engine, "bench", "-n", "200", "-c", "4", *ca, url, refusable=False)
        else:
            runs[engine] = engine_run(engine, "--qps", "400", "--concurrency", "4", "--interval", "1s",
                                      "--iterations", "0", "--duration", "100s", "--totalRequests", "137", *ca, *flags,
                                      url, refusable=False)
    # The open model's connections are its overlaps, the machine's pace; so, with a lifetime, are
    # the closed model's where a send was skipped: a skip moves sends between clients, and which
    # connections reach their 7th request with them (18 closed of 20 opened on one engine, 17 on
    # the other, with both cores busy).
    paced = "open" in how or ("--maxRequestsPerConnection" in how and not unskipped(runs))
    assert_same(runs, connections=not paced, differs="TLS not verified" if "--caBundle" in how else "")
    native = runs["native"].summary
    requests = 200 if how == ("bench",) else 137
    if "--caBundle" in how:
        assert native["errors"] == {"tls": requests}
    else:
        assert native["good"] == requests and native["statusCodes"] == {"200": requests}
        assert set(native["connections"]) == {"HTTP/1.1 TLSv1.3"} == set(runs["python"].summary["connections"])
        assert native["phases"]["tls"]["count"] == requests and native["phases"]["tls"]["max"] > 0


# Issue 34: a warm-up on both engines. Its own books balance (every send it made due sent or
# skipped: requests + skipped = t), the run's count ends the run (totalRequests counts the run's
# sends only), and the run goes on over the warm-up's connections, counted as the Python engine
# counts them: opened by the warm-up, then by the run that takes them over (Recorder.took_over).
WARMUPS = {
    "closed": ("--loadModel", "closed"),
    "open": ("--loadModel", "open"),
    "lifetime": ("--maxRequestsPerConnection", "3"),
}
WARMUP_COUNTED = ("requests", "good", "bad", "failed", "statusCodes", "errors", "connectionsOpened",
                  "connectionsClosed", "connections")


def warmed(run: Run) -> dict[str, Any]:
    """The warm-up's section of a run's summary, its books checked: every send due sent or skipped."""
    warmup = assert_counts_add_up(run.stdout)["warmup"]
    assert warmup["requests"] + warmup["skipped"] == round(warmup["t"]), warmup
    assert 0 <= warmup["connectionsClosed"] <= warmup["connectionsOpened"], warmup
    return warmup


def assert_warmups_same(runs: dict[str, Run], connections: bool) -> None:
    """The warm-ups sent and counted alike: the same sends due, and (`connections`) the same
    connections; what they sent is the machine's pace where a client skipped, so those counts
    are compared only where neither warm-up skipped."""
    native, python = (warmed(runs[engine]) for engine in ENGINES)
    assert native["t"] == python["t"] and native["intervals"] == python["intervals"]
    if native["skipped"] == python["skipped"] == 0:
        keys = WARMUP_COUNTED if connections else WARMUP_COUNTED[:6]
        assert {k: native.get(k) for k in keys} == {k: python.get(k) for k in keys}


@pytest.mark.parametrize("how", list(WARMUPS.values()), ids=list(WARMUPS))
def test_a_warmup_counts_the_same_on_both_engines(nginx: Nginx, how: tuple[str, ...]) -> None:
    """A 1 s warm-up at 40 req/s, then a run of 60 sends: the same warm-up on both engines, the same
    run, and the native engine sends it (no refusal). Closed and keep-alive, each client's one
    connection carries the warm-up and the run: the run opens none of its own, and counts the two it
    took over (`connections`); with a lifetime, connections end in both."""
    runs = {engine: engine_run(engine, "--warmup", "1s", "--qps", "40", "--concurrency", "2", "--interval", "500ms",
                               "--iterations", "0", "--duration", "100s", "--totalRequests", "60", *how, nginx.url,
                               refusable=False)
            for engine in ENGINES}
    closed = "open" not in how
    assert_warmups_same(runs, connections=closed)
    assert_same(runs, connections=closed and unskipped(runs))
    summary = runs["native"].summary
    assert summary["requests"] == summary["good"] == 60  # totalRequests: the run's sends only
    if how == WARMUPS["closed"]:
        for engine in ENGINES:
            summary = runs[engine].summary
            assert summary["connectionsOpened"] == 2 and summary["connections"] == {"HTTP/1.1": 2}, engine
            assert summary["warmup"]["connectionsOpened"] == 2 and summary["warmup"]["connectionsClosed"] == 0


def test_an_https_warmup_hands_its_tls_connections_on_on_both_engines(tls_nginx: TlsNginx, pki: Pki) -> None:
    """Over TLS, the warm-up's connections (their SSL state, in C) go on to the run: the run makes no
    handshake of its own, and says it spoke TLS 1.3 over the two it took over, on both engines."""
    url = tls_nginx.url(tls_nginx.https_port)
    runs = {engine: engine_run(engine, "--warmup", "1s", "--qps", "40", "--concurrency", "2", "--interval", "500ms",
                               "--iterations", "0", "--duration", "100s", "--totalRequests", "60",
                               "--caBundle", str(pki.ca), url, refusable=False)
            for engine in ENGINES}
    assert_warmups_same(runs, connections=True)
    assert_same(runs)
    for engine in ENGINES:
        summary = runs[engine].summary
        assert summary["good"] == 60 and summary["connections"] == {"HTTP/1.1 TLSv1.3": 2}, engine
        assert summary["phases"]["tls"]["max"] == 0, engine  # no handshake in the run: every connection warmed
        assert summary["warmup"]["connections"] == {"HTTP/1.1 TLSv1.3": 2}, engine
