"""Out of the box a dead target fails the Job: the shipped configuration.json has thresholds.

The rendered CronJob's exact command and files (tests/support/pallet.py), shortened to two intervals:
against a loopback port where nothing listens every request is refused, every shipped rule breaks
and the run exits 8, not one response (the Job is Failed); against a healthy nginx it keeps the
same thresholds and exits 0.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

from tests.conftest import REPO, Nginx, assert_counts_add_up, free_port
from tests.support.pallet import assert_shipped_verdict, pod_command, render

SHIPPED_RULES = json.loads((REPO / "configuration.json").read_text()).get("thresholds", [])


def run_pod(url: str, root: Path) -> subprocess.CompletedProcess[str]:
    command, env = pod_command(render("base"), root, url)
    return subprocess.run([*command, "--interval", "2s", "--iterations", "2"], capture_output=True, text=True,
                          timeout=120, env={**os.environ, "TZ": "UTC", **env}, cwd=root)


def verdict_lines(stdout: str) -> list[str]:
    return [line for line in stdout.splitlines() if line.startswith("# threshold")]


def test_the_shipped_configuration_states_thresholds() -> None:
    assert SHIPPED_RULES, "configuration.json has no thresholds: a dead target would give a Complete Job"


def test_a_refused_target_fails_the_run_with_the_shipped_configuration(tmp_path: Path) -> None:
    done = run_pod(f"http://127.0.0.1:{free_port()}/", tmp_path / "pod")  # nothing listens there
    assert done.returncode == 8, done.stdout + done.stderr  # no response at all: says more than 3
    assert re.search(r"\nsoak: no response at all: \d+ requests sent, none answered \(refused \d+\) \(exit code 8\)\n$",
                     done.stderr), done.stderr
    summary = assert_counts_add_up(done.stdout)
    assert summary["good"] == summary["bad"] == 0 and set(summary["errors"]) == {"refused"}
    assert summary["thresholds"]["passed"] is False
    assert [rule["rule"] for rule in summary["thresholds"]["rules"]] == SHIPPED_RULES
    assert all(rule["ok"] is False for rule in summary["thresholds"]["rules"]), "every shipped rule sees it"
    assert verdict_lines(done.stdout)[-1] == f"# thresholds: {len(SHIPPED_RULES)} of {len(SHIPPED_RULES)} broken"


def test_a_healthy_nginx_keeps_the_shipped_thresholds(nginx: Nginx, tmp_path: Path) -> None:
    """Exit 0, unless the machine was too busy for the client itself to keep pace (then only goal%
    breaks, by the sends the client skipped, and the run exits 3 saying so, or 9, inconclusive, when
    it broke only in intervals where the client was seen not to keep pace)."""
    done = run_pod(nginx.url, tmp_path / "pod")
    summary = assert_counts_add_up(done.stdout)
    assert [rule["rule"] for rule in summary["thresholds"]["rules"]] == SHIPPED_RULES
    assert_shipped_verdict(summary, done.returncode, done.stdout + done.stderr)
    if summary["thresholds"]["passed"]:
        assert verdict_lines(done.stdout)[-1] == f"# thresholds: all {len(SHIPPED_RULES)} ok"
