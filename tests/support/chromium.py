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
# Where Chromium goes by itself, whatever the page: its updater, its sign-in, its network time.
BROWSER_OWN = ("update.googleapis.com", "accounts.google.com", "clients2.google.com")


@dataclass
class Connections:
    """A loopback listener that records what each connection to it sent first (a proxy's CONNECT or GET)."""

    seen: list[bytes] = field(default_factory=list)

    @property
    def from_the_page(self) -> list[bytes]:
        """The connections but Chromium's own calls home (BROWSER_OWN)."""
        return [first for first in self.seen if host_of(first) not in BROWSER_OWN]

    def __post_init__(self) -> None:
        self._server = socket.create_server(("127.0.0.1", 0))
        self._server.settimeout(0.2)
        self.port = self._server.getsockname()[1]
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                client, _ = self._server.accept()
            except TimeoutError:
                continue
            with client:
                client.settimeout(2)
                try:
                    self.seen.append(client.recv(4096) or b"(connected, sent nothing)")
                except OSError:
                    self.seen.append(b"(connected)")

    def __enter__(self) -> Connections:
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None, tb: TracebackType | None) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
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
