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
import os
import signal
import subprocess
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from runner.core.errors import EXIT_INCONCLUSIVE, EXIT_INTERRUPTED, EXIT_THRESHOLDS
from runner.load.native.engine import module as native_module
from tests.conftest import Run, assert_counts_add_up, engine_line, run_soak, soak_command
from tests.support.balancer import BACKENDS, HEADER, Balanced, balanced, name, named_nginx
from tests.support.liverun import LONG_RUN, LiveRun, wait_until
from tests.support.pallet import find, mounted_files, nginx_server, render
from tests.support.pushgateway import Pushgateway

CONNECTIONS = 200  # the fewest connections a run that must reach every backend makes (see above)
CLIENTS = 5
PACE = ("--qps", "250", "--concurrency", str(CLIENTS), "--interval", "1s")  # 50 req/s per client: 20 ms apart


@pytest.fixture(scope="module")
def backends(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Balanced]:
    with balanced(tmp_path_factory.mktemp("balanced")) as running:
        yield running


COUNTED = "--backendHeader", HEADER  # responses counted by the backend that answered


def counted_run(*args: str, requests: int, code: int = 0) -> dict:
    """A run that ends after exactly `requests` requests, however slow the machine (or after
    150 s, which no machine should need); its summary, checked, with its backends and
    connections when it counted them. A run expected to break its thresholds (exit 3) may instead
    say that it broke them only where its client's own delay may have changed them (exit 9, on a busy machine):
    what it measured is still checked, its verdict is not the service's."""
    run = run_soak(*args, "--iterations", "0", "--duration", "150s", "--totalRequests", str(requests), timeout=180)
    if code == EXIT_THRESHOLDS and run.returncode == EXIT_INCONCLUSIVE:
        assert "broke only where the client's own delay may have changed" in run.stderr, run.stderr
    else:
        assert run.returncode == code, run.stderr
    summary = assert_counts_add_up(run.stdout)
    assert summary["requests"] == summary["good"] == requests, run.stderr
    assert_connections_add_up(summary)
    if "backends" in summary:
        assert_backends_add_up(summary, run.stdout)
    return summary


def assert_connections_add_up(summary: dict) -> None:
    """No connection closed that was not opened, and the intervals' counts are the run's."""
    opened, closed = summary["connectionsOpened"], summary["connectionsClosed"]
    assert 0 <= closed <= opened
    for key in ("connectionsOpened", "connectionsClosed"):
        counted = sum(i[key] for i in summary["intervalStats"])
        assert counted == summary[key] if "drain" not in summary else counted <= summary[key], key


def assert_backends_add_up(summary: dict, stdout: str) -> None:
    """Every response counted at one backend, in the run and in each interval; the backends
    reached are the names counted; and a `# iter` note where, and only where, an interval
    reached fewer backends than the one before."""
    intervals = summary["intervalStats"]
    assert sum(summary["backends"].values()) == summary["good"] + summary["bad"]
    assert summary["backendsReached"] == len(set(summary["backends"]) - {"other", "(none)"})
    for i in intervals:
        assert sum(i["backends"].values()) == i["good"] + i["bad"], i
        assert i["backendsReached"] == len(set(i["backends"]) - {"other", "(none)"}), i
    if "drain" not in summary:
        total: dict[str, int] = {}
        for i in intervals:
            for backend, n in i["backends"].items():
                total[backend] = total.get(backend, 0) + n
        assert total == summary["backends"]
    notes = [line for line in stdout.splitlines()
             if line.startswith("# iter ") and (" backends answered, " in line or " backend answered, " in line)]
    fewer = [(a, b) for a, b in zip(intervals, intervals[1:]) if b["backendsReached"] < a["backendsReached"]]
    assert len(notes) == len(fewer), (notes, [(a["backendsReached"], b["backendsReached"]) for a, b in fewer])
    for (before, after), note in zip(fewer, notes, strict=True):
        assert note.startswith(f"# iter {after['iter']}: ") and (
            f"{after['backendsReached']} backend{'s' if after['backendsReached'] != 1 else ''} answered, "
            f"{before['backendsReached']} in iter {before['iter']}") in note, note


def served_by_name(backends: Balanced, tag: str) -> dict[str, int]:
    """Requests with `tag` each backend logged, by the name it gives itself; those with none left out."""
    return {name(b): n for b, n in _served(backends, tag).items() if n}


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


def test_the_run_counts_the_backends_keep_alive_alone_reaches_and_a_request_limit_reaches(
        backends: Balanced, transport: str) -> None:
    """The runner's own count, per backend, against each backend's access log: without a
    lifetime at most one backend a client, with 5 requests a connection all ten, and each
    backend's responses as many as it served. Connections: as many opened as the backends saw,
    and with the limit at least one for every 5 responses."""
    alone = f"counted-keep-alive-{transport}"
    summary = counted_run(*PACE, *COUNTED, backends.url + alone, requests=400)
    assert 1 <= summary["backendsReached"] <= CLIENTS
    assert summary["backends"] == served_by_name(backends, alone)
    assert summary["connectionsOpened"] == len(backends.connections(alone)) <= CLIENTS

    limited = f"counted-five-per-connection-{transport}"
    requests = 5 * CONNECTIONS
    summary = counted_run(*PACE, *COUNTED, "--maxRequestsPerConnection", "5", backends.url + limited,
                          requests=requests)
    assert summary["backendsReached"] == BACKENDS
    assert summary["backends"] == served_by_name(backends, limited)  # the server's view and the runner's agree
    assert set(summary["backends"]) == {name(b) for b in range(BACKENDS)}
    opened = summary["connectionsOpened"]
    assert opened == len(backends.connections(limited)) >= requests / 5
    assert opened - CLIENTS <= summary["connectionsClosed"] <= opened  # each closed after its 5th, but the last few


def test_backends_at_least_ten_fails_keep_alive_alone_and_passes_with_a_lifetime(
        backends: Balanced, transport: str) -> None:
    """Five clients that keep their connections cannot reach ten backends: exit code 3, the
    rule's line naming what it measured. With a request limit the same rule holds."""
    rule = ("--thresholds", "backends >= 10")
    alone = f"threshold-keep-alive-{transport}"
    summary = counted_run(*PACE, *COUNTED, *rule, backends.url + alone, requests=400, code=EXIT_THRESHOLDS)
    (judged,) = summary["thresholds"]["rules"]
    assert (judged["rule"], judged["ok"], judged["measured"]) == ("backends >= 10", False, summary["backendsReached"])
    assert judged["measured"] <= CLIENTS
    limited = f"threshold-limited-{transport}"
    summary = counted_run(*PACE, *COUNTED, *rule, "--maxRequestsPerConnection", "5", backends.url + limited,
                          requests=5 * CONNECTIONS)
    (judged,) = summary["thresholds"]["rules"]
    assert (judged["ok"], judged["measured"]) == (True, BACKENDS)


def test_shards_and_workers_add_their_backends_up(backends: Balanced) -> None:
    """Two pods' shards, merged by `soak merge`, and a run over two local workers: each
    backend's responses are the sum of what every part counted, which is what it served, and
    so are the connections."""
    shards = "sharded"
    flags = [*PACE, *COUNTED, "--maxRequestsPerConnection", "5", "--shards", "2", "--iterations", "0",
             "--duration", "150s", "--totalRequests", str(5 * CONNECTIONS)]
    env = {**os.environ, "TZ": "UTC"}
    pods = [subprocess.Popen(soak_command(*flags, "--shard", str(i), backends.url + shards), stdout=subprocess.PIPE,
                             text=True, env=env) for i in (0, 1)]
    logs = [pod.communicate(timeout=180)[0] for pod in pods]
    assert [pod.returncode for pod in pods] == [0, 0], logs
    parts = [assert_counts_add_up(log) for log in logs]
    done = subprocess.run(soak_command("merge"), input="".join(logs), capture_output=True, text=True, timeout=120,
                          env=env)
    assert done.returncode == 0, done.stderr
    merged = assert_counts_add_up(done.stdout)
    assert_connections_add_up(merged)
    assert_backends_add_up(merged, done.stdout)
    assert merged["backends"] == served_by_name(backends, shards) == dict(
        sum((Counter(part["backends"]) for part in parts), Counter()).most_common())
    assert merged["backendsReached"] == BACKENDS
    assert merged["connectionsOpened"] == sum(p["connectionsOpened"] for p in parts) == len(backends.connections(shards))
    assert merged["connectionsClosed"] == sum(p["connectionsClosed"] for p in parts)

    workers = "two-workers"
    summary = counted_run(*PACE, *COUNTED, "--maxRequestsPerConnection", "5", "--workers", "2",
                          backends.url + workers, requests=5 * CONNECTIONS)
    assert summary["backends"] == served_by_name(backends, workers) and summary["backendsReached"] == BACKENDS
    assert summary["connectionsOpened"] == len(backends.connections(workers))


@pytest.mark.parametrize("workers", ["1", "2"])
def test_what_was_pushed_counts_responses_by_backend_and_connections_as_the_summary(
        backends: Balanced, workers: str) -> None:
    """The final push to a real Pushgateway: soak_backend_responses_total by backend label is
    the summary's backends and what each backend served; the connection counters are the
    summary's, from one process or summed over local workers."""
    tag = f"pushed-{workers}"
    gateway = Pushgateway()
    try:
        summary = counted_run(*PACE, *COUNTED, "--maxRequestsPerConnection", "5", "--workers", workers,
                              "--pushgateway", gateway.url, "--pushgatewayJob", f"soak-backends-{workers}",
                              backends.url + tag, requests=5 * CONNECTIONS)
        s = gateway.group(f"soak-backends-{workers}")
    finally:
        gateway.stop()
    pushed = {dict(labels)["backend"]: n for labels, n in s["soak_backend_responses_total"].items()}
    assert pushed == summary["backends"] == served_by_name(backends, tag)
    assert s["soak_connections_opened_total"][()] == summary["connectionsOpened"] == len(backends.connections(tag))
    assert s["soak_connections_closed_total"][()] == summary["connectionsClosed"]


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
    with balanced(tmp_path) as backends, LiveRun("--qps", "100", "--concurrency", str(CLIENTS), *LONG_RUN, *COUNTED,
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
        # A failure's line is printed when its interval closes: a response served after this
        # is in a later interval, which the dead backend is then out of.
        seen = sum(_served(backends, tag).values())
        wait_until(lambda: sum(_served(backends, tag).values()) > seen, timeout=60)
        live.wait(live.send(signal.SIGTERM), timeout=30)
    run = Run(live.process.returncode, live.stdout, live.stderr)
    assert run.returncode == EXIT_INTERRUPTED, run.stderr  # stopped by the test, before its planned end
    summary = assert_counts_add_up(run.stdout)
    assert summary["failed"] >= 1 and set(summary["errors"]) <= {"closed", "reset"}, summary["errors"]
    after = _served(backends, tag)
    assert after[dead] == served[dead]
    assert all(after[b] > served[b] for b in range(BACKENDS) if b != dead), (served, after)
    assert summary["good"] == sum(after.values())  # every response counted good was one a backend logged
    # The runner's view: each backend's responses as it served them, the dead one's too (before it died) ...
    assert_connections_add_up(summary)
    assert_backends_add_up(summary, run.stdout)
    assert summary["backends"] == served_by_name(backends, tag) and name(dead) in summary["backends"]
    # ... and once its connections have failed, it answers in no later interval: after the first
    # interval with a failure (a connection it dropped, or one HAProxy could not make to it).
    intervals = summary["intervalStats"]
    first = next(k for k, i in enumerate(intervals) if i["failed"])
    assert set(intervals[first]["errors"]) <= {"closed", "reset"}
    assert all(name(dead) not in i["backends"] for i in intervals[first + 1:]), intervals[first + 1:]
    assert any(i["backendsReached"] for i in intervals[first + 1:])  # the others did answer after it


def _served(backends: Balanced, tag: str) -> dict[int, int]:
    """Requests with `tag` each backend has logged."""
    counts = dict.fromkeys(range(BACKENDS), 0)
    for entry in backends.logged(tag):
        counts[entry.backend] += 1
    return counts


def test_the_shipped_configuration_reaches_every_replica_of_the_10_replica_component(tmp_path: Path) -> None:
    """The rendered pallet with nginx at 10 replicas: its configuration.json, as the pod mounts
    it, replayed against ten nginx that each run the rendered nginx server block (on a loopback
    port of its own, its name for $hostname: they share this host). Faster than an hour, and
    for as many requests as make CONNECTIONS connections under its own lifetime: a request
    limit is the same whatever the rate (the run's lifetime must be one, for the replay to be
    as the pod's). Its thresholds are replaced by `backends >= 10`: goal% is the client's pace,
    which a replay at twenty times the rate does not promise."""
    resources = render("nginx-10-replicas")
    assert find(resources, "Deployment", "nginx")["spec"]["replicas"] == BACKENDS
    config = json.loads(mounted_files(resources)["/etc/soak/config/configuration.json"])
    per_connection = config.get("maxRequestsPerConnection", 0)
    assert per_connection > 0, "the shipped configuration sets no maxRequestsPerConnection"
    assert config.get("backendHeader"), "the shipped configuration counts no backends"
    shipped = tmp_path / "configuration.json"
    shipped.write_text(json.dumps(config))
    tag = "shipped-10-replicas"
    www = tmp_path / "www"
    www.mkdir()
    (www / tag).write_text("the page\n")
    pods = nginx_server(resources)
    for rendered in ("listen 8080;", "$hostname", "root /usr/share/nginx/html;"):
        assert rendered in pods, rendered

    def server(index: int, port: int) -> str:
        return (pods.replace("listen 8080;", f"listen 127.0.0.1:{port};").replace("$hostname", name(index))
                .replace("root /usr/share/nginx/html;", f"root {www};"))

    requests = per_connection * CONNECTIONS
    (tmp_path / "pods").mkdir()
    with balanced(tmp_path / "pods", server) as backends:
        summary = counted_run("--config", str(shipped), "--qps", "2000", "--interval", "1s",
                              "--thresholds", "backends >= 10", backends.url + tag, requests=requests)
        assert summary["config"]["concurrency"] == config["concurrency"]
        assert len(backends.connections(tag)) >= CONNECTIONS
        assert backends.reached(tag) == set(range(BACKENDS))
        assert summary["backendsReached"] == BACKENDS and summary["thresholds"]["passed"] is True
        assert summary["backends"] == served_by_name(backends, tag)
        assert summary["connectionsOpened"] == len(backends.connections(tag)) >= requests / per_connection


def test_the_shipped_configuration_and_url_list_run_on_the_native_engine(tmp_path: Path) -> None:
    """The base pallet's configuration.json and URL list (urlsconfigmap.yaml), as the pod mounts
    them, the Service's name pointed at a loopback nginx running the rendered server block: the
    run is the native engine's where it is built (its backendHeader and its URL list no longer
    refuse it), and it counts the pod's name on every response."""
    resources = render("base")
    files = mounted_files(resources)
    config = json.loads(files["/etc/soak/config/configuration.json"])
    assert config.get("backendHeader") and config.get("maxRequestsPerConnection")
    config["thresholds"] = ["errors% <= 1"]  # goal% is the client's pace, which a replay does not promise
    shipped = tmp_path / "configuration.json"
    shipped.write_text(json.dumps(config))
    listed = files["/etc/soak/urls/urls.txt"]
    service = "http://nginx.soak-target.svc.cluster.local"
    assert service in listed
    www = tmp_path / "www"
    www.mkdir()
    (www / "index.html").write_text("the page\n")
    pods = nginx_server(resources)

    def server(index: int, port: int) -> str:
        return (pods.replace("listen 8080;", f"listen 127.0.0.1:{port};").replace("$hostname", name(index))
                .replace("root /usr/share/nginx/html;", f"root {www};"))

    (tmp_path / "pod").mkdir()
    with named_nginx(tmp_path / "pod", 0, server) as url:
        urls = tmp_path / "urls.txt"
        urls.write_text(listed.replace(service, url.rstrip("/")))
        run = run_soak("--config", str(shipped), "--urls", str(urls), "--qps", "1000", "--interval", "1s",
                       "--iterations", "0", "--duration", "150s", "--totalRequests", "150", timeout=180)
    assert run.returncode == 0, run.stderr
    assert run.engine_said == engine_line()
    summary = assert_counts_add_up(run.stdout)
    assert summary["engine"] == ("native" if native_module() is not None else "python")
    assert summary["requests"] == summary["good"] == 150
    assert summary["backends"] == {name(0): 150} and summary["backendsReached"] == 1
