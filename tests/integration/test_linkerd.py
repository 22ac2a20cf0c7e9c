"""The runner beside a Linkerd proxy: wait for its readiness before sending, ask it to shut down after.

Against a fake proxy admin server on loopback with the real endpoints' paths and answers
(tests/support/fakeproxy.py). The soak's own requests go to the same server, so one ordered log of
real requests shows when the proxy was probed, when load began, and when shutdown came.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from runner.core.errors import EXIT_PROXY_NOT_READY
from runner.readback.logscan import scan
from tests.conftest import assert_counts_add_up, free_port, run_soak, soak_command
from tests.support.fakeproxy import FakeProxy
from tests.support.pallet import assert_shipped_verdict, pod_command, render, soak_container

TEN = ("--qps", "50", "--concurrency", "2", "--interval", "1s", "--totalRequests", "10")


@pytest.fixture
def proxy() -> Iterator[FakeProxy]:
    fake = FakeProxy().start()
    try:
        yield fake
    finally:
        fake.stop()


def test_the_first_send_waits_until_the_proxy_is_ready(proxy: FakeProxy) -> None:
    proxy.not_ready_answers = 3
    run = run_soak("--linkerdAwait", "--linkerdAdmin", proxy.admin, *TEN, proxy.target)
    assert run.returncode == 0, run.stderr
    probes = proxy.calls("GET", "/ready")
    assert [status for _, status in probes] == [503, 503, 503, 200]
    sends = proxy.calls("GET", "/target")
    assert len(sends) == 10 and run.summary["good"] == 10
    assert min(t for t, _ in sends) > probes[-1][0], "a request went out before the proxy was ready"
    (line,) = run.stderr.splitlines()
    found = re.fullmatch(rf"soak: linkerd proxy ready after (\d+\.\d)s \(GET http://{proxy.admin}/ready: 200 ready\)",
                         line)
    assert found, line
    assert float(found.group(1)) >= 0.5  # three 503s, 200 ms apart


def test_a_proxy_that_never_gets_ready_means_exit_4_and_nothing_sent(proxy: FakeProxy) -> None:
    proxy.not_ready_answers = -1
    started = time.monotonic()
    run = run_soak("--linkerdAwait", "--linkerdAwaitTimeout", "1s", "--linkerdAdmin", proxy.admin, *TEN, proxy.target)
    assert time.monotonic() - started < 10
    assert run.returncode == EXIT_PROXY_NOT_READY == 4
    assert run.stderr == (f"soak: linkerd proxy not ready after 1s (GET http://{proxy.admin}/ready, "
                          "last: 503 not ready); nothing was sent\n")
    assert run.stdout == ""
    assert proxy.calls("GET", "/target") == []
    assert len(proxy.calls("GET", "/ready")) >= 3


def test_no_admin_server_at_all_is_not_ready_either(proxy: FakeProxy) -> None:
    admin = f"127.0.0.1:{free_port()}"
    run = run_soak("--linkerdAwait", "--linkerdAwaitTimeout", "500ms", "--linkerdAdmin", admin, *TEN, proxy.target)
    assert run.returncode == 4
    assert run.stderr == (f"soak: linkerd proxy not ready after 500ms (GET http://{admin}/ready, "
                          "last: connection refused); nothing was sent\n")
    assert proxy.calls("GET", "/target") == []


def test_the_proxy_is_asked_to_shut_down_after_the_last_request(proxy: FakeProxy) -> None:
    run = run_soak("--linkerdShutdown", "--linkerdAdmin", proxy.admin, *TEN, proxy.target)
    assert run.returncode == 0, run.stderr
    (shutdown,) = proxy.calls("POST", "/shutdown")
    assert shutdown[1] == 200
    assert shutdown[0] > max(t for t, _ in proxy.calls("GET", "/target"))
    assert run.stderr.splitlines() == [
        f"soak: linkerd proxy asked to shut down (POST http://{proxy.admin}/shutdown: 200 shutdown)"]
    assert proxy.calls("GET", "/ready") == [], "no wait was asked for"


def test_shutdown_is_asked_even_when_the_proxy_never_got_ready(proxy: FakeProxy) -> None:
    proxy.not_ready_answers = -1
    run = run_soak("--linkerdAwait", "--linkerdAwaitTimeout", "500ms", "--linkerdShutdown",
                   "--linkerdAdmin", proxy.admin, *TEN, proxy.target)
    assert run.returncode == 4
    assert len(proxy.calls("POST", "/shutdown")) == 1
    lines = run.stderr.splitlines()
    assert lines[0].startswith("soak: linkerd proxy not ready after 500ms")
    assert lines[1].startswith("soak: linkerd proxy asked to shut down")


def test_a_disabled_shutdown_endpoint_is_reported_with_the_annotation(proxy: FakeProxy) -> None:
    proxy.shutdown_enabled = False
    run = run_soak("--linkerdShutdown", "--linkerdAdmin", proxy.admin, *TEN, proxy.target)
    assert run.returncode == 0, run.stderr
    assert run.stderr.splitlines() == [
        f"soak: linkerd proxy did not agree to shut down (POST http://{proxy.admin}/shutdown: "
        "404 shutdown endpoint is not enabled); annotate the pod config.linkerd.io/proxy-admin-shutdown: enabled"]


def test_sigterm_mid_run_still_shuts_the_proxy_down(proxy: FakeProxy) -> None:
    child = subprocess.Popen(
        soak_command("--linkerdAwait", "--linkerdShutdown", "--linkerdAdmin", proxy.admin, "--qps", "20",
                     "--concurrency", "2", "--interval", "1s", "--duration", "30s", proxy.target),
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env={**os.environ, "TZ": "UTC"})
    try:
        deadline = time.monotonic() + 15
        while not proxy.calls("GET", "/target") and time.monotonic() < deadline:
            time.sleep(0.05)
        child.send_signal(signal.SIGTERM)
        stdout, stderr = child.communicate(timeout=20)
    finally:
        child.kill()
    assert child.returncode == 7, stderr  # stopped before its planned end
    assert '"stopReason": "signal SIGTERM"' in stdout
    (shutdown,) = proxy.calls("POST", "/shutdown")
    assert shutdown[0] > max(t for t, _ in proxy.calls("GET", "/target"))


def test_sigterm_while_waiting_for_the_proxy_still_shuts_it_down(proxy: FakeProxy) -> None:
    proxy.not_ready_answers = -1
    child = subprocess.Popen(
        soak_command("--linkerdAwait", "--linkerdShutdown", "--linkerdAdmin", proxy.admin, *TEN, proxy.target),
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 15
        while len(proxy.calls("GET", "/ready")) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        child.send_signal(signal.SIGTERM)
        stdout, stderr = child.communicate(timeout=20)
    finally:
        child.kill()
    assert child.returncode == 130 and stdout == ""
    assert len(proxy.calls("POST", "/shutdown")) == 1
    assert proxy.calls("GET", "/target") == []
    assert stderr.splitlines() == [
        f"soak: linkerd proxy asked to shut down (POST http://{proxy.admin}/shutdown: 200 shutdown)"]


def test_validate_describes_the_wait_and_the_shutdown() -> None:
    run = run_soak("validate", "--linkerdAwait", "--linkerdShutdown", "--linkerdAwaitTimeout", "30s",
                   "http://nginx.soak-target.svc.cluster.local")
    assert run.returncode == 0, run.stderr
    assert "waits up to 30s for the Linkerd proxy (GET http://127.0.0.1:4191/ready) before the first send" in run.lines
    assert "asks the Linkerd proxy to shut down at the end (POST http://127.0.0.1:4191/shutdown)" in run.lines


@pytest.mark.parametrize(("admin", "message"), [
    ("4191", '--linkerdAdmin: "4191" is not allowed; must be host:port, like 127.0.0.1:4191 (port 1 to 65535)'),
    ("http://127.0.0.1:4191", '--linkerdAdmin: "http://127.0.0.1:4191" is not allowed; '
                              'must be host:port, like 127.0.0.1:4191 (port 1 to 65535)'),
    ("127.0.0.1:70000", '--linkerdAdmin: "127.0.0.1:70000" is not allowed; must be host:port, like 127.0.0.1:4191 '
                        '(port 1 to 65535)'),
])
def test_a_bad_admin_address_is_one_line(admin: str, message: str, proxy: FakeProxy) -> None:
    run = run_soak("--linkerdAwait", "--linkerdAdmin", admin, *TEN, proxy.target)
    assert (run.returncode, run.stderr) == (2, f"soak: {message}\n")
    assert proxy.calls("GET", "/target") == []


def test_a_log_with_the_proxy_lines_reads_back_without_complaint(proxy: FakeProxy) -> None:
    run = run_soak("--linkerdAwait", "--linkerdShutdown", "--linkerdAdmin", proxy.admin, *TEN, proxy.target)
    assert run.returncode == 0, run.stderr
    log = scan(run.stderr + run.stdout)  # as kubectl logs may interleave them
    assert log.skipped == 0, log.skip_notes
    assert log.startup is not None and len(log.intervals) == len(run.interval_lines)


def test_the_linkerd_components_pod_awaits_the_proxy(proxy: FakeProxy, tmp_path: Path) -> None:
    """The rendered CronJob with the linkerd component, run as the pod runs it (tests/support/pallet.py),
    with the admin address pointed at the fake proxy: it waits, then sends."""
    args = soak_container(render("linkerd"))["args"]
    assert "--linkerdAwait" in args
    assert "--linkerdAwait" not in soak_container(render("base"))["args"]
    proxy.not_ready_answers = 2
    command, env = pod_command(render("linkerd"), tmp_path / "pod", proxy.target)
    done = subprocess.run(
        [*command, "--linkerdAdmin", proxy.admin, "--interval", "500ms", "--iterations", "2"],
        capture_output=True, text=True, timeout=60, env={**os.environ, "TZ": "UTC", **env}, cwd=tmp_path,
    )
    summary = assert_counts_add_up(done.stdout)
    assert_shipped_verdict(summary, done.returncode, done.stderr)  # 0, unless the client could not keep pace
    assert done.stderr.startswith("soak: linkerd proxy ready after ")
    probes = proxy.calls("GET", "/ready")
    sends = proxy.calls("GET", "/target")
    assert [status for _, status in probes] == [503, 503, 200]
    assert len(sends) == summary["requests"] and summary["requests"] + summary["skipped"] == 100
    assert min(t for t, _ in sends) > probes[-1][0]
