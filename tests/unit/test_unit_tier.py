"""The unit tier's guard (tests/unit/conftest.py) itself: what it refuses and what it lets through."""

from __future__ import annotations

import asyncio
import socket
import subprocess

import pytest
import uvloop

from tests.unit.conftest import NotAUnitTest


@pytest.mark.parametrize(("family", "kind"), [
    (socket.AF_INET, socket.SOCK_STREAM), (socket.AF_INET, socket.SOCK_DGRAM),
    (socket.AF_INET6, socket.SOCK_STREAM), (socket.AF_INET6, socket.SOCK_DGRAM),
])
def test_a_network_socket_is_refused(family: socket.AddressFamily, kind: socket.SocketKind) -> None:
    with pytest.raises(NotAUnitTest):
        socket.socket(family, kind)


def test_the_default_socket_is_refused() -> None:
    with pytest.raises(NotAUnitTest):
        socket.socket()


def test_a_connection_is_refused_before_it_is_tried() -> None:
    with pytest.raises(NotAUnitTest):
        socket.create_connection(("127.0.0.1", 9))


def test_a_subprocess_is_refused() -> None:
    with pytest.raises(NotAUnitTest):
        subprocess.run(["true"], check=False)


def test_uvloop_is_refused() -> None:
    with pytest.raises(NotAUnitTest):
        uvloop.new_event_loop()


def test_asyncio_loop_and_a_socket_pair_are_allowed() -> None:
    asyncio.run(asyncio.sleep(0))
    a, b = socket.socketpair()
    a.sendall(b"x")
    assert b.recv(1) == b"x"
    a.close()
    b.close()
