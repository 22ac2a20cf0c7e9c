"""The unit tier: pure parts, no sockets and no subprocesses, the whole tier in seconds.

Held to that here, not by convention: for every test in this folder, opening a socket or
starting a process fails the test, naming what it tried. A test that needs a real server or
the real CLI belongs in tests/integration.
"""

from __future__ import annotations

import socket
import subprocess
from collections.abc import Iterator

import pytest


class NotAUnitTest(AssertionError):
    """A unit test reached for the network or another process."""


@pytest.fixture(autouse=True)
def _no_sockets_or_processes(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    def refuse(what: str):  # type: ignore[no-untyped-def]
        def refused(*args: object, **kwargs: object) -> None:
            raise NotAUnitTest(f"a unit test may not use {what}; move it to tests/integration")

        return refused

    monkeypatch.setattr(socket.socket, "__init__", refuse("a socket"))
    monkeypatch.setattr(subprocess.Popen, "__init__", refuse("a subprocess"))
    yield
