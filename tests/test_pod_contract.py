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
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.conftest import REPO, Nginx, assert_counts_add_up
from tests.pallet import dockerfile_instruction, mounted_files, render, soak_container


def test_the_cronjobs_command_runs_against_nginx(nginx: Nginx, tmp_path: Path) -> None:
    resources = render("base")
    container = soak_container(resources)
    command = container.get("command") or dockerfile_instruction("ENTRYPOINT")
    args = container.get("args", dockerfile_instruction("CMD"))
    env = {item["name"]: item["value"] for item in container.get("env", [])}
    pod = tmp_path / "pod"

    def in_pod(path: str) -> Path:
        return pod / path.lstrip("/")

    for path, content in mounted_files(resources).items():
        in_pod(path).parent.mkdir(parents=True, exist_ok=True)
        in_pod(path).write_text(content)
    urls_file = in_pod(args[args.index("--urls") + 1])
    assert urls_file.exists(), "--urls names a file that no mounted ConfigMap provides"
    urls_file.write_text(f"{nginx.url}\n")  # the one override: the target

    mounts = [m["mountPath"] for m in container["volumeMounts"]]
    mapped = [str(in_pod(a)) if any(a.startswith(m + "/") for m in mounts) else a for a in args]
    executable = shutil.which(command[0])
    if executable is None:
        pytest.fail(f"{command[0]} (the image's entrypoint) is not on PATH: pip install .")
    before = nginx.requests_logged()
    done = subprocess.run(
        [executable, *command[1:], *mapped, "--interval", "500ms", "--iterations", "2"],
        capture_output=True, text=True, timeout=60, env={**os.environ, "TZ": "UTC", **env}, cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    summary = assert_counts_add_up(done.stdout)
    config = json.loads((REPO / "configuration.json").read_text())
    assert summary["config"]["qps"] == config["qps"] and summary["config"]["concurrency"] == config["concurrency"]
    assert summary["good"] == summary["requests"] == config["qps"] == nginx.requests_logged() - before
    assert done.stdout.splitlines()[0] == (
        f"# sending {config['qps']} GET req/s with concurrency={config['concurrency']} to {nginx.url} ...")
