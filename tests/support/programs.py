"""Finding a program the tests run, or failing the test with how to install it."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest


def program(name: str, install: str, *elsewhere: str) -> str:
    """The path of `name`: among this interpreter's scripts (what `pip install '.[test]'` put
    there, found even when the venv is not activated), on PATH, or at one of `elsewhere` (where
    Debian puts a daemon outside a user's PATH). Not found, the test fails saying `install`."""
    beside = Path(sys.executable).parent / name
    if beside.exists():
        return str(beside)
    found = shutil.which(name) or next((path for path in elsewhere if Path(path).exists()), None)
    if found is None:
        pytest.fail(f"{name} is not installed: {install}")
    return found
