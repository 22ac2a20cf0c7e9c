"""Headless Chromium, as a person's browser opens a page: its screenshot, its DOM, its print, and
every network connection it tried.

Chromium runs with its proxy set to a loopback listener of ours, and with loopback itself sent
through the proxy too (`<-loopback>` removes the implicit bypass), so any request the page makes,
to any host (a CDN's script, a web font, an image, a link prefetched), arrives at the listener
first: Connections records each, and the test asserts there was none from the page. Chromium
itself calls home whatever page it shows, even with background networking and component updates
off (update.googleapis.com, accounts.google.com, the network time at clients2.google.com):
those hosts, and only those, are told apart (BROWSER_OWN) and not counted as the page's. Every
Chromium run gets its own profile directory and its own listener (no fixed port, nothing shared
between tests).
"""

from __future__ import annotations

import socket
import subprocess
import threading
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType

from tests.support.programs import program

FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--disable-default-apps", "--hide-scrollbars",
         "--disable-features=MediaRouter,OptimizationHints,Translate")
TIMEOUT_S = 60
READ_S = 10  # how long a connection may take to send its request line
# Where Chromium goes by itself, whatever the page: its updater, its sign-in, its network time.
BROWSER_OWN = ("update.googleapis.com", "accounts.google.com", "clients2.google.com")


@dataclass
class Connections:
    """A loopback listener that records the first bytes of each connection to it: a proxy request's
    line (`CONNECT host:443 ...`, `GET http://host/...`). Each connection is read in a thread of its
    own, for up to READ_S, so a slow one (a busy machine) holds up no other."""

    seen: list[bytes] = field(default_factory=list)
    idle: int = 0  # connections that sent nothing: opened ahead of need (Chromium preconnects), no request

    def __post_init__(self) -> None:
        self._server = socket.create_server(("127.0.0.1", 0))
        self._server.settimeout(0.2)
        self.port = self._server.getsockname()[1]
        self._stop = threading.Event()
        self._readers: list[threading.Thread] = []
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    @property
    def from_the_page(self) -> list[bytes]:
        """The requests but Chromium's own calls home (BROWSER_OWN)."""
        return [first for first in self.seen if host_of(first) not in BROWSER_OWN]

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                client, _ = self._server.accept()
            except TimeoutError:
                continue
            reader = threading.Thread(target=self._read, args=(client,), daemon=True)
            reader.start()
            self._readers.append(reader)

    def _read(self, client: socket.socket) -> None:
        with client:
            client.settimeout(READ_S)
            try:
                first = client.recv(4096)
            except OSError:
                first = b""
        with self._lock:
            if first:
                self.seen.append(first)
            else:
                self.idle += 1

    def __enter__(self) -> Connections:
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None, tb: TracebackType | None) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
        for reader in self._readers:
            reader.join(timeout=READ_S + 1)
        self._server.close()


def host_of(first: bytes) -> str:
    """The host a proxy request names: `CONNECT host:443 ...` or `GET http://host/path ...`."""
    words = first.split(b" ", 2)
    if len(words) < 2:
        return ""
    target = words[1].decode("latin-1")
    target = target.split("://", 1)[1] if "://" in target else target
    return target.split("/", 1)[0].rsplit(":", 1)[0]


def chromium(page: Path, profile: Path, proxy_port: int, *args: str) -> subprocess.CompletedProcess[str]:
    """Run headless Chromium on the file `page` with `args` (--screenshot=..., --dump-dom, ...)."""
    binary = program("chromium", "apt-get install -y chromium", "/usr/bin/chromium")
    command = [binary, *FLAGS, f"--user-data-dir={profile}", f"--proxy-server=127.0.0.1:{proxy_port}",
               "--proxy-bypass-list=<-loopback>", *args, page.as_uri()]
    done = subprocess.run(command, capture_output=True, text=True, timeout=TIMEOUT_S)
    assert done.returncode == 0, done.stderr[-3000:]
    return done


def png_size(path: Path) -> tuple[int, int]:
    """A PNG's width and height, from its IHDR chunk."""
    data = path.read_bytes()[:24]
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    return int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")
