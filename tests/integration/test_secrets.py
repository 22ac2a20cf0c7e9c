"""Secrets and servers' control characters, end to end: the real CLI against a loopback server that
records what arrived and echoes it back (tests/support/echoserver.py), and every output searched for every secret.

A run's output is published by nature: `kubectl logs`, saved summaries, a Pushgateway, Prometheus.
What the runner sends must arrive (credentials in the URL too, with both transports alike), and
nothing it sends as a secret may come out again, not even when a server repeats it.
"""

from __future__ import annotations

import base64
import json
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from runner.core.errors import EXIT_INTERRUPTED, EXIT_OK, EXIT_SHARD_MISSING, EXIT_USAGE
from tests.conftest import assert_counts_add_up, free_port, run_soak
from tests.support.echoserver import SERVER_ESC, EchoServer
from tests.support.liverun import LiveRun

PASSWORD = "S3cret!Passw0rd"  # written in the URL percent-encoded, as it must be
PASSWORD_IN_URL = "S3cret%21Passw0rd"
USER = "alice"
BASIC = base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode()
QUERY_TOKEN = "Qu3ryT0kenValue"
SIGNATURE = "sha256=5ig5ig5ig5ig"
CREDENTIAL = "Cr3dentialValue"
FROM_ENV = "EnvTenantValue42"  # under an innocent name: hidden only because it came from the environment
BODY_SECRET = "B0dySecretValue"
SECRETS = (PASSWORD, PASSWORD_IN_URL, BASIC, QUERY_TOKEN, SIGNATURE, CREDENTIAL, FROM_ENV, BODY_SECRET)


def with_credentials(url: str, query: bool = True) -> str:
    """The server's URL with a user name and password in it, and a token in its query."""
    url = url.replace("http://", f"http://{USER}:{PASSWORD_IN_URL}@")
    return url + (f"?access_token={QUERY_TOKEN}&page=2" if query else "")


def secret_args(server: EchoServer) -> list[str]:
    """Every way of giving the runner a secret, at once."""
    return ["--method", "POST", "--body", f"client_secret={BODY_SECRET}&grant_type=x",
            "-H", f"X-Hub-Signature-256: {SIGNATURE}", "-H", f"X-Credential: {CREDENTIAL}",
            "--headerFromEnv", "X-Tenant=SOAK_TEST_TENANT", "-H", "X-Trace: visible-trace"]


def assert_no_secret(where: str, text: str) -> None:
    for secret in SECRETS:
        assert secret not in text, f"{secret!r} is printed in {where}:\n{text}"


def test_user_info_is_sent_as_basic_auth_by_both_transports(transport: str) -> None:
    """The same Authorization header on the wire from both clients, and no user info in the request line."""
    with EchoServer() as server:
        run = run_soak("--qps", "20", "--concurrency", "2", "--interval", "500ms", "--iterations", "1",
                       with_credentials(server.url("/ok"), query=False))
        heads = list(server.heads)
    assert run.returncode == EXIT_OK, run.stderr
    summary = assert_counts_add_up(run.stdout)
    assert summary["good"] == summary["requests"] == len(heads) > 0
    assert {head.get("authorization") for head in heads} == {f"Basic {BASIC}"}
    assert {head[":target"] for head in heads} == {"/ok"}
    assert {head["host"] for head in heads} == {f"127.0.0.1:{server.port}"}


def test_user_info_and_an_authorization_header_are_refused_up_front() -> None:
    with EchoServer() as server:
        url = with_credentials(server.url("/ok"), query=False)
        for command in (["validate"], []):
            run = run_soak(*command, "-H", "Authorization: Bearer x", "--qps", "10", "--iterations", "1", url)
            assert run.returncode == EXIT_USAGE
            assert run.stderr == (f"soak: http://{USER}:<hidden>@127.0.0.1:{server.port}/ok: a user name and "
                                  "password in the URL and an Authorization header both give credentials; give "
                                  "them one way\n")
        assert server.heads == []


def test_no_secret_is_printed_or_exported(transport: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """One run given every kind of secret, split over shards and workers, with metrics served and pushed,
    against a server that echoes what it gets into its failures: stdout, stderr, the CSV, /metrics,
    the pushes, `soak merge` and `validate` hold none of them, and the server did receive them all."""
    monkeypatch.setenv("SOAK_TEST_TENANT", FROM_ENV)
    port = free_port()
    csv = tmp_path / "latencies.csv"
    with EchoServer() as server:
        # Three URLs, so that every process of the split (its sends strided by 4) has each of them.
        urls = [with_credentials(server.url("/ok")), with_credentials(server.url("/echo-garbage")), server.url("/ok")]
        args = [*secret_args(server), "--qps", "40", "--concurrency", "4", "--interval", "500ms",
                "--iterations", "600", "--shards", "2", "--shard", "0", "--workers", "2",
                "--reportLatenciesCSV", str(csv), "--metricAddr", f"127.0.0.1:{port}",
                "--pushgateway", server.url(""), *urls]
        with LiveRun(*args) as live:
            live.wait_for_first_interval()
            time.sleep(1.2)  # a second interval: failures on stderr, and a push
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
                metrics = response.read().decode()
            live.wait(live.send(signal.SIGTERM))
        heads = list(server.heads)
    assert live.process.returncode == EXIT_INTERRUPTED, live.stderr  # stopped before its planned end
    summary = assert_counts_add_up(live.stdout)
    assert summary["good"] > 0 and summary["failed"] > 0

    # The server received every secret: the run really sent them.
    sent = [h for h in heads if QUERY_TOKEN in h[":target"]]
    assert sent and all(h["authorization"] == f"Basic {BASIC}" and h["x-tenant"] == FROM_ENV
                        and h["x-credential"] == CREDENTIAL and h["x-hub-signature-256"] == SIGNATURE
                        and BODY_SECRET in h[":body"] for h in sent)
    pushes = "".join(h[":body"] for h in heads if h[":target"].startswith("/metrics/"))
    assert "soak_requests_total" in pushes

    # ... and none of them came out again.
    log = tmp_path / "shard-0.log"
    log.write_text(live.stdout)
    merged = run_soak("merge", str(log))
    validated = run_soak("validate", *args)
    assert validated.returncode == EXIT_OK, validated.stderr
    assert merged.returncode == EXIT_SHARD_MISSING, merged.stderr  # shard 1 of the 2 never ran
    assert merged.stdout.startswith("# sending")
    for where, text in [("stdout", live.stdout), ("stderr", live.stderr), ("the CSV", csv.read_text()),
                        ("/metrics", metrics), ("the pushes", pushes), ("soak merge's stdout", merged.stdout),
                        ("soak merge's stderr", merged.stderr), ("validate", validated.stdout)]:
        assert_no_secret(where, text)
    # Shown hidden, not left out: the output still says what was sent.
    shown = f"http://{USER}:<hidden>@127.0.0.1:{server.port}/ok?access_token=<hidden>&page=2"
    assert shown in live.stdout.splitlines()[0] and f"  to {shown}" in validated.stdout.splitlines()
    assert summary["config"]["headers"] == {"X-Hub-Signature-256": "<hidden>", "X-Credential": "<hidden>",
                                            "X-Tenant": {"fromEnv": "SOAK_TEST_TENANT"}, "X-Trace": "visible-trace"}
    assert summary["config"]["body"] == f"<{len(f'client_secret={BODY_SECRET}&grant_type=x')} bytes>"
    assert summary["shard"]["urls"][0] == shown
    assert f'url="http://127.0.0.1:{server.port}/ok?access_token=<hidden>&page=2"' in metrics
    assert "header Authorization: Basic <hidden> (from each URL's (2 of 3 have one) user name and password)" \
        in validated.stdout.splitlines()
    if transport == "httpx":  # httpx quotes the bad status line, and with it what the server echoed
        assert "<hidden>" in live.stderr.split("echo-garbage", 1)[1].splitlines()[0]


def test_a_bench_prints_no_secret_a_server_echoes_in_its_server_header(transport: str,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """ab's report prints the Server header: this server puts the request's headers and body in it."""
    monkeypatch.setenv("SOAK_TEST_TENANT", FROM_ENV)
    with EchoServer() as server:
        run = run_soak("bench", "-n", "20", "-c", "2", *secret_args(server), with_credentials(server.url("/ok")),
                       env={"SOAK_TEST_TENANT": FROM_ENV})
        heads = list(server.heads)
    assert run.returncode == EXIT_OK, run.stderr
    assert len(heads) == 20 and all(h["authorization"] == f"Basic {BASIC}" for h in heads)
    software = next(line for line in run.stdout.splitlines() if line.startswith("Server Software:"))
    assert "<hidden>" in software and "visible-trace" in software  # the echo is there, its secrets are not
    assert_no_secret("stdout", run.stdout)
    assert_no_secret("stderr", run.stderr)
    assert json.loads(run.stdout[run.stdout.index("\n{") + 1:])["bench"]["path"] == "/ok?access_token=<hidden>&page=2"


def test_a_pushgateway_error_body_reaches_stderr_escaped() -> None:
    """A Pushgateway (or anything at its address) answering with control characters cannot reach the terminal."""
    with EchoServer() as server:
        run = run_soak("--qps", "10", "--interval", "500ms", "--iterations", "1", "--pushgateway", server.url(""),
                       server.url("/ok"))
    assert run.returncode == EXIT_OK, run.stderr
    assert "\x1b" not in run.stderr and "\x07" not in run.stderr
    escaped = SERVER_ESC.replace("\x1b", "\\x1b").replace("\x07", "\\x07")
    assert f"soak: pushgateway {server.url('')}: HTTP 400 Bad Request: push refused: {escaped}; " in run.stderr


LEAKED = "S3cretPW77"  # a password every usage error below would have quoted
WITH_PASSWORD = f"http://alice:{LEAKED}@127.0.0.1:9/"
USAGE_ERRORS = {  # a usage error of each command, each quoting a word that holds the password
    "run": ["--transport", "httpx", "bench", "-n", "5", "-c", "1", WITH_PASSWORD],  # the command after a flag
    "validate": ["validate", "--qps", WITH_PASSWORD],
    "demo": ["demo", WITH_PASSWORD],
    "bench": ["bench", "-c", WITH_PASSWORD, WITH_PASSWORD],
    "merge": ["merge", WITH_PASSWORD],
    "compare": ["compare", "--latencyUnit", WITH_PASSWORD, "a.log", "b.log"],
    "plot": ["plot", "a.log", "-o", "a.png", "--width", WITH_PASSWORD],
    # a header's credential, quoted back by value: a malformed -H, and a mistyped flag read as a URL
    "header": ["-H", f"Authorization Bearer {LEAKED}", "http://127.0.0.1:9/"],
    "typo": [f"--hedaer=X-Api-Key: {LEAKED}", "http://127.0.0.1:9/"],
}


@pytest.mark.parametrize("args", USAGE_ERRORS.values(), ids=USAGE_ERRORS.keys())
def test_a_usage_error_never_prints_a_password(args: list[str], tmp_path: Path) -> None:
    """`unrecognized arguments: ... http://alice:S3cretPW@...` went to stderr as given: a typo in a CronJob's
    args put the password in `kubectl logs`. Every line the program writes is redacted where it is written."""
    run = run_soak(*args, cwd=tmp_path)
    assert run.returncode == EXIT_USAGE, run.stderr
    assert run.stderr.startswith("soak: ") and run.stderr.count("\n") == 1, run.stderr
    assert LEAKED not in run.stdout + run.stderr
    assert "<hidden>" in run.stderr


@pytest.mark.parametrize("command", ["run", "demo", "validate", "bench", "merge", "compare", "plot", "report"])
def test_the_help_goes_through_the_redaction_unchanged(command: str) -> None:
    """The help has no secret, and words like `TEXT|@FILE` are not URLs: nothing of it is hidden."""
    run = run_soak(command, "--help")
    assert run.returncode == 0, run.stderr
    assert "<hidden>" not in run.stdout
    if command in ("run", "demo", "validate"):  # the commands that send, and so take a body (a bench offers -p)
        assert "--body TEXT|@FILE" in run.stdout
    if command in ("run", "validate", "bench"):
        assert "target URL, or @FILE for a URL list" in run.stdout


def test_warnings_and_tracebacks_are_redacted_where_they_are_written() -> None:
    """Python's warnings and its last-resort traceback write to sys.stderr, which the program routes
    through the same redaction as its own lines: a library that quotes a URL cannot print its password."""
    code = ("import warnings\n"
            "from runner.commands.outputs import OUTPUTS\n"
            "OUTPUTS.install()\n"
            f"warnings.warn('retrying {WITH_PASSWORD}')\n"
            f"raise RuntimeError('cannot reach {WITH_PASSWORD}')\n")
    repo = Path(__file__).resolve().parents[2]  # where `runner` is, installed or not
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=repo)
    assert done.returncode == 1
    assert LEAKED not in done.stderr
    assert "UserWarning: retrying http://alice:<hidden>@127.0.0.1:9/" in done.stderr
    assert "RuntimeError: cannot reach http://alice:<hidden>@127.0.0.1:9/" in done.stderr
