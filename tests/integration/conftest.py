"""Fixtures shared by the integration tests beyond the root conftest's."""

from __future__ import annotations

import pytest

from tests.conftest import Nginx
from tests.support.runlogs import mixed_log


@pytest.fixture(scope="session")
def ours(nginx: Nginx) -> str:
    """A real run of ours, stdout and stderr merged as `kubectl logs` shows them (one, for every test
    that reads a run back)."""
    return mixed_log(nginx.url)
