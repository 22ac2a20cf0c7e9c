"""A new connection looks its host name up again, and takes the name's addresses in turn.

A headless Service's name resolves to every ready pod's address, and changes as pods come
and go. The run here gets a DNS server of the test's own (tests/support/dnsserver.py, in a
mount namespace of the run's own): a name with four addresses, 127.0.0.2 to 127.0.0.5, all
served by one nginx that logs which address each connection came in on; then a name that
moves to another address mid-run, and one whose records are removed mid-run, on both engines.
Connections end by maxRequestsPerConnection, so the run makes many; the server counts what the
runner did, the DNS server how often it was asked.
"""

from __future__ import annotations

import math
import os
import re
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from runner.core.errors import EXIT_INTERRUPTED
from runner.load.transport import RESOLVE_TTL_NS
from tests.conftest import REPO, Run, assert_counts_add_up, free_port, running_nginx, soak_command
from tests.support.dnsserver import DnsServer, can_unshare, resolv_conf, with_resolver
from tests.support.liverun import LONG_RUN, LiveRun, wait_until

# Each test takes the `transport` fixture (every transport), or runs both engines itself.
pytestmark = pytest.mark.skipif(not can_unshare(), reason="needs root and unshare --mount, to give the run its own resolver")

NAME = "backends.soak.test"
ADDRESSES = ["127.0.0.2", "127.0.0.3", "127.0.0.4", "127.0.0.5"]

_NGINX_HTTP = """
    log_format resolution '$server_addr $connection $request_uri';
    access_log {dir}/access.log resolution;
    server {{
        listen 127.0.0.1:{port};  # where the fixture waits for it to be ready
{listens}
        location / {{ return 200 "ok\\n"; }}
    }}
"""


class Served:
    """nginx on one port of 127.0.0.1 to 127.0.0.5; what it logged, by the address a request came to."""

    def __init__(self, directory: Path, port: int) -> None:
        self.log = directory / "access.log"
        self.port = port

    def connections(self, tag: str) -> dict[str, set[str]]:
        """The connections (nginx's serials) that carried a request with `tag`, by the address they came to."""
        found: dict[str, set[str]] = {}
        for line in self.log.read_text().splitlines() if self.log.exists() else []:
            address, serial, uri = line.split()
            if tag in uri:
                found.setdefault(address, set()).add(serial)
        return found

    def requests(self, tag: str) -> int:
        """The requests with `tag` that nginx answered (and logged) so far."""
        return sum(tag in line for line in self.log.read_text().splitlines()) if self.log.exists() else 0

    def url(self, tag: str) -> str:
        return f"http://{NAME}:{self.port}/{tag}"


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    directory = tmp_path_factory.mktemp("resolution-nginx")
    port = free_port()  # free on 127.0.0.1; nothing else listens on 127.0.0.2-5
    listens = "\n".join(f"        listen {address}:{port};" for address in ADDRESSES)
    with running_nginx(directory, _NGINX_HTTP.format(dir=directory, port=port, listens=listens), [port]):
        yield Served(directory, port)


@pytest.fixture
def dns() -> Iterator[DnsServer]:
    with DnsServer.on_loopback(NAME, ADDRESSES) as server:
        yield server


def test_new_connections_take_the_names_addresses_in_turn_and_ask_the_resolver_seldom(
        served: Served, dns: DnsServer, transport: str, tmp_path: Path) -> None:
    tag = f"in-turn-{transport}"
    command = ["--qps", "200", "--concurrency", "4", "--interval", "1s", "--iterations", "0", "--totalRequests", "120",
               "--maxRequestsPerConnection", "3", served.url(tag)]
    done = subprocess.run(with_resolver(resolv_conf(tmp_path, dns.address), soak_command(*command)),
                          capture_output=True, text=True, timeout=120, cwd=REPO, env={**os.environ, "TZ": "UTC"})
    run = Run(done.returncode, done.stdout, done.stderr)
    assert run.returncode == 0, run.stderr
    summary = assert_counts_add_up(run.stdout)
    assert summary["good"] == summary["requests"] == 120
    by_address = {address: len(serials) for address, serials in served.connections(tag).items()}
    # 120 requests, 3 to a connection: at least 40 connections, dialled to the four addresses in turn.
    assert set(by_address) == set(ADDRESSES), by_address
    assert sum(by_address.values()) >= 40
    assert max(by_address.values()) - min(by_address.values()) <= 1, f"not in turn: {by_address}"
    # One lookup for the four clients' first dials together, then one per RESOLVE_TTL_NS at most
    # (and one more for the moment it expires), however long the machine took: not one per connection.
    allowed = 2 + math.ceil(summary["durationSeconds"] * 1e9 / RESOLVE_TTL_NS)
    assert 1 <= dns.lookups <= allowed < 40, f"{dns.lookups} lookups for {sum(by_address.values())} connections"


def test_a_new_connection_goes_where_the_name_points_now(
        served: Served, dns: DnsServer, transport: str, tmp_path: Path) -> None:
    """A pod replaced mid-run: the name's answer moves, and new connections follow it within
    the runner's cache time, without an error."""
    tag = f"moved-{transport}"
    dns.answer(ADDRESSES[:1])
    with LiveRun("--qps", "50", "--concurrency", "2", *LONG_RUN, "--maxRequestsPerConnection", "5", served.url(tag),
                 wrap=lambda line: with_resolver(resolv_conf(tmp_path, dns.address), line)) as live:
        wait_until(lambda: ADDRESSES[0] in served.connections(tag), timeout=30)
        assert ADDRESSES[0] in served.connections(tag), live.stderr
        dns.answer(ADDRESSES[1:2])
        # Expected within 5 s (the cache) and a connection's 5 requests; 60 s is for a busy machine.
        wait_until(lambda: ADDRESSES[1] in served.connections(tag), timeout=60)
        assert ADDRESSES[1] in served.connections(tag), live.stderr
        live.wait(live.send(signal.SIGTERM), timeout=30)
    run = Run(live.process.returncode, live.stdout, live.stderr)
    assert run.returncode == EXIT_INTERRUPTED, run.stderr  # stopped by the test before its planned end
    summary = assert_counts_add_up(run.stdout)
    assert summary["failed"] == 0, run.stderr
    assert set(served.connections(tag)) == set(ADDRESSES[:2])
    assert dns.lookups >= 2


ERROR_LINE = re.compile(r'^[A-Z]+ "[^"]+": (?P<text>.+) \(\d+ times?\)$')
GONE_MARGIN_S = 3.0  # after the answer's RESOLVE_TTL_NS: the lookup that may have answered just before the
#                      removal, the dial that used it, nginx's log line; seconds on a busy machine
WATCHED_S = 3.0  # then this long with the name gone: 60 sends due, every one a new connection


def name_gone_run(engine: str, served: Served, dns: DnsServer, tmp_path: Path) -> tuple[Run, int, int, int]:
    """A run on `engine` whose name's records are removed once it has reached the server, and put
    back later; with the requests the server had answered GONE_MARGIN_S after the removal's
    RESOLVE_TTL_NS, WATCHED_S after that, and once the name resolved again."""
    tag = f"gone-{engine}"
    dns.answer(ADDRESSES[:1])
    with LiveRun("--transport", "fast", "--engine", engine, "--qps", "20", "--concurrency", "2", *LONG_RUN,
                 "--maxRequestsPerConnection", "1", served.url(tag),
                 wrap=lambda line: with_resolver(resolv_conf(tmp_path, dns.address), line)) as live:
        wait_until(lambda: served.requests(tag) > 0, timeout=30)
        assert served.requests(tag) > 0, live.stderr
        dns.answer([])
        time.sleep(RESOLVE_TTL_NS / 1e9 + GONE_MARGIN_S)
        reached = served.requests(tag)
        time.sleep(WATCHED_S)
        after = served.requests(tag)
        dns.answer(ADDRESSES[:1])
        wait_until(lambda: served.requests(tag) > after, timeout=30)  # the failed lookups are tried again
        again = served.requests(tag)
        live.wait(live.send(signal.SIGTERM), timeout=30)
    return live.finished(), reached, after, again


def test_a_name_that_stops_resolving_fails_new_connections_as_dns_on_both_engines(
        served: Served, dns: DnsServer, tmp_path: Path) -> None:
    """A Service deleted mid-run: its name's records are removed. Once the last answer is
    RESOLVE_TTL_NS old, every new connection fails as `dns`, with the same text, on both engines
    (the native engine dialled the last addresses for ever, and counted no failure), and once
    the name resolves again, new connections reach the server again. Every send dials
    (maxRequestsPerConnection 1). How many fail is not compared number for number: it is the
    sends due from the moment each engine's last answer expired, which the machine's pace moves
    by a send or two (the answer's age counts from a lookup made when a dial, or C's timer, came
    to it). What holds at any load is: nothing reaches the server once the removal is that old
    (and a margin), every failure is `dns`, and the texts are the same."""
    texts = {}
    for engine in ("native", "python"):
        run, reached, after, again = name_gone_run(engine, served, dns, tmp_path)
        assert run.returncode == EXIT_INTERRUPTED, run.stderr
        assert run.engine_said == f"soak: engine: {engine}\n"
        summary = assert_counts_add_up(run.stdout)
        assert after == reached, f"{engine}: {after - reached} requests reached the server with the name gone"
        assert again > after, f"{engine}: no new connection once the name resolved again"
        assert summary["errors"] == {"dns": summary["failed"]} and summary["failed"] > 0, summary["errors"]
        texts[engine] = {m["text"] for m in map(ERROR_LINE.match, run.stderr.splitlines()) if m}
    assert texts["native"] == texts["python"], texts
    assert len(texts["python"]) == 1 and next(iter(texts["python"])).startswith("dns: "), texts
