"""Ten nginx servers behind HAProxy, which picks one at random for each new connection: a
Kubernetes Service with ten pods, as kube-proxy balances it, on loopback.

kube-proxy (iptables or nftables mode) sends each new connection to a pod chosen uniformly
at random and leaves the connection there; HAProxy in `mode tcp` with `balance random(1)`
does the same (one draw: plain random; its default of two draws would pick the less loaded
of two, which kube-proxy does not). Each nginx is its own process, so that one can die while
the others serve, and adds a header naming itself (`X-Backend: nginx-N`), as the pallet's
nginx names its pod. Which backends a run reached is counted from each nginx's own access
log: the server's view, not the runner's.
"""

from __future__ import annotations

import subprocess
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from tests.conftest import free_port, running_nginx, wait_for_port
from tests.support import reaper
from tests.support.programs import program

BACKENDS = 10
HEADER = "X-Backend"  # the header each backend names itself in (a run's backendHeader)

_NGINX_HTTP = """
    # The connection's serial, its request count, the URI (which carries the run's tag) and
    # the request's Connection header: what a connection carried, and which request ended it.
    log_format backend '$connection $connection_requests $request_uri $status "$http_connection"';
    access_log {dir}/access.log backend;
    {server}
"""

_SERVER = """server {{
        listen 127.0.0.1:{port};
        location / {{
            add_header X-Backend nginx-{index} always;
            return 200 "nginx-{index}\\n";
        }}
    }}"""


@contextmanager
def named_nginx(directory: Path, index: int, server: Callable[[int, int], str] | None = None) -> Iterator[str]:
    """One backend alone, without HAProxy: nginx naming itself `nginx-<index>` in HEADER (or running
    `server(index, port)`, as balanced() takes it); its URL. For runs whose backends must come out
    the same every time (a URL per backend)."""
    port = free_port()
    block = server(index, port) if server is not None else _SERVER.format(port=port, index=index)
    with running_nginx(directory, _NGINX_HTTP.format(dir=directory, server=block), [port]):
        yield f"http://127.0.0.1:{port}/"


def name(index: int) -> str:
    """Backend `index`'s name, as it says it in its header."""
    return f"nginx-{index}"

_HAPROXY = """
global
    maxconn 4096
defaults
    mode tcp
    timeout connect 1s
    timeout client 60s
    timeout server 60s
    # A dead backend fails the connection at once, as a connection to a pod that is gone does,
    # rather than after HAProxy's retries and their one-second pauses.
    retries 0
frontend soak
    bind 127.0.0.1:{port}
    default_backend nginx
backend nginx
    balance random(1)
{servers}
"""


@dataclass(frozen=True)
class Logged:
    """One request as a backend's nginx logged it."""

    backend: int
    connection: str  # nginx's serial for the connection
    number: int  # which request on the connection, from 1
    uri: str
    closing: bool  # it said Connection: close


@dataclass
class Balanced:
    """HAProxy on `url`, in front of BACKENDS nginx servers."""

    url: str
    directories: list[Path]
    _processes: list[subprocess.Popen[bytes]] = field(default_factory=list)

    def logged(self, tag: str) -> list[Logged]:
        """Every request whose URI holds `tag`, as the backends logged them so far."""
        found = []
        for index, directory in enumerate(self.directories):
            log = directory / "access.log"
            for line in log.read_text().splitlines() if log.exists() else []:
                serial, number, uri, _status, connection = line.split()
                if tag in uri:
                    found.append(Logged(index, serial, int(number), uri, connection == '"close"'))
        return found

    def reached(self, tag: str) -> set[int]:
        """The backends that logged a request with `tag`."""
        return {entry.backend for entry in self.logged(tag)}

    def connections(self, tag: str) -> dict[tuple[int, str], list[Logged]]:
        """The requests with `tag` by the connection that carried them (backend, serial), in order."""
        by_connection: dict[tuple[int, str], list[Logged]] = {}
        for entry in self.logged(tag):
            by_connection.setdefault((entry.backend, entry.connection), []).append(entry)
        return {key: sorted(entries, key=lambda e: e.number) for key, entries in by_connection.items()}

    def kill(self, index: int) -> None:
        """Stop backend `index` for good (its nginx exits); HAProxy keeps choosing it."""
        reaper.stop(self._processes[index])


@contextmanager
def balanced(directory: Path, server: Callable[[int, int], str] | None = None) -> Iterator[Balanced]:
    """HAProxy and its BACKENDS nginx servers, each on a free loopback port, until the block ends.

    `server(index, port)`: each backend's server block, in place of one that names itself in
    HEADER and answers with its name (as the pallet's rendered nginx, say)."""
    haproxy = program("haproxy", "apt-get install -y haproxy (as README's quick start does)", "/usr/sbin/haproxy")
    ports: list[int] = []
    while len(ports) < BACKENDS + 1:
        port = free_port()
        if port not in ports:
            ports.append(port)
    front, backs = ports[0], ports[1:]
    with ExitStack() as stack:
        directories, processes = [], []
        for index, port in enumerate(backs):
            home = directory / f"nginx-{index}"
            home.mkdir()
            block = server(index, port) if server is not None else _SERVER.format(port=port, index=index)
            processes.append(stack.enter_context(running_nginx(home, _NGINX_HTTP.format(dir=home, server=block), [port])))
            directories.append(home)
        servers = "\n".join(f"    server nginx-{i} 127.0.0.1:{port}" for i, port in enumerate(backs))
        config = directory / "haproxy.cfg"
        config.write_text(_HAPROXY.format(port=front, servers=servers))
        balancer = reaper.spawn([haproxy, "-db", "-f", str(config)], "haproxy")  # -db: in the foreground
        stack.callback(reaper.stop, balancer)
        wait_for_port(front)
        yield Balanced(f"http://127.0.0.1:{front}/", directories, processes)

