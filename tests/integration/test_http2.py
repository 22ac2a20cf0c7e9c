"""HTTP/2 through the httpx transport, against real nginx with the session's certificates.

That HTTP/2 was really spoken is checked on both sides: nginx logs each request's protocol
($server_protocol) and connection, and the summary's `connections` says what each
connection the runner opened speaks. The native engine speaks HTTP/1.1 only, and both transport
names give the Python engine httpx (issue 34 retired the Python fast transport), so `http2` with
the default transport runs on the Python engine, on httpx, and the start-up line says why; with
`engine: native` it is refused in one line.
"""

from __future__ import annotations

from collections import Counter

from runner.core.errors import EXIT_NO_RESPONSE
from tests.conftest import assert_counts_add_up, run_soak
from tests.support.certs import Pki
from tests.support.tlsservers import Logged, TlsNginx

HTTPX = ("--transport", "httpx", "--http2")
TEN = ("--qps", "50", "--concurrency", "2", "--interval", "1s", "--totalRequests", "10")


def new_entries(server: TlsNginx, before: int, port: int) -> list[Logged]:
    return [e for e in server.logged()[before:] if e.port == port]


def test_http2_over_tls_is_negotiated_one_connection_per_client(tls_nginx: TlsNginx, pki: Pki) -> None:
    before = len(tls_nginx.logged())
    run = run_soak(*HTTPX, *TEN, "--caBundle", str(pki.ca), tls_nginx.url(tls_nginx.https_port))
    assert run.returncode == 0, run.stderr
    summary = assert_counts_add_up(run.stdout)
    assert summary["statusCodes"] == {"200": 10}
    assert summary["connections"] == {"HTTP/2 TLSv1.3": 2}
    seen = new_entries(tls_nginx, before, tls_nginx.https_port)
    assert [(e.protocol, e.tls) for e in seen] == [("HTTP/2.0", "TLSv1.3")] * 10
    assert len({e.connection for e in seen}) == 2


def test_http2_over_cleartext_uses_prior_knowledge(tls_nginx: TlsNginx) -> None:
    before = len(tls_nginx.logged())
    run = run_soak(*HTTPX, *TEN, tls_nginx.url(tls_nginx.h2c_port, scheme="http"))
    assert run.returncode == 0, run.stderr
    assert run.summary["statusCodes"] == {"200": 10}
    assert run.summary["connections"] == {"HTTP/2": 2}
    seen = new_entries(tls_nginx, before, tls_nginx.h2c_port)
    assert [(e.protocol, e.tls) for e in seen] == [("HTTP/2.0", "-")] * 10


def test_open_model_keeps_one_connection_per_client(tls_nginx: TlsNginx, pki: Pki) -> None:
    """In the open model requests may overlap: HTTP/2 multiplexes them on the client's one connection."""
    before = len(tls_nginx.logged())
    run = run_soak(*HTTPX, "--loadModel", "open", "--qps", "200", "--concurrency", "2", "--interval", "1s",
                   "--totalRequests", "100", "--caBundle", str(pki.ca), tls_nginx.url(tls_nginx.https_port))
    assert run.returncode == 0, run.stderr
    assert run.summary["statusCodes"] == {"200": 100}
    assert run.summary["connections"] == {"HTTP/2 TLSv1.3": 2}
    seen = new_entries(tls_nginx, before, tls_nginx.https_port)
    assert len(seen) == 100 and len({e.connection for e in seen}) == 2


def test_no_reuse_opens_a_connection_per_request(tls_nginx: TlsNginx, pki: Pki) -> None:
    before = len(tls_nginx.logged())
    run = run_soak(*HTTPX, *TEN, "--noReuse", "--caBundle", str(pki.ca), tls_nginx.url(tls_nginx.https_port))
    assert run.returncode == 0, run.stderr
    assert run.summary["statusCodes"] == {"200": 10}
    assert run.summary["connections"] == {"HTTP/2 TLSv1.3": 10}
    seen = new_entries(tls_nginx, before, tls_nginx.https_port)
    assert len({e.connection for e in seen}) == 10 and {e.protocol for e in seen} == {"HTTP/2.0"}


def test_a_request_limit_retires_http2_connections(tls_nginx: TlsNginx, pki: Pki) -> None:
    """HTTP/2 has no Connection: close: a connection's last request retires it (no new streams),
    and it is closed once its streams are done; the next request opens another."""
    before = len(tls_nginx.logged())
    run = run_soak(*HTTPX, "--qps", "50", "--concurrency", "2", "--interval", "1s", "--iterations", "0",
                   "--totalRequests", "12", "--maxRequestsPerConnection", "3", "--caBundle", str(pki.ca),
                   tls_nginx.url(tls_nginx.https_port))
    assert run.returncode == 0, run.stderr
    summary = assert_counts_add_up(run.stdout)
    assert summary["statusCodes"] == {"200": 12}
    seen = new_entries(tls_nginx, before, tls_nginx.https_port)
    per_connection = Counter(e.connection for e in seen)
    assert len(seen) == 12 and {e.protocol for e in seen} == {"HTTP/2.0"}
    assert max(per_connection.values()) == 3 and len(per_connection) >= 4
    assert summary["connections"] == {"HTTP/2 TLSv1.3": len(per_connection)}


def test_a_request_limit_holds_for_multiplexed_requests(tls_nginx: TlsNginx, pki: Pki) -> None:
    """In the open model requests overlap on a client's one HTTP/2 connection: those already sent
    finish on it, and none past the limit is given to it."""
    before = len(tls_nginx.logged())
    run = run_soak(*HTTPX, "--loadModel", "open", "--qps", "200", "--concurrency", "2", "--interval", "1s",
                   "--iterations", "0", "--totalRequests", "100", "--maxRequestsPerConnection", "10",
                   "--caBundle", str(pki.ca), tls_nginx.url(tls_nginx.https_port))
    assert run.returncode == 0, run.stderr
    assert run.summary["statusCodes"] == {"200": 100}
    per_connection = Counter(e.connection for e in new_entries(tls_nginx, before, tls_nginx.https_port))
    assert sum(per_connection.values()) == 100
    assert max(per_connection.values()) <= 10 and len(per_connection) >= 10
    # One connection at a time takes a client's new requests, the next only once it has its ten:
    # only the run's end leaves a connection short (one per client at most).
    assert sum(1 for carried in per_connection.values() if carried < 10) <= 2, per_connection


def test_a_retired_http2_connection_drains_while_the_next_one_opens(tls_nginx: TlsNginx, pki: Pki) -> None:
    """Every request a new connection's, from one client in the open model, all due within
    15 ms: the connections overlap, each opened while the last still answers. When a
    client's pool allowed one HTTP/2 connection, each waited for the last to close, and at
    2000 req/s most requests of a run timed out waiting. Overlap is certain at any load here:
    a TLS connection takes far longer than the half millisecond between due sends, and a
    client that falls behind sends what is overdue at once."""
    before = len(tls_nginx.logged())
    run = run_soak(*HTTPX, "--loadModel", "open", "--qps", "2000", "--concurrency", "1", "--interval", "1s",
                   "--iterations", "0", "--totalRequests", "30", "--maxRequestsPerConnection", "1",
                   "--caBundle", str(pki.ca), tls_nginx.url(tls_nginx.https_port))
    assert run.returncode == 0, run.stderr
    assert run.summary["statusCodes"] == {"200": 30}, run.stderr
    seen = new_entries(tls_nginx, before, tls_nginx.https_port)
    assert len({e.connection for e in seen}) == 30
    # Each connection from its opening to its one response, as nginx saw them (to the ms, so
    # 1 ms is taken off each end): the most that were open at one moment.
    spans = [(e.logged - e.connection_age + 0.001, e.logged - 0.001) for e in seen]
    most = max(sum(1 for start, end in spans if start <= moment <= end) for moment, _ in spans)
    assert most >= 2, f"the connections never overlapped: {sorted(spans)}"


def test_bench_phases_come_from_http2_events(tls_nginx: TlsNginx, pki: Pki) -> None:
    run = run_soak("bench", *HTTPX, "-n", "40", "-c", "2", "-k", "--caBundle", str(pki.ca),
                   tls_nginx.url(tls_nginx.https_port))
    assert run.returncode == 0, run.stderr
    bench = run.summary["bench"]
    assert bench["complete"] == 40 and bench["failed"] == 0
    phases = bench["phases"]
    # Two connections were opened (connect > 0 for those), 38 requests reused them (connect 0).
    assert phases["connect"]["min"] == 0 and phases["connect"]["max"] > 0
    assert 0 < phases["waiting"]["min"] <= phases["waiting"]["max"] <= phases["total"]["max"]
    assert run.summary["connections"] == {"HTTP/2 TLSv1.3": 2}


def test_a_server_without_http2_fails_as_protocol_and_says_why(tls_nginx: TlsNginx, pki: Pki) -> None:
    url = tls_nginx.url(tls_nginx.http1_port)
    run = run_soak(*HTTPX, *TEN, "--caBundle", str(pki.ca), url)
    assert run.returncode == EXIT_NO_RESPONSE, run.stderr  # every request failed: no response at all
    assert run.summary["errors"] == {"protocol": 10}
    assert f'GET "{url}": protocol: the server did not agree to HTTP/2 (ALPN: http/1.1) (10 times)' \
        in run.stderr.splitlines()


def test_http2_with_the_default_transport_takes_the_python_engine_and_says_why(tls_nginx: TlsNginx) -> None:
    """Once a usage error (the fast transport spoke HTTP/1.1 only); the Python engine's client is httpx
    for either name now, so no client is switched behind the configuration's back: the engine is,
    and the start-up line says so."""
    before = len(tls_nginx.logged())
    url = tls_nginx.url(tls_nginx.h2c_port, scheme="http")
    for args in (["--http2"], ["--transport", "fast", "--http2"]):
        run = run_soak(*args, *TEN, url)
        assert run.returncode == 0, (args, run.stderr)
        assert run.engine_said == "soak: engine: python (the native engine cannot send this run: HTTP/2)\n", args
        assert run.summary["statusCodes"] == {"200": 10} and run.summary["connections"] == {"HTTP/2": 2}, args
    seen = new_entries(tls_nginx, before, tls_nginx.h2c_port)
    assert [(e.protocol, e.tls) for e in seen] == [("HTTP/2.0", "-")] * 20


def test_http2_on_the_native_engine_is_refused_in_one_line(tls_nginx: TlsNginx) -> None:
    before = len(tls_nginx.logged())
    run = run_soak("--engine", "native", "--http2", *TEN, tls_nginx.url(tls_nginx.h2c_port, scheme="http"))
    assert (run.returncode, run.stdout) == (2, ""), run.stderr
    assert run.stderr == "soak: engine: native cannot send this run: HTTP/2; use engine: auto or python\n"
    assert len(tls_nginx.logged()) == before


def test_validate_says_http2(tls_nginx: TlsNginx) -> None:
    run = run_soak("validate", "--transport", "httpx", "--http2", tls_nginx.url(tls_nginx.h2c_port, scheme="http"))
    assert run.returncode == 0, run.stderr
    assert "HTTP/2 on every connection (prior knowledge over http, ALPN over https)" in run.lines
