"""TLS faults on both engines: each counted and named as the Python engine names it.

A TLS server that misbehaves (tests/support/tlsfaults.py: its TLS in memory over a plain socket,
so every byte on the wire and the TCP close are the test's) or OpenSSL's own s_server asking for
a renegotiation: certificates that do not verify (expired, self-signed, another host's, an
unknown CA), handshakes that fail (bytes that are not TLS, a close, a stall: the run's timeout
applies), close_notify missing mid-body and after a whole body, every TLS byte in a send of its
own. Each case runs on the native engine and on the Python engine (on httpx, since issue 34
retired the fast transport): the same counts, the same kinds, the same texts, which are the
Python engine's from before the native engine spoke TLS, but where httpx names a fault otherwise
(a row of tests/support/httpx_differs.py, by the case's name: a close in the handshake). Short bounded runs: 6 sends at 20 req/s from 2 clients, a 1 s timeout.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import pytest

from runner.core.errors import EXIT_NO_RESPONSE, EXIT_OK
from runner.load.native.engine import module
from tests.conftest import assert_counts_add_up, failure_lines, run_soak
from tests.support.certs import Pki
from tests.support.httpx_differs import HTTPX_DIFFERS
from tests.support.tlsfaults import CUT_DECLARED, CUT_SENT, TlsFaultServer, renegotiating_server

ENGINES = ("native", "python")
SENDS = 6
RUN = ("--transport", "fast", "--qps", "20", "--concurrency", "2", "--interval", "1s", "--timeout", "1s",
       "--totalRequests", str(SENDS))
CUT = re.escape(f"closed: peer closed connection without sending complete message body (received {CUT_SENT} "
                f"bytes, expected {CUT_DECLARED})")


@dataclass(frozen=True)
class Case:
    """A TlsFaultServer's settings and path, and what every send must end as: a status, or a kind and its text."""

    path: str = "/ok"
    cert: str = "server"
    on_accept: str = "serve"
    split: bool = False
    status: int = 0  # every send a response of this status
    kind: str = ""  # ... else every send a failure of this kind
    text: str = ""  # a regular expression its text matches ({port}: the server's)
    host: str = "127.0.0.1"
    flags: tuple[str, ...] = field(default=())


CASES = {
    "whole": Case(status=200),
    "every byte in a send of its own": Case(split=True, status=200),
    "expired certificate": Case(cert="expired", kind="tls", text="tls: certificate verify failed: certificate has expired"),
    "self-signed certificate": Case(cert="self-signed", kind="tls",
                                    text="tls: certificate verify failed: self-signed certificate"),
    "another IP's certificate": Case(cert="other-host", kind="tls", text=re.escape(
        "tls: certificate verify failed: IP address mismatch, certificate is not valid for '127.0.0.1'.")),
    "another host's certificate": Case(cert="other-host", host="localhost", kind="tls", text=re.escape(
        "tls: certificate verify failed: Hostname mismatch, certificate is not valid for 'localhost'.")),
    "unknown CA": Case(kind="tls", flags=("--caBundle", "OTHER_CA"),
                       text="tls: certificate verify failed: unable to get local issuer certificate"),
    "not TLS at all": Case(on_accept="garbage", kind="tls", text="tls: wrong version number"),
    "closed in the handshake": Case(on_accept="close-handshake", kind="reset", text="connection reset by peer"),
    "stalled in the handshake": Case(on_accept="stall-handshake", kind="timeout",
                                     text=r"timeout: TLS handshake with 127\.0\.0\.1:{port} not finished within 1s"),
    "no close_notify mid-body": Case(path="/cut-mid-body", kind="closed", text=CUT),
    "no close_notify mid-body, every byte apart": Case(path="/cut-mid-body", split=True, kind="closed", text=CUT),
    "close_notify mid-body": Case(path="/notify-mid-body", kind="closed", text=CUT),
    "no close_notify after a whole body": Case(path="/cut-after-body", status=200),
    "no close_notify ending a body": Case(path="/cut-until-close", status=200),
    "no close_notify ending a body, every byte apart": Case(path="/cut-until-close", split=True, status=200),
    "close_notify ending a body": Case(path="/notify-until-close", status=200),
}


def engine_run(engine: str, *args: str) -> dict:
    """A run on `engine` that must start and end well: its summary, with its failure lines' texts."""
    run = run_soak("--engine", engine, *args)
    assert run.returncode in (EXIT_OK, EXIT_NO_RESPONSE), run.stderr
    assert run.engine_said == f"soak: engine: {engine}\n", run.stderr
    summary = assert_counts_add_up(run.stdout)
    texts = set()
    for line in failure_lines(run.stderr):
        said = re.fullmatch(r'GET "[^"]+": (.+) \(\d+ times?\)', line)
        assert said, line
        texts.add(said[1])
    return summary | {"texts": texts}


@pytest.mark.skipif(module() is None or not module().TLS, reason="the native engine is not built with TLS here")
@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("name", list(CASES))
def test_a_tls_fault_is_counted_and_named_as_the_python_engine_names_it(name: str, engine: str, pki: Pki) -> None:
    """Where httpx names a fault otherwise than the native engine (a row of HTTPX_DIFFERS, by the
    case's name), its failures are counted all the same, and named as the row says."""
    case = CASES[name]
    flags = tuple(str(pki.other_ca) if flag == "OTHER_CA" else flag for flag in case.flags)
    with TlsFaultServer(pki, case.cert, case.on_accept, case.split) as server:
        url = server.url(case.path).replace("127.0.0.1", case.host)
        found = engine_run(engine, *RUN, *(flags or ("--caBundle", str(pki.ca))), url)
        assert server.wait_idle()
    assert found["requests"] == SENDS
    if case.status:
        assert found["statusCodes"] == {str(case.status): SENDS} and found["errors"] == {}, found["texts"]
        assert set(found["connections"]) == {"HTTP/1.1 TLSv1.3"}
        return
    differs = HTTPX_DIFFERS.get(name) if engine == "python" else None
    if differs is not None:
        assert found["failed"] == SENDS and found["errors"] != {case.kind: SENDS}, f"no longer differs: {name}"
        said = [*(f"`{kind}`" for kind in found["errors"]), *(f"`{text}`" for text in found["texts"])]
        assert found["texts"] and all(part in differs.why for part in said), (said, differs.why)
        return
    assert found["errors"] == {case.kind: SENDS}, found["texts"]
    assert found["texts"] and all(re.fullmatch(case.text.format(port=server.port), t) for t in found["texts"]), \
        found["texts"]


@pytest.mark.skipif(module() is None or not module().TLS, reason="the native engine is not built with TLS here")
@pytest.mark.parametrize("engine", ENGINES)
def test_a_renegotiation_before_each_answer_is_followed(engine: str, pki: Pki) -> None:
    """OpenSSL's s_server over TLS 1.2 asks for a new handshake before each of 3 answers on one
    connection: both engines' OpenSSL clients go through it and get each answer."""
    with renegotiating_server(pki, 3) as port:
        found = engine_run(engine, "--transport", "fast", "--qps", "5", "--concurrency", "1", "--interval", "1s",
                           "--timeout", "5s", "--totalRequests", "3", "--caBundle", str(pki.ca),
                           f"https://127.0.0.1:{port}/")
    assert found["statusCodes"] == {"200": 3} and found["errors"] == {}, found["texts"]
    assert found["connections"] == {"HTTP/1.1 TLSv1.2": 1}
