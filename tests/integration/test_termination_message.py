"""The termination message: the CLI writes its verdict where Kubernetes shows why a container ended.

Real runs against nginx and a closed port, the message written to a file of the test's
(terminationMessagePath), read back and held against the run's own log: the broken rules are
the lines the log printed, a passing run says so, an unwritable path is an output that failed.
The container test (test_container.py) reads it from the image as the kubelet does.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from runner.commands.termination import KUBERNETES_PATH, MESSAGE_BYTES
from tests.conftest import Nginx, assert_counts_add_up, run_soak
from tests.support.faultserver import refused_port

pytestmark = pytest.mark.nginx

SHORT = ("--qps", "20", "--interval", "1s", "--iterations", "2")
# Rules a loopback nginx keeps on any machine, however busy: no goal%, which a late client breaks.
KEPT = "errors% <= 1, p99 < 60s"


def test_a_broken_threshold_is_named_in_the_message(tmp_path: Path) -> None:
    message = tmp_path / "termination-log"
    blocker = refused_port()
    try:
        run = run_soak(*SHORT, "--thresholds", KEPT, "--terminationMessagePath", str(message),
                       f"http://127.0.0.1:{blocker.getsockname()[1]}/")
    finally:
        blocker.close()
    assert run.returncode == 3, run.stderr
    broken = [line.removeprefix("# ") for line in run.stdout.splitlines()
              if line.startswith("# threshold ") and line.endswith(" BROKEN")]
    assert broken == ["threshold run errors% <= 1: 100% BROKEN", "threshold run p99 < 60s: nothing to measure BROKEN"]
    assert message.read_text() == "\n".join(["exit code 3: 2 of 2 thresholds broken", *broken]) + "\n"


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


def test_outside_kubernetes_nothing_is_written_by_default(nginx: Nginx) -> None:
    """Kubernetes' path is written where the kubelet made it; a laptop has none, and gets none."""
    if os.path.exists(KUBERNETES_PATH):
        pytest.skip(f"{KUBERNETES_PATH} exists here (a pod?): the default writes it")
    run = run_soak(*SHORT, nginx.url)
    assert run.returncode == 0, run.stderr
    assert not os.path.exists(KUBERNETES_PATH)


def test_many_broken_rules_stay_within_the_kubelets_limit(tmp_path: Path) -> None:
    message = tmp_path / "termination-log"
    blocker = refused_port()
    rules = ", ".join(f"errors% <= {n / 100:.2f}" for n in range(100))
    try:
        run = run_soak(*SHORT, "--thresholds", rules, "--terminationMessagePath", str(message),
                       f"http://127.0.0.1:{blocker.getsockname()[1]}/")
    finally:
        blocker.close()
    assert run.returncode == 3, run.stderr
    text = message.read_text()
    assert len(text.encode()) <= MESSAGE_BYTES
    lines = text.splitlines()
    assert lines[0] == "exit code 3: 100 of 100 thresholds broken" and lines[-1].endswith("more lines in the log")
