"""Prometheus metrics from real runs: /metrics scraped while a run against nginx lasts, and what a run
pushed read back from a real Pushgateway (Debian's prometheus-pushgateway) on loopback.

The figures are checked against the run's own summary, and the server's own counts: the metrics
must say what the run measured, not merely look plausible.
"""

from __future__ import annotations

import io
import re
import signal
import socket
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from prometheus_client.openmetrics.parser import text_string_to_metric_families as parse_openmetrics
from prometheus_client.parser import text_string_to_metric_families

import runner
from runner.config.settings import merge, settings_from
from runner.core.errors import EXIT_INTERRUPTED, EXIT_OK, EXIT_THRESHOLDS, EXIT_USAGE
from runner.load.model import Closed
from runner.metrics.collector import Metrics
from runner.metrics.tally import WorkerTallies
from tests.conftest import REPO, Nginx, assert_counts_add_up, free_port, parse_interval, run_soak
from tests.support.faultserver import FaultServer, refused_port
from tests.support.liverun import LONG_RUN, LiveRun
from tests.support.pushgateway import Pushgateway, Samples


@pytest.fixture(scope="module")
def pushgateway() -> Iterator[Pushgateway]:
    gateway = Pushgateway()
    try:
        yield gateway
    finally:
        gateway.stop()


def scrape(port: int, accept: str | None = None) -> str:
    request = urllib.request.Request(f"http://127.0.0.1:{port}/metrics", headers={"Accept": accept} if accept else {})
    with urllib.request.urlopen(request, timeout=5) as response:
        return response.read().decode()


def samples_of(text: str) -> Samples:
    found: Samples = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            found.setdefault(sample.name, {})[tuple(sorted(sample.labels.items()))] = sample.value
    return found


def total(samples: Samples, name: str, **labels: str) -> float:
    """The sum of a metric's series whose labels include `labels`."""
    return sum(v for k, v in samples.get(name, {}).items() if labels.items() <= dict(k).items())


@pytest.mark.parametrize("workers", ["1", "2"])
def test_metrics_are_served_while_the_run_lasts(nginx: Nginx, workers: str) -> None:
    """Scraped mid-run, /metrics holds at least what the printed intervals counted, at most the run's total,
    and agrees with itself; it is gone once the run has ended. With workers, the parent serves their sum."""
    port = free_port()
    with LiveRun("--qps", "200", "--concurrency", "4", *LONG_RUN, "--metricAddr", f"127.0.0.1:{port}",
                 "--workers", workers, nginx.url) as live:
        live.wait_for_first_interval()
        time.sleep(1.2)
        printed = [parse_interval(line) for line in live.stdout.splitlines() if line[:1].isdigit()]
        text = scrape(port)
        openmetrics = scrape(port, "application/openmetrics-text; version=1.0.0")
        live.wait(live.send(signal.SIGTERM))
    assert live.process.returncode == EXIT_INTERRUPTED, live.stderr  # stopped before its planned end
    summary = assert_counts_add_up(live.stdout)
    s = samples_of(text)
    requests = s["requests"][()]
    assert sum(i.requests for i in printed) <= requests <= summary["requests"]
    assert s["soak_intervals_total"][()] >= len(printed)
    assert requests == total(s, "soak_requests_total") == total(s, "soak_requests_total", url=nginx.url,
                                                                 status_class="2xx")
    assert s["successes"][()] == requests  # nginx answers 200 to each
    assert s["latency_ms_count"][()] == s["latency_us_count"][()] == s["latency_ns_count"][()] == requests
    assert total(s, "soak_request_duration_seconds_count", url=nginx.url) == requests
    assert s["soak_target_requests_per_second"][()] == 200 and s["soak_concurrency"][()] == 4
    assert s["soak_run_finished"][()] == 0
    assert s["soak_build_info"] == {(("engine", summary["engine"]), ("version", runner.__version__)): 1}
    assert 0 < s["soak_interval_latency_seconds"][(("percentile", "p99"),)] < 1
    assert "soak_thresholds_passed" not in s
    families = {f.name: f for f in parse_openmetrics(openmetrics)}  # what Prometheus itself asks for
    assert families["soak_requests"].type == "counter" and families["latency_ms"].type == "histogram"
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", port), timeout=1).close()


def test_every_scrape_of_a_busy_run_agrees_with_itself(nginx: Nginx) -> None:
    """Scraped again and again while thousands of responses a second are filed, each scrape counts a
    response in all its series or in none: the native engine's counts are copied as of one moment
    (once, a scrape read 201 in soak_requests_total and 202 in the latency histogram's count)."""
    port = free_port()
    seen: list[tuple[float, float, float]] = []
    with LiveRun("--qps", "5000", "--concurrency", "20", *LONG_RUN, "--metricAddr", f"127.0.0.1:{port}",
                 nginx.url) as live:
        live.wait_for_first_interval()
        deadline = time.monotonic() + 10
        while len(seen) < 100 and time.monotonic() < deadline:
            s = samples_of(scrape(port))
            seen.append((s["requests"][()], total(s, "soak_requests_total"),
                         total(s, "soak_request_duration_seconds_count")))
        live.wait(live.send(signal.SIGTERM))
    assert live.process.returncode == EXIT_INTERRUPTED, live.stderr
    assert_counts_add_up(live.stdout)
    assert seen and seen[-1][0] > seen[0][0], seen  # responses were filed between the scrapes
    assert [counts for counts in seen if len(set(counts)) != 1] == []


def test_a_taken_port_is_one_line_and_exit_2_before_anything_is_sent(nginx: Nginx) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        before = nginx.requests_logged()
        run = run_soak("--qps", "50", "--iterations", "1", "--interval", "1s", "--metricAddr", f"127.0.0.1:{port}",
                       nginx.url)
    assert run.returncode == EXIT_USAGE
    assert run.stderr == f"soak: metricAddr: 127.0.0.1:{port}: cannot listen: Address already in use\n"
    assert run.stdout == "" and nginx.requests_logged() == before


@pytest.mark.parametrize("workers", ["1", "2"])
def test_what_was_pushed_is_what_the_run_counted(pushgateway: Pushgateway, fault_server: FaultServer,
                                                 workers: str) -> None:
    """Good, bad and failed sends to three URLs; the final push holds exactly the summary's counts,
    from one process or summed over local workers."""
    blocker = refused_port()
    refused = f"http://127.0.0.1:{blocker.getsockname()[1]}/"
    try:
        run = run_soak("--qps", "60", "--concurrency", "4", "--interval", "500ms", "--iterations", "3",
                       "--workers", workers, "--pushgateway", pushgateway.url, "--pushgatewayJob", "soak-exact",
                       "--thresholds", "errors% <= 0", "--intervalThresholds", "p99 < 10s",
                       fault_server.url("/ok"), fault_server.url("/status/503"), refused)
    finally:
        blocker.close()
    assert run.returncode == EXIT_THRESHOLDS, run.stderr
    assert "pushgateway" not in run.stderr
    summary = assert_counts_add_up(run.stdout)
    fault_server.wait_idle()
    s = pushgateway.group("soak-exact")
    ok, bad = fault_server.url("/ok"), fault_server.url("/status/503")
    assert s["requests"][()] == summary["requests"]
    assert s["successes"][()] == summary["good"] == fault_server.seen("/ok")
    assert total(s, "soak_requests_total", url=ok, status_class="2xx") == summary["good"]
    assert total(s, "soak_requests_total", url=bad, status_class="5xx") == summary["bad"] == fault_server.seen(
        "/status/503")
    assert total(s, "soak_requests_total", url=refused, status_class="failed") == summary["failed"] > 0
    assert total(s, "soak_failures_total", url=refused, kind="refused") == summary["errors"]["refused"]
    assert s["soak_skipped_total"][()] == summary["skipped"]
    assert s["latency_ms_count"][()] == summary["good"]  # slow_cooker's histograms: good responses only
    assert total(s, "soak_request_duration_seconds_count") == summary["good"] + summary["bad"]
    assert s["soak_intervals_total"][()] == summary["intervals"]
    assert s["soak_run_finished"][()] == 1
    assert s["soak_thresholds_passed"][()] == 0  # the final verdict, for alerts after the pod is gone
    assert s["soak_threshold_passed"] == {(("rule", "errors% <= 0"), ("scope", "run")): 0,
                                          (("rule", "p99 < 10s"), ("scope", "interval")): 1}
    assert s["push_failure_time_seconds"][()] == 0


def test_pushes_are_grouped_by_job_and_pod_index(pushgateway: Pushgateway, nginx: Nginx) -> None:
    """The default job, and the pod's index from JOB_COMPLETION_INDEX (a shard of an Indexed Job)."""
    run = run_soak("--qps", "40", "--concurrency", "2", "--interval", "500ms", "--iterations", "2", "--shards", "2",
                   "--pushgateway", pushgateway.url, "--thresholds", "errors% <= 0", nginx.url,
                   env={"JOB_COMPLETION_INDEX": "1"})
    assert run.returncode == EXIT_OK, run.stderr
    s = pushgateway.group("soak", pod_index="1")
    assert s["requests"][()] == run.summary["requests"] > 0
    assert s["soak_target_requests_per_second"][()] == 20  # this shard's half of the rate
    assert s["soak_thresholds_passed"][()] == 1
    assert pushgateway.group("soak", pod_index="0") == {}


def test_a_pushgateway_that_is_down_never_stops_the_run(nginx: Nginx) -> None:
    """Refused pushes: one stderr line per push at most, and the run goes on and ends as it would."""
    blocker = refused_port()
    gateway = f"http://127.0.0.1:{blocker.getsockname()[1]}"
    try:
        run = run_soak("--qps", "50", "--interval", "500ms", "--iterations", "4", "--pushgateway", gateway,
                       nginx.url)
    finally:
        blocker.close()
    assert run.returncode == EXIT_OK
    summary = assert_counts_add_up(run.stdout)
    assert summary["stopReason"] == "iterations" and summary["good"] == summary["requests"] > 0
    complaints = run.stderr.splitlines()
    assert 1 <= len(complaints) <= summary["intervals"] + 1
    # Each failed push says what becomes of its counts: the next push carries them, but the
    # final one has no next (it once promised one).
    prefix = f"soak: pushgateway {gateway}: Connection refused; "
    assert complaints[-1] == prefix + "the final figures and verdict were not pushed"
    assert set(complaints[:-1]) <= {prefix + "the counts are kept and go with the next push"}


def test_a_pushgateway_error_is_told_in_one_line(fault_server: FaultServer) -> None:
    """A server that answers the push with an error (here 404): the answer, in one line per push."""
    run = run_soak("--qps", "20", "--interval", "500ms", "--iterations", "2", "--pushgateway",
                   fault_server.url(""), fault_server.url("/ok"))
    assert run.returncode == EXIT_OK
    complaints = run.stderr.splitlines()
    assert 1 <= len(complaints) <= 3
    prefix = f"soak: pushgateway {fault_server.url('')}: HTTP 404 Not Found: no such fault; "
    assert complaints[-1] == prefix + "the final figures and verdict were not pushed"
    assert all(line == prefix + "the counts are kept and go with the next push" for line in complaints[:-1]), complaints


def test_counts_missed_by_failed_pushes_arrive_with_a_later_one(nginx: Nginx) -> None:
    """The Pushgateway is down for the first pushes and comes up mid-run: the last push has every count."""
    port = free_port()
    gateway: Pushgateway | None = None
    try:
        with LiveRun("--qps", "50", "--interval", "500ms", "--iterations", "6", "--pushgateway",
                     f"http://127.0.0.1:{port}", "--pushgatewayJob", "soak-late", nginx.url) as live:
            deadline = time.monotonic() + 10
            while "pushgateway" not in live.stderr and time.monotonic() < deadline:
                time.sleep(0.05)
            assert "Connection refused" in live.stderr
            gateway = Pushgateway(port)
            live.process.wait(timeout=30)
            live.wait(time.monotonic())
        assert live.process.returncode == EXIT_OK
        summary = assert_counts_add_up(live.stdout)
        s = gateway.group("soak-late")
        assert s["requests"][()] == summary["requests"] and s["soak_run_finished"][()] == 1
    finally:
        if gateway is not None:
            gateway.stop()


def test_validate_says_where_metrics_go() -> None:
    run = run_soak("validate", "--metricAddr", ":9090", "--pushgateway", "http://pg.monitoring:9091",
                   "http://127.0.0.1:1/")
    assert run.returncode == EXIT_OK, run.stderr
    assert "serves Prometheus metrics on port 9090 of every interface (GET /metrics) while it runs" in run.stdout
    assert ("pushes metrics to the Pushgateway http://pg.monitoring:9091 after every interval and at the end "
            "(job soak)") in run.stdout


CAP = 20  # runner.metrics.collector.URL_SERIES_CAP, written out: these tests also run the CLI of code without it
MANY = 500


def url_list(tmp_path: Path, urls: list[str]) -> str:
    path = tmp_path / "urls.txt"
    path.write_text("".join(f"{url}\n" for url in urls))
    return str(path)


def url_labels(s: Samples) -> set[str]:
    """Every url label value of every series."""
    return {dict(labels)["url"] for series in s.values() for labels in series if "url" in dict(labels)}


def test_a_scrape_of_a_run_to_many_urls_has_series_for_the_first_ones_and_other(nginx: Nginx,
                                                                               tmp_path: Path) -> None:
    """500 URLs (once 10,500 histogram series and more): the first 20 have series of their own, the
    rest are counted under url="other", and the counts still agree with each other."""
    urls = [f"{nginx.url}?n={n}" for n in range(MANY)]
    port = free_port()
    with LiveRun("--qps", "200", "--concurrency", "4", *LONG_RUN, "--metricAddr", f"127.0.0.1:{port}",
                 "--urls", url_list(tmp_path, urls)) as live:
        live.wait_for_first_interval()
        deadline = time.monotonic() + 30
        while True:  # until a send beyond the first 20 URLs has been counted
            text = scrape(port)
            s = samples_of(text)
            if total(s, "soak_requests_total", url="other") or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        live.wait(live.send(signal.SIGTERM))
    assert live.process.returncode == EXIT_INTERRUPTED, live.stderr  # stopped before its planned end
    summary = assert_counts_add_up(live.stdout)
    assert url_labels(s) == {*urls[:CAP], "other"}
    assert {dict(k)["url"] for k in s["soak_request_duration_seconds_count"]} == {*urls[:CAP], "other"}
    samples = [line for line in text.splitlines() if line and not line.startswith("#")]
    assert len(samples) < (CAP + 1) * 40, len(samples)  # about 30 per url label, whatever the list's length
    requests = s["requests"][()]
    assert 0 < total(s, "soak_requests_total", url="other") < requests <= summary["requests"]
    assert total(s, "soak_requests_total") == total(s, "soak_request_duration_seconds_count") == requests
    assert s["soak_other_urls"][()] == MANY - CAP


@pytest.mark.parametrize("workers", ["1", "2"])
def test_what_was_pushed_for_many_urls_adds_up_to_the_summary(pushgateway: Pushgateway, fault_server: FaultServer,
                                                              tmp_path: Path, workers: str) -> None:
    """500 URLs, good, bad and refused, named and beyond the cap: the final push holds the first 20
    URLs' series and "other", and together they are exactly the summary's counts."""
    blocker = refused_port()
    refused = f"http://127.0.0.1:{blocker.getsockname()[1]}/"
    kinds = [fault_server.url("/ok"), fault_server.url("/status/503"), refused]
    urls = [f"{kinds[n % 3]}?n={n}" for n in range(MANY)]
    try:
        run = run_soak("--qps", "400", "--concurrency", "4", "--interval", "500ms", "--iterations", "3",
                       "--workers", workers, "--pushgateway", pushgateway.url, "--pushgatewayJob", "soak-many",
                       "--urls", url_list(tmp_path, urls))
    finally:
        blocker.close()
    assert run.returncode == EXIT_OK, run.stderr
    assert "pushgateway" not in run.stderr
    summary = assert_counts_add_up(run.stdout)
    s = pushgateway.group("soak-many")
    assert s["soak_run_finished"][()] == 1
    assert url_labels(s) == {*urls[:CAP], "other"}
    assert s["requests"][()] == total(s, "soak_requests_total") == summary["requests"]
    assert total(s, "soak_requests_total", status_class="2xx") == summary["good"]
    assert total(s, "soak_requests_total", status_class="5xx") == summary["bad"]
    assert total(s, "soak_requests_total", status_class="failed") == summary["failed"]
    assert total(s, "soak_failures_total", kind="refused") == summary["errors"]["refused"]
    assert total(s, "soak_request_duration_seconds_count") == summary["good"] + summary["bad"]
    named = sum(total(s, "soak_requests_total", url=url) for url in urls[:CAP])
    other = total(s, "soak_requests_total", url="other")
    assert named > 0 and other > 0 and named + other == summary["requests"]
    assert s["soak_other_urls"][()] == MANY - CAP


def test_a_run_to_40000_urls_pushes_every_count_in_bounded_memory(pushgateway: Pushgateway, nginx: Nginx,
                                                                   tmp_path: Path) -> None:
    """The issue's case: 40,000 URLs once took 900 MB and no push ever completed. The final push
    now arrives with the summary's counts, and the runner stays far under the pod's 256Mi."""
    urls = [f"{nginx.url}?n={n}" for n in range(40_000)]
    run = run_soak("--qps", "200", "--concurrency", "4", "--interval", "500ms", "--iterations", "3",
                   "--pushgateway", pushgateway.url, "--pushgatewayJob", "soak-40k", "--urls", url_list(tmp_path, urls))
    assert run.returncode == EXIT_OK, run.stderr
    assert "pushgateway" not in run.stderr
    summary = assert_counts_add_up(run.stdout)
    s = pushgateway.group("soak-40k")
    assert s["soak_run_finished"][()] == 1
    assert s["requests"][()] == total(s, "soak_requests_total") == summary["requests"]
    assert url_labels(s) == {*urls[:CAP], "other"}
    assert summary["process"]["maxRssBytes"] < 150 * 2**20


def test_the_bench_of_long_url_lists_reads_its_figures_from_real_runs(pushgateway: Pushgateway, nginx: Nginx,
                                                                     tmp_path: Path) -> None:
    """bench/metrics_cost.py --urls: a push's cost, and a run's figures from its summary and the Pushgateway."""
    sys.path.insert(0, str(REPO / "bench"))
    try:
        import metrics_cost  # bench/metrics_cost.py
    finally:
        sys.path.remove(str(REPO / "bench"))
    samples, ms = metrics_cost.push_work(100, pushes=2)
    assert 0 < samples < (CAP + 1) * 40 and ms > 0
    urls = tmp_path / "urls.txt"
    urls.write_text("".join(f"{nginx.url}?n={n}\n" for n in range(100)))
    run = metrics_cost.many_urls_run(urls, 100, "pushgateway", 50, 2, pushgateway.url)
    assert (run.urls, run.metrics) == (100, "pushgateway") and run.rss_mib > 0 and run.p99_ms >= 0
    # Fewer than 3 when one push served the asks made while it was under way.
    assert re.fullmatch(r"[1-3] of 3 pushes accepted", run.extra), run.extra
    assert "| 100 | pushgateway |" in run.row


def test_metrics_with_local_workers_take_their_counts_from_the_workers() -> None:
    settings = settings_from(merge({"metricAddr": "127.0.0.1:0", "workers": 2}))
    metrics = Metrics(settings, Closed(), ["http://a.example/"], None, io.StringIO())
    try:
        assert metrics.tally is None and isinstance(metrics.workers, WorkerTallies)
    finally:
        metrics.close()
