"""A security scan of the rendered pallet: checkov finds nothing it is not told why to accept.

Every variant is rendered (tests/support/pallet.py) and scanned in one checkov run (no download of
Prisma Cloud's metadata: nothing leaves the machine). No check may fail; each skipped one is
skipped by a `checkov.io/skipN` annotation with its reason, on the resource where it is
expected. The same scan of the pallet stripped of its NetworkPolicies and skip annotations
fails those checks, so the scan is really looking. Also: every emptyDir has a sizeLimit,
which checkov does not check.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.support.pallet import VARIANTS, find, pod_specs, render
from tests.support.programs import program

# The findings the pallet accepts, each with its reason in the resource's annotations.
ACCEPTED = {
    "Deployment.soak-target.nginx": {"CKV_K8S_11", "CKV_K8S_15", "CKV_K8S_40", "CKV_K8S_43"},
    "CronJob.soak.soak": {"CKV_K8S_11", "CKV_K8S_15", "CKV_K8S_43"},
}
# And with a component on, what it adds: credentials the S3 client reads from the environment.
ACCEPTED_WITH = {"results-s3": {"CronJob.soak.soak": {"CKV_K8S_35"}}}


def checkov() -> str:
    return program("checkov", "pip install '.[test]'")


def unguarded(resources: tuple[dict[str, Any], ...]) -> list[dict[str, Any]]:
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


def run_checkov(directory: Path) -> dict[str, dict[str, list[dict[str, Any]]]]:
    """checkov's results for each file in `directory`, by the file's name (without .yaml)."""
    done = subprocess.run([checkov(), "--directory", str(directory), "--framework", "kubernetes", "--skip-download",
                           "--output", "json"], capture_output=True, text=True, timeout=600, cwd=directory)
    assert done.returncode in (0, 1), done.stderr[-3000:]  # 1: some check failed
    report = json.loads(done.stdout)
    assert report["summary"]["parsing_errors"] == 0
    by_file: dict[str, dict[str, list[dict[str, Any]]]] = {}
    for outcome in ("passed_checks", "failed_checks", "skipped_checks"):
        for check in report["results"].get(outcome, []):
            name = Path(check["file_path"]).stem
            by_file.setdefault(name, {"passed_checks": [], "failed_checks": [], "skipped_checks": []})
            by_file[name][outcome].append(check)
    return by_file


@pytest.fixture(scope="module")
def scan(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, list[dict[str, Any]]]]:
    """checkov's results per variant, and (scanned apart: checkov relates resources across files)
    for the unguarded base."""
    variants = tmp_path_factory.mktemp("checkov")
    for variant in VARIANTS:
        (variants / f"{variant}.yaml").write_text(yaml.safe_dump_all(render(variant)))
    alone = tmp_path_factory.mktemp("checkov-unguarded")
    (alone / "unguarded.yaml").write_text(yaml.safe_dump_all(unguarded(render("base"))))
    return {**run_checkov(variants), **run_checkov(alone)}


@pytest.mark.parametrize("variant", VARIANTS)
def test_checkov_finds_nothing_unaccepted(scan: dict[str, dict[str, list[dict[str, Any]]]], variant: str) -> None:
    results = scan[variant]
    assert len(results["passed_checks"]) > 100, "checkov checked the resources"
    failed = sorted((c["check_id"], c["resource"]) for c in results["failed_checks"])
    assert failed == []
    skipped: dict[str, set[str]] = {}
    for check in results["skipped_checks"]:
        reason = check["check_result"].get("suppress_comment") or ""
        assert reason != "No comment provided" and len(reason) > 20, f"{check['check_id']} skipped without a reason"
        skipped.setdefault(check["resource"], set()).add(check["check_id"])
    accepted = {resource: set(checks) for resource, checks in ACCEPTED.items()}
    for component in variant.split("+"):
        for resource, checks in ACCEPTED_WITH.get(component, {}).items():
            accepted[resource] |= checks
    assert skipped == accepted


def test_checkov_flags_the_pallet_without_its_policies_and_reasons(scan: dict[str, dict[str, list[dict[str, Any]]]]) -> None:
    results = scan["unguarded"]
    failed = {(c["check_id"], c["resource"]) for c in results["failed_checks"]}
    # checkov names the pod by its template's labels, in order
    labels = find(render("base"), "Deployment", "nginx")["spec"]["template"]["metadata"]["labels"]
    nginx_pod = "Pod.soak-target.nginx." + ".".join(f"{key}-{value}" for key, value in sorted(labels.items()))
    assert ("CKV2_K8S_6", nginx_pod) in failed, "no NetworkPolicy"
    for resource, checks in ACCEPTED.items():
        assert {(check, resource) for check in checks} <= failed
    assert results["skipped_checks"] == []


@pytest.mark.parametrize("variant", VARIANTS)
def test_every_empty_dir_has_a_size_limit(variant: str) -> None:
    for name, pod in pod_specs(render(variant)):
        for volume in pod.get("volumes", []):
            if "emptyDir" in volume:
                assert volume["emptyDir"].get("sizeLimit"), f"{name}: emptyDir {volume['name']} has no sizeLimit"
