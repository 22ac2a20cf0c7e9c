"""`soak bench --workers N`: the clients, -n and -t split over local processes, and ab's report
of them all exactly as one process would print it; checked against what nginx saw.

Every run goes to the nginx fixture or the fault server on 127.0.0.1 (a refused port: test_bench.py); each is bounded by -n or -t,
and those that are signalled or have a worker killed are killed when the test ends.
"""

from __future__ import annotations

import os
import signal
import time

import pytest

from runner.core.errors import EXIT_INTERRUPTED
from runner.report.clientnotes import RUN_NOTE
from runner.stats.histogram import LatencyHistogram
from tests.conftest import NGINX_PAGE, Nginx, Run, run_soak
from tests.integration.test_bench import ab_fields, ab_progress, connections
from tests.integration.test_worker_pipes import children
from tests.support.faultserver import FaultServer
from tests.support.liverun import LiveRun, wait_until

EXIT_WITHIN_S = 5.0  # from a signal to the exit: the workers' grace, then the parent's merge


def workers_of(pid: int) -> list[int]:
    """The worker processes of a run: multiprocessing's spawned children (not its resource tracker)."""
    return [child for child, cmdline in children(pid) if "spawn_main" in cmdline]


def phase_count(run: Run, phase: str) -> int:
    """How many requests the report's phase histogram holds (the summary's HDR encoding of it)."""
    record = run.summary["bench"]["phases"][phase]
    return LatencyHistogram.restored(record["hdr"], 0, 0, 0, 0).count


@pytest.mark.parametrize("keep_alive", [False, True], ids=["new-connections", "keep-alive"])
def test_n_requests_over_two_workers_are_exactly_n(nginx: Nginx, keep_alive: bool) -> None:
    before = nginx.requests_logged()
    run = run_soak("bench", "--workers", "2", "-n", "1000", "-c", "4", *(["-k"] if keep_alive else []), nginx.url)
    ab = ab_fields(run)  # also: the printed report is the summary's
    logged = nginx.log_lines()[before:]
    assert len(logged) == 1000 == ab["complete"] == run.summary["requests"]
    assert (ab["failed"], ab["concurrency"], ab["documentLength"]) == (0, 4, len(NGINX_PAGE))
    assert ab["htmlTransferred"] == 1000 * len(NGINX_PAGE)
    assert phase_count(run, "total") == 1000, "every worker's timings are in the phases"
    opened = len(connections(logged))
    if keep_alive:
        assert opened <= 4 and ab["keepAliveRequests"] == 1000
    else:
        assert opened == 1000 and "Keep-Alive requests" not in run.stdout
    assert ab_progress(run.stderr) == [f"Completed {n} requests" for n in range(100, 1001, 100)] + [
        "Finished 1000 requests"], "ab's progress, from the workers' counts added up"


def test_progress_is_told_as_the_workers_go(fault_server: FaultServer) -> None:
    """ab's "Completed 100 requests" while the run is still going, not all at its end: the server
    takes 100 ms a request, so the second hundred takes at least 2.5 s more after the first.
    And the time taken ends with the last response of any worker."""
    with LiveRun("bench", "--workers", "2", "-n", "200", "-c", "4", "-k", fault_server.url("/slow/100")) as live:
        deadline = time.monotonic() + 30
        while "Completed 100 requests" not in live.stderr and time.monotonic() < deadline:
            time.sleep(0.02)
        arrived = fault_server.seen("/slow/100")
        live.wait(time.monotonic(), timeout=30)
    assert arrived < 200, "the first step was told only when every request had been sent"
    assert ab_progress(live.stderr) == ["Completed 100 requests", "Completed 200 requests", "Finished 200 requests"]
    # Each client made 50 requests of at least 100 ms in turn: the bench took at least 5 s, to
    # its last response (after the last send), whichever worker had it.
    assert ab_fields(Run(live.process.returncode, live.stdout, live.stderr))["timeTakenSeconds"] >= 5.0


def test_n_splits_so_the_parts_add_up(nginx: Nginx) -> None:
    """10 over 3 workers is 4, 3 and 3: exactly 10, not 9 (10 // 3 each) nor 12."""
    before = nginx.requests_logged()
    run = run_soak("bench", "--workers", "3", "-n", "10", "-c", "3", "-k", nginx.url)
    assert ab_fields(run)["complete"] == 10
    assert nginx.requests_logged() - before == 10


def test_time_limit_stops_every_worker(nginx: Nginx) -> None:
    before = nginx.requests_logged()
    launched = time.monotonic()
    with LiveRun("bench", "--workers", "2", "-t", "2", "-n", "100000000", "-c", "4", "-k", nginx.url) as live:
        seen: set[int] = set()
        deadline = time.monotonic() + 15
        while live.process.poll() is None and time.monotonic() < deadline:
            seen.update(workers_of(live.process.pid))
            time.sleep(0.05)
        lived = live.wait(launched)
    run = Run(live.process.returncode, live.stdout, live.stderr)
    ab = ab_fields(run)
    assert len(seen) == 2, "the bench ran in two worker processes"
    assert run.summary["stopReason"] == "duration"
    # From the common start to the last response: the limit at least, and within the parent's own
    # life (not the workers' times added up), however long a busy machine made that life.
    assert 2.0 <= ab["timeTakenSeconds"] <= lived, "from the common start to the last response"
    logged = nginx.requests_logged() - before
    assert logged == ab["complete"] == run.summary["requests"] > 0
    time.sleep(0.5)
    assert nginx.requests_logged() - before == logged, "nothing was sent once the run had ended"


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_a_signal_stops_every_worker_and_the_report_has_what_was_measured(nginx: Nginx,
                                                                          sig: signal.Signals) -> None:
    before = nginx.requests_logged()
    with LiveRun("bench", "--workers", "2", "-n", "100000000", "-c", "2", "-k", nginx.url) as live:
        wait_until(lambda: nginx.requests_logged() > before, timeout=20)  # the workers are sending
        time.sleep(0.3)
        elapsed = live.wait(live.send(sig))
    run = Run(live.process.returncode, live.stdout, live.stderr)
    assert elapsed < EXIT_WITHIN_S
    ab = ab_fields(run, EXIT_INTERRUPTED)  # was 0: a bench cut short passed
    assert run.summary["stopReason"] == f"signal {sig.name}"
    assert ab["complete"] == run.summary["requests"] == phase_count(run, "total") > 0
    wait_until(lambda: nginx.requests_logged() - before >= ab["complete"])
    assert nginx.requests_logged() - before == ab["complete"]
    # ab's last line, then at most our note that the client was saturated (a busy machine's), then why it ended.
    stopped = (f"soak: stopped by {sig.name} before its planned end, after {ab['complete']} of 100000000 "
               "requests: the results cover only that (exit code 7)\n")
    assert run.stderr.endswith(stopped), run.stderr
    before_stop = run.stderr.removesuffix(stopped)
    assert ab_progress(before_stop)[-1] == f"Finished {ab['complete']} requests"
    assert before_stop.split(f"Finished {ab['complete']} requests\n", 1)[1] in ("", *[
        line + "\n" for line in before_stop.splitlines() if line.startswith(RUN_NOTE)])


def test_a_worker_that_dies_is_named_and_what_it_measured_is_kept(nginx: Nginx) -> None:
    before = nginx.requests_logged()
    with LiveRun("bench", "--workers", "2", "-t", "4", "-n", "100000000", "-c", "2", "-k", nginx.url) as live:
        wait_until(lambda: nginx.requests_logged() > before, timeout=20)
        time.sleep(1.5)  # past the first interval's end: its figures are home
        victims = workers_of(live.process.pid)
        assert len(victims) == 2
        os.kill(victims[1], signal.SIGKILL)
        live.wait(time.monotonic(), timeout=30)
    run = Run(live.process.returncode, live.stdout, live.stderr)
    assert run.returncode == 5, run.stderr
    assert "soak: worker 1 failed: exited with code -9 before its summary\n" in run.stderr
    assert "Traceback" not in run.stderr
    summary = run.summary
    assert summary["failedWorkers"] == {"1": "exited with code -9 before its summary"}
    bench = summary["bench"]
    assert bench["complete"] == summary["requests"] > 0
    # The dead worker's figures as it last sent them: at least the intervals it had closed
    # (those are in "complete"), so the phases hold no fewer requests than the counts.
    assert phase_count(run, "total") >= bench["complete"]
    assert nginx.requests_logged() - before >= bench["complete"]


def test_fewer_clients_than_workers_is_one_line() -> None:
    run = run_soak("bench", "--workers", "3", "-n", "10", "-c", "2", "http://127.0.0.1:9/")
    assert (run.returncode, run.stdout) == (2, "")
    assert run.stderr == ("soak: -c: 2 is not allowed with workers: 3; must be at least the number of workers, "
                          "so that every worker has its share\n")
