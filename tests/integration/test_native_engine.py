"""The native engine (runner/load/native/core.c) driven as a run drives an engine, on loopback.

Against real nginx and the misbehaving servers of tests/support/faultserver.py, through its
Python side (runner.load.native.engine, runner.stats.native), built from the tree's sources.
Every assertion holds at any load: counts add up (requests + skipped = the sends due), a
count is exact, nothing is sent after a stop (the server's own count), and each failure is
named as the Python engine (on httpx) names it on the same server: never that the client kept pace.
"""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import ExitStack

import pytest

from runner.config.targets import Targets
from runner.metrics.tally import MetricsTally, holding
from runner.run.engines import native_run
from runner.stats.figures import NO_BACKEND, OTHER_BACKENDS, backends_reached
from runner.stats.native import ConnectionCounts, TakenRecorder
from runner.stats.recorder import BACKENDS_KEPT, Interval, Tally
from tests.conftest import NGINX_PAGE, Nginx, assert_due_sends_accounted
from tests.support.balancer import HEADER, named_nginx
from tests.support.balancer import name as backend_name
from tests.support.faultserver import CHUNKED_SIZE, OK_BODY, FaultServer, refused_port, unaccepting_port
from tests.support.httpx_differs import ERROR_TEXT, HTTPX_DIFFERS
from tests.support.nativerun import Plan, Ran, native_engine_module, run_native, run_python


@pytest.fixture(scope="module", autouse=True)
def engine_module(tmp_path_factory: pytest.TempPathFactory) -> object:
    """The engine compiled from the tree, for every test here."""
    return native_engine_module(tmp_path_factory.mktemp("native-engine"))


def assert_accounted(ran: Ran) -> None:
    """The run's own books: intervals and drain sum to the run, requests + skipped = due."""
    parts = Tally()
    for interval in ran.intervals:
        parts.merge(interval.tally)
    if ran.drain is not None:
        parts.merge(ran.drain)
    assert (parts.good, parts.bad, parts.failed, parts.skipped) == (ran.run.good, ran.run.bad, ran.run.failed,
                                                                   ran.run.skipped)
    assert sum(ran.run.errors.values()) == ran.run.failed
    assert sum(ran.run.statuses.values()) == ran.run.responses
    assert ran.run.latency.count == ran.run.responses
    assert [i.index for i in ran.intervals] == list(range(len(ran.intervals)))
    assert_due_sends_accounted(ran.summary())


def _wait_logged(nginx: Nginx, at_least: int, timeout: float = 5.0) -> int:
    """nginx's own count of requests, once it has logged `at_least` (or the timeout passed)."""
    deadline = time.monotonic() + timeout
    while nginx.requests_logged() < at_least and time.monotonic() < deadline:
        time.sleep(0.05)
    return nginx.requests_logged()


# --- against nginx --------------------------------------------------------------------------


def test_a_closed_soak_against_nginx_counts_every_due_send(nginx: Nginx) -> None:
    before = nginx.requests_logged()
    ran = run_native(Plan([nginx.url], qps=200, clients=4, seconds=1.5, interval_s=0.5))
    assert_accounted(ran)
    assert ran.requests > 0 and ran.run.failed == 0
    assert ran.run.statuses == Counter({200: ran.run.good})
    assert ran.run.bytes_in == len(NGINX_PAGE) * ran.run.good
    assert _wait_logged(nginx, before + ran.requests) - before == ran.requests  # what nginx saw
    assert ran.engine.sent == ran.requests
    assert ran.recorder.send_lag is not None and ran.recorder.send_lag.count == ran.requests
    assert ran.recorder.connections["HTTP/1.1"] <= 4  # keep-alive: one connection per client


def test_total_requests_is_exact_in_every_model(nginx: Nginx) -> None:
    for plan in (Plan([nginx.url], qps=2000, clients=5, seconds=None, total_requests=137),
                 Plan([nginx.url], qps=2000, clients=5, seconds=None, total_requests=101, open_model=True),
                 Plan([nginx.url], clients=7, seconds=None, total_requests=1000, bench=True)):
        before = nginx.requests_logged()
        ran = run_native(plan)
        assert ran.requests == plan.total_requests == ran.engine.sent, plan
        assert _wait_logged(nginx, before + ran.requests) - before == plan.total_requests
        if not plan.bench:
            assert_accounted(ran)
            assert ran.sending_end_ns == ran.engine.stopped_sending_ns


def test_a_bench_counts_abs_figures(nginx: Nginx) -> None:
    ran = run_native(Plan([nginx.url], clients=3, seconds=None, total_requests=300, bench=True))
    bench = ran.recorder.bench
    assert bench is not None and ran.run.good == 300
    assert bench.document_length == len(NGINX_PAGE) and bench.length_mismatches == 0
    assert bench.server is not None and bench.server.startswith("nginx")
    assert bench.total.count == 300 and bench.waiting.count == 300 and bench.connect_new.count == 3
    assert bench.kept_alive == 300 and bench.header_bytes > 0 and bench.last_end_ns > 0
    assert ran.recorder.send_lag is None


def test_nothing_is_sent_after_a_stop(nginx: Nginx) -> None:
    before = nginx.requests_logged()
    ran = run_native(Plan([nginx.url], qps=500, clients=3, seconds=30, stop_after_s=0.6, interval_s=0.25))
    assert_accounted(ran)
    assert ran.sending_end_ns >= ran.schedule.start_ns + 600 * 1_000_000
    seen = _wait_logged(nginx, before + ran.requests)
    time.sleep(0.3)
    assert nginx.requests_logged() == seen and seen - before == ran.requests
    assert ran.engine.sent == ran.requests


def test_a_stop_asked_for_while_the_engine_went_on_sending_takes_effect_after_its_sends(nginx: Nginx) -> None:
    """A signal's stop is dated when Python handles it, and reaches C's thread once it lets go of
    its lock: at 3,000 req/s the thread had sent sends due after that date (requests + skipped
    over the due sends by 2, under load). Dated 100 ms back, every such send is one of ~300:
    the stop must take effect after the last send made, so the books still balance."""
    ran = run_native(Plan([nginx.url], qps=3000, clients=30, seconds=30, stop_after_s=0.5, stop_dated_back_s=0.1))
    assert_accounted(ran)  # requests + skipped = the sends due before the stop
    assert ran.engine.sent == ran.requests


def test_without_keep_alive_every_request_has_its_connection(nginx: Nginx) -> None:
    before = nginx.requests_logged()
    ran = run_native(Plan([nginx.url], qps=300, clients=3, seconds=1.0, no_reuse=True))
    assert_accounted(ran)
    assert ran.run.failed == 0 and ran.requests > 0
    lines = nginx.log_lines()[before:]
    assert len({line.split()[0] for line in lines}) == len(lines) == ran.requests  # a connection each
    assert ran.recorder.connections["HTTP/1.1"] == ran.requests


@pytest.mark.parametrize("engine", ["native", "python"])
def test_the_slowest_answer_the_clients_delay_may_be_in_is_counted_alike(nginx: Nginx, engine: str) -> None:
    """stats.client.holds_delay, as both engines file it: without keep-alive every answer opened its
    connection (the loop saw the connect), so the slowest of them is the slowest of all; with it,
    only the first answer of each connection did (the rest, timed by the kernel, hold none), so
    it is some answer's latency, no more than the slowest's, and the intervals' make the run's."""
    run = run_native if engine == "native" else run_python
    fresh = run(Plan([nginx.url], qps=300, clients=3, seconds=None, total_requests=60, no_reuse=True))
    assert fresh.run.good == 60 and fresh.run.delayed_max_ns == fresh.run.latency.max > 0
    kept = run(Plan([nginx.url], qps=300, clients=3, seconds=None, total_requests=60))
    assert kept.run.good == 60 and 0 < kept.run.delayed_max_ns <= kept.run.latency.max
    assert kept.run.delayed_max_ns == max(i.tally.delayed_max_ns for i in kept.intervals)


def _by_connection(lines: list[str]) -> dict[str, list[str]]:
    """nginx's log lines by connection: each request's `Connection` header ("-": none), in order."""
    found: dict[str, list[str]] = {}
    for line in lines:
        fields = line.split()
        found.setdefault(fields[0], []).append(fields[8].strip("\""))
    return found


@pytest.mark.parametrize("engine", ["native", "python"])
def test_a_request_limit_ends_each_connection_after_its_nth_saying_so(nginx: Nginx, engine: str) -> None:
    """maxRequestsPerConnection 4: every connection carries exactly 4 requests, the 4th with
    `Connection: close`, and the next send dials anew; both engines alike, at any load. One
    client: how 40 requests split between two is the machine's pace (21 and 19 make 11)."""
    before = nginx.requests_logged()
    plan = Plan([nginx.url], qps=400, clients=1, seconds=None, total_requests=40, max_requests=4)
    ran = (run_native if engine == "native" else run_python)(plan)
    assert ran.run.good == 40 and ran.recorder.connections["HTTP/1.1"] == 10
    _wait_logged(nginx, before + 40)
    carried = _by_connection(nginx.log_lines()[before:])
    assert sorted(carried.values()) == [["-"] * 3 + ["close"]] * 10, carried


def test_connections_opened_and_closed_are_counted_per_interval_and_for_the_run(nginx: Nginx) -> None:
    ran = run_native(Plan([nginx.url], qps=400, clients=1, seconds=None, total_requests=40, max_requests=4,
                          interval_s=0.05))
    recorder = ran.recorder
    assert isinstance(recorder, TakenRecorder)
    assert len(recorder.interval_connections) == len(ran.intervals)
    assert recorder.run_connections == ConnectionCounts(10, 10)  # each closed by its lifetime, after its 4th
    assert sum(c.opened for c in recorder.interval_connections) == 10
    assert sum(c.closed for c in recorder.interval_connections) == 10
    kept = run_native(Plan([nginx.url], qps=400, clients=3, seconds=None, total_requests=30))
    counts = kept.recorder.run_connections  # type: ignore[union-attr]
    assert 1 <= counts.opened <= 3  # one kept by each client that sent
    assert counts.closed == 0  # still open at the end, as the Python engine counts them (docs/output.md)


def test_an_age_limit_retires_a_connection_at_its_next_send_never_while_idle(nginx: Nginx) -> None:
    """maxConnectionAge 1 ms with sends 100 ms apart: a new connection's first request is never
    its last (it is 0 ms old when it is sent), and the next request on it finds it too old and
    rides it one last time with `Connection: close`: a connection idle past its age is not
    closed for that alone. Only a stall of nearly 100 ms between a dial and the next due send
    lets a connection carry one more before it is old, so that is allowed, never the rest."""
    before = nginx.requests_logged()
    ran = run_native(Plan([nginx.url], qps=10, clients=1, seconds=None, total_requests=6, max_age_s=0.001))
    assert ran.run.good == 6
    _wait_logged(nginx, before + 6)
    carried = list(_by_connection(nginx.log_lines()[before:]).values())
    assert sum(map(len, carried)) == 6 and len(carried) >= 2, carried
    for said in carried[:-1]:  # each ends with the close its last request said, none sooner
        assert said[0] == "-" and said[-1] == "close" and set(said[:-1]) == {"-"}, carried
    assert set(carried[-1][:-1]) <= {"-"}, carried


def test_head_has_no_body_and_ends_its_connection(nginx: Nginx) -> None:
    ran = run_native(Plan([nginx.url], qps=100, clients=2, seconds=None, total_requests=10, method="HEAD"))
    assert ran.run.good == 10 and ran.run.bytes_in == 0
    assert ran.recorder.connections["HTTP/1.1"] == 10  # closed after each, as the Python engine does


def test_the_open_model_counts_latency_from_the_due_time(nginx: Nginx) -> None:
    ran = run_native(Plan([nginx.url], qps=300, clients=3, seconds=1.0, open_model=True))
    assert_accounted(ran)
    assert ran.recorder.uncorrected is not None and ran.recorder.uncorrected.count == ran.run.responses
    assert ran.run.latency.sum >= ran.recorder.uncorrected.sum  # from min(due, start): never later


def test_metrics_count_what_the_recorder_counts(nginx: Nginx) -> None:
    # one URL: the native engine refuses a list (its runs have no perUrl section yet)
    ran = run_native(Plan([nginx.url], qps=200, clients=2, seconds=1.0, metrics=True))
    counted = ran.engine.metrics()
    assert counted is not None
    counts = holding(counted)
    assert isinstance(counts, MetricsTally)
    assert sum(counts.statuses[0]) == ran.run.statuses[200] == ran.run.good > 0
    assert sum(sum(places) for places in counts.good) == ran.run.good
    assert sum(sum(places) for places in counts.bad) == ran.run.bad
    assert counts.skipped == ran.run.skipped and counts.late == ran.run.late
    assert sum(counts.good_ns) + sum(counts.bad_ns) == ran.run.latency.sum


# --- faults, named as the Python engine names them ------------------------------------------


def _failures(ran: Ran) -> tuple[Counter[str], set[tuple[str, str]]]:
    return ran.run.errors, {(kind, group.text) for (kind, _), group in ran.run.error_groups.items()}


FAULTS = [  # (path, timeout s, what each request ends as)
    ("/close", 10, "closed"),
    ("/garbage", 10, "protocol"),
    ("/reset-mid-body", 10, "reset"),
    ("/close-mid-body", 10, "closed"),
    ("/switch", 10, "protocol"),
    ("/bad-chunking", 10, "protocol"),
    ("/endless-headers", 10, "protocol"),
    ("/endless-chunk-line", 10, "protocol"),
    ("/interim/102-close", 10, "closed"),
    ("/stall", 0.3, "timeout"),
    ("/slow/600", 0.3, "timeout"),
    ("/slow-body/5000", 1.5, "timeout"),  # the head well within the timeout, the body not
    ("/interim/102-stall", 0.3, "timeout"),
]
# The faults httpx names in its parser's own words (HTTPX_DIFFERS, key ERROR_TEXT): the kinds alone compared.
NAMED_APART = {"/garbage": "not HTTP at all (/garbage)", "/bad-chunking": "a chunk size that is not hex (/bad-chunking)"}


@pytest.mark.parametrize(("path", "timeout", "kind"), FAULTS, ids=[f[0] for f in FAULTS])
def test_each_fault_is_named_as_the_python_engine_names_it(path: str, timeout: float, kind: str) -> None:
    runs = {}
    for name, run in (("native", run_native), ("python", run_python)):
        server = FaultServer().start()
        try:
            plan = Plan([server.url(path)], qps=20, clients=2, seconds=None, total_requests=4, timeout_s=timeout)
            runs[name] = run(plan)
            server.wait_idle()
            assert server.seen(path) == 4, name
        finally:
            server.stop()
    native, python = (_failures(runs[name]) for name in ("native", "python"))
    assert native[0] == python[0] == Counter({kind: 4}), f"native {native}, python {python}"
    if path in NAMED_APART:
        assert ERROR_TEXT in HTTPX_DIFFERS[NAMED_APART[path]].keys
        assert native[1] != python[1], f"no longer differs: {NAMED_APART[path]}"
    else:
        assert native[1] == python[1], f"native {native}, python {python}"


@pytest.mark.parametrize(("path", "length"), [("/ok", len(OK_BODY)), ("/chunked", CHUNKED_SIZE),
                                              ("/until-close", 3 * len(OK_BODY)), ("/interim/100", len(OK_BODY)),
                                              ("/status/503", len(b"status 503\n")),
                                              # more than a read's 64 KiB already in the socket when
                                              # the edge-triggered watch reports it: the rest is read
                                              (f"/big/{4 << 20}", 4 << 20)])
def test_bodies_are_framed_as_the_python_engine_frames_them(fault_server: FaultServer, path: str,
                                                              length: int) -> None:
    ran = run_native(Plan([fault_server.url(path)], qps=20, clients=2, seconds=None, total_requests=4))
    assert ran.run.failed == 0 and ran.run.responses == 4 and ran.run.bytes_in == 4 * length
    fault_server.wait_idle()
    assert fault_server.seen(path) == 4


def test_refused_and_unanswered_connects() -> None:
    refused = refused_port()
    listener, filler = unaccepting_port()
    try:
        for port, timeout, kind in ((refused.getsockname()[1], 10, "refused"), (listener.getsockname()[1], 0.3,
                                                                                "timeout")):
            url = f"http://127.0.0.1:{port}/"
            plan = Plan([url], qps=20, clients=2, seconds=None, total_requests=4, timeout_s=timeout)
            native, python = _failures(run_native(plan)), _failures(run_python(plan))
            assert native == python and native[0] == Counter({kind: 4}), (native, python)
    finally:
        for s in (refused, listener, filler):
            s.close()


def test_a_response_after_its_deadline_is_a_timeout(fault_server: FaultServer) -> None:
    """The check comes every timeout at most, but the verdict is the arrival's: after the deadline, a timeout."""
    ran = run_native(Plan([fault_server.url("/trickle/30/100")], qps=20, clients=1, seconds=None, total_requests=2,
                          timeout_s=1.5))
    assert ran.run.errors == Counter({"timeout": 2})
    assert {g.text for g in ran.run.error_groups.values()} == {"timeout: no complete body within 1.5s"}


def test_cancel_counts_each_request_in_flight(fault_server: FaultServer) -> None:
    ran = run_native(Plan([fault_server.url("/stall")], qps=50, clients=3, seconds=30, stop_after_s=0.3,
                          cancel=True))
    assert ran.run.errors == Counter({"cancelled": 3})  # each client's first request, stalled
    assert {g.text for g in ran.run.error_groups.values()} == {"cancelled: still in flight when the run stopped"}
    assert_accounted(ran)
    fault_server.wait_idle()
    assert fault_server.seen("/stall") == 3


def test_an_open_run_past_max_in_flight_skips_and_counts(fault_server: FaultServer) -> None:
    """200 ms answers at 50 req/s need 10 in flight; with 3 allowed, the rest is skipped, whatever the load."""
    ran = run_native(Plan([fault_server.url("/slow/200")], qps=50, clients=2, seconds=1.5, open_model=True,
                          max_in_flight=3))
    assert_accounted(ran)
    assert ran.run.skipped > 0 and ran.run.failed == 0
    fault_server.wait_idle()
    assert fault_server.seen("/slow/200") == ran.requests


def test_a_slow_server_makes_a_closed_client_skip(fault_server: FaultServer) -> None:
    ran = run_native(Plan([fault_server.url("/slow/100")], qps=100, clients=2, seconds=1.5))
    assert_accounted(ran)
    assert ran.run.skipped > 0  # 2 clients at 100 ms each can send 20 a second of the 100 due
    fault_server.wait_idle()
    assert fault_server.seen("/slow/100") == ran.requests


def test_intervals_are_taken_only_in_order(nginx: Nginx) -> None:
    ran = run_native(Plan([nginx.url], qps=50, clients=1, seconds=0.3, interval_s=0.1))
    with pytest.raises(ValueError, match="not the next one"):
        ran.engine.take(0)
    assert all(isinstance(interval, Interval) for interval in ran.intervals)


def test_what_comes_back_after_the_end_is_the_drain(fault_server: FaultServer) -> None:
    """300 ms answers, a send due every 100 ms: the client is always busy, so a request is in flight at the end."""
    ran = run_native(Plan([fault_server.url("/slow/300")], qps=10, clients=1, seconds=1.0, interval_s=0.5))
    assert_accounted(ran)
    assert ran.drain is not None and ran.drain.good >= 1
    assert ran.recorder.drain_end_ns >= ran.schedule.end_ns
    assert all(i.tally.good + i.tally.skipped >= 0 for i in ran.intervals)
    fault_server.wait_idle()
    assert fault_server.seen("/slow/300") == ran.requests


def test_a_bench_of_varying_lengths_counts_as_the_python_engine() -> None:
    """ab's Length failures and Keep-Alive counts: the same bench, the same figures, in both engines."""
    benches = []
    for run in (run_native, run_python):
        server = FaultServer().start()  # its own: /varying's lengths take turns server-wide
        try:
            ran = run(Plan([server.url("/varying")], clients=1, seconds=None, total_requests=9, bench=True))
        finally:
            server.stop()
        bench = ran.recorder.bench
        assert bench is not None
        benches.append((ran.run.good, bench.document_length, bench.length_mismatches, dict(bench.other_lengths),
                        bench.kept_alive, bench.header_bytes, bench.total.count, bench.connect_new.count))
    assert benches[0] == benches[1]
    assert benches[0][:4] == (9, 3, 4, {5: 4})


def test_urls_on_two_servers_are_counted_apart_as_the_python_engine_counts_them(nginx: Nginx,
                                                                              fault_server: FaultServer) -> None:
    """A list of two URLs on two servers (connections per origin): 40 sends, every other one to
    each; each URL's tally (Recorder.per_url) holds its own sends, the same on both engines, and
    each server saw as many as its URL counted."""
    urls = [nginx.url, fault_server.url("/status/404")]
    plan = Plan(urls, qps=200, clients=2, seconds=None, total_requests=40)
    before = nginx.requests_logged()
    native = run_native(plan)
    python = run_python(plan)
    assert isinstance(native.recorder.per_url, list) and isinstance(python.recorder.per_url, list)

    def per_url(ran: Ran) -> list[tuple[object, ...]]:
        assert ran.recorder.per_url is not None
        return [(t.requests, t.good, t.bad, t.failed, dict(t.statuses), dict(t.errors), t.bytes_in, t.latency.count,
                 t.connections_opened) for t in ran.recorder.per_url]

    for ran in (native, python):  # each URL's tally holds its own sends, and they add up to the run
        assert ran.recorder.per_url is not None
        assert [set(t.statuses) for t in ran.recorder.per_url] == [{200}, {404}]
        assert sum(t.requests for t in ran.recorder.per_url) == ran.run.requests == 40
    to_nginx = sum(ran.recorder.per_url[0].requests for ran in (native, python))  # type: ignore[index]
    assert nginx.requests_logged() - before == to_nginx and fault_server.seen("/status/404") == 80 - to_nginx
    if native.run.skipped == python.run.skipped == 0:  # a skip moves the wheel on: without one, every other send
        assert per_url(native) == per_url(python)
        assert [t.statuses for t in native.recorder.per_url] == [Counter({200: 20}), Counter({404: 20})]


@pytest.fixture(scope="module")
def named(tmp_path_factory: pytest.TempPathFactory) -> Iterator[list[str]]:
    """Two nginx naming themselves in X-Backend (nginx-0, nginx-1): a URL each."""
    with ExitStack() as stack:
        yield [stack.enter_context(named_nginx(tmp_path_factory.mktemp(f"named-{i}"), i)) for i in range(2)]


def test_backends_are_counted_per_interval_per_url_and_in_the_metrics(named: list[str]) -> None:
    """backendHeader over two URLs, each a backend, 3:1 by weight (the wheel): every interval's
    backends add up to its responses, the run's are 30 and 10, each URL's its own backend's, and
    the metrics' soak_backend_responses_total counts are the run's, on both engines alike."""
    urls = Targets((named[0], named[1]), (3, 1))
    plan = Plan(urls, qps=200, clients=2, seconds=None, total_requests=40, metrics=True,  # type: ignore[arg-type]
                backend_header=HEADER)
    runs = {"native": run_native(plan), "python": run_python(plan)}
    for ran in runs.values():
        for interval in ran.intervals:
            assert sum(interval.tally.backends.values()) == interval.tally.responses
        assert ran.recorder.per_url is not None
        mine = [t.responses for t in ran.recorder.per_url]  # each URL's own backend, whatever was skipped
        assert [dict(t.backends) for t in ran.recorder.per_url] == [{backend_name(0): mine[0]}, {backend_name(1): mine[1]}]
        assert ran.run.backends == Counter({backend_name(0): mine[0], backend_name(1): mine[1]}) and sum(mine) == 40
        if ran.run.skipped == 0:  # a skip moves the wheel on: without one, exactly 3:1
            assert mine == [30, 10]
        assert ran.metrics is not None and ran.metrics.snapshot().backends == ran.run.backends
    assert isinstance(runs["native"].recorder, TakenRecorder)


# A backend header new with every response ($request_id), and a URL answered without it.
_EVERY_RESPONSE_ITS_OWN = """server {{
        listen 127.0.0.1:{port};
        location = /none {{ return 200 "none\\n"; }}
        location / {{
            add_header X-Backend $request_id always;
            return 200 "ok\\n";
        }}
    }}"""


def test_backends_beyond_the_names_kept_read_as_100_on_both_engines(tmp_path_factory: pytest.TempPathFactory) -> None:
    """300 backends answer (every response names a new one), and one response in 51 has no header,
    the first among the first 100 values met: it took a name's place, and both engines said 99
    backends (and 301 - 99 as other), so `backends >= 100` broke where 300 answered."""
    directory = tmp_path_factory.mktemp("every-response")
    with named_nginx(directory, 0, lambda _, port: _EVERY_RESPONSE_ITS_OWN.format(port=port)) as url:
        urls = Targets((url + "none", url), (1, 50))
        assert urls.wheel.index(0) < 50  # the response without the header is met among the first values
        plan = Plan(urls, qps=500, clients=2, seconds=None, total_requests=306,  # type: ignore[arg-type]
                    backend_header=HEADER)
        for ran in (run_native(plan), run_python(plan)):
            assert ran.run.responses == 306, ran.run.errors
            assert ran.recorder.per_url is not None
            none, named = (tally.responses for tally in ran.recorder.per_url)  # skipped sends move the wheel on
            assert none > 0 and named > BACKENDS_KEPT
            assert ran.run.backends[NO_BACKEND] == none
            assert backends_reached(ran.run.backends) == BACKENDS_KEPT
            assert ran.run.backends[OTHER_BACKENDS] == named - BACKENDS_KEPT
            for interval in ran.intervals:
                assert (OTHER_BACKENDS in interval.tally.backends) <= \
                    (backends_reached(interval.tally.backends) == BACKENDS_KEPT)


def test_ipv6_loopback() -> None:
    listener = socket.socket(socket.AF_INET6, socket.SOCK_STREAM)
    listener.bind(("::1", 0))
    listener.listen(8)
    port = listener.getsockname()[1]
    stop = threading.Event()

    def serve() -> None:
        listener.settimeout(0.2)
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except TimeoutError:
                continue
            with conn:
                data = b""
                while not stop.is_set():
                    chunk = conn.recv(65536)
                    if not chunk:
                        break
                    data += chunk
                    while b"\r\n\r\n" in data:
                        _, data = data.split(b"\r\n\r\n", 1)
                        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nok\n")

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        ran = run_native(Plan([f"http://[::1]:{port}/"], qps=100, clients=1, seconds=None, total_requests=5))
        assert ran.run.good == 5 and ran.run.bytes_in == 15
    finally:
        stop.set()
        thread.join(5)
        listener.close()
    unanswered = run_native(Plan([f"http://[::1]:{port}/"], qps=100, clients=1, seconds=None, total_requests=2))
    assert unanswered.run.errors == Counter({"refused": 2})


def test_a_stop_before_the_start_sends_nothing_and_skips_what_fell_due(nginx: Nginx) -> None:
    """A signal taken while a worker starts: nothing is sent, and the sends due before it are skipped."""
    before = nginx.requests_logged()
    plan = Plan([nginx.url], qps=100, clients=3, seconds=5)
    schedule, load, options, grid = plan.parts()
    engine, recorder = native_run(schedule, load, options, grid)
    at = schedule.start_ns + 200_000_000  # sends 0 to 19 fell due before then; send 20 is due at the stop
    engine.stop(at_ns=at)
    asyncio.run(asyncio.wait_for(engine.run(), 30))
    interval = recorder.close(at, final=True, sending_end_ns=at)
    assert engine.sent == 0 and recorder.total.requests == 0
    assert recorder.total.skipped == 20 == interval.tally.skipped == schedule.sends_due(schedule.start_ns, at)
    time.sleep(0.2)
    assert nginx.requests_logged() == before
    cancelled, _ = native_run(*plan.parts())
    cancelled.cancel_in_flight()
    asyncio.run(asyncio.wait_for(cancelled.run(), 30))
    assert cancelled.sent == 0


def test_each_step_of_finished_sends_is_told_once_and_never_early(nginx: Nginx) -> None:
    """Progress (ab's `Completed N requests`) hears of the finished sends from C's thread at each step
    asked for (NativeEngine.follow), not from a poll: every step up to the count, each told once,
    never before the engine had finished that many; and a step already passed is told at once."""
    plan = Plan([nginx.url], clients=3, seconds=None, total_requests=300, bench=True)
    engine, _ = native_run(*plan.parts())
    told: list[tuple[int, int]] = []  # (step, finished sends when told)

    def step(done: int) -> int:
        reached = told[-1][0] + 50 if told else 50
        while reached <= done:
            told.append((reached, done))
            reached += 50
        return reached

    engine.follow(50, step)
    asyncio.run(asyncio.wait_for(engine.run(), 30))
    assert [at for at, _ in told] == list(range(50, 301, 50))
    assert all(done >= at for at, done in told)
