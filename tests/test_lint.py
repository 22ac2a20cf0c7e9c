"""The code stays lint-clean (ruff, configured in pyproject.toml): unused imports, shadowed
names and mistakes ruff finds fail the suite, not a later reader."""

from __future__ import annotations

import subprocess
import sys

from tests.conftest import REPO


def test_ruff_finds_nothing() -> None:
    done = subprocess.run([sys.executable, "-m", "ruff", "check", "runner", "tests", "bench"],
                          capture_output=True, text=True, cwd=REPO, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
