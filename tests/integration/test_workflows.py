"""The GitHub Actions workflows do what docs/deploy.md says (actionlint's check of them is in tests/checks.py).

ci.yml runs .ci/run on every push; release.yml, on a version tag, runs those tests and then
builds the image for linux/amd64 and linux/arm64 with BuildKit under QEMU and pushes it to
ghcr.io with an SBOM and a provenance attestation, with no more permissions than that needs.
The kustomization points at the name and version it publishes.
"""

from __future__ import annotations

import re
import tomllib
from typing import Any

import yaml

from tests.conftest import REPO

WORKFLOWS = REPO / ".github" / "workflows"
VERSION = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["version"]


def workflow(name: str) -> dict[str, Any]:
    data = yaml.safe_load((WORKFLOWS / name).read_text())
    data["on"] = data.pop(True, data.get("on"))  # YAML 1.1 reads the key `on` as true
    return data


def steps_using(job: dict[str, Any], action: str) -> list[dict[str, Any]]:
    return [step for step in job["steps"] if step.get("uses", "").split("@")[0] == action]


def test_ci_runs_the_test_suite_on_every_push() -> None:
    ci = workflow("ci.yml")
    assert ci["on"]["push"] == {"branches": ["**"]} and "workflow_call" in ci["on"]
    assert ci["permissions"] == {"contents": "read"}
    (job,) = ci["jobs"].values()
    assert [step["run"] for step in job["steps"] if "run" in step] == ['sudo env "PATH=$PATH" "CI=$CI" bash .ci/run']
    assert job["timeout-minutes"] <= 90


def test_a_version_tag_builds_both_platforms_with_attestations_and_least_privilege() -> None:
    release = workflow("release.yml")
    assert release["on"] == {"push": {"tags": ["v*"]}}
    assert release["permissions"] == {}, "nothing by default; each job asks for its own"
    assert release["jobs"]["test"] == {"uses": "./.github/workflows/ci.yml", "permissions": {"contents": "read"}}
    image = release["jobs"]["image"]
    assert image["needs"] == "test"
    assert image["permissions"] == {"contents": "read", "packages": "write"}
    for action in ("actions/checkout", "docker/setup-qemu-action", "docker/setup-buildx-action", "docker/login-action",
                   "docker/metadata-action", "docker/build-push-action"):
        assert len(steps_using(image, action)) == 1, action
    (build,) = steps_using(image, "docker/build-push-action")
    assert build["with"]["platforms"] == "linux/amd64,linux/arm64"
    assert build["with"]["push"] is True
    assert build["with"]["sbom"] is True and build["with"]["provenance"] == "mode=max"
    (qemu,) = steps_using(image, "docker/setup-qemu-action")
    assert qemu["with"]["platforms"] == "arm64"
    (login,) = steps_using(image, "docker/login-action")
    assert login["with"]["registry"] == "ghcr.io" and login["with"]["password"] == "${{ secrets.GITHUB_TOKEN }}"
    for job in release["jobs"].values():
        for step in steps_using(job, "actions/checkout") if "steps" in job else []:
            assert step["with"]["persist-credentials"] is False


def test_the_kustomization_uses_the_published_image_at_the_projects_version() -> None:
    image = workflow("release.yml")["jobs"]["image"]
    (meta,) = steps_using(image, "docker/metadata-action")
    published = meta["with"]["images"]
    assert published == "ghcr.io/${{ github.repository_owner }}/soak"
    assert "type=semver,pattern={{version}}" in meta["with"]["tags"].split()
    kustomization = yaml.safe_load((REPO / "kustomization.yaml").read_text())
    (soak,) = [i for i in kustomization["images"] if i["name"] == "soak"]
    owner = re.fullmatch(r"ghcr\.io/([a-z0-9-]+)/soak", soak["newName"])
    assert owner, soak["newName"]
    assert published.replace("${{ github.repository_owner }}", owner.group(1)) == soak["newName"]
    assert soak["newTag"] == VERSION, "the tag v<version> publishes <version>"


def test_a_version_tag_builds_wheels_for_both_platforms_and_an_sdist_that_needs_no_compiler() -> None:
    """cp311 manylinux wheels on an x86_64 and an arm64 runner, each tested to run the native
    engine; an sdist tested to install and say `engine: python` where no compiler is; both
    attached to the tag's release by a job that alone may write."""
    jobs = workflow("release.yml")["jobs"]
    wheels, sdist, publish = jobs["wheels"], jobs["sdist"], jobs["publish"]
    assert wheels["needs"] == "test" and sdist["needs"] == "test"
    assert {(m["runner"], m["arch"]) for m in wheels["strategy"]["matrix"]["include"]} == {
        ("ubuntu-24.04", "x86_64"), ("ubuntu-24.04-arm", "aarch64")}
    (build,) = steps_using(wheels, "pypa/cibuildwheel")
    assert build["env"]["CIBW_ARCHS"] == "${{ matrix.arch }}"
    config = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["cibuildwheel"]
    assert config["build"] == "cp311-manylinux_*"
    assert "soak demo 2>&1 >/dev/null | head -n 1 | grep -qx 'soak: engine: native'" in config["test-command"]
    assert any("replay_main.c" in command for command in config["test-command"])
    (no_compiler,) = [step for step in sdist["steps"] if step.get("env", {}).get("CC") == "/bin/false"]
    assert "dist/*.tar.gz" in no_compiler["run"] and "'^soak: engine: python '" in no_compiler["run"]
    assert set(publish["needs"]) == {"wheels", "sdist"}
    assert publish["permissions"] == {"contents": "write"}
    assert wheels["permissions"] == sdist["permissions"] == {"contents": "read"}
    assert "gh release create" in publish["steps"][-1]["run"]
