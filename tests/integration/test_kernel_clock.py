"""Latency from the kernel's receive timestamps: the client's own scheduling delay left out.

Against tests/support/delayserver.py, which answers a set time after the kernel received
each request and keeps what each answer really took. What these tests assert holds at any
load: a response cannot be stamped before the server sent it, so no reported latency is
below the delay; and a response that the kernel received while the client could not run
is dated when it arrived, not when the client got round to it. How close the reported p50
comes to the truth is a timing, so bench/latency_truth.py prints it (within 0.1 ms at 100
req/s there) and no test asserts it: on a busy machine the server's own thread is late too,
and the two are not told apart by a test that must never be flaky.

The native engine stamps what it reads (SO_TIMESTAMPNS); the Python engine, on httpx, times
by its loop's clock (the Python fast transport, retired in issue 34, stamped too): these
tests are the native engine's.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from tests.conftest import REPO, run_soak, soak_command
from tests.support.delayserver import DelayServer
from tests.support.freeze import freeze

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="kernel receive timestamps are Linux's")

DELAY_MS = 3.0
STOPPED_DELAY_MS = 200.0  # long enough to stop the client after the request arrived and before its answer
BLOCK_S = 0.6


def test_no_reported_latency_is_below_the_servers_delay() -> None:
    with DelayServer(DELAY_MS) as server:
        run = run_soak("--qps", "100", "--concurrency", "5", "--interval", "1s", "--iterations", "2",
                       "--latencyUnit", "us", "--engine", "native", server.url)
        served = len(server.served_ns)
    summary = run.summary
    assert summary["good"] == served > 0
    assert summary["min"] >= DELAY_MS * 1000, summary
    assert summary["latencyClock"] == "kernel", summary


def _stopped_while_answered(server: DelayServer) -> tuple[dict, int, int] | None:
    """One request sent by the native engine, the whole process stopped (SIGSTOP) from after the
    server received it until BLOCK_S later, well after its answer was due.

    Returns the summary, when the server received the request and when the process was let go
    (wall clock, ns); None if this machine was too busy to stop it before the answer was sent.
    """
    command = soak_command("--engine", "native", "--qps", "1", "--concurrency", "1", "--totalRequests", "1",
                           "--interval", "1s", "--timeout", "10s", "--latencyUnit", "us", server.url)
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO,
                               env={**os.environ, "TZ": "UTC"})
    try:
        received = len(server.received_wall_ns)
        limit = time.monotonic() + 30
        while len(server.received_wall_ns) == received and time.monotonic() < limit and process.poll() is None:
            time.sleep(0.001)
        stopped_ns, resumed_ns = freeze(process, BLOCK_S)
        out, err = process.communicate(timeout=60)
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGCONT)
            process.kill()
            process.wait()
    assert process.returncode == 0, err
    arrived_ns = server.received_wall_ns[-1]
    if stopped_ns >= arrived_ns + server.delay_ns or server.sent_wall_ns[-1] >= resumed_ns:
        return None  # stopped too late (the answer may have been read) or answered after the resume
    lines = out.splitlines()
    return json.loads("\n".join(lines[lines.index("{"):])), arrived_ns, resumed_ns


def test_an_answer_that_arrives_while_the_client_is_stopped_is_dated_when_it_arrived() -> None:
    with DelayServer(STOPPED_DELAY_MS) as server:
        for _ in range(5):  # a busy machine may stop the client too late, or answer after the resume
            found = _stopped_while_answered(server)
            if found is not None:
                break
        else:
            pytest.skip("the client was never stopped while its answer arrived: the machine is too busy to tell")
    summary, arrived_ns, resumed_ns = found
    assert summary["good"] == 1 and summary["latencyClock"] == "kernel", summary
    assert summary["max"] * 1000 < resumed_ns - arrived_ns, "the answer was dated when the client read it"
    assert summary["min"] >= STOPPED_DELAY_MS * 1000, summary
