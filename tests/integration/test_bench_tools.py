"""bench/nginx.sh, which README's walkthrough uses to start nginx with N workers by hand."""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
import urllib.request

import pytest

from tests.conftest import NGINX_PAGE, REPO, free_port, wait_for_port
from tests.support import reaper


def test_nginx_sh_serves_the_page_with_the_workers_asked_for() -> None:
    port = free_port()
    process = reaper.spawn(["bash", str(REPO / "bench" / "nginx.sh"), "2", str(port)], "bench/nginx.sh",
                           stderr=subprocess.PIPE, text=True)
    try:
        wait_for_port(port)
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=5) as response:
            assert response.read() == NGINX_PAGE
        workers = subprocess.run(["pgrep", "-f", "-c", "nginx: worker process"], capture_output=True, text=True)
        assert int(workers.stdout.strip() or 0) >= 2
    finally:
        process.send_signal(signal.SIGTERM)  # as `kill %1` does
        _, err = process.communicate(timeout=10)
        reaper.stopped(process)
    assert f"nginx with 2 worker(s) on http://127.0.0.1:{port}/" in err
    with pytest.raises(OSError):  # killing the script stopped its nginx too: nothing listens any more
        socket.create_connection(("127.0.0.1", port), timeout=1).close()


def test_workers_bench_step_reads_the_figures_of_a_run_with_two_workers(nginx) -> None:
    """bench/workers.py's step: the figures it prints come from a real run's summary."""
    sys.path.insert(0, str(REPO / "bench"))
    try:
        import workers  # bench/workers.py
    finally:
        sys.path.remove(str(REPO / "bench"))
    before = nginx.requests_logged()
    step = workers.step(nginx.url, "fast", 2, 200, "1s", 2)
    assert (step.transport, step.workers, step.qps) == ("fast", 2, 200)
    assert step.requests == 400 and nginx.requests_logged() - before == 400
    assert step.achieved == pytest.approx(200, rel=0.01) and step.lowest_goal >= 99
    assert step.cpu_s > 0 and "| fast | 2 | 200 |" in step.row
