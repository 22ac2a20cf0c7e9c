"""The unit tier: pure parts, no network and no subprocesses, the whole tier in seconds.

Held to that here, not by convention: for every test in this folder, opening a TCP or UDP
socket (any internet socket) or starting a process fails the test, naming what it tried. A
Unix socket pair is allowed: it is how an event loop wakes itself, so a unit test may run the
engine on asyncio's own event loop with a scripted clock, which reaches no network. uvloop is
refused: libuv opens its sockets in C, past any check made here. A test that needs a real
server, uvloop or the real CLI belongs in tests/integration.
"""

from __future__ import annotations

import socket
import subprocess
from collections.abc import Iterator
from typing import Any

import pytest
import uvloop

# Address families a unit test may not open: the network, whatever the protocol.
_NETWORK = (socket.AF_INET, socket.AF_INET6)


class NotAUnitTest(AssertionError):
    """A unit test reached for the network or another process."""


@pytest.fixture(autouse=True)
def _no_network_or_processes(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    opened = socket.socket.__init__

    def local_only(self: socket.socket, family: Any = -1, *args: Any, **kwargs: Any) -> None:
        if family in _NETWORK or family == -1:  # -1: socket()'s default, AF_INET (or a descriptor's own)
            raise NotAUnitTest("a unit test may not open a TCP or UDP socket; move it to tests/integration")
        opened(self, family, *args, **kwargs)

    def refused(*args: object, **kwargs: object) -> None:
        raise NotAUnitTest("a unit test may not start a subprocess; move it to tests/integration")

    def no_uvloop(*args: object, **kwargs: object) -> None:
        raise NotAUnitTest("a unit test may not run uvloop (its sockets are opened in C, unchecked); "
                           "use asyncio's own loop, or move it to tests/integration")

    monkeypatch.setattr(socket.socket, "__init__", local_only)
    monkeypatch.setattr(uvloop.Loop, "__init__", no_uvloop)  # a Python class over the C loop: every way in
    monkeypatch.setattr(subprocess.Popen, "__init__", refused)
    yield
