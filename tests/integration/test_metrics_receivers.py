"""Metrics written to real receivers: Debian's Prometheus (its remote write receiver, with and without
native histograms), an OTLP receiver decoding with opentelemetry-proto, and the Pushgateway's stale
groups. The figures read back are checked against the run's own summary; a receiver that is down,
slow or refusing changes neither the exit code nor the summary, and says so once per cause.
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry, Gauge, push_to_gateway

from runner.core.errors import EXIT_OK
from runner.metrics.native import SCHEMA
from tests.conftest import REPO, Nginx, assert_counts_add_up, run_soak
from tests.support.faultserver import FaultServer, refused_port
from tests.support.otlpreceiver import OtlpReceiver, attributes
from tests.support.prometheus import Prometheus
from tests.support.pushgateway import Pushgateway

WIDTH = 2 ** (1 / 2**SCHEMA)  # one native bucket: its upper bound over its lower


RULES = REPO / "manifests" / "components" / "monitoring" / "soak-alerts.rules.yaml"


@pytest.fixture(scope="module")
def native_prometheus(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Prometheus]:
    """Prometheus with its remote write receiver and native histograms, evaluating the pallet's rules."""
    prometheus = Prometheus(tmp_path_factory.mktemp("prometheus-native"), [], rule_files=[RULES],
                            flags=["--web.enable-remote-write-receiver", "--enable-feature=native-histograms"])
    try:
        yield prometheus
    finally:
        prometheus.stop()


def soak_writing(*flags: str, urls: list[str], job: str, token: Path | None = None) -> tuple[dict, str]:
    """A 5-interval run against `urls`, latencies in ns (the summary's p99 exact to the ns): its summary, stderr."""
    extra = ["--remoteWriteBearerTokenFile", str(token)] if token else []
    run = run_soak("--qps", "100", "--concurrency", "2", "--interval", "1s", "--iterations", "5", "--latencyUnit", "ns",
                   "--pushgatewayJob", job, *flags, *extra, *urls, timeout=120)
    assert run.returncode == EXIT_OK, run.stderr
    return assert_counts_add_up(run.stdout), run.stderr


def said_of(stderr: str) -> list[str]:
    """The lines about the metrics' receivers (not the engine's, nor the `# iter` notes on the client's pace)."""
    return [line for line in stderr.splitlines() if line.startswith(("soak: remoteWrite ", "soak: otlp "))]


def within_a_bucket(got: float, exact_ns: float) -> bool:
    """Whether Prometheus' quantile (s) lies within one native bucket of the summary's (ns): the summary's
    is its HDR bucket's top, up to 0.1% above the value the rank falls on, whose bucket Prometheus reads."""
    return exact_ns / WIDTH / 1.001 <= got * 1e9 <= exact_ns * WIDTH * 1.001


def p99_agrees(got: float, figures: dict) -> bool:
    """Whether Prometheus' p99 (s) agrees with the summary's figures (of a URL, or of the run): within one
    native bucket of its exact p99 when both name the same response. Prometheus' p99 is the ceil(0.99 n)-th
    response, HDR's the round(0.99 n)-th: where they differ (151 responses: the 150th against the 149th) and
    the tail is sparse, Prometheus' lies above the summary's, and no higher than the slowest response."""
    n = figures["good"] + figures["bad"]
    if math.ceil(0.99 * n) == int(0.99 * n + 0.5):
        return within_a_bucket(got, figures["p99"])
    return figures["p99"] / WIDTH / 1.001 <= got * 1e9 <= figures["max"] * WIDTH * 1.001


@pytest.mark.parametrize("engine", ["native", "python"])
def test_remote_write_puts_every_interval_and_the_p99_by_url_in_prometheus(native_prometheus: Prometheus,
                                                                         nginx: Nginx, engine: str) -> None:
    """Either engine: the native one counts in C (its counts reach Python per interval), the Python one per result."""
    urls = [nginx.url, nginx.url + "echo"]
    summary, stderr = soak_writing("--remoteWrite", native_prometheus.write_url, "--engine", engine, urls=urls,
                                   job=f"rw-{engine}")
    assert "remoteWrite" not in stderr and summary["engine"] == engine
    end = time.time() + 1
    job = f'{{job="rw-{engine}"}}'
    # Every interval's write, with its own timestamp: the interval's end, exactly a second apart (the
    # grid's), then the final write.
    (intervals,) = native_prometheus.samples(f"soak_intervals_total{job}", end).values()
    times = [t for t, _ in intervals]
    assert [float(v) for _, v in intervals] == [1, 2, 3, 4, 5, 5]
    assert [round(b - a, 3) for a, b in zip(times, times[1:-1])] == [1.0] * 4 and times[-1] > times[-2]
    assert all(len(series) == 6 for series in native_prometheus.samples(f"soak_requests_total{job}", end).values())
    at = times[-1]
    # Counts: the final write holds the summary's.
    requests = native_prometheus.query(f"sum(soak_requests_total{job})", at)
    assert requests == {(): summary["requests"]}
    counts = native_prometheus.query(f"histogram_count(soak_request_duration_seconds{job})", at)
    by_url = {entry["url"]: entry for entry in summary["perUrl"]}
    assert {dict(labels)["url"]: n for labels, n in counts.items()} == {u: by_url[u]["good"] + by_url[u]["bad"]
                                                                         for u in urls}
    # The p99 by URL from the native histograms, within one bucket of the summary's exact one.
    p99s = native_prometheus.query(f"histogram_quantile(0.99, soak_request_duration_seconds{job})", at)
    assert len(p99s) == 2
    for labels, got in p99s.items():
        labels = dict(labels)
        assert labels["run"] == summary["start"][:19] + "Z" and labels["pod_index"] == "0"
        assert p99_agrees(got, by_url[labels["url"]]), (got, by_url[labels["url"]])
    # The phases, too, added up from each closed interval's: ttfb's count is the intervals' responses
    # (the summary's, less the drain: responses that came back after the last interval's end).
    ttfb = native_prometheus.query(f'histogram_count(soak_phase_seconds{{job="rw-{engine}", phase="ttfb"}})', at)
    assert list(ttfb.values()) == [sum(i["good"] + i["bad"] for i in summary["intervalStats"])]
    info = native_prometheus.query(f"soak_build_info{job}", at)
    assert [dict(labels)["engine"] for labels in info] == [engine] and list(info.values()) == [1]


def test_a_finished_run_s_p99_is_recorded_from_its_native_histogram(native_prometheus: Prometheus,
                                                                   nginx: Nginx) -> None:
    """The regression alerts' recording rule reads the native histogram where a run wrote one: its value is
    the native quantile (4.4% buckets), not the one interpolated in the classic buckets."""
    summary, _ = soak_writing("--remoteWrite", native_prometheus.write_url, urls=[nginx.url], job="rw-rules")
    record = 'job_url:soak_request_duration_seconds:p99_finished{job="rw-rules"}'
    recorded = native_prometheus.wait_for(lambda: native_prometheus.query(record, time.time()), 30, record)
    at = time.time()
    native = native_prometheus.query('histogram_quantile(0.99, sum by (job, url) '
                                     '(soak_request_duration_seconds{job="rw-rules"}))', at)
    classic = native_prometheus.query('histogram_quantile(0.99, sum by (job, url, le) '
                                      '(soak_request_duration_seconds_bucket{job="rw-rules"}))', at)
    assert {tuple(kv for kv in k if kv[0] != "__name__"): v for k, v in recorded.items()} == native != classic
    (p99,) = native.values()
    assert p99_agrees(p99, summary)


def test_a_bearer_token_is_read_before_every_write(native_prometheus: Prometheus, nginx: Nginx,
                                                   tmp_path: Path) -> None:
    """A token file that cannot be read: each write says so once and keeps its points; the run is unchanged."""
    missing = tmp_path / "token"
    summary, stderr = soak_writing("--remoteWrite", native_prometheus.write_url, urls=[nginx.url], job="rw-token",
                                   token=missing)
    assert summary["good"] == summary["requests"] > 0
    assert said_of(stderr) == [
        f"soak: remoteWrite {native_prometheus.write_url}: remoteWriteBearerTokenFile: {missing}: cannot read it: "
        "No such file or directory; the points are kept and go with the next write",
        f"soak: remoteWrite {native_prometheus.write_url}: remoteWriteBearerTokenFile: {missing}: cannot read it: "
        "No such file or directory; the final figures were not written"]


def test_without_native_histograms_prometheus_is_told_about_and_gets_the_rest(tmp_path: Path, nginx: Nginx) -> None:
    """Prometheus 2.42 without its feature flag answers 500 and writes nothing: detected, said once, and the
    classic series still arrive, every interval of them."""
    plain = Prometheus(tmp_path, [], flags=["--web.enable-remote-write-receiver"])
    try:
        summary, stderr = soak_writing("--remoteWrite", plain.write_url, urls=[nginx.url], job="rw-classic")
        end = time.time() + 1
        (intervals,) = plain.samples('soak_intervals_total{job="rw-classic"}', end).values()
        count = plain.query('sum(soak_request_duration_seconds_count{job="rw-classic"})', end)
        native = plain.query('soak_request_duration_seconds{job="rw-classic"}', end)
    finally:
        plain.stop()
    assert [float(v) for _, v in intervals] == [1, 2, 3, 4, 5, 5]
    assert count == {(): summary["good"] + summary["bad"]} and native == {}
    assert said_of(stderr) == [
        f"soak: remoteWrite {plain.write_url}: the receiver refuses native histograms (HTTP 500 Internal Server "
        "Error: native histograms are disabled): from now on the latency goes as classic histograms only "
        "(Prometheus: --enable-feature=native-histograms)"]


def test_otlp_sends_sums_gauges_and_exponential_histograms_that_add_up(nginx: Nginx) -> None:
    receiver = OtlpReceiver()
    try:
        summary, stderr = soak_writing("--otlp", receiver.url, urls=[nginx.url], job="otlp-job")
    finally:
        receiver.stop()
    assert "otlp" not in stderr
    # Each interval's snapshot and the final one; those due while a write was out share a request.
    assert len(receiver.moments()) == 6 >= len(receiver.requests) >= 1
    assert receiver.headers[0]["Content-Type"] == "application/x-protobuf"
    points = receiver.points()
    resources = {tuple(sorted(r.items())) for r, _, _ in points}
    assert resources == {(("service.name", "otlp-job"), ("service.version", "0.1.0"), ("soak.pod_index", "0"),
                          ("soak.run", summary["start"][:19] + "Z"))}
    final = [(name, p) for _, name, p in points if p.time_unix_nano == points[-1][2].time_unix_nano]
    (duration,) = [p for name, p in final if name == "soak_request_duration_seconds"]
    responses = summary["good"] + summary["bad"]
    assert attributes(duration) == {"url": nginx.url}
    assert duration.count == responses == duration.zero_count + sum(duration.positive.bucket_counts)
    assert duration.scale == SCHEMA
    assert math.isclose(duration.sum * 1e9, summary["mean"] * responses, rel_tol=1e-9, abs_tol=responses * 0.001)
    (requests,) = [p for name, p in final if name == "soak_requests"]
    assert requests.as_double == summary["requests"] and attributes(requests) == {"url": nginx.url,
                                                                                  "status_class": "2xx"}
    (intervals,) = [p for name, p in final if name == "soak_intervals"]
    assert intervals.as_double == 5
    first = receiver.moments()[0]
    assert all(p.start_time_unix_nano < first for _, _, p in points)


@pytest.mark.parametrize("fault", ["down", "slow", "400", "500"])
def test_a_failing_receiver_changes_nothing_and_says_so_once(fault: str, nginx: Nginx,
                                                             fault_server: FaultServer) -> None:
    blocker = refused_port()
    url = {"down": f"http://127.0.0.1:{blocker.getsockname()[1]}/api/v1/write", "slow": fault_server.url("/stall"),
           "400": fault_server.url("/status/400"), "500": fault_server.url("/status/500")}[fault]
    try:
        started = time.monotonic()
        summary, stderr = soak_writing("--remoteWrite", url, "--otlp", url, urls=[nginx.url], job=f"fail-{fault}")
        took = time.monotonic() - started
    finally:
        blocker.close()
    assert summary["good"] == summary["requests"] > 0 and summary["stopReason"] == "iterations"
    said = {"down": "Connection refused", "slow": "no answer within 5s", "400": "", "500": "HTTP 500"}[fault]
    lines = said_of(stderr)
    for name in ("remoteWrite", "otlp"):
        mine = [line for line in lines if line.startswith(f"soak: {name} {url}: ")]
        if fault == "400":  # refused for good: dropped, said once; the final write is refused too
            assert len(mine) == 2 and mine[0].endswith("; these points are dropped (the receiver refuses them)")
            assert "HTTP 400" in mine[0] and mine[1].endswith("; the final figures were not written"), mine
        else:
            prefix = f"soak: {name} {url}: {said}"
            assert len(mine) == 2 and all(line.startswith(prefix) for line in mine), mine
            assert mine[0].endswith("; the points are kept and go with the next write")
            assert mine[1].endswith("; the final figures were not written")
    assert len(lines) == 4
    # A slow receiver holds up nothing but the end, and that boundedly (the final writes, all together).
    assert took < 120


def test_a_run_with_fewer_shards_deletes_the_groups_of_the_pods_it_no_longer_has(nginx: Nginx) -> None:
    """5 shards, then 3: shard 0 of the second run deletes the groups of pod_index 3 and 4 as it starts."""
    gateway = Pushgateway()
    registry = CollectorRegistry()
    Gauge("soak_run_finished", "another job's", registry=registry).set(1)
    try:
        push_to_gateway(gateway.url, "another", registry, {"pod_index": "3"})

        def shard(index: int, count: int) -> None:
            run = run_soak("--qps", "20", "--concurrency", str(count), "--interval", "500ms", "--iterations", "1",
                           "--shards", str(count), "--shard", str(index), "--pushgateway", gateway.url,
                           "--pushgatewayJob", "shrinking", nginx.url)
            assert run.returncode == EXIT_OK, run.stderr
            assert "pushgateway" not in run.stderr

        with ThreadPoolExecutor(5) as pool:  # the pods of one Job, started together
            list(pool.map(lambda index: shard(index, 5), range(5)))
        before = {i for i in map(str, range(6)) if gateway.group("shrinking", i)}
        shard(1, 3)  # not shard 0: deletes nothing
        assert {i for i in map(str, range(6)) if gateway.group("shrinking", i)} == before == set("01234")
        shard(0, 3)
        after = {i for i in map(str, range(6)) if gateway.group("shrinking", i)}
        other = gateway.group("another", "3")  # another job's groups are left alone
    finally:
        gateway.stop()
    assert after == set("012") and other["soak_run_finished"] == {(): 1}
