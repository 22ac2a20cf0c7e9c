"""The monitoring component against the real parts: soaks push, Prometheus scrapes, every query is checked.

Four short soaks (the CLI, 3 intervals of 1 s, run at once) push to a real Pushgateway, each in a job of
its own; a real Prometheus (Debian's) scrapes it every second with honor_labels and evaluates
the alerts' rule file. Then every query of the dashboard (its template variables substituted)
and every alert's expression is evaluated through Prometheus' HTTP API and checked against the
runs' own JSON summaries, and the alerts Prometheus itself raised are checked too.

    soak         nginx's page; every threshold kept (the default pushgatewayJob)
    soak-broken  a refused port and nginx's /fail (503): errors, about half the goal, thresholds broken
    soak-slow    the fault server's /slow/600: every response takes 600 ms, above SoakP99High's 500 ms
    soak-teapot  nginx's /teapot: every response a 418, which is no error (only 1xx, 5xx and failures are)

In each run one URL gets every response and at most one other every failure, so each URL's
figures follow from the run's summary. Every check holds whatever the machine's load: the
expectations come from each run's own summary, never from how fast it went.
"""

from __future__ import annotations

import json
import math
import re
import time
from collections import Counter
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime

import pytest
import yaml
from hdrh.histogram import HdrHistogram

from runner.metrics.tally import DURATION
from tests.conftest import REPO, Nginx, assert_counts_add_up, run_soak
from tests.support.faultserver import FaultServer, refused_port
from tests.support.prometheus import Prometheus, QueryError, backfill
from tests.support.pushgateway import Pushgateway

pytestmark = pytest.mark.nginx

MONITORING = REPO / "manifests" / "components" / "monitoring"
RULES = MONITORING / "soak-alerts.rules.yaml"
EDGES = DURATION.bounds  # soak_request_duration_seconds' bucket edges, in seconds

Labels = tuple[tuple[str, str], ...]
Series = dict[Labels, float]


def labels(**pairs: str) -> Labels:
    return tuple(sorted(pairs.items()))


@dataclass(frozen=True)
class Soaked:
    """One run: its Pushgateway job, its summary, the URL that got every response, the one refused."""

    job: str
    summary: dict
    responder: str
    refused: str | None = None

    @property
    def urls(self) -> list[str]:
        return [self.responder] + ([self.refused] if self.refused else [])

    @property
    def end(self) -> float:
        """When its last interval ended: the schedule's, its start plus its intervals of 1 s."""
        assert self.summary["config"]["interval"] == "1s" and self.summary["stopReason"] == "iterations"
        return datetime.fromisoformat(self.summary["start"]).timestamp() + self.summary["intervals"]

    @property
    def last(self) -> dict:
        return self.summary["intervalStats"][-1]

    @property
    def responses(self) -> int:
        return self.summary["good"] + self.summary["bad"]

    def seconds(self, value: float) -> float:
        assert self.summary["latencyUnit"] == "us"
        return value / 1e6


@dataclass
class Monitored:
    prometheus: Prometheus
    runs: list[Soaked]
    at: float  # when every query is evaluated: after the runs' final figures were scraped


def soak(pushgateway: Pushgateway, job: str, qps: str, *args: str) -> dict:
    job_flag = [] if job == "soak" else ["--pushgatewayJob", job]  # "soak" is the runner's default
    run = run_soak("--qps", qps, "--concurrency", "2", "--interval", "1s", "--iterations", "3", "--latencyUnit", "us",
                   "--pushgateway", pushgateway.url, *job_flag, *args, timeout=90)
    assert run.returncode in (0, 3), run.stdout + run.stderr
    assert "pushgateway" not in run.stderr  # every push arrived
    return assert_counts_add_up(run.stdout)


# Job soak's finished run of a week ago, as the rules recorded it: the dashboard's "a week before".
WEEK_P99, WEEK_GOAL = 0.0123, 97.5
WEEK_S = 7 * 86400


def a_week_ago(url: str, now: float) -> list[tuple[str, dict[str, str], list[tuple[float, float]]]]:
    """The recorded figures of job soak's run a week before `now`: up from 10 to 5 minutes before that."""
    times = [now - WEEK_S - 600 + 30 * k for k in range(11)]
    return [("job_url:soak_request_duration_seconds:p99_finished", {"job": "soak", "url": url}, [(t, WEEK_P99) for t in times]),
            ("job_url:soak_goal_percent:finished", {"job": "soak", "url": url}, [(t, WEEK_GOAL) for t in times])]


@pytest.fixture(scope="module")
def monitored(nginx: Nginx, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Monitored]:
    pushgateway = Pushgateway()
    fault = FaultServer().start()
    blocker = refused_port()
    prometheus = None
    try:
        storage = tmp_path_factory.mktemp("prometheus")
        backfill(storage, a_week_ago(nginx.url, time.time()))
        prometheus = Prometheus(storage, [f"127.0.0.1:{pushgateway.port}"], [RULES])
        refused = f"http://127.0.0.1:{blocker.getsockname()[1]}/"
        slow = fault.url("/slow/600")
        # The four soaks at once, each in its job: 3 s in all rather than 12, and nothing here
        # depends on their pace (every expectation is from a run's own summary).
        with ThreadPoolExecutor(4) as pool:
            summaries = list(pool.map(lambda args: soak(pushgateway, *args), [
                ("soak", "50", "--thresholds", "errors% <= 0", "--intervalThresholds", "p99 < 10s", nginx.url),
                ("soak-broken", "20", "--thresholds", "errors% <= 1", refused, f"{nginx.url}fail"),
                ("soak-slow", "2", slow),
                ("soak-teapot", "20", "--thresholds", "errors% <= 0", f"{nginx.url}teapot"),
            ]))
        runs = [
            Soaked("soak", summaries[0], nginx.url),
            Soaked("soak-broken", summaries[1], f"{nginx.url}fail", refused),
            Soaked("soak-slow", summaries[2], slow),
            Soaked("soak-teapot", summaries[3], f"{nginx.url}teapot"),
        ]
        for run in runs:  # Prometheus has scraped each run's final push, and the rules recorded the finished run
            prometheus.wait_for(lambda run=run: prometheus.query(
                f'soak_intervals_total{{job="{run.job}"}} == {run.summary["intervals"]} '
                f'and on (job) soak_run_finished == 1', prometheus.now()), 30, f"{run.job}'s final figures scraped")
            for record in ("job_url:soak_request_duration_seconds:p99_finished", "job_url:soak_goal_percent:finished"):
                prometheus.wait_for(lambda run=run, record=record: prometheus.query(
                    f'{record}{{job="{run.job}"}}', prometheus.now()), 30, f"{run.job}'s {record}")
        yield Monitored(prometheus, runs, prometheus.now())
    finally:
        if prometheus is not None:
            prometheus.stop()
        fault.stop()
        pushgateway.stop()
        blocker.close()


# --- What each dashboard query must return, from the run's summary ----------------------------

PanelCheck = Callable[[Soaked, Series], None]
PANEL_CHECKS: dict[tuple[str, str], PanelCheck] = {}


def expects(title: str, ref_id: str) -> Callable[[PanelCheck], PanelCheck]:
    def register(check: PanelCheck) -> PanelCheck:
        PANEL_CHECKS[title, ref_id] = check
        return check
    return register


def close(got: float, want: float, tolerance: float, what: str) -> None:
    assert abs(got - want) <= tolerance, f"{what}: {got} is not {want} (within {tolerance})"


def equal(got: Series, want: dict[Labels, float], what: str, tolerance: float = 1e-9) -> None:
    assert set(got) == set(want), f"{what}: series {sorted(got)}, expected {sorted(want)}"
    for key, value in want.items():
        close(got[key], value, tolerance, f"{what} {key}")


def histogram_quantile(q: float, cumulative: list[float], total: float) -> float:
    """Prometheus' histogram_quantile over buckets with upper edges EDGES (then +Inf), step for step."""
    buckets = [*zip(EDGES, cumulative, strict=True), (math.inf, total)]
    if total == 0:
        return math.nan
    rank = q * total
    b = next(i for i, (_, count) in enumerate(buckets[:-1]) if count >= rank) if buckets[-2][1] >= rank \
        else len(buckets) - 1
    if b == len(buckets) - 1:
        return buckets[-2][0]
    start, (end, count) = 0.0, buckets[b]
    if b > 0:
        start = buckets[b - 1][0]
        count -= buckets[b - 1][1]
        rank -= buckets[b - 1][1]
    return start + (end - start) * rank / count


def quantile_range(run: Soaked, q: float) -> tuple[float, float]:
    """What histogram_quantile(q) over soak_request_duration_seconds must return, from the summary's
    own latency histogram (HDR, 3 significant digits): each HDR bucket's responses counted below an
    edge or above it, or, for the few that straddle one, either way; the estimate lies between."""
    hdr = HdrHistogram.decode(run.summary["histogram"]["hdr"])
    assert run.summary["histogram"]["unit"] == "ns" and hdr.get_total_count() == run.responses
    edges_ns = [DURATION.last_ns(edge) for edge in EDGES]  # the largest latency each bucket counts
    surely, maybe = [0] * len(EDGES), [0] * len(EDGES)
    for item in hdr.get_recorded_iterator():
        low = hdr.get_lowest_equivalent_value(item.value_iterated_to)
        high = hdr.get_highest_equivalent_value(item.value_iterated_to)
        for i, edge in enumerate(edges_ns):
            surely[i] += item.count_at_value_iterated_to if high <= edge else 0
            maybe[i] += item.count_at_value_iterated_to if low <= edge else 0
    return histogram_quantile(q, maybe, run.responses), histogram_quantile(q, surely, run.responses)


def assert_quantile(estimate: float, run: Soaked, q: float, what: str) -> None:
    low, high = quantile_range(run, q)
    assert low - 1e-12 <= estimate <= high + 1e-12, f"{what}: {estimate} s is not in [{low}, {high}]"
    # and so within the bucket resolution of the summary's own exact figure, when both name the same
    # response: Prometheus' quantile is the ceil(q * n)-th response, HDR's (the summary's) the
    # round(q * n)-th, and with few responses (60: the 60th against the 59th) they may differ
    n = run.responses
    if math.ceil(q * n) != max(1, int(q * n + 0.5)):
        return
    key = {0.5: "p50", 0.95: "p95", 0.99: "p99", 1.0: "max"}[q]
    exact = run.seconds(run.summary[key])
    slack = exact * 0.002 + 1e-6  # HDR's 3 significant digits, the summary's three decimals
    edges = [0.0, *EDGES, math.inf]
    buckets = [(edges[i - 1], edges[i]) for i in range(1, len(edges))
               if edges[i - 1] < exact + slack and exact - slack <= edges[i]]
    assert any(low <= estimate <= high for low, high in buckets), (what, estimate, exact, buckets)


def latency_by_url(q: float) -> PanelCheck:
    def check(run: Soaked, got: Series) -> None:
        assert set(got) == {labels(url=url) for url in run.urls}, got
        assert_quantile(got[labels(url=run.responder)], run, q, f"{run.job} quantile {q}")
        if run.refused:  # no response at all: no latency
            assert math.isnan(got[labels(url=run.refused)])
    return check


for _title, _q in [("p50 by URL", 0.5), ("p95 by URL", 0.95), ("p99 by URL", 0.99), ("max by URL (bucket edge)", 1.0)]:
    expects(_title, "A")(latency_by_url(_q))


def verdict(run: Soaked) -> dict[Labels, float]:
    thresholds = run.summary.get("thresholds")
    return {(): float(thresholds["passed"])} if thresholds else {}


@expects("Last run's verdict", "A")
def _verdict(run: Soaked, got: Series) -> None:
    equal(got, verdict(run), "verdict")


@expects("Verdict per run, rule by rule", "A")
def _verdict_again(run: Soaked, got: Series) -> None:
    equal(got, verdict(run), "verdict")


@expects("Verdict per run, rule by rule", "B")
def _rules(run: Soaked, got: Series) -> None:
    rules = (run.summary.get("thresholds") or {}).get("rules", [])
    equal(got, {labels(rule=r["rule"], scope=r["scope"]): float(r["ok"]) for r in rules}, "rules")


@expects("Run state", "A")
def _finished(run: Soaked, got: Series) -> None:
    equal(got, {(): 1.0}, "finished")


@expects("Intervals closed", "A")
def _intervals(run: Soaked, got: Series) -> None:
    equal(got, {(): float(run.summary["intervals"])}, "intervals")


@expects("Latency per interval", "A")
def _interval_quantiles(run: Soaked, got: Series) -> None:
    keys = ("p50", "p95", "p99", "p999")
    assert set(got) == {labels(percentile=key) for key in keys}
    for key in keys:
        want = run.seconds(run.last[key])
        close(got[labels(percentile=key)], want, 1e-6 + want * 1e-3, f"{run.job} last interval {key}")


@expects("Latency per interval", "B")
def _interval_max(run: Soaked, got: Series) -> None:
    want = run.seconds(run.last["max"])
    equal(got, {(): want}, "last interval max", 1e-6 + want * 1e-3)


@expects("goal%", "A")
def _interval_goal(run: Soaked, got: Series) -> None:
    equal(got, {(): run.last["goalPercent"]}, "last interval goal%", 1)  # the line's goal% is a whole percent


@expects("goal%", "B")
def _run_goal(run: Soaked, got: Series) -> None:
    equal(got, {(): run.summary["goalPercent"]}, "run goal%", 1)


@expects("Requests per second", "A")
def _interval_rate(run: Soaked, got: Series) -> None:
    assert run.last["interval"] == "1s"
    equal(got, {(): run.last["good"] + run.last["bad"] + run.last["failed"]}, "last interval requests/s", 1e-6)


@expects("Requests per second", "B")
def _target_rate(run: Soaked, got: Series) -> None:
    equal(got, {(): run.summary["rate"]["target"]}, "target rate")


@expects("errors% per interval", "A")
def _interval_errors(run: Soaked, got: Series) -> None:
    last = run.last
    requests = last["good"] + last["bad"] + last["failed"]
    equal(got, {(): 100 * (last["bad"] + last["failed"]) / requests} if requests else {}, "last interval errors%")


def classes(run: Soaked) -> Counter[str]:
    found: Counter[str] = Counter()
    for code, n in run.summary["statusCodes"].items():
        found[f"{int(code) // 100}xx"] += n
    return found


def bad_classes(run: Soaked) -> Counter[str]:
    return Counter({c: n for c, n in classes(run).items() if c not in ("2xx", "3xx", "4xx")})


@expects("Requests by URL and status class", "A")
def _requests(run: Soaked, got: Series) -> None:
    want = {labels(url=run.responder, status_class=c): float(n) for c, n in classes(run).items()}
    if run.refused:
        want[labels(url=run.refused, status_class="failed")] = float(run.summary["failed"])
    equal(got, want, "requests")


@expects("errors% by URL", "A")
def _errors_by_url(run: Soaked, got: Series) -> None:
    want = {labels(url=run.responder): 100 * run.summary["bad"] / run.responses}
    if run.refused:
        want[labels(url=run.refused)] = 100.0
    equal(got, want, "errors% by URL")


@expects("Failed sends by URL and kind", "A")
def _failures(run: Soaked, got: Series) -> None:
    equal(got, {labels(url=run.refused, kind=k): float(n) for k, n in run.summary["errors"].items()} if run.refused
          else {}, "failures by kind")


@expects("Bad responses by URL and status class", "A")
def _bad(run: Soaked, got: Series) -> None:
    equal(got, {labels(url=run.responder, status_class=c): float(n) for c, n in bad_classes(run).items()}, "bad")


@expects("Skipped sends, clients, URLs counted as other", "A")
def _skipped(run: Soaked, got: Series) -> None:
    equal(got, {(): float(run.summary["skipped"])}, "skipped")


@expects("Skipped sends, clients, URLs counted as other", "B")
def _clients(run: Soaked, got: Series) -> None:
    equal(got, {(): float(run.summary["config"]["concurrency"])}, "clients")


@expects("Skipped sends, clients, URLs counted as other", "C")
def _others(run: Soaked, got: Series) -> None:
    equal(got, {(): 0.0}, "URLs counted as other")


@expects("Late sends", "A")
def _late(run: Soaked, got: Series) -> None:
    equal(got, {(): float(run.summary["late"])}, "late sends")


@expects("Client saturated", "A")
def _saturated(run: Soaked, got: Series) -> None:
    equal(got, {(): float(run.last["clientSaturated"])}, "last interval client saturated")


@expects("p99 by URL: this week and a week before", "A")
def _finished_p99(run: Soaked, got: Series) -> None:
    assert set(got) == {labels(url=run.responder)}, got  # a URL without a response has no p99 recorded
    assert_quantile(got[labels(url=run.responder)], run, 0.99, f"{run.job} recorded p99")


@expects("p99 by URL: this week and a week before", "B")
def _finished_p99_a_week_before(run: Soaked, got: Series) -> None:
    equal(got, {labels(url=run.responder): WEEK_P99} if run.job == "soak" else {}, "p99 a week before")


@expects("goal%: this week and a week before", "A")
def _finished_goal(run: Soaked, got: Series) -> None:
    equal(got, {(): run.summary["goalPercent"]}, "recorded goal%", 1)


@expects("goal%: this week and a week before", "B")
def _finished_goal_a_week_before(run: Soaked, got: Series) -> None:
    equal(got, {(): WEEK_GOAL} if run.job == "soak" else {}, "goal% a week before")


SINCE_END = ("Since the last run ended", "A")  # checked against the evaluation time, below


# --- The dashboard and the rules, read ---------------------------------------------------------


def dashboard() -> dict:
    return json.loads((MONITORING / "dashboard.json").read_text())


def targets() -> list[tuple[str, str, str]]:
    """(panel title, refId, expr) of every query of the dashboard."""
    found = []
    for panel in dashboard()["panels"]:
        assert panel["type"] == "row" or panel.get("targets"), panel["title"]
        found += [(panel["title"], t["refId"], t["expr"]) for t in panel.get("targets", [])]
    return found


def alert_rules() -> list[dict]:
    return [rule for group in yaml.safe_load(RULES.read_text())["groups"] for rule in group["rules"] if "alert" in rule]


def recording_rules() -> list[dict]:
    return [rule for group in yaml.safe_load(RULES.read_text())["groups"] for rule in group["rules"] if "record" in rule]


def variable_query(variable: dict) -> tuple[str, str]:
    """A template variable's `label_values(series, label)`: the series selector and the label."""
    found = re.fullmatch(r"label_values\((.*), (\w+)\)", variable["definition"])
    assert found and variable["query"]["query"] == variable["definition"], variable
    return found[1], found[2]


def substituted(expr: str, job: str, url: str = ".*") -> str:
    """The query as Grafana sends it: $job and $url replaced (a regex, escaped as Grafana escapes it)."""
    done = expr.replace("$job", job).replace("$url", url)
    assert "$" not in done, f"a template variable the test does not know: {expr}"
    return done


def grafana_regex(value: str) -> str:
    return re.escape(value).replace("\\", "\\\\")  # in a PromQL string, each backslash doubled


_NOT_NAMES = {"by", "without", "on", "ignoring", "group_left", "group_right", "and", "or", "unless", "bool",
              "offset", "inf", "nan", "le", "time"}


def series_names(expr: str) -> set[str]:
    """Every metric name an expression reads: identifiers outside strings, matchers, ranges and
    grouping clauses that are not functions (followed by a parenthesis) nor keywords."""
    text = re.sub(r'"(?:[^"\\]|\\.)*"|`[^`]*`', '""', expr)
    text = re.sub(r"\{[^}]*\}|\[[^\]]*\]", " ", text)
    text = re.sub(r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", " ", text)
    text = re.sub(r"\boffset\s+\w+", " ", text)
    names = re.findall(r"(?<![\w.:])([a-zA-Z_:][a-zA-Z0-9_:]*)\b(?!\s*\()", text)
    return {name for name in names if name.lower() not in _NOT_NAMES}


LEVEL = re.compile(r"([<>])=?\s*(-?\d+(?:\.\d+)?)\b")


def relaxed(expr: str) -> str:
    """The expression with its levels (a number after > or <) made always true: its values, unfiltered."""
    return LEVEL.sub(lambda m: "> -Inf" if m[1] == ">" else "< Inf", expr)


# --- The tests ---------------------------------------------------------------------------------


def test_every_dashboard_query_has_its_expected_values() -> None:
    """Each query of the dashboard is checked below: a new panel comes with its expectation."""
    assert {(title, ref) for title, ref, _ in targets()} == set(PANEL_CHECKS) | {SINCE_END}


def test_every_query_reads_only_series_that_prometheus_has(monitored: Monitored) -> None:
    """A panel or an alert reading a series the runner does not export fails here, whatever else it does."""
    expressions = [expr for _, _, expr in targets()] + [rule["expr"] for rule in alert_rules() + recording_rules()]
    expressions += [variable_query(v)[0] for v in dashboard()["templating"]["list"] if v["type"] == "query"]
    names = set().union(*(series_names(expr) for expr in expressions))
    assert {"soak_thresholds_passed", "soak_request_duration_seconds_bucket", "push_time_seconds"} <= names
    # Native histograms come only by remote write (test_metrics_receivers.py has them in a real
    # Prometheus, and the rule that reads them): here, pushed runs, each is read only beside its
    # classic histogram, which must be there.
    native_only = {"soak_request_duration_seconds": "soak_request_duration_seconds_bucket"}
    for native, classic in native_only.items():
        assert all(classic in series_names(expr) for expr in expressions if native in series_names(expr)), native
    names = {native_only.get(name, name) for name in names}
    missing = sorted(name for name in names if monitored.prometheus.series_count(name) == 0)
    assert not missing, f"queried but not in Prometheus: {missing}"


def test_a_series_the_runner_does_not_export_is_caught() -> None:
    assert series_names('histogram_quantile(0.99, sum by (le) (rate(soak_client_lateness_seconds_bucket{job=~"x"}[5m])))'
                        ' / on (job) soak_x offset 1h') == {"soak_client_lateness_seconds_bucket", "soak_x"}


def test_the_template_variables_list_the_runs_jobs_and_urls(monitored: Monitored) -> None:
    variables = {v["name"]: v for v in dashboard()["templating"]["list"]}
    match, label = variable_query(variables["job"])
    assert label == "job"
    assert {run.job for run in monitored.runs} <= set(monitored.prometheus.label_values("job", match))
    match, label = variable_query(variables["url"])
    assert label == "url"
    for run in monitored.runs:
        assert set(monitored.prometheus.label_values("url", substituted(match, run.job))) == set(run.urls)


def test_every_dashboard_query_returns_the_runs_summaries(monitored: Monitored) -> None:
    for title, ref, expr in targets():
        returned = False
        for run in monitored.runs:
            got = monitored.prometheus.query(substituted(expr, run.job), monitored.at)
            returned = returned or bool(got)
            if (title, ref) == SINCE_END:
                equal(got, {(): monitored.at - run.end}, f"{run.job}: since the run ended", 0.01)
            else:
                try:
                    PANEL_CHECKS[title, ref](run, got)
                except AssertionError as e:
                    raise AssertionError(f"{title} ({ref}), job {run.job}: {e}\n{expr}") from None
            if "$url" in expr:  # one URL chosen: its series, and only those
                for url in run.urls:
                    one = monitored.prometheus.query(substituted(expr, run.job, grafana_regex(url)), monitored.at)
                    want = {key: value for key, value in got.items() if dict(key)["url"] == url}
                    assert set(one) == set(want), (title, url, one, want)
                    assert all(math.isnan(v) and math.isnan(want[k]) or v == want[k] for k, v in one.items())
        assert returned, f"{title} ({ref}) returns nothing for any run"


def alert_values(monitored: Monitored, rule: dict, relax: bool = False) -> Series:
    expr = relaxed(rule["expr"]) if relax else rule["expr"]
    try:
        return monitored.prometheus.query(expr, monitored.at)
    except QueryError as e:
        raise AssertionError(f"{rule['alert']}: {e}") from None


def test_every_alert_expression_against_the_runs(monitored: Monitored) -> None:
    rules = {rule["alert"]: rule for rule in alert_rules()}
    runs = monitored.runs
    checked = set()

    def values(name: str, relax: bool = False) -> Series:
        checked.add(name)
        return alert_values(monitored, rules[name], relax)

    def kept(series: Series, keep: Callable[[float], bool]) -> Series:
        return {key: value for key, value in series.items() if keep(value)}

    # a broken verdict: one alert per URL of the broken run, none for the kept one, none without thresholds
    broken = {labels(job=r.job, pod_index="0", url=u): 0.0 for r in runs
              if r.summary.get("thresholds") and not r.summary["thresholds"]["passed"] for u in r.urls}
    assert {dict(key)["job"] for key in broken} == {"soak-broken"}
    equal(values("SoakThresholdsBroken"), broken, "SoakThresholdsBroken")

    # every run just finished: nothing at 2 h; at any age, each run's age since its end
    assert values("SoakNoRunFinished") == {}
    equal(values("SoakNoRunFinished", relax=True),
          {labels(job=r.job, pod_index="0", url=u, last_run="finished"): monitored.at - r.end for r in runs for u in r.urls},
          "SoakNoRunFinished's age", 0.01)

    # job soak pushed: no alert; a job that never pushed is absent from the real series
    assert values("SoakNoFigures") == {}
    never = dict(rules["SoakNoFigures"], expr=rules["SoakNoFigures"]["expr"].replace('job="soak"', 'job="never"'))
    assert alert_values(monitored, never) == {labels(job="never"): 1.0}

    # goal%: the run's, for each of its URLs, as its summary has it; the alert below 95
    goals = values("SoakGoalLow", relax=True)
    equal(goals, {labels(job=r.job, pod_index="0", url=u): r.summary["goalPercent"] for r in runs for u in r.urls},
          "goal%", 1)
    equal(values("SoakGoalLow"), kept(goals, lambda v: v < 95), "SoakGoalLow")
    assert labels(job="soak-broken", pod_index="0", url=runs[1].refused) in values("SoakGoalLow")  # about half

    # p99 by URL, in the bucket of the summary's; the alert above 500 ms: the slow run's URL
    p99s = values("SoakP99High", relax=True)
    assert set(p99s) == {labels(job=r.job, url=r.responder) for r in runs}  # a refused URL has no latency
    for r in runs:
        assert_quantile(p99s[labels(job=r.job, url=r.responder)], r, 0.99, f"{r.job} p99")
    equal(values("SoakP99High"), kept(p99s, lambda v: v > 0.5), "SoakP99High")
    assert set(values("SoakP99High")) == {labels(job="soak-slow", url=runs[2].responder)}

    # errors% by URL: every send to the refused port, every /fail response; the alert above 1%
    errors = values("SoakErrorsHigh", relax=True)
    want = {labels(job=r.job, url=r.refused): 100.0 for r in runs if r.refused}
    want |= {labels(job=r.job, url=r.responder): 100 * r.summary["bad"] / r.responses for r in runs if r.summary["bad"]}
    equal(errors, want, "errors%")
    equal(values("SoakErrorsHigh"), kept(errors, lambda v: v > 1), "SoakErrorsHigh")
    assert set(values("SoakErrorsHigh")) == {labels(job="soak-broken", url=u) for u in runs[1].urls}

    # regressions compare a run with the one an hour before it: none here (test_monitoring_regressions.py has them)
    for name in ("SoakP99Regressed", "SoakGoalRegressed"):
        assert values(name) == {} and values(name, relax=True) == {}, name

    assert checked == set(rules), f"alerts not checked: {set(rules) - checked}"


def test_prometheus_raises_the_alerts_with_their_words(monitored: Monitored) -> None:
    """The rule file loaded into Prometheus: every rule evaluates without error, and the alerts it
    raises are exactly the expressions' answers, their annotations filled in."""
    prometheus = monitored.prometheus
    rules = alert_rules()
    expected = set()
    for rule in rules:
        for key in alert_values(monitored, rule):
            expected.add(tuple(sorted({**dict(key), "alertname": rule["alert"], **rule["labels"]}.items())))
    assert expected

    def raised() -> bool:
        return {tuple(sorted(a["labels"].items())) for a in prometheus.alerts()} == expected

    prometheus.wait_for(raised, 30, f"Prometheus' alerts: {expected}")
    for rule in prometheus.rules():
        assert rule["health"] == "ok" and not rule.get("lastError"), rule
    holds = {rule["alert"]: rule.get("for", "0s") for rule in rules}
    for alert in prometheus.alerts():
        name, url = alert["labels"]["alertname"], alert["labels"].get("url")
        assert alert["state"] == ("firing" if holds[name] in ("0s", "0m") else "pending"), alert
        for text in alert["annotations"].values():
            assert "<no value>" not in text and "error expanding" not in text and "{{" not in text, text
        if url:
            assert url in alert["annotations"]["summary"] and url in alert["annotations"]["description"]
    (broken,) = {a["annotations"]["description"] for a in prometheus.alerts()
                 if a["labels"]["alertname"] == "SoakThresholdsBroken" and a["labels"]["url"].endswith("/fail")}
    assert 'Broken: run rule "errors% <= 1".' in broken  # the broken rules, named by the query in its template


def test_a_query_that_prometheus_refuses_fails_the_test(monitored: Monitored) -> None:
    with pytest.raises(QueryError, match="parse error"):
        monitored.prometheus.query("sum by (url (soak_requests_total)", monitored.at)

