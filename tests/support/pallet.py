"""The rendered pallet, for tests: `kubectl kustomize` of the root with components turned on.

A component is turned on the way README tells users to: by uncommenting its line in the
root kustomization.yaml (in a copy of the pallet's files).
"""

from __future__ import annotations

import functools
import json
import re
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.conftest import REPO
from tests.support.programs import program

COMPONENTS = {"linkerd": "manifests/components/linkerd", "nginx-10-replicas": "manifests/components/nginx-10-replicas",
              "scale-out": "manifests/components/scale-out", "metrics": "manifests/components/metrics",
              "monitoring": "manifests/components/monitoring", "results-pvc": "manifests/components/results-pvc",
              "results-s3": "manifests/components/results-s3"}
VARIANTS = ["base", "linkerd", "nginx-10-replicas", "linkerd+nginx-10-replicas", "scale-out", "linkerd+scale-out",
            "metrics", "linkerd+scale-out+metrics", "results-pvc", "scale-out+results-s3",
            "linkerd+scale-out+metrics+results-pvc"]
PALLET_FILES = ["kustomization.yaml", "configuration.json", "urlsconfigmap.yaml", "manifests"]
# Native sidecars (the linkerd component) need 1.29; the schemas we validate against end at 1.37.
KUBERNETES_VERSIONS = [f"1.{minor}.0" for minor in range(29, 38)]


def kubectl() -> str:
    return program("kubectl", "it renders the manifests (kubectl kustomize)")


Edit = tuple[str, str, str]  # (a pallet file's path, a text in it, what the user writes instead)


@functools.cache
def render(variant: str, edits: tuple[Edit, ...] = ()) -> tuple[dict[str, Any], ...]:
    """The resources `kubectl kustomize` makes of the pallet with the variant's components on, and
    with `edits` made first, as a user would edit the files."""
    wanted = [] if variant == "base" else variant.split("+")
    with tempfile.TemporaryDirectory(prefix="pallet-") as copy:
        source = Path(copy)
        for name in PALLET_FILES:
            (shutil.copytree if (REPO / name).is_dir() else shutil.copy)(REPO / name, source / name)
        for path, old, new in edits:
            edited = (source / path).read_text()
            assert edited.count(old) == 1, f"{path}: {old!r} is not there once"
            (source / path).write_text(edited.replace(old, new))
        text = (source / "kustomization.yaml").read_text()
        for name in wanted:  # turn the component on as README says: uncomment its line
            line = f"  # - {COMPONENTS[name]}\n"
            assert line in text, f"the root kustomization.yaml has no commented line for {name}"
            text = text.replace(line, f"  - {COMPONENTS[name]}\n")
        (source / "kustomization.yaml").write_text(text)
        done = subprocess.run([kubectl(), "kustomize", str(source)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return tuple(doc for doc in yaml.safe_load_all(done.stdout) if doc)


def find(resources: tuple[dict[str, Any], ...], kind: str, name: str | None = None) -> dict[str, Any]:
    matches = [r for r in resources if r["kind"] == kind and (name is None or r["metadata"]["name"] == name)]
    assert len(matches) == 1, f"expected one {kind} {name or ''}, found {len(matches)}"
    return matches[0]


def pod_specs(resources: tuple[dict[str, Any], ...]) -> list[tuple[str, dict[str, Any]]]:
    specs = []
    for r in resources:
        if r["kind"] == "Deployment":
            specs.append((r["metadata"]["name"], r["spec"]["template"]["spec"]))
        elif r["kind"] == "CronJob":
            specs.append((r["metadata"]["name"], r["spec"]["jobTemplate"]["spec"]["template"]["spec"]))
    return specs


def soak_container(resources: tuple[dict[str, Any], ...]) -> dict[str, Any]:
    spec = find(resources, "CronJob", "soak")["spec"]["jobTemplate"]["spec"]["template"]["spec"]
    (container,) = spec["containers"]
    return container


def mounted_files(resources: tuple[dict[str, Any], ...]) -> dict[str, str]:
    """Path -> content of every file the soak container sees from a ConfigMap volume."""
    pod = find(resources, "CronJob", "soak")["spec"]["jobTemplate"]["spec"]["template"]["spec"]
    volumes = {v["name"]: v["configMap"]["name"] for v in pod["volumes"] if "configMap" in v}
    files = {}
    for mount in soak_container(resources)["volumeMounts"]:
        if mount["name"] in volumes:
            data = find(resources, "ConfigMap", volumes[mount["name"]])["data"]
            for key, value in data.items():
                files[f"{mount['mountPath']}/{key}"] = value
    return files


def nginx_server(resources: tuple[dict[str, Any], ...]) -> str:
    """The server block the rendered nginx pods run: default.conf of the ConfigMap mounted over conf.d."""
    pod = find(resources, "Deployment", "nginx")["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    (mount,) = [m for m in container["volumeMounts"] if m["mountPath"] == "/etc/nginx/conf.d"]
    assert mount["readOnly"] is True
    (volume,) = [v for v in pod["volumes"] if v["name"] == mount["name"]]
    return str(find(resources, "ConfigMap", volume["configMap"]["name"])["data"]["default.conf"])


def dockerfile_instruction(name: str) -> list[str]:
    """The JSON-form argument of a Dockerfile instruction, e.g. ENTRYPOINT ["soak"]."""
    (line,) = [line for line in (REPO / "Dockerfile").read_text().splitlines() if line.startswith(f"{name} ")]
    return json.loads(line.split(" ", 1)[1])


JOB_NAME = "soak-29400000"  # the Job a pod of the rendered CronJob belongs to, as its labels say
_DOWNWARD = {"metadata.labels['batch.kubernetes.io/job-name']": JOB_NAME}


def pod_command(resources: tuple[dict[str, Any], ...], root: Path, url: str) -> tuple[list[str], dict[str, str]]:
    """The soak pod's command line and env as the rendered CronJob runs it, ready to run here.

    The image's ENTRYPOINT unless the container sets a command; the container's args and
    env (a value from the pod's own labels as Kubernetes gives it to a Job's pod: the Job's
    name, JOB_NAME), `$(VAR)` in the args expanded from that env as Kubernetes expands it; the
    rendered ConfigMaps written as the files the pod sees, their mount paths (and every other
    volume's, in a file:// URL) mapped under `root`. The only change is the URL list, which
    points at `url`.
    """
    container = soak_container(resources)
    command = container.get("command") or dockerfile_instruction("ENTRYPOINT")
    args = container.get("args", dockerfile_instruction("CMD"))
    env = {item["name"]: item["value"] if "value" in item else _DOWNWARD[item["valueFrom"]["fieldRef"]["fieldPath"]]
           for item in container.get("env", [])}
    args = [re.sub(r"\$\((\w+)\)", lambda m: env.get(m.group(1), m.group(0)), a) for a in args]

    def in_pod(path: str) -> Path:
        return root / path.lstrip("/")

    for path, content in mounted_files(resources).items():
        in_pod(path).parent.mkdir(parents=True, exist_ok=True)
        in_pod(path).write_text(content)
    urls_file = in_pod(args[args.index("--urls") + 1])
    assert urls_file.exists(), "--urls names a file that no mounted ConfigMap provides"
    urls_file.write_text(f"{url}\n")  # the one override: the target
    mounts = [m["mountPath"] for m in container["volumeMounts"]]
    mapped = [str(in_pod(a)) if any(a.startswith(m + "/") for m in mounts) else a for a in args]
    mapped = [_in_file_url(a, mounts, in_pod) for a in mapped]
    executable = shutil.which(command[0])
    if executable is None:
        pytest.fail(f"{command[0]} (the image's entrypoint) is not on PATH: pip install .")
    return [executable, *command[1:], *mapped], env


def _in_file_url(arg: str, mounts: list[str], in_pod: Any) -> str:
    """`arg` with a volume's path in a file:// URL (the results-pvc component's store) mapped, once."""
    for mount in sorted(mounts, key=len, reverse=True):
        found = re.search(rf"file://{re.escape(mount)}(?=/|$)", arg)
        if found:
            return arg[:found.start()] + f"file://{in_pod(mount)}" + arg[found.end():]
    return arg


def broken_by_the_target(summary: dict[str, Any]) -> list[str]:
    """The threshold rules a run broke that its target is to blame for, in the summary's order.

    goal% measures the client's pace as well as the target's: on a machine too busy for the client
    to keep its schedule, the sends it skipped break goal% with nothing wrong at the target. Such a
    break is left out only when those skipped sends are the whole shortfall: every send made was
    answered, none badly (requests + skipped = due is checked by assert_counts_add_up).
    """
    client_late_only = summary["failed"] == summary["bad"] == 0 and summary["skipped"] > 0
    return [rule["rule"] for rule in summary["thresholds"]["rules"]
            if not rule["ok"] and not (rule["rule"].startswith("goal%") and client_late_only)]


def assert_shipped_verdict(summary: dict[str, Any], returncode: int, said: str) -> None:
    """A run judged by the shipped thresholds against a healthy target exits 0. On a machine too
    busy for the client to keep its schedule only goal% may break, by the sends it skipped
    (broken_by_the_target): exit 3, or 9 (inconclusive) where the client was seen not to keep pace."""
    assert broken_by_the_target(summary) == [], said
    assert returncode in ((0,) if summary["thresholds"]["passed"] else (3, 9)), said
