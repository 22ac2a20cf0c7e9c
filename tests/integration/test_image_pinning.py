"""Pinning the image by digest as docs/deploy.md says: a `digest:` line in kustomization.yaml.

The edit needs no tool but an editor; the pallet then renders, validates and runs the image
by digest (the tag kept only for people to read).
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import kubernetes_validate
import yaml

from tests.conftest import REPO
from tests.support.pallet import PALLET_FILES, kubectl

DIGEST = "sha256:" + "0123456789abcdef" * 4


def test_a_digest_line_pins_the_soak_image(tmp_path: Path) -> None:
    for name in PALLET_FILES:
        (shutil.copytree if (REPO / name).is_dir() else shutil.copy)(REPO / name, tmp_path / name)
    text = (tmp_path / "kustomization.yaml").read_text()
    documented = (REPO / "docs" / "deploy.md").read_text()
    assert "    digest: sha256:<the 64 hex digits>\n" in documented
    (entry,) = re.findall(r"  - name: soak\n(?:    .*\n)*?    newTag: .*\n", text)
    (tmp_path / "kustomization.yaml").write_text(text.replace(entry, entry + f"    digest: {DIGEST}\n"))
    done = subprocess.run([kubectl(), "kustomize", str(tmp_path)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    resources = [r for r in yaml.safe_load_all(done.stdout) if r]
    (cronjob,) = [r for r in resources if r["kind"] == "CronJob"]
    (container,) = cronjob["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"]
    kustomization = yaml.safe_load(text)
    (soak,) = [i for i in kustomization["images"] if i["name"] == "soak"]
    assert container["image"] == f"{soak['newName']}:{soak['newTag']}@{DIGEST}"
    kubernetes_validate.validate(cronjob, "1.29.0", strict=True)
