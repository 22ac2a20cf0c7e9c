"""The Dockerfile, as far as it can be checked without a Docker engine.

The base image is pinned, the user is numeric and is the one the
manifests run as, dependencies come pinned from the project's own metadata, and the
entrypoint it names exists and runs after `pip install .` in a fresh virtual environment.
tests/integration/test_container.py builds the image and runs it.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

from tests.conftest import REPO
from tests.support.pallet import dockerfile_instruction

DOCKERFILE = (REPO / "Dockerfile").read_text()


def test_base_image_is_a_pinned_slim_python_that_satisfies_the_project() -> None:
    (image,) = re.findall(r"^ARG PYTHON_IMAGE=(\S+)$", DOCKERFILE, re.M)
    found = re.fullmatch(r"python:(3)\.(\d+)\.(\d+)-slim-\w+", image)
    assert found, f"{image} is not pinned to a patch version of a slim image"
    required = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["requires-python"]
    assert required == ">=3.11" and int(found.group(2)) >= 11
    assert DOCKERFILE.count("FROM ${PYTHON_IMAGE}") == 2


def test_runs_unbuffered_as_a_numeric_non_root_user() -> None:
    assert "PYTHONUNBUFFERED=1" in DOCKERFILE
    (user,) = re.findall(r"^USER (\S+)$", DOCKERFILE, re.M)
    uid, gid = (int(part) for part in user.split(":"))
    assert uid >= 1000 and gid >= 1000


def test_the_lock_pins_every_dependency_as_pyproject_does() -> None:
    """The image installs with -c requirements.lock: it must agree with pyproject's own pins."""
    lock = {}
    for line in (REPO / "requirements.lock").read_text().splitlines():
        if line and not line.startswith("#"):
            name, version = line.split("==")
            lock[name.lower().replace("_", "-")] = version
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    # The extras the image installs too: remote (remoteWrite, otlp) and s3 (an s3:// resultsStore).
    extras = project["optional-dependencies"]
    for requirement in [*project["dependencies"], *extras["remote"], *extras["s3"]]:
        spec = requirement.split(";")[0].strip()
        name, version = spec.split("==")
        assert lock.get(name.lower()) == version, f"{spec} is not what requirements.lock pins"
    # The build stage makes a wheel of each package the lock pins (and of nothing else: the
    # project's own with --no-deps); the image installs from those wheels alone.
    build, final = DOCKERFILE.split("\nFROM ${PYTHON_IMAGE}")[1:]
    assert "--requirement requirements.lock" in build and "PIP_CONSTRAINT=/src/requirements.lock" in build
    assert "--no-index --find-links /wheels" in final and "'soak-pallet[remote,s3]'" in final


def test_the_wheel_builds_as_the_image_builds_it_with_the_spdx_license(tmp_path: Path) -> None:
    """The build stage's `pip wheel --no-deps .`, build tools pinned by the lock (PIP_CONSTRAINT):
    pyproject's build requirement must admit the locked setuptools, and the license must be the
    SPDX string that setuptools 77 and later read (the TOML table was deprecated, to stop
    building after 2027-02-18), so the wheel says `License-Expression: Apache-2.0`."""
    (instruction,) = re.findall(r"^RUN (/opt/build/bin/pip wheel .*--no-deps.*) \.$", DOCKERFILE, re.M)
    options = instruction.split()[2:]  # after `pip wheel`, as the Dockerfile gives them
    assert "--wheel-dir" in options
    options = options[:options.index("--wheel-dir")]
    env = {**os.environ, "PIP_CONSTRAINT": str(REPO / "requirements.lock")}
    done = subprocess.run([sys.executable, "-m", "pip", "wheel", "-v", *options, "--wheel-dir", str(tmp_path), "."],
                          capture_output=True, text=True, cwd=REPO, env=env, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "SetuptoolsDeprecationWarning" not in done.stdout + done.stderr, done.stdout[-3000:]
    (wheel,) = tmp_path.glob("soak_pallet-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        (name,) = [n for n in archive.namelist() if n.endswith(".dist-info/METADATA")]
        metadata = archive.read(name).decode()
    assert "License-Expression: Apache-2.0\n" in metadata, metadata[:600]
    assert "\nLicense: " not in metadata


def test_the_entrypoint_exists_after_pip_install_in_a_fresh_venv(tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    pip = [str(venv / "bin" / "python"), "-m", "pip", "install", "--quiet", "--disable-pip-version-check"]
    done = subprocess.run([*pip, "--constraint", "requirements.lock", "."], capture_output=True, text=True,
                          cwd=REPO, timeout=600)
    assert done.returncode == 0, done.stderr
    (entrypoint,) = dockerfile_instruction("ENTRYPOINT")
    executable = venv / "bin" / entrypoint
    assert executable.exists(), f"pip install . does not install {entrypoint}"
    # The image's default command, exactly: ENTRYPOINT + CMD.
    run = subprocess.run([str(executable), *dockerfile_instruction("CMD")], capture_output=True, text=True,
                         timeout=120, cwd=Path("/"))
    assert run.returncode == 0, run.stderr
    assert run.stdout.startswith("# sending 100 GET req/s with concurrency=5 to http://127.0.0.1:")
