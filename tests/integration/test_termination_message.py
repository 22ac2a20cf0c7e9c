"""The termination message: the CLI writes its verdict where Kubernetes shows why a container ended.

Real runs against nginx, a server that answers 503 and a closed port, the message written to a
file of the test's (terminationMessagePath), read back and held against the run's own log: the
broken rules are the lines the log printed, a passing run says so, a run stopped by a signal or
answered by nothing says that first, in the words of its stderr, and an unwritable path is an
output that failed.
The container test (test_container.py) reads it from the image as the kubelet does.
"""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest

from runner.commands.termination import KUBERNETES_PATH, MESSAGE_BYTES
from runner.core.errors import EXIT_INTERRUPTED, EXIT_NO_RESPONSE, EXIT_THRESHOLDS
from tests.conftest import Nginx, assert_counts_add_up, run_soak
from tests.support.faultserver import FaultServer, refused_port
from tests.support.liverun import LONG_RUN, LiveRun

pytestmark = pytest.mark.nginx

SHORT = ("--qps", "20", "--interval", "1s", "--iterations", "2")
# Rules a loopback nginx keeps on any machine, however busy: no goal%, which a late client breaks.
KEPT = "errors% <= 1, p99 < 60s"


def broken_lines(stdout: str) -> list[str]:
    """The verdict's lines of the rules a run broke, as its log printed them."""
    return [line.removeprefix("# ") for line in stdout.splitlines()
            if line.startswith("# threshold ") and line.endswith(" BROKEN")]


def last_line(stderr: str, code: int) -> str:
    """The line stderr ended with, which says why the run exits with `code`, without its `soak: `
    and `(exit code N)`: the termination message says the code in its own words."""
    line = stderr.splitlines()[-1]
    assert line.startswith("soak: ") and line.endswith(f" (exit code {code})"), stderr
    return line.removeprefix("soak: ").removesuffix(f" (exit code {code})")


def test_a_broken_threshold_is_named_in_the_message(fault_server: FaultServer, tmp_path: Path) -> None:
    message = tmp_path / "termination-log"
    run = run_soak(*SHORT, "--thresholds", KEPT, "--terminationMessagePath", str(message),
                   fault_server.url("/status/503"))
    assert run.returncode == EXIT_THRESHOLDS, run.stderr
    broken = broken_lines(run.stdout)
    assert broken == ["threshold run errors% <= 1: 100% BROKEN"]
    assert message.read_text() == "\n".join(["exit code 3: 1 of 2 thresholds broken", *broken]) + "\n"


def test_a_target_that_answers_nothing_says_so_before_the_verdict(tmp_path: Path) -> None:
    """Exit 8 wins over the broken rules (runner.core.errors.PRECEDENCE): its line comes first, the
    verdict's after it, each as the log said it."""
    message = tmp_path / "termination-log"
    blocker = refused_port()
    try:
        run = run_soak(*SHORT, "--thresholds", KEPT, "--terminationMessagePath", str(message),
                       f"http://127.0.0.1:{blocker.getsockname()[1]}/")
    finally:
        blocker.close()
    assert run.returncode == EXIT_NO_RESPONSE, run.stderr
    why = last_line(run.stderr, EXIT_NO_RESPONSE)
    assert why.startswith("no response at all: ") and "(refused " in why
    # A refusal is the server's answer: errors% is broken however busy the client was. p99 has
    # nothing to measure, and where the client was saturated in every interval that says nothing
    # of the service (inconclusive): both as the log's lines say them.
    failing = [line.removeprefix("# ") for line in run.stdout.splitlines()
               if line.startswith("# threshold ") and line.endswith((" BROKEN", " INCONCLUSIVE"))]
    assert failing[0] == "threshold run errors% <= 1: 100% BROKEN"
    assert failing[1] in ("threshold run p99 < 60s: nothing to measure BROKEN",
                          "threshold run p99 < 60s: nothing to measure (nothing to measure where the client kept pace)"
                          " INCONCLUSIVE"), failing
    total = "2 of 2 thresholds broken" if failing[1].endswith(" BROKEN") else \
        "1 of 2 thresholds broken, 1 of 2 inconclusive"
    assert message.read_text() == "\n".join([f"exit code 8: {why}", total, *failing]) + "\n"


def test_a_run_stopped_by_a_signal_is_no_pass_in_the_message(nginx: Nginx, tmp_path: Path) -> None:
    """An evicted pod's run kept its rules in what it ran: the message says it was cut short first."""
    message = tmp_path / "termination-log"
    with LiveRun("--qps", "20", *LONG_RUN, "--thresholds", KEPT, "--terminationMessagePath", str(message),
                 nginx.url) as live:
        live.wait_for_first_interval()
        live.wait(live.send(signal.SIGTERM))
    assert live.process.returncode == EXIT_INTERRUPTED, live.stderr
    assert_counts_add_up(live.stdout)
    why = last_line(live.stderr, EXIT_INTERRUPTED)
    assert why.startswith("stopped by SIGTERM before its planned end, after ")
    assert message.read_text() == f"exit code 7: {why}\n2 of 2 thresholds kept\n"


def test_a_passing_run_says_passed(nginx: Nginx, tmp_path: Path) -> None:
    message = tmp_path / "termination-log"
    run = run_soak(*SHORT, "--thresholds", KEPT, "--terminationMessagePath", str(message), nginx.url)
    assert run.returncode == 0, run.stderr
    assert_counts_add_up(run.stdout)
    assert message.read_text() == "passed: 2 of 2 thresholds kept\n"
    run = run_soak(*SHORT, "--terminationMessagePath", str(message), nginx.url)
    assert run.returncode == 0 and message.read_text() == "passed: no thresholds set\n"


def test_a_message_that_cannot_be_written_is_an_output_that_failed(nginx: Nginx, tmp_path: Path) -> None:
    where = tmp_path / "no-such-dir" / "termination-log"
    run = run_soak(*SHORT, "--terminationMessagePath", str(where), nginx.url)
    assert run.returncode == 6
    assert f"soak: terminationMessagePath: {where}: No such file or directory" in run.stderr.splitlines()
    assert_counts_add_up(run.stdout)  # the run itself is whole


def test_a_fifo_without_a_reader_is_an_output_that_failed_not_a_hang(nginx: Nginx, tmp_path: Path) -> None:
    """Opening a FIFO to write waits for a reader: the run hung for ever after its summary. One
    that is read gets the message, as a file does."""
    fifo = tmp_path / "termination-fifo"
    os.mkfifo(fifo)
    run = run_soak(*SHORT, "--terminationMessagePath", str(fifo), nginx.url, timeout=60)
    assert run.returncode == 6, run.stderr
    assert run.stderr.splitlines()[-1] == f"soak: terminationMessagePath: {fifo}: a FIFO that nothing reads"
    assert_counts_add_up(run.stdout)  # the run itself is whole
    reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
    try:
        run = run_soak(*SHORT, "--terminationMessagePath", str(fifo), nginx.url, timeout=60)
        assert run.returncode == 0, run.stderr
        assert os.read(reader, 4096) == b"passed: no thresholds set\n"
    finally:
        os.close(reader)


def test_outside_kubernetes_nothing_is_written_by_default(nginx: Nginx) -> None:
    """Kubernetes' path is written where the kubelet made it; a laptop has none, and gets none."""
    if os.path.exists(KUBERNETES_PATH):
        pytest.skip(f"{KUBERNETES_PATH} exists here (a pod?): the default writes it")
    run = run_soak(*SHORT, nginx.url)
    assert run.returncode == 0, run.stderr
    assert not os.path.exists(KUBERNETES_PATH)


def test_many_broken_rules_stay_within_the_kubelets_limit(fault_server: FaultServer, tmp_path: Path) -> None:
    message = tmp_path / "termination-log"
    rules = ", ".join(f"errors% <= {n / 100:.2f}" for n in range(100))
    run = run_soak(*SHORT, "--thresholds", rules, "--terminationMessagePath", str(message),
                   fault_server.url("/status/503"))
    assert run.returncode == 3, run.stderr
    text = message.read_text()
    assert len(text.encode()) <= MESSAGE_BYTES
    lines = text.splitlines()
    assert lines[0] == "exit code 3: 100 of 100 thresholds broken" and lines[-1].endswith("more lines in the log")
