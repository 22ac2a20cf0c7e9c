"""At the top of the allowed rate: skipped sends cost nothing per send, what is in flight bounds
memory, and settings the process cannot hold (more connections than it may open) are refused.

A million sends a second to a server that answers in 500 ms, or never: nearly every send is
skipped, and the client must account for each of them exactly (requests + skipped = due)
without spending time on each one. What the tests hold to holds however slow the machine:
the books balance to the send, and the process's own CPU time (not the wall clock) stays far
below what a cost per skipped send would take (about a microsecond each, 3 s for 3 million).
All load goes to the fault server on 127.0.0.1; each run is bounded by --iterations and by
the subprocess timeout.
"""

from __future__ import annotations

import os
import resource
import subprocess
import sys

import pytest

from runner.core.errors import EXIT_NO_RESPONSE, EXIT_OK
from tests.conftest import REPO, Run, assert_counts_add_up, parse_interval, run_soak
from tests.support.faultserver import FaultServer

QPS = 1_000_000  # the most the schema allows
SECONDS = 3
# The run's own CPU time, far below a cost per skipped send (1-3 us each: 3-9 s for these runs)
# and far above what sending a few hundred requests takes (0.1 s).
CPU_BOUND_S = 1.5
OPEN_FILES = 4096  # the limit the runs had (`ulimit -n 4096`)


def at_top_rate(url: str, *flags: str) -> Run:
    return run_soak("--qps", str(QPS), "--interval", "1s", "--iterations", str(SECONDS), *flags, url, timeout=120)


def check_books(run: Run) -> dict:
    """The run ended well (against /stall, with no response at all: exit 8), every due send is
    counted, and never before it was due."""
    summary = assert_counts_add_up(run.stdout)
    assert run.returncode == (EXIT_NO_RESPONSE if summary["good"] + summary["bad"] == 0 else EXIT_OK), run.stderr
    assert summary["requests"] + summary["skipped"] == QPS * SECONDS, (summary["requests"], summary["skipped"])
    counted = 0
    for line, stats in zip(run.interval_lines, summary["intervalStats"], strict=True):
        fields = parse_interval(line)
        counted += fields.requests + stats["skipped"]
        assert counted <= QPS * (fields.iteration + 1), (line, stats)  # skips count where they were due, or later
    return summary


def test_a_closed_client_at_a_million_a_second_skips_in_bulk(fault_server: FaultServer) -> None:
    """The issue's run: one client at 1,000,000 req/s to a 500 ms server sends a few requests and
    skips the rest. It once spent a skipped Result on each (17 s for a 2 s run); now each
    response costs one record of the sends it skipped, whatever their number."""
    run = at_top_rate(fault_server.url("/slow/500"), "--concurrency", "1", "--timeout", "5s")
    summary = check_books(run)
    assert 1 <= summary["requests"] <= 2 * SECONDS + 1 and summary["good"] == summary["requests"]
    assert summary["process"]["cpuSeconds"] < CPU_BOUND_S, summary["process"]
    assert fault_server.wait_idle() and fault_server.seen("/slow/500") == summary["requests"]


def test_open_clients_that_have_no_room_skip_in_bulk_in_each_interval(fault_server: FaultServer) -> None:
    """The open model with every slot taken by a request that never returns: 100 clients, 200 in
    flight, the rest of 3 million sends skipped. A client waits for room instead of waking for
    each send only to skip it (a core's worth of work at this rate), and each interval still
    holds the skips due in it, though no request ends until the timeout."""
    run = at_top_rate(fault_server.url("/stall"), "--loadModel", "open", "--maxInFlight", "200",
                      "--concurrency", "100", "--timeout", "2s")
    summary = check_books(run)
    assert summary["failed"] == summary["requests"] >= 200
    assert summary["process"]["cpuSeconds"] < CPU_BOUND_S, summary["process"]
    first = summary["intervalStats"][0]
    assert first["skipped"] > 0, "the first interval's skips are its own, counted as it closed"
    assert len(run.interval_lines) == SECONDS


def test_open_clients_behind_schedule_still_close_every_interval(fault_server: FaultServer) -> None:
    """100 open clients at 1,000,000 req/s to a fast server send as fast as they can and fall
    behind: every interval line is printed, every due send is counted, and once sending is
    over nothing more goes out (what was left is skipped). Memory stays what is in flight needs."""
    run = at_top_rate(fault_server.url("/ok"), "--loadModel", "open", "--maxInFlight", "1000",
                      "--concurrency", "100", "--timeout", "5s")
    summary = check_books(run)
    assert summary["good"] == summary["requests"] > 0
    assert len(run.interval_lines) == SECONDS
    # Only what was in flight when sending ended can come back after it: a client behind
    # schedule once went on sending what had been due, after the end.
    assert (summary.get("drain") or {"requests": 0})["requests"] <= 1000, summary["drain"]
    assert summary["process"]["maxRssBytes"] < 400 << 20, summary["process"]
    assert fault_server.wait_idle() and fault_server.seen("/ok") == summary["requests"]


def _limited(*args: str) -> subprocess.CompletedProcess[str]:
    """The CLI with its open-file limit at OPEN_FILES, soft and hard, as `ulimit -n 4096` sets it."""

    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (OPEN_FILES, OPEN_FILES))

    return subprocess.run([sys.executable, "-m", "runner", *args], capture_output=True, text=True, timeout=60,
                          cwd=REPO, env={**os.environ, "TZ": "UTC"}, preexec_fn=limit)


@pytest.mark.parametrize(("flags", "name"), [
    (("--loadModel", "open", "--maxInFlight", "1000000", "--concurrency", "100"), "maxInFlight: 1000000"),
    (("--concurrency", "5000"), "concurrency: 5000"),
])
@pytest.mark.parametrize("command", ["run", "validate"])
def test_more_connections_than_the_process_may_open_are_refused_at_start(fault_server: FaultServer, flags: tuple[
        str, ...], name: str, command: str) -> None:
    """The issue's open run under `ulimit -n 4096` grew to 1.3 GB and printed nothing in 40 s:
    past the limit every connect fails and the sends waiting to connect pile up. A run (and
    validate, which refuses what a run refuses) now says so in one line before sending anything."""
    done = _limited(command, "--qps", str(QPS), "--interval", "1s", "--iterations", "1", *flags,
                    fault_server.url("/ok"))
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert done.stderr.splitlines() == [
        f"soak: {name} is more than this process can keep open: its open-file limit (ulimit -n) is {OPEN_FILES}, "
        f"of which 64 are kept for its own files; raise the limit or lower {name.split(':')[0]}"], done.stderr
    assert done.stdout == ""
    assert fault_server.seen() == 0, "nothing was sent"


def test_as_many_connections_as_the_limit_leaves_room_for_run(fault_server: FaultServer) -> None:
    """Just under the limit, with the process's own files beside: the run goes ahead."""
    done = _limited("--qps", "100", "--interval", "500ms", "--iterations", "1", "--concurrency", str(OPEN_FILES - 64),
                    fault_server.url("/ok"))
    assert done.returncode == 0, done.stderr
    summary = assert_counts_add_up(done.stdout)
    assert summary["requests"] + summary["skipped"] == 50
