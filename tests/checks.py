"""The checks that run programs over the sources, not the program: lint, types, the workflows,
the Dockerfile, the manifests' schemas and their security scan.

`python -m tests.checks` runs every check at once, each in a process of its own (most wait on a
program: ruff, mypy, actionlint, hadolint, yamllint, checkov), prints one line per check with
its wall time, then what each failed one found, and exits 1 if any failed. `python -m
tests.checks NAME ...` runs those named. `tests/run-all` (README's test command, so CI's) runs
them before the test suite: they are a step of their own, not pytest items, so that the tiers
the tests are sized by hold only tests.

Each check asserts what the program says, and where a program could pass whatever it is given,
that it fails a broken input (actionlint a misspelt workflow, checkov the pallet without its
NetworkPolicies and reasons): a check that cannot fail checks nothing.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parent.parent
WORKFLOWS = REPO / ".github" / "workflows"
CHECKS: dict[str, Callable[[], None]] = {}


def check(function: Callable[[], None]) -> Callable[[], None]:
    CHECKS[function.__name__] = function
    return function


def tool(name: str, install: str) -> str:
    """A program the checks run: beside this interpreter (pip's), or on PATH."""
    beside = Path(sys.executable).parent / name
    found = str(beside) if beside.exists() else shutil.which(name)
    assert found is not None, f"{name} is not installed: {install}"
    return found


def run(*command: str, cwd: Path = REPO, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    return subprocess.run(command, capture_output=True, text=True, cwd=cwd, timeout=timeout)


# --- the code --------------------------------------------------------------------------------


@check
def ruff() -> None:
    """Unused imports, shadowed names and the mistakes ruff finds (configured in pyproject.toml)."""
    done = run(sys.executable, "-m", "ruff", "check", "runner", "tests", "bench", timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr


@check
def mypy() -> None:
    done = run(sys.executable, "-m", "mypy")
    assert done.returncode == 0, done.stdout + done.stderr


# --- the workflows and the Dockerfile ----------------------------------------------------------


@check
def actionlint() -> None:
    """actionlint finds nothing in the workflows, and does find a misspelt input and a wrong step id."""
    program = tool("actionlint", "pip install '.[test]'")
    assert sorted(p.name for p in WORKFLOWS.iterdir()) == ["ci.yml", "release.yml"]
    done = run(program, "-color=false", timeout=120)
    assert (done.returncode, done.stdout + done.stderr) == (0, ""), done.stdout + done.stderr
    with tempfile.TemporaryDirectory(prefix="actionlint-") as directory:
        root = Path(directory)
        (root / ".github" / "workflows").mkdir(parents=True)
        text = (WORKFLOWS / "release.yml").read_text()
        broken = text.replace("persist-credentials:", "persist-credential:").replace("steps.build.", "steps.bulid.")
        assert broken != text
        (root / ".github" / "workflows" / "release.yml").write_text(broken)
        shutil.copy(WORKFLOWS / "ci.yml", root / ".github" / "workflows" / "ci.yml")
        subprocess.run(["git", "init", "-q", str(root)], check=True, timeout=60)  # actionlint's project root
        done = run(program, "-color=false", cwd=root, timeout=120)
    assert done.returncode == 1, done.stdout + done.stderr
    assert 'input "persist-credential" is not defined' in done.stdout and 'property "bulid"' in done.stdout, done.stdout


@check
def hadolint() -> None:
    done = run(tool("hadolint", "pip install '.[test]'"), "Dockerfile", timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr


# --- the manifests ---------------------------------------------------------------------------

YAMLLINT = ("{extends: default, rules: {line-length: {max: 120}, document-start: disable, "
            "comments: {min-spaces-from-content: 1}, comments-indentation: disable}}")


@check
def yamllint() -> None:
    """The pallet's YAML as written (before kustomize)."""
    done = run(tool("yamllint", "pip install '.[test]'"), "--strict", "-d", YAMLLINT, "kustomization.yaml",
               "urlsconfigmap.yaml", "manifests", timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr


@check
def kubernetes_schemas() -> None:
    """Every resource of every variant validates strictly against every Kubernetes version's schemas."""
    import kubernetes_validate

    from tests.support.pallet import KUBERNETES_VERSIONS, VARIANTS, render

    failures = []
    for variant in VARIANTS:
        for version in KUBERNETES_VERSIONS:
            for resource in render(variant):
                try:
                    kubernetes_validate.validate(resource, version, strict=True)
                except kubernetes_validate.ValidationError as e:
                    failures.append(f"{variant}: {resource['kind']} {resource['metadata']['name']} on {version}: "
                                    f"{e.message}")
    assert failures == [], "\n".join(failures)


# The findings the pallet accepts, each with its reason in the resource's annotations.
ACCEPTED = {
    "Deployment.soak-target.nginx": {"CKV_K8S_11", "CKV_K8S_15", "CKV_K8S_40", "CKV_K8S_43"},
    "CronJob.soak.soak": {"CKV_K8S_11", "CKV_K8S_15", "CKV_K8S_43"},
}
# And with a component on, what it adds: credentials the S3 client reads from the environment.
ACCEPTED_WITH = {"results-s3": {"CronJob.soak.soak": {"CKV_K8S_35"}}}
Findings = dict[str, dict[str, list[dict[str, Any]]]]


@check
def checkov() -> None:
    """A security scan of every rendered variant: checkov finds nothing it is not told why to accept.

    One checkov run over the variants (no download of Prisma Cloud's metadata: nothing leaves the
    machine). No check may fail; each skipped one is skipped by a `checkov.io/skipN` annotation
    with its reason, on the resource where it is expected. The same scan of the pallet stripped of
    its NetworkPolicies and skip annotations fails those checks, so the scan is really looking."""
    from tests.support.pallet import VARIANTS, find, render

    with tempfile.TemporaryDirectory(prefix="checkov-") as variants, \
            tempfile.TemporaryDirectory(prefix="checkov-unguarded-") as alone:
        for variant in VARIANTS:
            (Path(variants) / f"{variant}.yaml").write_text(yaml.safe_dump_all(render(variant)))
        # scanned apart: checkov relates resources across files
        (Path(alone) / "unguarded.yaml").write_text(yaml.safe_dump_all(_unguarded(render("base"))))
        scan = {**_run_checkov(Path(variants)), **_run_checkov(Path(alone))}
    for variant in VARIANTS:
        results = scan[variant]
        assert len(results["passed_checks"]) > 100, f"{variant}: checkov checked the resources"
        failed = sorted((c["check_id"], c["resource"]) for c in results["failed_checks"])
        assert failed == [], f"{variant}: {failed}"
        skipped: dict[str, set[str]] = {}
        for found in results["skipped_checks"]:
            reason = found["check_result"].get("suppress_comment") or ""
            assert reason != "No comment provided" and len(reason) > 20, \
                f"{variant}: {found['check_id']} skipped without a reason"
            skipped.setdefault(found["resource"], set()).add(found["check_id"])
        accepted = {resource: set(checks) for resource, checks in ACCEPTED.items()}
        for component in variant.split("+"):
            for resource, checks in ACCEPTED_WITH.get(component, {}).items():
                accepted[resource] |= checks
        assert skipped == accepted, f"{variant}: {skipped}"
    results = scan["unguarded"]
    failed_unguarded = {(c["check_id"], c["resource"]) for c in results["failed_checks"]}
    # checkov names the pod by its template's labels, in order
    labels = find(render("base"), "Deployment", "nginx")["spec"]["template"]["metadata"]["labels"]
    nginx_pod = "Pod.soak-target.nginx." + ".".join(f"{key}-{value}" for key, value in sorted(labels.items()))
    assert ("CKV2_K8S_6", nginx_pod) in failed_unguarded, "no NetworkPolicy"
    for resource, checks in ACCEPTED.items():
        assert {(one, resource) for one in checks} <= failed_unguarded, resource
    assert results["skipped_checks"] == []


def _unguarded(resources: tuple[dict[str, Any], ...]) -> list[dict[str, Any]]:
    """The pallet without its NetworkPolicies and without the skip annotations."""
    stripped = []
    for resource in resources:
        if resource["kind"] == "NetworkPolicy":
            continue
        resource = json.loads(json.dumps(resource))
        annotations = resource["metadata"].get("annotations", {})
        for key in [k for k in annotations if k.startswith("checkov.io/skip")]:
            del annotations[key]
        stripped.append(resource)
    return stripped


def _run_checkov(directory: Path) -> Findings:
    """checkov's results for each file in `directory`, by the file's name (without .yaml)."""
    done = run(tool("checkov", "pip install '.[test]'"), "--directory", str(directory), "--framework", "kubernetes",
               "--skip-download", "--output", "json", cwd=directory)
    assert done.returncode in (0, 1), done.stderr[-3000:]  # 1: some check failed
    report = json.loads(done.stdout)
    assert report["summary"]["parsing_errors"] == 0
    by_file: Findings = {}
    for outcome in ("passed_checks", "failed_checks", "skipped_checks"):
        for found in report["results"].get(outcome, []):
            name = Path(found["file_path"]).stem
            by_file.setdefault(name, {"passed_checks": [], "failed_checks": [], "skipped_checks": []})
            by_file[name][outcome].append(found)
    return by_file


# --- running them ----------------------------------------------------------------------------


def timed(name: str) -> tuple[float, str | None]:
    """Run one check: its wall time, and what it found (None: nothing)."""
    started = time.monotonic()
    try:
        CHECKS[name]()
        found = None
    except (KeyboardInterrupt, SystemExit):
        raise
    except BaseException as e:  # an assertion, a program that is missing or timed out, pytest.fail in a helper
        found = f"{type(e).__name__}: {e}"
    return time.monotonic() - started, found


def main(names: list[str]) -> int:
    unknown = [name for name in names if name not in CHECKS]
    if unknown:
        print(f"no such check: {', '.join(unknown)}; the checks: {', '.join(CHECKS)}", file=sys.stderr)
        return 2
    chosen = names or list(CHECKS)
    started = time.monotonic()
    with ProcessPoolExecutor(max_workers=min(len(chosen), max(2, os.cpu_count() or 2))) as pool:
        outcomes = dict(zip(chosen, pool.map(timed, chosen), strict=True))
    failed = {name: found for name, (_, found) in outcomes.items() if found is not None}
    for name, (seconds, found) in outcomes.items():
        print(f"check {name}: {'FAILED' if found is not None else 'ok'} ({seconds:.1f} s)")
    for name, found in failed.items():
        print(f"\n--- {name} ---\n{found}")
    print(f"checks: {len(chosen) - len(failed)} passed, {len(failed)} failed in {time.monotonic() - started:.1f} s")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
