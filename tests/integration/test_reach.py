"""Which of a Service's pods a soak reaches: ten nginx behind HAProxy choosing at random per
connection, as kube-proxy does (tests/support/balancer.py).

Keep-alive alone holds each client to the backend its one connection landed on; a
connection lifetime (maxRequestsPerConnection, maxConnectionAge) makes new connections,
each a new pick, until every backend has been reached. The backends reached are counted
from each nginx's own access log, by a tag in each run's URL.

How many connections make "every backend" certain: with C connections each landing on one
of 10 backends uniformly at random, P(some backend gets none) <= 10 * 0.9^C, the union bound
over the backends. Every run below is sized so that C is at least 200, whatever the load:
10 * 0.9^200 = 7.1e-9, once in a hundred million runs.
"""

from __future__ import annotations

import json
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import Run, assert_counts_add_up, run_soak
from tests.support.balancer import BACKENDS, Balanced, balanced
from tests.support.liverun import LONG_RUN, LiveRun, wait_until
from tests.support.pallet import find, mounted_files, render

CONNECTIONS = 200  # the fewest connections a run that must reach every backend makes (see above)
CLIENTS = 5
PACE = ("--qps", "250", "--concurrency", str(CLIENTS), "--interval", "1s")  # 50 req/s per client: 20 ms apart


@pytest.fixture(scope="module")
def backends(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Balanced]:
    with balanced(tmp_path_factory.mktemp("balanced")) as running:
        yield running


def counted_run(*args: str, requests: int) -> dict:
    """A run that ends after exactly `requests` requests, however slow the machine (or after
    150 s, which no machine should need); its summary, checked."""
    run = run_soak(*args, "--iterations", "0", "--duration", "150s", "--totalRequests", str(requests), timeout=180)
    assert run.returncode == 0, run.stderr
    summary = assert_counts_add_up(run.stdout)
    assert summary["requests"] == summary["good"] == requests, run.stderr
    return summary


def test_keep_alive_reaches_a_backend_per_client_and_a_request_limit_reaches_all(
        backends: Balanced, transport: str) -> None:
    alone = f"keep-alive-{transport}"
    counted_run(*PACE, backends.url + alone, requests=400)
    assert len(backends.connections(alone)) <= CLIENTS
    assert 1 <= len(backends.reached(alone)) <= CLIENTS  # five clients, five connections: half the backends at most

    limited = f"five-per-connection-{transport}"
    requests = 5 * CONNECTIONS  # at most 5 requests to a connection: at least CONNECTIONS connections
    counted_run(*PACE, "--maxRequestsPerConnection", "5", backends.url + limited, requests=requests)
    connections = backends.connections(limited)
    assert len(backends.logged(limited)) == requests  # the servers saw what the run counted
    assert len(connections) >= CONNECTIONS and max(len(carried) for carried in connections.values()) == 5
    assert backends.reached(limited) == set(range(BACKENDS))


def test_an_age_limit_reaches_all(backends: Balanced, transport: str) -> None:
    """With sends 20 ms apart per client and connections ended once 40 ms old, a connection
    carries at most 6 requests at any load: a client late for some sends sends only its newest
    due one, so the sends within a connection's 40 ms (plus its dial, under 20 ms however busy
    the machine) are at most (40 + 20) / 20 + 2, and the one that ends it one more.
    1500 requests are then at least 250 connections."""
    tag = f"aged-{transport}"
    counted_run(*PACE, "--maxConnectionAge", "40ms", backends.url + tag, requests=1500)
    assert len(backends.connections(tag)) >= CONNECTIONS
    assert backends.reached(tag) == set(range(BACKENDS))


def test_a_backend_that_dies_mid_run_fails_its_connections_and_the_rest_carry_on(
        transport: str, tmp_path: Path) -> None:
    """As a pod killed behind a Service: connections that land on it fail, the run goes on and
    every other backend keeps answering. Its own backends, as one of them is killed."""
    tag = f"killed-{transport}"
    with balanced(tmp_path) as backends, LiveRun("--qps", "100", "--concurrency", str(CLIENTS), *LONG_RUN,
                                                 "--maxRequestsPerConnection", "5", backends.url + tag) as live:
        wait_until(lambda: bool(backends.reached(tag)), timeout=30)
        dead = min(backends.reached(tag), default=0)
        backends.kill(dead)
        served = _served(backends, tag)

        def carried_on() -> bool:
            now = _served(backends, tag)
            failed = "closed: " in live.stderr or "reset: " in live.stderr
            return failed and all(now[b] > served[b] for b in range(BACKENDS) if b != dead)

        # 20 new connections a second, one in ten to the dead backend: seconds, on a quiet machine.
        wait_until(carried_on, timeout=90)
        live.wait(live.send(signal.SIGTERM), timeout=30)
    run = Run(live.process.returncode, live.stdout, live.stderr)
    assert run.returncode == 0, run.stderr
    summary = assert_counts_add_up(run.stdout)
    assert summary["failed"] >= 1 and set(summary["errors"]) <= {"closed", "reset"}, summary["errors"]
    after = _served(backends, tag)
    assert after[dead] == served[dead]
    assert all(after[b] > served[b] for b in range(BACKENDS) if b != dead), (served, after)
    assert summary["good"] == sum(after.values())  # every response counted good was one a backend logged


def _served(backends: Balanced, tag: str) -> dict[int, int]:
    """Requests with `tag` each backend has logged."""
    counts = dict.fromkeys(range(BACKENDS), 0)
    for entry in backends.logged(tag):
        counts[entry.backend] += 1
    return counts


def test_the_shipped_configuration_reaches_every_replica_of_the_10_replica_component(
        backends: Balanced, tmp_path: Path) -> None:
    """The rendered pallet with nginx at 10 replicas: its configuration.json, as the pod mounts
    it, replayed against ten backends. Faster than an hour, and for as many requests as make
    CONNECTIONS connections under its own lifetime: a request limit is the same whatever the
    rate (the run's lifetime must be one, for the replay to be as the pod's). Its thresholds
    are left out: goal% is the client's pace, which a replay at twenty times the rate does not
    promise."""
    resources = render("nginx-10-replicas")
    assert find(resources, "Deployment", "nginx")["spec"]["replicas"] == BACKENDS
    config = json.loads(mounted_files(resources)["/etc/soak/config/configuration.json"])
    per_connection = config.get("maxRequestsPerConnection", 0)
    assert per_connection > 0, "the shipped configuration sets no maxRequestsPerConnection"
    shipped = tmp_path / "configuration.json"
    shipped.write_text(json.dumps(config))
    tag = "shipped-10-replicas"
    requests = per_connection * CONNECTIONS
    summary = counted_run("--config", str(shipped), "--qps", "2000", "--interval", "1s", "--thresholds", "",
                          backends.url + tag, requests=requests)
    assert summary["config"]["concurrency"] == config["concurrency"]
    assert len(backends.connections(tag)) >= CONNECTIONS
    assert backends.reached(tag) == set(range(BACKENDS))
