"""HTTPS against real local TLS servers with the session's own certificates (tests/support/certs.py).

Verification is on by default; a CA bundle makes it pass, its absence makes every send a
counted `tls` failure while the run goes on; `insecure` skips it and says so; a client
certificate gets through nginx's mTLS check. What the server saw (TLS version, client
certificate check) comes from nginx's own access log. Every test runs with both transports.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from runner.core.errors import EXIT_NO_RESPONSE
from runner.load.tls import INSECURE_WARNING
from tests.conftest import Nginx, assert_counts_add_up, failure_lines, run_soak
from tests.support.certs import Pki
from tests.support.tlsservers import StrictTlsServer, TlsNginx

pytestmark = pytest.mark.usefixtures("transport")

# Short, bounded runs: 10 sends at 50 req/s from 2 clients.
TEN = ("--qps", "50", "--concurrency", "2", "--interval", "1s", "--totalRequests", "10")


def new_entries(server: TlsNginx, before: int, port: int) -> list:
    return [e for e in server.logged()[before:] if e.port == port]


def test_verification_succeeds_with_the_ca_bundle(tls_nginx: TlsNginx, pki: Pki) -> None:
    before = len(tls_nginx.logged())
    run = run_soak(*TEN, "--caBundle", str(pki.ca), tls_nginx.url(tls_nginx.https_port))
    assert run.returncode == 0, run.stderr
    summary = assert_counts_add_up(run.stdout)
    assert summary["statusCodes"] == {"200": 10} and summary["failed"] == 0
    # One kept-alive connection per client, over TLS 1.3, HTTP/1.1 (http2 is off).
    assert summary["connections"] == {"HTTP/1.1 TLSv1.3": 2}
    seen = new_entries(tls_nginx, before, tls_nginx.https_port)
    assert len(seen) == 10
    assert {(e.protocol, e.tls) for e in seen} == {("HTTP/1.1", "TLSv1.3")}
    assert len({e.connection for e in seen}) == 2
    assert run.stderr == ""


def test_a_host_name_in_the_certificate_verifies_too(tls_nginx: TlsNginx, pki: Pki) -> None:
    run = run_soak(*TEN, "--caBundle", str(pki.ca), tls_nginx.url(tls_nginx.https_port, host="localhost"))
    assert run.returncode == 0, run.stderr
    assert run.summary["statusCodes"] == {"200": 10}


def test_without_the_ca_every_send_fails_as_tls_and_the_run_goes_on(tls_nginx: TlsNginx) -> None:
    url = tls_nginx.url(tls_nginx.https_port)
    before = len(tls_nginx.logged())
    run = run_soak(*TEN, url)
    assert run.returncode == EXIT_NO_RESPONSE, run.stderr  # it went on, and says that nothing answered
    summary = assert_counts_add_up(run.stdout)
    # Every one of the 10 sends was made, failed its certificate check, and was counted.
    assert summary["requests"] == 10 and summary["errors"] == {"tls": 10}
    assert summary["stopReason"] == "totalRequests"
    assert summary["connections"] == {}
    assert f'GET "{url}": tls: certificate verify failed: unable to get local issuer certificate (10 times)' \
        in run.stderr.splitlines()
    assert new_entries(tls_nginx, before, tls_nginx.https_port) == [], "no request got past the handshake"


def test_a_bundle_of_another_ca_does_not_verify_the_server(tls_nginx: TlsNginx, pki: Pki) -> None:
    run = run_soak(*TEN, "--caBundle", str(pki.other_ca), tls_nginx.url(tls_nginx.https_port))
    assert run.returncode == EXIT_NO_RESPONSE, run.stderr
    assert run.summary["errors"] == {"tls": 10}


def test_insecure_skips_verification_and_warns_once(tls_nginx: TlsNginx) -> None:
    run = run_soak(*TEN, "--insecure", tls_nginx.url(tls_nginx.https_port, host="localhost"))
    assert run.returncode == 0, run.stderr
    assert run.summary["statusCodes"] == {"200": 10}
    assert run.stderr.splitlines() == [f"soak: {INSECURE_WARNING}"]
    assert run.summary["config"]["insecure"] is True


def test_mtls_succeeds_with_the_client_certificate(tls_nginx: TlsNginx, pki: Pki) -> None:
    before = len(tls_nginx.logged())
    run = run_soak(*TEN, "--caBundle", str(pki.ca), "--clientCert", str(pki.client_cert),
                   "--clientKey", str(pki.client_key), tls_nginx.url(tls_nginx.mtls_port))
    assert run.returncode == 0, run.stderr
    assert run.summary["statusCodes"] == {"200": 10}
    seen = new_entries(tls_nginx, before, tls_nginx.mtls_port)
    assert [(e.status, e.client_verify, e.client_dn) for e in seen] == [(200, "SUCCESS", "CN=soak-client")] * 10


def test_mtls_with_certificate_and_key_in_one_file(tls_nginx: TlsNginx, pki: Pki) -> None:
    run = run_soak(*TEN, "--caBundle", str(pki.ca), "--clientCert", str(pki.client_combined),
                   tls_nginx.url(tls_nginx.mtls_port))
    assert run.returncode == 0, run.stderr
    assert run.summary["statusCodes"] == {"200": 10}


def test_mtls_without_a_client_certificate_is_refused_by_nginx_with_400(tls_nginx: TlsNginx, pki: Pki) -> None:
    """nginx refuses at the HTTP level: 400 "No required SSL certificate was sent". A 4xx is an
    answer, so it counts in good (as slow_cooker counts it); the status codes show it."""
    before = len(tls_nginx.logged())
    run = run_soak(*TEN, "--caBundle", str(pki.ca), tls_nginx.url(tls_nginx.mtls_port))
    assert run.returncode == 0, run.stderr
    assert run.summary["statusCodes"] == {"400": 10}
    seen = new_entries(tls_nginx, before, tls_nginx.mtls_port)
    assert [(e.status, e.client_verify) for e in seen] == [(400, "NONE")] * 10


def test_a_server_that_refuses_in_the_handshake_counts_tls_failures(pki: Pki) -> None:
    with StrictTlsServer(pki) as server:
        url = f"https://127.0.0.1:{server.port}/"
        run = run_soak(*TEN, "--caBundle", str(pki.ca), url)
        assert run.returncode == EXIT_NO_RESPONSE, run.stderr
        summary = assert_counts_add_up(run.stdout)
        assert summary["errors"] == {"tls": 10}
        # One line per interval it failed in: the ten sends may span two on a busy machine.
        said = [re.fullmatch(rf'GET "{re.escape(url)}": tls: tlsv13 alert certificate required \((\d+) times?\)', line)
                for line in failure_lines(run.stderr)]
        assert all(said) and sum(int(m[1]) for m in said if m) == 10, run.stderr
        assert (server.accepted, server.refused) == (0, 10)
        run = run_soak(*TEN, "--caBundle", str(pki.ca), "--clientCert", str(pki.client_combined), url)
        assert run.returncode == 0, run.stderr
        assert run.summary["statusCodes"] == {"200": 10}
        assert server.accepted == 10  # the server closes after each answer: a new handshake each time


def test_plain_http_reports_its_connections_without_tls(nginx: Nginx) -> None:
    run = run_soak(*TEN, nginx.url)
    assert run.returncode == 0, run.stderr
    assert run.summary["connections"] == {"HTTP/1.1": 2}


# --- bad files: one line naming the setting and the path, exit 2, nothing sent ---------------------


def test_a_bad_tls_file_stops_the_run_before_any_load(tls_nginx: TlsNginx, tmp_path: Path) -> None:
    missing = tmp_path / "nope.pem"
    before = len(tls_nginx.logged())
    run = run_soak(*TEN, "--caBundle", str(missing), tls_nginx.url(tls_nginx.https_port))
    assert run.returncode == 2
    assert run.stderr == f"soak: caBundle: {missing}: no such file\n"
    assert run.stdout == ""
    assert len(tls_nginx.logged()) == before


def test_validate_checks_the_tls_files_and_describes_them(pki: Pki, tmp_path: Path) -> None:
    run = run_soak("validate", "--caBundle", str(pki.ca), "--clientCert", str(pki.client_cert),
                   "--clientKey", str(pki.client_key), "https://127.0.0.1:1/")
    assert run.returncode == 0, run.stderr
    assert f"https: servers verified against the CAs in {pki.ca}" in run.lines
    assert f"https: presents the client certificate {pki.client_cert} with the key in {pki.client_key}" in run.lines
    not_pem = tmp_path / "key.txt"
    not_pem.write_text("hello\n")
    run = run_soak("validate", "--clientCert", str(pki.client_cert), "--clientKey", str(not_pem),
                   "https://127.0.0.1:1/")
    assert (run.returncode, run.stderr) == (2, f"soak: clientKey: {not_pem}: no PEM private key in it\n")
