"""The runner against targets that misbehave: every fault is survived, counted and named.

Each test aims a short, bounded run (a few dozen requests, on 127.0.0.1 only) at one fault
of tests/support/faultserver.py, then checks the same things:

- the run completes and exits 0 (slow_cooker exits 0 even when every request failed);
- the counts add up: the interval lines' good+bad+failed sum to the summary's `requests`,
  which is its good+bad+failed, and (where the request reaches a server) to the number of
  requests the server itself received;
- a failure is counted under the right kind in summary["errors"];
- stderr carries each failure once per interval with a count, not once per request.

The only name that is not loopback is `no-such-host.invalid`: RFC 6761 reserves `.invalid`
so that it never resolves, so that test sends nothing anywhere.
"""

from __future__ import annotations

import re

import pytest

from tests.conftest import Nginx, Run, assert_counts_add_up, exit_for, failure_lines, parse_interval, run_soak
from tests.support.delayserver import DelayServer
from tests.support.faultserver import CHUNKED_SIZE, OK_BODY, RESET_SENT, FaultServer, refused_port

# Every test here runs once with each transport (see conftest.transport).
pytestmark = pytest.mark.usefixtures("transport")

ERROR_LINE = re.compile(r'^GET "(?P<url>[^"]+)": (?P<text>.+) \((?P<count>\d+) times?\)$')
MiB = 1 << 20


def soak(url: str, *flags: str, qps: int = 20, concurrency: int = 2, interval: str = "500ms",
         iterations: int = 2, timeout: float = 60) -> Run:
    """A short run, bounded by --iterations and by the subprocess timeout."""
    return run_soak("--qps", str(qps), "--concurrency", str(concurrency), "--interval", interval,
                    "--iterations", str(iterations), *flags, url, timeout=timeout)


def error_lines(run: Run) -> list[tuple[str, str, int]]:
    """stderr as (url, text, count) lines; anything else on stderr fails the test."""
    found = []
    for line in failure_lines(run.stderr):
        m = ERROR_LINE.match(line)
        assert m, f"unexpected stderr line: {line!r}\n{run.stderr}"
        found.append((m["url"], m["text"], int(m["count"])))
    return found


def check(run: Run, *, server: FaultServer | None = None) -> dict:
    """What every run must get right, fault or not; returns the summary. Not one response is exit 8."""
    summary = assert_counts_add_up(run.stdout)
    assert run.returncode == exit_for(summary), run.stderr
    assert summary["requests"] > 0
    if server is not None:
        assert server.wait_idle(), "the server still has a connection open after the runner exited"
        assert server.seen() == summary["requests"], "the server received a different number of requests"
    return summary


def check_failures(run: Run, url: str, kind: str, text: str, *, server: FaultServer | None = None,
                   body_bytes: tuple[int, int] = (0, 0)) -> dict:
    """Every request failed with `kind`, and stderr reports `text` once per interval, with a count.

    `text` is a regular expression for the whole error text. `body_bytes` bounds the body
    bytes that arrived per request before the failure: they are counted in bytesIn.
    """
    summary = check(run, server=server)
    assert summary["failed"] == summary["requests"]
    assert summary["errors"] == {kind: summary["requests"]}
    assert summary["good"] == summary["bad"] == 0
    low, high = body_bytes
    assert low * summary["requests"] <= summary["bytesIn"] <= high * summary["requests"]
    assert summary["statusCodes"] == {}
    intervals = [parse_interval(line) for line in run.interval_lines]
    lines = error_lines(run)
    for line_url, line_text, _ in lines:
        assert line_url == url
        assert re.fullmatch(text, line_text), f"error text {line_text!r} does not match {text!r}"
    # One error, one URL: each interval with failures has exactly one line, carrying its count, and
    # so has the drain (what came back after the last interval), last.
    drained = (summary.get("drain") or {}).get("failed", 0)
    counts = [count for _, _, count in lines]
    expected = [i.failed for i in intervals if i.failed] + ([drained] if drained else [])
    if len({line_text for _, line_text, _ in lines}) == 1:
        assert counts == expected
    else:  # `text` allows two (a phase the timeout came in): a line per text and interval, adding up
        assert sum(counts) == sum(expected) and len(counts) >= len(expected)
    # More failures than intervals, so the lines above really are aggregated.
    assert summary["failed"] > len(intervals)
    return summary


def sends_due(qps: int, seconds: float) -> int:
    """Sends in a schedule of `seconds` at `qps`: each one is either made or counted as skipped."""
    return round(qps * seconds)


def all_made_or_skipped(summary: dict, due: int) -> int:
    """requests + skipped = due, whatever the load: a client the machine held back skips (and counts)
    what it could not send on time, so `requests` alone equals `due` only on a quiet machine."""
    assert summary["requests"] + summary["skipped"] == due, (summary["requests"], summary["skipped"], due)
    return int(summary["requests"])


def test_ok_target_is_a_fair_baseline(fault_server: FaultServer) -> None:
    """The control: a well-behaved path gives all good, one keep-alive connection per client."""
    run = soak(fault_server.url("/ok"), qps=20, concurrency=2)
    summary = check(run, server=fault_server)
    assert summary["good"] == all_made_or_skipped(summary, sends_due(20, 1.0))
    assert summary["bytesIn"] == len(OK_BODY) * summary["requests"]
    assert run.stderr == ""
    assert fault_server.connections_accepted == 2


def test_connection_refused() -> None:
    """A port that is bound but not listening: every connect is refused, and counted."""
    closed = refused_port()
    try:
        url = f"http://127.0.0.1:{closed.getsockname()[1]}/"
        run = soak(url, qps=20, concurrency=2)
    finally:
        closed.close()
    summary = check_failures(run, url, "refused", "connection refused")
    all_made_or_skipped(summary, sends_due(20, 1.0))


def test_dns_failure() -> None:
    """A name that cannot resolve: failed as `dns`, at a low rate (no load reaches any host)."""
    url = "http://no-such-host.invalid:8080/"
    run = soak(url, "--timeout", "5s", qps=5, concurrency=1, interval="1s", iterations=2)
    summary = check_failures(run, url, "dns", r"dns: .+")
    all_made_or_skipped(summary, sends_due(5, 2.0))


def test_timeout_waiting_for_headers(fault_server: FaultServer) -> None:
    """A server that reads the request and never answers: each request times out at --timeout."""
    url = fault_server.url("/stall")
    run = soak(url, "--timeout", "500ms", qps=20, concurrency=4, iterations=3)
    summary = check_failures(run, url, "timeout", "timeout: no response headers within 500ms", server=fault_server)
    # A client is busy for 500 ms per request, so most sends are skipped, and counted as such.
    assert summary["skipped"] > 0
    all_made_or_skipped(summary, sends_due(20, 1.5))


def test_each_request_goes_to_its_own_server_on_its_own_connection(fault_server: FaultServer, nginx: Nginx) -> None:
    """URLs on two servers, one client taking turns: every request reaches the server its URL
    names, and the client keeps one keep-alive connection to each (not one shared by both)."""
    before = nginx.requests_logged()
    run = soak(nginx.url, fault_server.url("/ok"), qps=20, concurrency=1)
    summary = check(run)
    assert summary["good"] == all_made_or_skipped(summary, sends_due(20, 1.0))
    assert fault_server.wait_idle()
    # Send n goes to URL n % 2, made or skipped: each server gets at most its half, together all.
    at_nginx, at_fault_server = nginx.requests_logged() - before, fault_server.seen()
    assert at_fault_server == fault_server.seen("/ok")
    assert at_nginx + at_fault_server == summary["requests"]
    assert 0 < at_nginx <= sends_due(20, 1.0) // 2 and 0 < at_fault_server <= sends_due(20, 1.0) // 2
    assert fault_server.connections_accepted == 1


def test_a_client_stuck_past_the_end_sends_nothing_after_it(fault_server: FaultServer) -> None:
    """One client, its first request stalled until a timeout after the run's 1 s of sending:
    the sends it missed are skipped, and none of them goes out late once sending is over."""
    url = fault_server.url("/stall")
    run = soak(url, "--timeout", "2s", qps=10, concurrency=1, iterations=2)
    summary = assert_counts_add_up(run.stdout)
    assert error_lines(run) == [(url, "timeout: no response headers within 2s", 1)]
    assert summary["errors"] == {"timeout": 1} and summary["failed"] == summary["requests"] == 1
    fault_server.wait_idle()
    assert fault_server.seen("/stall") == 1
    assert summary["skipped"] == sends_due(10, 1.0) - 1


def test_open_model_never_has_more_in_flight_than_max_in_flight(fault_server: FaultServer) -> None:
    """A 300 ms server at 2,000 req/s with maxInFlight 2: sends go out two at a time, the rest are
    skipped, and no request waits in the client, so every latency is the server's 300 ms. (A
    client behind schedule once started every overdue send at once, and httpx queued them.)"""
    url = fault_server.url("/slow/300")
    run = soak(url, "--loadModel", "open", "--maxInFlight", "2", "--timeout", "5s", qps=2000, concurrency=1,
               interval="1s", iterations=1)
    summary = check(run, server=fault_server)
    assert 2 <= summary["requests"] <= 8, summary["requests"]  # two at 0, 0.3, 0.6 and 0.9 s at most
    all_made_or_skipped(summary, sends_due(2000, 1.0))
    assert 300 <= summary["uncorrected"]["p50"] and 300 <= summary["min"], summary["uncorrected"]
    if not summary["clientSaturated"]:  # a client held back by its machine sends less, and reads late
        assert summary["requests"] >= 4 and summary["uncorrected"]["p99"] < 450, (summary["uncorrected"],
                                                                                summary["client"])


def test_a_response_just_after_the_timeout_is_a_timeout() -> None:
    """A server that answers 3 ms after the 2 s timeout: every request timed out, in both
    clients. The Python fast transport (retired in issue 34) checked its requests' deadlines every
    1/20 of the timeout (100 ms here) and once counted a head that arrived between a deadline and
    the next check as a good response. The server answers 2.003 s after it received the request, which is
    after the client sent it, so the answer is late however slow the machine."""
    with DelayServer(2003) as server:
        url = server.url
        run = soak(url, "--timeout", "2s", qps=4, concurrency=4, interval="1s", iterations=1)
    # The late answer's body (100 bytes) counts in bytesIn where the client read it, as any
    # body bytes that arrived before a failure do.
    summary = check_failures(run, url, "timeout", "timeout: no response headers within 2s", body_bytes=(0, 100))
    assert summary["requests"] + summary["skipped"] == sends_due(4, 1.0)
    assert len(server.served_ns) == summary["requests"], "the server answered every request, late"


HASH_EVERY_BODY = ("--compress", "--hashValue", "1", "--hashSampleRate", "1")


def test_a_gzip_bomb_fails_at_the_inflate_bound_without_blocking_the_loop(fault_server: FaultServer) -> None:
    """255 KiB on the wire that inflate to 256 MiB, every body hashed: each fails as `protocol` once
    16 MiB are inflated, a bounded step at a time. Inflating and hashing a whole read at once
    once blocked the loop for 9 s a response (and a 10 s timeout ended up 15 s), and with a
    timeout long enough to hash it all, counted the bomb as a response. The timeout is long so
    that even a starved client hashes its 16 MiB (about a second each on a quiet machine) in time."""
    url = fault_server.url("/gzip-bomb/256")
    run = soak(url, *HASH_EVERY_BODY, "--timeout", "60s", qps=4, concurrency=2, interval="2s", iterations=1,
               timeout=180)
    summary = check_failures(run, url, "protocol", "protocol: gzip body inflates to more than 16 MiB",
                             server=fault_server, body_bytes=(0, 1 << 20))
    assert summary["requests"] + summary["skipped"] == sends_due(4, 2.0)
    assert (summary.get("drain") or {"durationSeconds": 0})["durationSeconds"] <= 60 + 1
    assert summary["client"]["loopLagMs"]["max"] < 5000, summary["client"]


def test_the_timeout_holds_while_a_body_is_hashed(fault_server: FaultServer, transport: str) -> None:
    """The same bomb with a 300 ms timeout: 16 MiB take over a second to hash in Python, so every
    request times out while its body is being hashed, at the timeout, not when hashing ends. On a
    busy machine the fault server's headers may themselves come after 300 ms: a timeout all the same.
    The native engine inflates and hashes 16 MiB in tens of milliseconds, a step a loop turn: each
    request ends at the bound or at the timeout (a starved machine), never later."""
    url = fault_server.url("/gzip-bomb/256")
    run = soak(url, *HASH_EVERY_BODY, "--timeout", "300ms", qps=4, concurrency=2, interval="1s", iterations=2)
    timeout = "timeout: no (complete body|response headers) within 300ms"
    if transport == "native":
        summary = check(run, server=fault_server)
        assert summary["failed"] == summary["requests"] and set(summary["errors"]) <= {"timeout", "protocol"}
        for _, text, _ in error_lines(run):
            assert re.fullmatch(f"{timeout}|protocol: gzip body inflates to more than 16 MiB", text), text
    else:
        summary = check_failures(run, url, "timeout", timeout, server=fault_server, body_bytes=(0, 1 << 20))
    assert summary["requests"] + summary["skipped"] == sends_due(4, 2.0)
    assert (summary.get("drain") or {"durationSeconds": 0})["durationSeconds"] <= 0.3 + 1


def test_timeout_reading_the_body(fault_server: FaultServer) -> None:
    """Headers arrive in time but the body does not: the whole-request timeout still applies."""
    url = fault_server.url("/slow-body/5000")
    run = soak(url, "--timeout", "500ms", qps=20, concurrency=4, iterations=3)
    check_failures(run, url, "timeout", "timeout: no complete body within 500ms", server=fault_server,
                   body_bytes=(0, 10**6))


def test_reset_mid_body(fault_server: FaultServer) -> None:
    """Headers, part of the body, then a TCP RST: failed as `reset`, not as a response."""
    url = fault_server.url("/reset-mid-body")
    # A reset may discard bytes that had arrived but were not read yet: at most what was sent counts.
    check_failures(soak(url), url, "reset", "connection reset by peer", server=fault_server,
                   body_bytes=(0, RESET_SENT))


def test_closed_mid_body(fault_server: FaultServer) -> None:
    """Headers, part of the body, then a clean close: failed as `closed`, with what was missing."""
    url = fault_server.url("/close-mid-body")
    check_failures(soak(url), url, "closed", rf"closed: .*received {RESET_SENT} bytes, expected 100000.*",
                   server=fault_server, body_bytes=(RESET_SENT, RESET_SENT))


def test_closed_without_response(fault_server: FaultServer) -> None:
    """The request is read, then the connection closed with no answer at all."""
    url = fault_server.url("/close")
    check_failures(soak(url), url, "closed", "closed: Server disconnected without sending a response.",
                   server=fault_server)


def test_not_http(fault_server: FaultServer) -> None:
    """Something that is not HTTP answers: failed as `protocol`."""
    url = fault_server.url("/garbage")
    check_failures(soak(url), url, "protocol", r"protocol: .*(illegal status line|invalid response).*", server=fault_server)


@pytest.mark.parametrize("code", ["000", "099", "99", "0999", "1000", "abc"])
def test_a_status_line_without_a_status_code_is_protocol_at_once(fault_server: FaultServer, code: str) -> None:
    """A status code outside 100-999 (or not three digits) is not HTTP: each transport fails it
    as `protocol` when it arrives. The Python fast transport (since retired) once took `000` and `099` for an interim
    1xx head and waited for a final one until the timeout."""
    url = fault_server.url(f"/raw-status/{code}")
    run = soak(url, "--timeout", "20s", qps=4, concurrency=1, interval="1s", iterations=1)
    summary = check_failures(run, url, "protocol", r"protocol: .*", server=fault_server)
    assert summary["requests"] + summary["skipped"] == sends_due(4, 1.0)
    assert summary["skipped"] == 0 and "drain" not in summary, "no response waited for the timeout"


def test_a_status_over_599_is_a_bad_response(fault_server: FaultServer) -> None:
    """600 is three digits, so a status code, outside any class: a response, and bad (both transports)."""
    run = soak(fault_server.url("/raw-status/600"), qps=20, concurrency=2)
    summary = check(run, server=fault_server)
    assert summary["bad"] == summary["requests"] == sends_due(20, 1.0)
    assert summary["statusCodes"] == {"600": summary["requests"]}


@pytest.mark.parametrize(
    ("status", "verdict"),
    [(301, "good"), (302, "good"), (404, "good"), (500, "bad"), (503, "bad")],
)
def test_status_codes(fault_server: FaultServer, status: int, verdict: str) -> None:
    """3xx and 4xx are good, 5xx bad (slow_cooker's rule); none of them is a failure.

    A redirect is an answer to count, not a hop to make: the 3xx carries `Location: /ok`,
    and the server must see no request for /ok. Connections are kept alive whatever the
    status: one per client.
    """
    path = f"/status/{status}"
    run = soak(fault_server.url(path), qps=20, concurrency=2)
    summary = check(run, server=fault_server)
    assert summary[verdict] == all_made_or_skipped(summary, sends_due(20, 1.0))
    assert summary["failed"] == 0 and summary["errors"] == {}
    assert summary["statusCodes"] == {str(status): summary["requests"]}
    assert fault_server.seen(path) == summary["requests"]
    assert fault_server.seen("/ok") == 0, "the runner followed a redirect"
    assert fault_server.connections_accepted == 2
    assert run.stderr == ""
    column = [getattr(parse_interval(line), verdict) for line in run.interval_lines]
    assert sum(column) + (summary.get("drain") or {}).get(verdict, 0) == summary["requests"]


def test_slow_responses(fault_server: FaultServer) -> None:
    """Answers after 300 ms: every latency printed, per interval and in the summary, shows it."""
    run = soak(fault_server.url("/slow/300"), "--latencyUnit", "ms", qps=10, concurrency=5, interval="1s")
    summary = check(run, server=fault_server)
    assert summary["good"] == summary["requests"]
    all_made_or_skipped(summary, sends_due(10, 2.0))
    intervals = [parse_interval(line) for line in run.interval_lines]
    answered = [i for i in intervals if i.good]
    assert answered
    for interval in answered:
        assert all(300 <= ms < 1000 for ms in interval.latencies), interval
    for key in ("min", "p50", "p75", "p90", "p95", "p99", "p999", "max"):
        assert 300 <= summary[key] < 1000, (key, summary[key])


def test_body_far_larger_than_memory(fault_server: FaultServer) -> None:
    """Two 512 MiB bodies are read to the end and counted, without ever being held in memory."""
    size = 512 * MiB
    run = soak(fault_server.url(f"/big/{size}"), "--totalRequests", "2", "--timeout", "60s",
               qps=2, concurrency=2, interval="1s", iterations=30, timeout=120)
    summary = check(run, server=fault_server)
    assert summary["good"] == summary["requests"] == 2
    assert summary["stopReason"] == "totalRequests"
    assert summary["bytesIn"] == size * 2
    assert summary["process"]["maxRssBytes"] < 150_000_000


def test_body_that_ends_with_the_connection(fault_server: FaultServer) -> None:
    """No Content-Length, not chunked: the body ends when the server closes, and it is complete."""
    run = soak(fault_server.url("/until-close"), qps=20, concurrency=2)
    summary = check(run, server=fault_server)
    assert summary["good"] == all_made_or_skipped(summary, sends_due(20, 1.0))
    assert summary["bytesIn"] == 3 * len(OK_BODY) * summary["requests"]
    assert run.stderr == ""


def test_chunked_body(fault_server: FaultServer) -> None:
    """A chunked body is read through its chunks; bytesIn counts the body, not the framing."""
    run = soak(fault_server.url("/chunked"), qps=20, concurrency=2)
    summary = check(run, server=fault_server)
    assert summary["good"] == all_made_or_skipped(summary, sends_due(20, 1.0))
    assert summary["bytesIn"] == CHUNKED_SIZE * summary["requests"]
    assert run.stderr == ""


def test_several_faults_at_once_are_reported_per_url(fault_server: FaultServer) -> None:
    """Three URLs, two of them failing differently: each failure is counted against its URL.

    Sends go to the URLs in turn, so each failing URL's error lines must add up to the
    requests its path received, and each appears at most once per interval.
    """
    paths = ["/ok", "/close", "/reset-mid-body"]
    urls = [fault_server.url(p) for p in paths]
    run = run_soak("--qps", "30", "--concurrency", "3", "--interval", "500ms", "--iterations", "2", *urls,
                   timeout=60)
    summary = check(run, server=fault_server)
    assert summary["good"] == fault_server.seen("/ok")
    assert summary["errors"] == {"closed": fault_server.seen("/close"), "reset": fault_server.seen("/reset-mid-body")}
    lines = error_lines(run)
    intervals = run.interval_lines
    for url, path, text in [(urls[1], "/close", "closed: Server disconnected without sending a response."),
                            (urls[2], "/reset-mid-body", "connection reset by peer")]:
        mine = [(t, count) for u, t, count in lines if u == url]
        assert {t for t, _ in mine} == {text}
        assert len(mine) <= len(intervals) + ("drain" in summary)  # at most once per interval, and the drain
        assert sum(count for _, count in mine) == fault_server.seen(path) > len(intervals)
    assert all(u != urls[0] for u, _, _ in lines)


def test_total_requests_answered_intervals_later(fault_server: FaultServer) -> None:
    """The last of totalRequests comes back intervals after it was sent.

    Sending stops with the last send: intervals after it expect nothing (t = 0), the last
    interval ends when the last response came back, and every send due before the stop was
    made or counted as skipped, none after it.
    """
    url = fault_server.url("/slow/700")
    run = soak(url, "--totalRequests", "4", qps=20, concurrency=2, interval="300ms", iterations=50)
    summary = check(run, server=fault_server)
    assert summary["requests"] == summary["good"] == 4
    assert summary["stopReason"] == "totalRequests"
    intervals = [parse_interval(line) for line in run.interval_lines]
    stop_interval = int(summary["sendingSeconds"] / 0.3)
    assert all(i.target == 0 for i in intervals[stop_interval + 1:])
    assert len(intervals) > stop_interval + 1, "the last responses came in later intervals"
    assert summary["durationSeconds"] > summary["sendingSeconds"] + 0.5
    due = int(20 * summary["sendingSeconds"]) + 1  # sends 0 .. n due by the stop
    assert summary["requests"] + summary["skipped"] in (due - 1, due)
