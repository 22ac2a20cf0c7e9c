"""The contract between the manifests and the runner: run exactly what the pod would run.

The rendered CronJob's command (the image's ENTRYPOINT unless the container sets one), its
args and env, and the rendered ConfigMaps written as the files the pod would see, with the
mount paths mapped into a temporary directory. Only the URL (to local nginx) and the
length of the run (two short intervals) are changed. If a manifest and the runner
disagree on a path, a flag or a key, this fails.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

from tests.conftest import REPO, Nginx, assert_counts_add_up
from tests.support.pallet import pod_command, render


def test_the_cronjobs_command_runs_against_nginx(nginx: Nginx, tmp_path: Path) -> None:
    command, env = pod_command(render("base"), tmp_path / "pod", nginx.url)
    before = nginx.requests_logged()
    done = subprocess.run(
        [*command, "--interval", "500ms", "--iterations", "2"],
        capture_output=True, text=True, timeout=60, env={**os.environ, "TZ": "UTC", **env}, cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    summary = assert_counts_add_up(done.stdout)
    config = json.loads((REPO / "configuration.json").read_text())
    assert summary["config"]["qps"] == config["qps"] and summary["config"]["concurrency"] == config["concurrency"]
    assert summary["good"] == summary["requests"] == config["qps"] == nginx.requests_logged() - before
    assert done.stdout.splitlines()[0] == (
        f"# sending {config['qps']} GET req/s with concurrency={config['concurrency']} to {nginx.url} ...")
