"""The metrics: counting per result, and the families exposed, checked against prometheus_client itself."""

from __future__ import annotations

import io
import random

import pytest
from prometheus_client import CollectorRegistry, Histogram, generate_latest
from prometheus_client.openmetrics.exposition import generate_latest as generate_openmetrics
from prometheus_client.openmetrics.parser import text_string_to_metric_families as parse_openmetrics
from prometheus_client.parser import text_string_to_metric_families

from runner.config import merge, settings_from
from runner.errors import UsageError
from runner.metrics import (
    DURATION,
    EDGES_NS,
    SLOW_COOKER_HISTOGRAMS,
    Figures,
    Metrics,
    MetricsReporter,
    MetricsTally,
    SoakCollector,
    WorkerTallies,
    exponential_buckets,
    status_class,
    summed,
    url_label,
)
from runner.recorder import Interval, Tally
from runner.report import RunInfo, RunSummary
from runner.result import Result
from runner.verdict import Verdict

START = 9_000_000_000_000
MS = 1_000_000
URLS = ["http://a.example/", "http://user:secret@b.example:8080/path?q=1"]


def response(latency_ns: int, status: int = 200, url: int = 0, due_ns: int | None = None) -> Result:
    return Result(url_index=url, due_ns=START if due_ns is None else due_ns, start_ns=START,
                  headers_ns=START + latency_ns, end_ns=START + latency_ns + 1000, status=status)


def scrape(tally: MetricsTally | WorkerTallies, figures: Figures | None = None) -> dict[str, dict]:
    """name -> {labels tuple: value} of every sample, as Prometheus would read the text format."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(SoakCollector(tally, figures or Figures(), URLS[:len(tally.snapshot().good)]))
    samples: dict[str, dict] = {}
    for family in text_string_to_metric_families(generate_latest(registry).decode()):
        for sample in family.samples:
            samples.setdefault(sample.name, {})[tuple(sorted(sample.labels.items()))] = sample.value
    return samples


def test_go_exponential_buckets_and_labels() -> None:
    ms, us, ns = (spec.bounds for spec in SLOW_COOKER_HISTOGRAMS)
    assert len(ms) == len(us) == len(ns) == 50
    assert ms[:3] == (0.5, 0.65, 0.8450000000000001)  # what Go's ExponentialBuckets(0.5, 1.3, 50) gives
    assert ms[-1] == pytest.approx(191511.2396, rel=1e-9)  # "0.5 ms to 3 minutes"
    assert us[0] == 1 and us[-1] == pytest.approx(2.4e6, rel=0.02) and ns[-1] == pytest.approx(4.25e8, rel=0.01)
    assert exponential_buckets(2, 2, 3) == [2, 4, 8]
    samples = scrape(MetricsTally(1))
    les = [dict(labels)["le"] for labels in samples["latency_ms_bucket"]]
    assert les[:3] == ["0.5", "0.65", "0.8450000000000001"] and les[-1] == "+Inf"
    assert les[-2] == "191511.23960735707"
    ns_les = [dict(labels)["le"] for labels in samples["latency_ns_bucket"]]
    assert ns_les[-2] == "4.250810001426997e+08"  # Go's shortest %g: an exponent from 1e6 up, as promhttp prints
    assert list(EDGES_NS) == sorted(set(EDGES_NS))


@pytest.mark.parametrize("seed", range(3))
def test_buckets_are_what_prometheus_client_would_count(seed: int) -> None:
    """The same latencies observed as slow_cooker does (truncated to the unit) in prometheus_client's own
    Histogram, and, for soak_request_duration_seconds, in seconds: identical buckets."""
    rng = random.Random(seed)
    latencies = [int(rng.lognormvariate(13, 2)) for _ in range(3000)]  # ~0.4 ms, from ns to minutes
    latencies += [0, 1, 999_999, 1_000_000, 1_000_001, 100_000, 250_000, 60_000_000_000, 61_000_000_000]
    latencies += [edge + d for edge in EDGES_NS[::7] for d in (-1, 0, 1)]
    tally = MetricsTally(1)
    reference = CollectorRegistry()
    histograms = {spec.name: Histogram(spec.name, spec.help, buckets=spec.bounds, registry=reference)
                  for spec in (*SLOW_COOKER_HISTOGRAMS, DURATION)}
    for latency in latencies:
        tally.record(response(latency))
        for spec in SLOW_COOKER_HISTOGRAMS:
            histograms[spec.name].observe(float(latency // spec.unit_ns))
        histograms[DURATION.name].observe(latency / 1e9)
    ours = scrape(tally)
    theirs: dict[str, dict] = {}
    for family in text_string_to_metric_families(generate_latest(reference).decode()):
        for sample in family.samples:
            theirs.setdefault(sample.name, {})[tuple(sorted(sample.labels.items()))] = sample.value
    for spec in SLOW_COOKER_HISTOGRAMS:
        assert ours[f"{spec.name}_bucket"] == theirs[f"{spec.name}_bucket"], spec.name
        assert ours[f"{spec.name}_count"] == theirs[f"{spec.name}_count"]
        # The sum is of the exact latencies, not of each one truncated as slow_cooker sums them.
        assert ours[f"{spec.name}_sum"][()] == pytest.approx(sum(latencies) / spec.unit_ns)
    url = (("url", URLS[0]),)
    ours_duration = {dict(k)["le"]: v for k, v in ours[f"{DURATION.name}_bucket"].items()}
    theirs_duration = {dict(k)["le"]: v for k, v in theirs[f"{DURATION.name}_bucket"].items()}
    assert ours_duration == theirs_duration
    assert ours[f"{DURATION.name}_sum"][url] == pytest.approx(sum(latencies) / 1e9)


def test_counters_follow_slow_cookers_meanings() -> None:
    tally = MetricsTally(2)
    for status, url in [(200, 0), (200, 0), (204, 1), (301, 1), (404, 0), (503, 0), (503, 1), (101, 0)]:
        tally.record(response(2 * MS, status, url))
    tally.record(Result(url_index=1, error="refused", error_text="connection refused"))
    tally.record(Result(url_index=1, error="refused", error_text="connection refused"))
    tally.record(Result(url_index=0, error="timeout", error_text="timed out"))
    tally.record(Result(url_index=0, skipped=True))
    s = scrape(tally)
    assert s["requests"][()] == 11  # every result, failures included, skips not (they were never sent)
    assert s["successes"][()] == 5  # 200-499 only
    assert s["latency_ms_count"][()] == 5 and s["latency_ms_sum"][()] == pytest.approx(10)  # good responses only
    a, b = URLS[0], "http://b.example:8080/path?q=1"  # no user name or password in a label
    assert s["soak_requests_total"] == {
        (("status_class", "1xx"), ("url", a)): 1, (("status_class", "2xx"), ("url", a)): 2,
        (("status_class", "4xx"), ("url", a)): 1, (("status_class", "5xx"), ("url", a)): 1,
        (("status_class", "failed"), ("url", a)): 1, (("status_class", "2xx"), ("url", b)): 1,
        (("status_class", "3xx"), ("url", b)): 1, (("status_class", "5xx"), ("url", b)): 1,
        (("status_class", "failed"), ("url", b)): 2,
    }
    assert sum(s["soak_requests_total"].values()) == s["requests"][()]
    assert s["soak_failures_total"] == {(("kind", "timeout"), ("url", a)): 1, (("kind", "refused"), ("url", b)): 2}
    assert s["soak_skipped_total"][()] == 1
    assert s["soak_request_duration_seconds_count"] == {(("url", a),): 5, (("url", b),): 3}  # good and bad


def test_open_model_latency_counts_from_the_due_time() -> None:
    late = Result(url_index=0, due_ns=START - 5 * MS, start_ns=START, headers_ns=START + MS, end_ns=START + MS,
                  status=200)
    closed, corrected = MetricsTally(1), MetricsTally(1, corrected=True)
    closed.record(late)
    corrected.record(late)
    assert scrape(closed)["latency_ms_sum"][()] == pytest.approx(1)
    assert scrape(corrected)["latency_ms_sum"][()] == pytest.approx(6)


def test_snapshot_is_a_copy() -> None:
    tally = MetricsTally(1)
    tally.record(response(MS))
    copy = tally.snapshot()
    tally.record(response(MS))
    tally.record(Result(error="refused"))
    assert sum(copy.statuses[0]) == 1 and not copy.failures and sum(copy.good[0]) == 1


def test_figures_and_the_verdict_as_gauges() -> None:
    figures = Figures()
    s = scrape(MetricsTally(1), figures)
    assert s["soak_run_finished"][()] == 0 and "soak_thresholds_passed" not in s
    assert "soak_target_requests_per_second" not in s and "soak_interval_latency_seconds" not in s
    info = RunInfo(settings_from(merge({"qps": 50, "concurrency": 2, "interval": "1s"})), URLS, None, START,
                   1_767_225_600.0)
    out = io.StringIO()
    verdict = Verdict.for_settings(settings_from(merge({"thresholds": ["p99 < 1s", "errors% <= 0"]})), out)
    reporter = MetricsReporter(figures, verdict)
    reporter.start(info)
    tally = Tally()
    for _ in range(45):
        tally.add(Result(status=200), 3 * MS, 0)
    for _ in range(5):
        tally.add(Result(error="refused", error_text="x"), 0, 0)
    reporter.interval(info, Interval(0, START, START + 1_000_000_000, tally))
    s = scrape(MetricsTally(1), figures)
    assert s["soak_target_requests_per_second"][()] == 50 and s["soak_concurrency"][()] == 2
    assert s["soak_start_time_seconds"][()] == 1_767_225_600.0
    assert s["soak_intervals_total"][()] == 1
    assert s["soak_interval_end_time_seconds"][()] == 1_767_225_601.0
    assert s["soak_interval_requests_per_second"][()] == 50
    assert s["soak_interval_goal_ratio"][()] == 0.9 and s["soak_interval_errors_ratio"][()] == 0.1
    assert s["soak_interval_latency_seconds"][(("quantile", "0.99"),)] == 0.003
    assert s["soak_interval_max_latency_seconds"][()] == 0.003
    assert verdict is not None
    summary = RunSummary(info, 1, START + 10**9, START + 10**9, tally, None, None, None, "iterations", 0.1, 1)
    verdict.finish(summary)
    reporter.finish(summary)
    s = scrape(MetricsTally(1), figures)
    assert s["soak_run_finished"][()] == 1
    assert s["soak_thresholds_passed"][()] == 0
    assert s["soak_threshold_passed"] == {(("rule", "p99 < 1s"), ("scope", "run")): 1,
                                          (("rule", "errors% <= 0"), ("scope", "run")): 0}


def test_both_exposition_formats_parse() -> None:
    """Prometheus asks for OpenMetrics when it can: that format must hold these families too."""
    tally = MetricsTally(2)
    tally.record(response(MS))
    tally.record(response(MS, 503, 1))
    tally.record(Result(url_index=1, error="refused"))
    registry = CollectorRegistry(auto_describe=False)
    registry.register(SoakCollector(tally, Figures(target_rate=10, last=None), URLS))
    families = {f.name: f for f in parse_openmetrics(generate_openmetrics(registry).decode())}
    assert families["requests"].type == "unknown" and families["requests"].samples[0].value == 3
    assert families["soak_requests"].type == "counter"
    assert families["latency_ms"].type == "histogram"
    text = generate_latest(registry).decode()
    assert "# TYPE requests untyped\nrequests 3.0\n" in text  # the series name slow_cooker exposes
    assert "# TYPE successes untyped\nsuccesses 1.0\n" in text


def test_status_class_and_url_label() -> None:
    assert [status_class(s) for s in (100, 200, 299, 302, 404, 503, 599, 999, 0, 1000)] == [
        "1xx", "2xx", "2xx", "3xx", "4xx", "5xx", "5xx", "9xx", "other", "other"]
    assert url_label("http://u:p@h:1/x?y#z") == "http://h:1/x?y#z"
    assert url_label("https://h/") == "https://h/"


def mixed_results(rng: random.Random, n: int) -> list[Result]:
    """Good, bad and failed sends to both URLs, and skips, with latencies from 50 us to 2 s."""
    results = []
    for _ in range(n):
        kind = rng.random()
        url = rng.randrange(2)
        if kind < 0.05:
            results.append(Result(url_index=url, skipped=True, due_ns=START, end_ns=START))
        elif kind < 0.1:
            results.append(Result(url_index=url, due_ns=START, start_ns=START, end_ns=START + MS,
                                  error=rng.choice(["refused", "timeout"])))
        else:
            results.append(response(int(rng.lognormvariate(13, 2)) + 50_000, rng.choice([200, 200, 404, 503]), url))
    return results


@pytest.mark.parametrize("seed", range(3))
def test_workers_counts_summed_are_the_counts_of_one_process(seed: int) -> None:
    """A run split over workers, each counting its own results: the parent's sum of their latest
    counts exposes exactly what one process counting every result would."""
    results = mixed_results(random.Random(seed), 2000)
    whole, parts = MetricsTally(2), [MetricsTally(2) for _ in range(3)]
    for i, result in enumerate(results):
        whole.record(result)
        parts[i % 3].record(result)
    workers = WorkerTallies(2)
    for w, part in enumerate(parts):
        workers.update(w, part.snapshot())
    assert scrape(workers) == scrape(whole)
    assert scrape(WorkerTallies(2)) == scrape(MetricsTally(2))  # before any worker has said anything


def test_a_workers_newer_counts_replace_its_older_ones() -> None:
    """Workers send their counts so far, not what is new: the sum takes each worker's latest once."""
    workers, tally = WorkerTallies(1), MetricsTally(1)
    tally.record(response(MS))
    workers.update(0, tally.snapshot())
    tally.record(response(MS))
    workers.update(0, tally.snapshot())
    workers.update(1, tally.snapshot())
    assert scrape(workers)["requests"][()] == 4
    assert summed([], 1).statuses == MetricsTally(1).statuses


def test_metrics_with_local_workers_take_their_counts_from_the_workers() -> None:
    settings = settings_from(merge({"metricAddr": "127.0.0.1:0", "workers": 2}))
    metrics = Metrics(settings, URLS, None, io.StringIO())
    try:
        assert metrics.tap is None and isinstance(metrics.workers, WorkerTallies)
    finally:
        metrics.close()


@pytest.mark.parametrize("addr", ["127.0.0.1:0x", "1.2.3.4:", ":0", ":65536", "host", "a b:80"])
def test_bad_metric_addresses_are_refused_by_the_schema(addr: str) -> None:
    from runner.schema import validate

    with pytest.raises(UsageError, match="metricAddr.*is not allowed; must be host:port or :port"):
        validate({"metricAddr": addr}, lambda e: "--metricAddr")


@pytest.mark.parametrize("addr", ["", ":9090", "127.0.0.1:9090", "[::1]:9090", "localhost:65535", "pod-0.svc:1"])
def test_good_metric_addresses(addr: str) -> None:
    assert settings_from(merge({"metricAddr": addr})).metric_addr == addr


def test_a_url_listed_twice_is_one_series() -> None:
    """URL lists keep duplicates (to weight a URL); its series must still be one, or a
    Pushgateway refuses every push (HTTP 400, 'inconsistent'). Credentials are not in labels,
    so URLs that differ only in them are one series too."""
    urls = ["http://a.example/", "http://u:p@b.example/", "http://a.example/", "http://v:q@b.example/"]
    tally = MetricsTally(4)
    for url in range(4):
        tally.record(response(MS, url=url))
        tally.record(Result(url_index=url, due_ns=START, start_ns=START, end_ns=START + MS, error="refused"))
    registry = CollectorRegistry(auto_describe=False)
    registry.register(SoakCollector(tally, Figures(), urls))
    text = generate_latest(registry).decode()
    samples = [line for line in text.splitlines() if line and not line.startswith("#")]
    assert len(samples) == len(set(samples)) and len({s.rsplit(" ", 1)[0] for s in samples}) == len(samples)
    assert 'soak_requests_total{status_class="2xx",url="http://a.example/"} 2.0' in samples
    assert 'soak_failures_total{kind="refused",url="http://b.example/"} 2.0' in samples
    assert 'soak_request_duration_seconds_count{url="http://b.example/"} 2.0' in samples


def test_the_pod_index_of_a_plain_indexed_job_is_its_completion_index() -> None:
    """Shards 1 in an Indexed Job: every pod runs the whole load; grouped under index 0 they
    overwrote each other's pushes, verdicts included."""
    from runner.pushgateway import pod_index
    from runner.shards import Shard

    assert pod_index(Shard(0, 1, 0, 1), {"JOB_COMPLETION_INDEX": "2"}) == "2"
    assert pod_index(Shard(0, 1, 0, 1), {}) == "0"
    assert pod_index(Shard(0, 1, 0, 1), {"JOB_COMPLETION_INDEX": "x"}) == "0"
    assert pod_index(Shard(1, 3, 0, 1), {"JOB_COMPLETION_INDEX": "1"}) == "1"
