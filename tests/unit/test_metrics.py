"""The metrics: counting per result, and the families exposed, checked against prometheus_client itself."""

from __future__ import annotations

import io
import pickle
import random

import pytest
from prometheus_client import CollectorRegistry, Histogram, generate_latest
from prometheus_client.openmetrics.exposition import generate_latest as generate_openmetrics
from prometheus_client.openmetrics.parser import text_string_to_metric_families as parse_openmetrics
from prometheus_client.parser import text_string_to_metric_families

from runner.config.settings import merge, settings_from
from runner.core.errors import UsageError
from runner.load.model import Closed, Open
from runner.load.result import Result
from runner.load.schedule import Schedule, Skips
from runner.metrics.collector import Gauges, MetricsReporter, SoakCollector, status_class
from runner.metrics.tally import (
    DURATION,
    EDGES_NS,
    OTHER_URLS,
    SLOW_COOKER_HISTOGRAMS,
    URL_SERIES_CAP,
    MetricsTally,
    UrlSlots,
    WorkerTallies,
    exponential_buckets,
    summed,
    url_label,
    url_slots,
)
from runner.report.verdict import Verdict
from runner.stats.client import ClientFigures
from runner.stats.histogram import LatencyHistogram
from runner.stats.recorder import Interval, Tally
from runner.stats.runinfo import RunInfo, RunSummary

START = 9_000_000_000_000
MS = 1_000_000
URLS = ["http://a.example/", "http://user:secret@b.example:8080/path?q=1"]
ONE, TWO = url_slots(URLS[:1]), url_slots(URLS)


def response(latency_ns: int, status: int = 200, url: int = 0, due_ns: int | None = None) -> Result:
    return Result(url_index=url, due_ns=START if due_ns is None else due_ns, start_ns=START,
                  headers_ns=START + latency_ns, end_ns=START + latency_ns + 1000, status=status)


def scrape(tally: MetricsTally | WorkerTallies, gauges: Gauges | None = None,
           slots: UrlSlots | None = None) -> dict[str, dict]:
    """name -> {labels tuple: value} of every sample, as Prometheus would read the text format;
    the tally's slots are ONE's or TWO's unless told."""
    registry = CollectorRegistry(auto_describe=False)
    slots = slots or url_slots(URLS[:len(tally.snapshot().good)])
    registry.register(SoakCollector(tally, gauges or Gauges(), slots))
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
    samples = scrape(MetricsTally(ONE, Closed()))
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
    tally = MetricsTally(ONE, Closed())
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
    tally = MetricsTally(TWO, Closed())
    for status, url in [(200, 0), (200, 0), (204, 1), (301, 1), (404, 0), (503, 0), (503, 1), (101, 0)]:
        tally.record(response(2 * MS, status, url))
    tally.record(Result(url_index=1, error="refused", error_text="connection refused"))
    tally.record(Result(url_index=1, error="refused", error_text="connection refused"))
    tally.record(Result(url_index=0, error="timeout", error_text="timed out"))
    tally.record(Skips(Schedule(START, 1.0, 1), 0, 0, 1))
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


def test_every_status_is_counted_in_its_class() -> None:
    """Each status of 0-1099 once: a hundred per class, the ones outside 100-999 as "other"."""
    tally = MetricsTally(ONE, Closed())
    for status in range(1100):
        tally.record(response(MS, status))
    classes = {dict(k)["status_class"]: v for k, v in scrape(tally)["soak_requests_total"].items()}
    assert classes == {**{f"{k}xx": 100 for k in range(1, 10)}, "other": 200}


def test_open_model_latency_counts_from_the_due_time() -> None:
    late = Result(url_index=0, due_ns=START - 5 * MS, start_ns=START, headers_ns=START + MS, end_ns=START + MS,
                  status=200)
    closed, corrected = MetricsTally(ONE, Closed()), MetricsTally(ONE, Open(1000))
    closed.record(late)
    corrected.record(late)
    assert scrape(closed)["latency_ms_sum"][()] == pytest.approx(1)
    assert scrape(corrected)["latency_ms_sum"][()] == pytest.approx(6)


def test_snapshot_is_a_copy() -> None:
    tally = MetricsTally(ONE, Closed())
    tally.record(response(MS))
    copy = tally.snapshot()
    tally.record(response(MS))
    tally.record(Result(error="refused"))
    assert sum(copy.statuses[0]) == 1 and not copy.failures and sum(copy.good[0]) == 1


def test_late_sends_are_counted_as_the_client_lag_says() -> None:
    tally = MetricsTally(ONE, Closed())
    on_time = Result(due_ns=START, start_ns=START + MS, headers_ns=START + 2 * MS, end_ns=START + 2 * MS, status=200)
    late = Result(due_ns=START, start_ns=START + 2 * MS, headers_ns=START + 3 * MS, end_ns=START + 3 * MS, status=200)
    waited = Result(due_ns=START, free_ns=START + 30 * MS, start_ns=START + 31 * MS, end_ns=START + 40 * MS,
                    error="refused")  # late for the server's doing: it waited for the request before
    for result in (on_time, late, waited, Skips(Schedule(START, 1.0, 1), 0, 0, 1)):
        tally.record(result)
    assert tally.late == 1 and scrape(tally)["soak_late_sends_total"][()] == 1


def test_connections_taken_over_from_a_warmup_count_as_opened() -> None:
    """As in the summary (Recorder.took_over): the run closes them, so it counts them as opened too."""
    tally = MetricsTally(ONE, Closed())
    tally.took_over(["HTTP/1.1", "HTTP/1.1"], START - MS)
    tally.record(Result(start_ns=START, headers_ns=START + MS, end_ns=START + MS, status=200, connections_closed=1))
    samples = scrape(tally)
    assert samples["soak_connections_opened_total"][()] == 2 and samples["soak_connections_closed_total"][()] == 1


def test_figures_and_the_verdict_as_gauges() -> None:
    figures = Gauges()
    s = scrape(MetricsTally(ONE, Closed()), figures)
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
    reporter.interval(info, Interval(0, START, START + 1_000_000_000, tally, due=50.0))
    s = scrape(MetricsTally(ONE, Closed()), figures)
    assert s["soak_target_requests_per_second"][()] == 50 and s["soak_concurrency"][()] == 2
    assert s["soak_start_time_seconds"][()] == 1_767_225_600.0
    assert s["soak_intervals_total"][()] == 1
    assert s["soak_interval_end_time_seconds"][()] == 1_767_225_601.0
    assert s["soak_interval_requests_per_second"][()] == 50
    assert s["soak_interval_goal_ratio"][()] == 0.9 and s["soak_interval_errors_ratio"][()] == 0.1
    assert s["soak_interval_latency_seconds"][(("percentile", "p99"),)] == 0.003
    assert s["soak_interval_max_latency_seconds"][()] == 0.003
    assert s["soak_interval_client_saturated"][()] == 0 and s["soak_interval_loop_lag_seconds"][()] == 0
    lagging = ClientFigures.measured(0.5, 1_000_000_000, LatencyHistogram())
    lagging.loop_lag.record(200 * MS)  # stalled 200 ms: the 5 sends it skipped may be its own doing
    skipped = Tally(skipped=5)
    skipped.merge(tally)
    reporter.interval(info, Interval(1, START + 1_000_000_000, START + 2_000_000_000, skipped, client=lagging,
                                     due=50.0, terms=info.pace_terms))
    s = scrape(MetricsTally(ONE, Closed()), figures)
    assert s["soak_interval_client_saturated"][()] == 1 and s["soak_interval_client_cpu_ratio"][()] == 0.5
    assert s["soak_interval_loop_lag_seconds"][()] == pytest.approx(0.2, rel=1e-3)
    assert verdict is not None
    summary = RunSummary(info, 1, START + 10**9, START + 10**9, tally, None, None, None, "iterations", 0.1, 1)
    verdict.finish(summary)
    reporter.finish(summary)
    s = scrape(MetricsTally(ONE, Closed()), figures)
    assert s["soak_run_finished"][()] == 1
    assert s["soak_thresholds_passed"][()] == 0
    assert s["soak_threshold_passed"] == {(("rule", "p99 < 1s"), ("scope", "run")): 1,
                                          (("rule", "errors% <= 0"), ("scope", "run")): 0}


def test_status_rules_are_exported_as_every_rule_is() -> None:
    """soak_threshold_passed names each rule as written: a status rule, `==` and scope included."""
    figures = Gauges()
    rules = ["errors% <= 1", "4xx% <= 1", "401% == 0", "5xx% == 0", "4xx%{url=/} <= 50"]
    verdict = Verdict.for_settings(settings_from(merge({"thresholds": rules})), io.StringIO())
    reporter = MetricsReporter(figures, verdict)
    info = RunInfo(settings_from(merge({"qps": 50, "interval": "1s"})), URLS, None, START, 1_767_225_600.0)
    reporter.start(info)
    tally = Tally()
    for status in (200, 200, 200, 401):
        tally.add(Result(status=status), 3 * MS, 0)
    reporter.interval(info, Interval(0, START, START + 1_000_000_000, tally, due=4.0))
    summary = RunSummary(info, 1, START + 10**9, START + 10**9, tally, None, None, None, "iterations", 0.1, 1)
    assert verdict is not None
    verdict.finish(summary)
    reporter.finish(summary)
    s = scrape(MetricsTally(ONE, Closed()), figures)
    assert s["soak_thresholds_passed"][()] == 0
    assert s["soak_threshold_passed"] == {(("rule", rule), ("scope", "run")): ok
                                          for rule, ok in zip(rules, (1, 0, 0, 1, 1), strict=True)}


def test_both_exposition_formats_parse() -> None:
    """Prometheus asks for OpenMetrics when it can: that format must hold these families too."""
    tally = MetricsTally(TWO, Closed())
    tally.record(response(MS))
    tally.record(response(MS, 503, 1))
    tally.record(Result(url_index=1, error="refused"))
    registry = CollectorRegistry(auto_describe=False)
    registry.register(SoakCollector(tally, Gauges(target_rate=10, last=None), TWO))
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


def mixed_results(rng: random.Random, n: int) -> list[Result | Skips]:
    """Good, bad and failed sends to both URLs, and skips, with latencies from 50 us to 2 s."""
    results: list[Result | Skips] = []
    for _ in range(n):
        kind = rng.random()
        url = rng.randrange(2)
        if kind < 0.05:
            results.append(Skips(Schedule(START, 1.0, 1), 0, 0, 1))
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
    whole, parts = MetricsTally(TWO, Closed()), [MetricsTally(TWO, Closed()) for _ in range(3)]
    for i, result in enumerate(results):
        whole.record(result)
        parts[i % 3].record(result)
    workers = WorkerTallies(TWO)
    for w, part in enumerate(parts):
        workers.update(w, part.snapshot())
    assert scrape(workers) == scrape(whole)
    assert scrape(WorkerTallies(TWO)) == scrape(MetricsTally(TWO, Closed()))  # before any worker has said anything


def test_a_workers_newer_counts_replace_its_older_ones() -> None:
    """Workers send their counts so far, not what is new: the sum takes each worker's latest once."""
    workers, tally = WorkerTallies(ONE), MetricsTally(ONE, Closed())
    tally.record(response(MS))
    workers.update(0, tally.snapshot())
    tally.record(response(MS))
    workers.update(0, tally.snapshot())
    workers.update(1, tally.snapshot())
    assert scrape(workers)["requests"][()] == 4
    assert summed([], ONE).statuses == MetricsTally(ONE, Closed()).statuses




@pytest.mark.parametrize("addr", ["127.0.0.1:0x", "1.2.3.4:", ":0", ":65536", "host", "a b:80"])
def test_bad_metric_addresses_are_refused_by_the_schema(addr: str) -> None:
    from runner.config.schema import validate

    with pytest.raises(UsageError, match="metricAddr.*is not allowed; must be host:port or :port"):
        validate({"metricAddr": addr}, lambda e: "--metricAddr")


@pytest.mark.parametrize("addr", ["", ":9090", "127.0.0.1:9090", "[::1]:9090", "localhost:65535", "pod-0.svc:1"])
def test_good_metric_addresses(addr: str) -> None:
    assert settings_from(merge({"metricAddr": addr})).metrics.addr == addr


def test_a_url_listed_twice_is_one_series() -> None:
    """URL lists keep duplicates (to weight a URL); its series must still be one, or a
    Pushgateway refuses every push (HTTP 400, 'inconsistent'). Credentials are not in labels,
    so URLs that differ only in them are one series too."""
    urls = ["http://a.example/", "http://u:p@b.example/", "http://a.example/", "http://v:q@b.example/"]
    tally = MetricsTally(url_slots(urls), Closed())
    for url in range(4):
        tally.record(response(MS, url=url))
        tally.record(Result(url_index=url, due_ns=START, start_ns=START, end_ns=START + MS, error="refused"))
    registry = CollectorRegistry(auto_describe=False)
    registry.register(SoakCollector(tally, Gauges(), url_slots(urls)))
    text = generate_latest(registry).decode()
    samples = [line for line in text.splitlines() if line and not line.startswith("#")]
    assert len(samples) == len(set(samples)) and len({s.rsplit(" ", 1)[0] for s in samples}) == len(samples)
    assert 'soak_requests_total{status_class="2xx",url="http://a.example/"} 2.0' in samples
    assert 'soak_failures_total{kind="refused",url="http://b.example/"} 2.0' in samples
    assert 'soak_request_duration_seconds_count{url="http://b.example/"} 2.0' in samples


def test_the_pod_index_of_a_plain_indexed_job_is_its_completion_index() -> None:
    """Shards 1 in an Indexed Job: every pod runs the whole load; grouped under index 0 they
    overwrote each other's pushes, verdicts included."""
    from runner.load.shards import Shard
    from runner.metrics.push import pod_index

    assert pod_index(Shard(0, 1, 0, 1), {"JOB_COMPLETION_INDEX": "2"}) == "2"
    assert pod_index(Shard(0, 1, 0, 1), {}) == "0"
    assert pod_index(Shard(0, 1, 0, 1), {"JOB_COMPLETION_INDEX": "x"}) == "0"
    assert pod_index(Shard(1, 3, 0, 1), {"JOB_COMPLETION_INDEX": "1"}) == "1"


def numbered(count: int) -> list[str]:
    return [f"http://a.example/{n}" for n in range(count)]


def test_urls_beyond_the_cap_share_one_label() -> None:
    """The first URL_SERIES_CAP distinct labels in the list's order get a slot each; a URL listed
    again (or with other credentials) keeps its label's slot wherever it appears; the rest are "other"."""
    urls = numbered(URL_SERIES_CAP + 30)
    urls[3] = "http://u:p@a.example/3"
    urls += ["http://v:q@a.example/3", "http://a.example/0", urls[-1]]
    slots = url_slots(urls)
    assert slots.labels == (*(f"http://a.example/{n}" for n in range(URL_SERIES_CAP)), OTHER_URLS)
    assert slots.slot_of[:URL_SERIES_CAP] == tuple(range(URL_SERIES_CAP))
    assert set(slots.slot_of[URL_SERIES_CAP:URL_SERIES_CAP + 30]) == {URL_SERIES_CAP}
    assert slots.slot_of[-3:] == (3, 0, URL_SERIES_CAP)
    assert slots.others == 30
    few = url_slots(numbered(URL_SERIES_CAP) * 2)  # at the cap, duplicates included: no "other" at all
    assert OTHER_URLS not in few.labels and few.others == 0 and len(few.labels) == URL_SERIES_CAP
    assert url_slots(["http://a/", "http://b/", "http://c/"], cap=2).labels == ("http://a/", "http://b/", OTHER_URLS)


def every_kind(count: int) -> tuple[MetricsTally, UrlSlots]:
    """A tally of `count` URLs, each answered well (200) and badly (503) once and refused once."""
    slots = url_slots(numbered(count))
    tally = MetricsTally(slots, Closed())
    for url in range(count):
        tally.record(response(MS, 200, url))
        tally.record(response(MS, 503, url))
        tally.record(Result(url_index=url, due_ns=START, start_ns=START, end_ns=START + MS, error="refused"))
    return tally, slots


def sample_lines(tally: MetricsTally, slots: UrlSlots) -> list[str]:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(SoakCollector(tally, Gauges(), slots))
    return [line for line in generate_latest(registry).decode().splitlines() if line and not line.startswith("#")]


def total(samples: dict[str, dict], name: str, **labels: str) -> float:
    """The sum of a metric's series whose labels include `labels`."""
    return sum(v for k, v in samples.get(name, {}).items() if labels.items() <= dict(k).items())


@pytest.mark.parametrize("count", [URL_SERIES_CAP + 1, 500, 40_000])
def test_the_series_count_does_not_grow_with_the_url_list(count: int) -> None:
    """Every URL answered well, badly and not at all: the same series, whether the list has 21 URLs
    or 40,000 (850,000 series once, and 470 MB of counts), and the counts take room for the cap
    only. The aggregate's counts and the named URLs' add up to every result."""
    tally, slots = every_kind(count)
    assert len(tally.statuses) == len(tally.good) == len(tally.good_ns) == URL_SERIES_CAP + 1
    assert len(sample_lines(tally, slots)) == len(sample_lines(*every_kind(URL_SERIES_CAP + 1)))
    s = scrape(tally, slots=slots)
    beyond = count - URL_SERIES_CAP
    assert total(s, "soak_requests_total") == s["requests"][()] == 3 * count
    assert total(s, "soak_requests_total", url=OTHER_URLS) == 3 * beyond
    assert total(s, "soak_requests_total", url=OTHER_URLS, status_class="5xx") == beyond
    assert total(s, "soak_failures_total", url=OTHER_URLS, kind="refused") == beyond
    assert s["soak_request_duration_seconds_count"][(("url", OTHER_URLS),)] == 2 * beyond
    assert s["soak_request_duration_seconds_count"][(("url", "http://a.example/0"),)] == 2
    assert s["soak_other_urls"][()] == beyond
    assert {dict(k)["url"] for k in s["soak_request_duration_seconds_count"]} == set(slots.labels)


def test_what_a_worker_sends_home_does_not_grow_with_the_url_list() -> None:
    """A worker pickles a copy of its counts home with every interval: the same size for 40,000
    URLs as for 21 (it once held a 1,000-entry list per URL, 40 million counts an interval)."""
    small, large = (MetricsTally(url_slots(numbered(n)), Closed()) for n in (URL_SERIES_CAP + 1, 40_000))
    assert len(pickle.dumps(large.snapshot())) == len(pickle.dumps(small.snapshot()))


@pytest.mark.parametrize("seed", range(2))
def test_workers_counts_summed_beyond_the_cap(seed: int) -> None:
    """Workers each map URLs to slots from the same list: their sum is one process's counts, "other" included."""
    rng = random.Random(seed)
    slots = url_slots(numbered(300))
    whole, parts = MetricsTally(slots, Closed()), [MetricsTally(slots, Closed()) for _ in range(2)]
    for i, result in enumerate(mixed_results(rng, 3000)):
        if isinstance(result, Result):
            result.url_index = rng.randrange(300)
        whole.record(result)
        parts[i % 2].record(result)
    workers = WorkerTallies(slots)
    for w, part in enumerate(parts):
        workers.update(w, part.snapshot())
    assert scrape(workers, slots=slots) == scrape(whole, slots=slots)
    assert total(scrape(workers, slots=slots), "soak_requests_total", url=OTHER_URLS) > 0


def test_a_shard_reaches_the_urls_its_send_numbers_land_on() -> None:
    """Shard.urls against brute force: the URLs (n mod U) of the sends offset, offset + stride, ..."""
    from runner.load.shards import Shard

    for count in range(1, 13):
        for shards in range(1, 7):
            for workers in range(1, 4):
                for index in range(shards):
                    for worker in range(workers):
                        part = Shard(index, shards, worker, workers)
                        sends = range(part.offset, part.offset + part.stride * 2 * count, part.stride)
                        assert list(part.urls(count)) == sorted({n % count for n in sends}), (part, count)
    assert [list(Shard(s, 3).urls(3)) for s in range(3)] == [[0], [1], [2]]
    assert list(Shard(1, 2).urls(4)) == [1, 3] and list(Shard(0, 3).urls(4)) == [0, 1, 2, 3]


def test_a_shard_exports_only_the_urls_it_sends_to() -> None:
    """Three shards of three URLs send one URL each: each shard's metrics have series for it alone,
    a URL that got only failures included, and the slots (and labels) every shard shares."""
    from runner.load.shards import Shard
    from runner.metrics.tally import reached_by

    urls = ["http://a.example/", "http://b.example/", "http://c.example/"]
    for index in range(3):
        slots = reached_by(url_slots(urls), Shard(index, 3).urls(len(urls)))
        assert slots.labels == url_slots(urls).labels
        tally = MetricsTally(slots)
        tally.record(Result(url_index=index, due_ns=START, start_ns=START, end_ns=START + MS, error="refused"))
        samples = scrape(tally, slots=slots)
        exported = {dict(labels)["url"] for name, series in samples.items() for labels in series
                    if "url" in dict(labels)}
        assert exported == {urls[index]}, index
        assert samples["soak_request_duration_seconds_count"] == {(("url", urls[index]),): 0.0}
    whole = MetricsTally(url_slots(urls))  # not split: every URL has its series, zeros too
    assert len(scrape(whole, slots=url_slots(urls))["soak_request_duration_seconds_count"]) == 3


def test_shard_0_deletes_the_groups_of_pods_beyond_the_run() -> None:
    from runner.load.shards import Shard
    from runner.metrics.push import cleans_from, stale_indexes

    groups = {"status": "success", "data": [
        {"labels": {"job": "soak", "pod_index": str(i)}} for i in range(6)] + [
        {"labels": {"job": "other", "pod_index": "4"}}, {"labels": {"job": "soak", "pod_index": "7", "x": "y"}},
        {"labels": {"job": "soak", "pod_index": "a"}}, {"labels": {"job": "soak"}}, "junk"]}
    assert stale_indexes(groups, "soak", 3) == ["3", "4", "5"]
    assert stale_indexes(groups, "soak", 6) == [] and stale_indexes({"data": None}, "soak", 1) == []
    assert stale_indexes("not json's object", "soak", 1) == []
    assert cleans_from(Shard(0, 3), {}) == 3 and cleans_from(Shard(1, 3), {}) is None
    assert cleans_from(Shard(0, 1), {}) == 1  # a run alone: no other pod's group is its own
    assert cleans_from(Shard(0, 1), {"JOB_COMPLETION_INDEX": "0"}) is None  # an Indexed Job of whole loads: unknown
