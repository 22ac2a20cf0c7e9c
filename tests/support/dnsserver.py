"""A DNS server of the test's own, and a run that asks it: for the tests of name lookups.

The runner looks names up with getaddrinfo, through the machine's resolver, as a pod does
through the cluster's DNS. To control the answers without touching the machine, a run is
started in a private mount namespace (`unshare --mount`, root only) whose /etc/resolv.conf
is a file of the test's, bind-mounted over the machine's, naming a server on 127.0.0.0/8:
either one that never answers (a socket the test holds), or DnsServer below, which answers a
name with the addresses the test gives it, like a headless Service, and counts the queries.
"""

from __future__ import annotations

import errno
import os
import random
import shutil
import socket
import struct
import subprocess
import threading
from collections.abc import Sequence
from pathlib import Path

_A, _AAAA = 1, 28
_ANSWER_TTL_S = 5  # as CoreDNS gives a Service's records; the runner keeps answers 5 s whatever it says


def can_unshare() -> bool:
    """Whether this process may give a run its own resolv.conf (root, with unshare --mount)."""
    if os.geteuid() != 0 or shutil.which("unshare") is None:
        return False
    return subprocess.run(["unshare", "--mount", "true"], capture_output=True).returncode == 0


def with_resolver(resolv_conf: Path, command: Sequence[str]) -> list[str]:
    """`command`, run in a mount namespace of its own where /etc/resolv.conf is `resolv_conf`."""
    return ["unshare", "--mount", "sh", "-c", 'mount --bind "$0" /etc/resolv.conf && exec "$@"',
            str(resolv_conf), *command]


def resolv_conf(directory: Path, server: str) -> Path:
    """A resolv.conf naming only `server` (port 53), one attempt of 1 s per query."""
    path = directory / "resolv.conf"
    path.write_text(f"nameserver {server}\noptions timeout:1 attempts:1\n")
    return path


class DnsServer:
    """Answers A queries for one name with the IPv4 addresses it is given (`answer` changes
    them while it runs), AAAA queries for it with none, and every other name with NXDOMAIN;
    on UDP port 53 of a loopback address. `lookups` counts the A queries for the name."""

    def __init__(self, address: str, name: str, addresses: Sequence[str]) -> None:
        self.address = address
        self.name = name.lower().rstrip(".")
        self._addresses = list(addresses)
        self._lock = threading.Lock()
        self.lookups = 0
        self._socket = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        try:
            self._socket.bind((address, 53))
        except OSError:
            self._socket.close()
            raise
        self._socket.settimeout(0.1)
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._serve, name="test-dns", daemon=True)

    @classmethod
    def on_loopback(cls, name: str, addresses: Sequence[str]) -> DnsServer:
        """One on a free address of 127.53.0.0/16 (port 53 is one per address: another test run
        on the machine may hold one)."""
        chooser = random.Random()
        for _ in range(50):
            address = f"127.53.{chooser.randrange(256)}.{chooser.randrange(1, 255)}"
            try:
                return cls(address, name, addresses)
            except OSError as exc:
                if exc.errno != errno.EADDRINUSE:
                    raise
        raise RuntimeError("no free address for a DNS server on 127.53.0.0/16")

    def answer(self, addresses: Sequence[str]) -> None:
        with self._lock:
            self._addresses = list(addresses)

    def __enter__(self) -> DnsServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stopping.set()
        self._thread.join(timeout=5)
        self._socket.close()

    def _serve(self) -> None:
        while not self._stopping.is_set():
            try:
                query, client = self._socket.recvfrom(512)
            except TimeoutError:
                continue
            except OSError:
                return
            reply = self._reply(query)
            if reply is not None:
                self._socket.sendto(reply, client)

    def _reply(self, query: bytes) -> bytes | None:
        """The answer to one query, or None for what is not a query of one question."""
        if len(query) < 12:
            return None
        ident, flags, questions = struct.unpack_from("!HHH", query)
        if flags & 0x8000 or questions != 1:
            return None
        labels, at = [], 12
        while at < len(query) and query[at]:
            length = query[at]
            labels.append(query[at + 1: at + 1 + length].decode("ascii", "replace").lower())
            at += 1 + length
        if at + 5 > len(query):
            return None
        qtype, _ = struct.unpack_from("!HH", query, at + 1)
        question = query[12: at + 5]
        ours = ".".join(labels) == self.name
        with self._lock:
            if ours and qtype == _A:
                self.lookups += 1
            addresses = list(self._addresses) if ours and qtype == _A else []
        rcode = 0 if ours else 3  # NOERROR, NXDOMAIN
        head = struct.pack("!HHHHHH", ident, 0x8480 | (flags & 0x0100) | rcode, 1, len(addresses), 0, 0)
        answers = b"".join(struct.pack("!HHHIH", 0xC00C, _A, 1, _ANSWER_TTL_S, 4) + socket.inet_aton(address)
                           for address in addresses)
        return head + question + answers
