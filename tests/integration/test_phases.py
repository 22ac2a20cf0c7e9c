"""Where the time went, on every engine and transport: a server with a known header delay, one with a
known connect delay, and plain nginx; the summary's phases, a phase rule's verdict, soak compare.

The connect delay is the kernel's own: in a network namespace of the test's (never the host's `lo`),
an iptables rule drops every other SYN, so each connect's first SYN is lost and retransmitted after
TCP's initial RTO of one second (RFC 6298; the kernel's timers never fire early, so a connect takes
at least that). The client connects one connection at a time, so each connection's first SYN is the
one dropped.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from runner.core.errors import EXIT_OK, EXIT_THRESHOLDS
from tests.conftest import REPO, Nginx, Run, assert_counts_add_up, run_soak, soak_command
from tests.support import reaper
from tests.support.faultserver import FaultServer

HEAD_MS, BODY_MS = 40, 30  # /phased/40/30: headers 40 ms after the request, the body 30 ms after them
# How far above its delay a phase's median may be on a busy machine: a shared CI node can hold a
# server thread or the client back by milliseconds; a phase that took the other's time would be
# 30 or 40 ms off, far beyond it. On a quiet machine they are within 1 ms (the done-when of issue 24).
MARGIN_MS = 15
RTO_MS = 1000  # TCP's initial retransmission timeout (the kernel's TCP_TIMEOUT_INIT)


def phases_of(run: Run) -> dict:
    summary = assert_counts_add_up(run.stdout)
    assert set(summary["phases"]) == {"dns", "connect", "tls", "ttfb", "body"}, summary.get("phases")
    return summary


def test_a_known_header_and_body_delay_land_in_their_phases(fault_server: FaultServer, transport: str,
                                                            tmp_path: Path) -> None:
    run = run_soak("--qps", "20", "--concurrency", "2", "--interval", "1s", "--iterations", "2",
                   "--thresholds", "ttfb.p50 < 1s, body.p50 < 1s",
                   fault_server.url(f"/phased/{HEAD_MS}/{BODY_MS}"))
    assert run.returncode == EXIT_OK, run.stderr
    summary = phases_of(run)
    phases, responses = summary["phases"], summary["good"] + summary["bad"]
    assert responses > 0 and all(p["count"] == responses for p in phases.values())
    ttfb, body = phases["ttfb"], phases["body"]
    # Each phase holds its own delay and not the other's: the medians within MARGIN_MS of their
    # delays. Not the minimums: where the split falls depends on the client reading at once (a
    # client held back reads headers and body in one go, from one kernel timestamp) and on its
    # stamp of the request written, taken after the write; with both cores busy a ttfb of 37 ms
    # and a body of 26 ms were seen. What holds at any load is the latency from the send, below.
    assert abs(ttfb["p50"] - HEAD_MS) < MARGIN_MS and abs(body["p50"] - BODY_MS) < MARGIN_MS, (ttfb, body)
    # A numeric host, plain HTTP: no lookup, no handshake; two kept-alive connections for all
    # the responses, so the median connect is a reused connection's 0.
    assert phases["dns"]["max"] == 0 and phases["tls"]["max"] == 0
    assert phases["connect"]["p50"] == 0 and phases["connect"]["max"] < RTO_MS
    # The phases up to the headers are the latency less the writing of the request (in none).
    up_to_headers = sum(phases[p]["mean"] for p in ("dns", "connect", "tls", "ttfb"))
    assert up_to_headers <= summary["mean"] + 0.005  # both in ms, to the microsecond
    assert summary["min"] >= HEAD_MS  # the server waited this long at least after the send, whatever the load
    # soak compare shows the phase rows, from the summary alone.
    saved = tmp_path / "run.log"
    saved.write_text(run.stdout)
    compared = subprocess.run([sys.executable, "-m", "runner", "compare", str(saved), str(saved)],
                              capture_output=True, text=True, timeout=60, cwd=REPO)
    assert compared.returncode == 0, compared.stderr
    rows = {line.split("  ")[0]: line for line in compared.stdout.splitlines()}
    assert "ttfb p50 (ms)" in rows and "body p50 (ms)" in rows and "connect p99 (ms)" in rows, compared.stdout
    assert float(rows["ttfb p50 (ms)"].split()[3]) == ttfb["p50"]


def test_a_reused_connection_records_connect_0_and_nginx_keeps_the_connect_rule(nginx: Nginx, transport: str) -> None:
    run = run_soak("--qps", "400", "--concurrency", "2", "--interval", "500ms", "--totalRequests", "400",
                   "--thresholds", "connect.p99 < 5ms", "--intervalThresholds", "dns.max < 1ms", nginx.url)
    assert run.returncode == EXIT_OK, run.stdout + run.stderr
    summary = phases_of(run)
    connect = summary["phases"]["connect"]
    assert summary["good"] == connect["count"] == 400
    # Every response but the (at most 2) that opened a connection had connect 0, however slow those
    # connects were: with 400 responses, p99 is a reused connection's 0.
    assert summary["connectionsOpened"] <= 2 and connect["p99"] == 0 and connect["min"] == 0
    line = next(line for line in run.stdout.splitlines() if line.startswith("# threshold run connect"))
    assert line == "# threshold run connect.p99 < 5ms: 0ns ok", line
    rules = summary["thresholds"]["rules"]
    assert [(r["rule"], r["phase"], r["ok"]) for r in rules] == [("connect.p99 < 5ms", "connect", True),
                                                                   ("dns.max < 1ms", "dns", True)]


# --- a known connect delay: a network namespace of our own --------------------------------------


@pytest.fixture
def slow_syn_namespace() -> Iterator[str]:
    """A network namespace whose loopback drops every other SYN; skipped where one cannot be made."""
    if os.geteuid() != 0:
        pytest.skip("a network namespace needs root")
    if shutil.which("ip") is None or shutil.which("iptables") is None:
        pytest.skip("needs ip (iproute2) and iptables")
    name = f"soak-test-{uuid.uuid4().hex[:8]}"
    made = subprocess.run(["ip", "netns", "add", name], capture_output=True, text=True, timeout=30)
    if made.returncode != 0:
        pytest.skip(f"cannot make a network namespace: {made.stderr.strip()}")
    try:
        for command in (["ip", "link", "set", "lo", "up"],
                        ["iptables", "-A", "INPUT", "-p", "tcp", "--syn", "-m", "statistic", "--mode", "nth",
                         "--every", "2", "--packet", "0", "-j", "DROP"]):
            done = subprocess.run(["ip", "netns", "exec", name, *command], capture_output=True, text=True,
                                  timeout=30)
            if done.returncode != 0:
                pytest.skip(f"cannot set up the namespace ({' '.join(command)}): {done.stderr.strip()}")
        yield name
    finally:
        subprocess.run(["ip", "netns", "del", name], capture_output=True, timeout=30)


def test_a_known_connect_delay_lands_in_connect_and_breaks_the_rule(slow_syn_namespace: str,
                                                                    transport: str) -> None:
    inside = ["ip", "netns", "exec", slow_syn_namespace]
    server = reaper.spawn([*inside, sys.executable, "tests/support/delayserver.py", "5"], "delay server", cwd=REPO,
                          env={**os.environ, "PYTHONPATH": str(REPO)}, stdout=subprocess.PIPE, text=True)
    try:
        assert server.stdout is not None
        url = server.stdout.readline().strip()
        assert url.startswith("http://127.0.0.1:"), url
        # One client, a new connection per request: each connect's first SYN is the one dropped.
        done = subprocess.run([*inside, *soak_command("--noReuse", "--concurrency", "1", "--qps", "1",
                                                      "--totalRequests", "3", "--interval", "2s",
                                                      "--thresholds", "connect.p99 < 5ms, ttfb.p50 < 1s", url)],
                              capture_output=True, text=True, timeout=120, cwd=REPO, env={**os.environ, "TZ": "UTC"})
    finally:
        server.kill()
        server.wait(timeout=30)
        reaper.stopped(server)
    run = Run(done.returncode, done.stdout, done.stderr)
    assert run.returncode == EXIT_THRESHOLDS, run.stdout + run.stderr
    summary = phases_of(run)
    connect, ttfb = summary["phases"]["connect"], summary["phases"]["ttfb"]
    assert summary["good"] == connect["count"] == 3
    assert connect["min"] >= RTO_MS, connect  # each connect waited for the retransmitted SYN
    assert ttfb["p50"] < RTO_MS and summary["min"] >= RTO_MS  # in connect, not ttfb; and in the latency
    lines = [line for line in run.stdout.splitlines() if line.startswith("# threshold run")]
    assert lines[0].startswith("# threshold run connect.p99 < 5ms: 1.") and lines[0].endswith("s BROKEN"), lines
    assert lines[1].endswith(" ok"), lines
    rule = summary["thresholds"]["rules"][0]
    assert (rule["phase"], rule["ok"]) == ("connect", False) and rule["measured"] >= RTO_MS


def test_local_workers_and_soak_merge_add_the_phases_up(fault_server: FaultServer, tmp_path: Path) -> None:
    url = fault_server.url(f"/phased/{HEAD_MS}/{BODY_MS}")
    common = ("--qps", "20", "--concurrency", "2", "--interval", "1s", "--iterations", "1")
    workers = run_soak(*common, "--workers", "2", url)
    assert workers.returncode == EXIT_OK, workers.stderr
    summary = phases_of(workers)
    assert all(p["count"] == summary["good"] + summary["bad"] > 0 for p in summary["phases"].values())
    assert summary["phases"]["ttfb"]["min"] >= HEAD_MS and summary["phases"]["body"]["min"] >= BODY_MS
    shards = []
    for index in (0, 1):
        shard = run_soak(*common, "--shards", "2", "--shard", str(index), url)
        assert shard.returncode == EXIT_OK, shard.stderr
        shards.append(phases_of(shard))
        (tmp_path / f"shard{index}.log").write_text(shard.stdout)
    merged = subprocess.run(soak_command("merge", str(tmp_path / "shard0.log"), str(tmp_path / "shard1.log")),
                            capture_output=True, text=True, timeout=60, cwd=REPO)
    assert merged.returncode == EXIT_OK, merged.stderr
    whole = phases_of(Run(merged.returncode, merged.stdout, merged.stderr))
    for phase, figures in whole["phases"].items():
        parts = [s["phases"][phase] for s in shards]
        assert figures["count"] == sum(p["count"] for p in parts) == whole["good"] + whole["bad"], phase
        assert figures["min"] == min(p["min"] for p in parts) and figures["max"] == max(p["max"] for p in parts)
