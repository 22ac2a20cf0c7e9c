"""The threshold rules: reading them, measuring them, and telling early that one cannot hold."""

from __future__ import annotations

import json
import math
import random

import pytest

from runner.config.rules import (
    BACKENDS_KEPT,
    LATENCIES,
    METRICS,
    STATUS_CLASSES,
    Rule,
    ThresholdError,
    is_percentage,
    number,
    parse_rule,
    rules_for,
    status_codes,
)
from runner.core.errors import UsageError
from runner.load.result import Result
from runner.stats.figures import NO_BACKEND, OTHER_BACKENDS, Figures, backends_reached
from runner.stats.record import tally_from_record, tally_record
from runner.stats.recorder import Tally
from runner.stats.thresholds import UNBOUNDED, Plan, Span, bounds, measure

MS = 1_000_000
US = 1_000
SECOND = 1_000_000_000


def span_of(tally: Tally, seconds: float, target: float | None, whole: bool = True, shares: int = 1) -> Span:
    """A span as the rules see it: `target` sends due over `seconds`."""
    return Span(Figures.of(tally, target, round(seconds * 1e9)), whole, shares)


def tally_of(latencies_ns: list[int], *, bad: int = 0, failed: int = 0, skipped: int = 0) -> Tally:
    """Good responses with these latencies, then `bad` 503s of 1 ms, failures and skips."""
    tally = Tally()
    for latency in latencies_ns:
        tally.add(Result(status=200), latency, 0)
    for _ in range(bad):
        tally.add(Result(status=503), MS, 0)
    for _ in range(failed):
        tally.add(Result(error="refused", error_text="connection refused"), 0, 0)
    for _ in range(skipped):
        tally.skipped += 1
    return tally


# --- reading rules -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "metric", "op", "limit", "unit"),
    [
        ("p99 < 50ms", "p99", "<", 50 * MS, "ms"),
        ("p99<50ms", "p99", "<", 50 * MS, "ms"),
        ("  p99   <=   50 ms ", "p99", "<=", 50 * MS, "ms"),
        ("p50 < 800us", "p50", "<", 800 * US, "us"),
        ("p50 < 800µs", "p50", "<", 800 * US, "us"),
        ("p75 < 2s", "p75", "<", 2e9, "s"),
        ("p90 < 1500ns", "p90", "<", 1500, "ns"),
        ("p95 < 0.5s", "p95", "<", 5e8, "s"),
        ("p999 <= 200ms", "p999", "<=", 200 * MS, "ms"),
        ("p99.9 <= 200ms", "p999", "<=", 200 * MS, "ms"),
        ("p(99.9) <= 200ms", "p999", "<=", 200 * MS, "ms"),
        ("p(95) < 20ms", "p95", "<", 20 * MS, "ms"),
        ("P99 < 1s", "p99", "<", 1e9, "s"),
        ("max < 1s", "max", "<", 1e9, "s"),
        ("mean < .5ms", "mean", "<", 5e5, "ms"),
        ("goal% >= 99", "goal%", ">=", 99, "%"),
        ("goal >= 99.5%", "goal%", ">=", 99.5, "%"),
        ("errors% <= 0.1", "errors%", "<=", 0.1, "%"),
        ("errors <= 0.1%", "errors%", "<=", 0.1, "%"),
        ("failed% <= 0", "failed%", "<=", 0, "%"),
        ("bad% < 1", "bad%", "<", 1, "%"),
        ("skipped% <= 1", "skipped%", "<=", 1, "%"),
        ("goal% >= 100", "goal%", ">=", 100, "%"),
        ("errors% < 100", "errors%", "<", 100, "%"),
        ("max <= 0ns", "max", "<=", 0, "ns"),
        ("rate > 0", "rate", ">", 0, "req/s"),
        ("rate >= 95", "rate", ">=", 95, "req/s"),
        ("rate >= 95/s", "rate", ">=", 95, "req/s"),
        ("rate > 95 req/s", "rate", ">", 95, "req/s"),
        ("rate > 95rps", "rate", ">", 95, "req/s"),
    ],
)
def test_rules_read_as_written(text: str, metric: str, op: str, limit: float, unit: str) -> None:
    rule = parse_rule(text)
    assert (rule.metric, rule.op, rule.unit, rule.scope) == (metric, op, unit, "run")
    assert rule.limit == pytest.approx(limit)
    assert rule.text == " ".join(text.split())
    assert parse_rule(text, "interval").scope == "interval"


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("", "must be a metric, a comparison and a number"),
        ("p99", "must be a metric, a comparison and a number"),
        ("p99 <", "must be a metric, a comparison and a number"),
        ("< 50ms", "must be a metric, a comparison and a number"),
        ("p99 < fast", "must be a metric, a comparison and a number"),
        ("p99 < -5ms", "must be a metric, a comparison and a number"),
        ("p99 < 50ms and p95 < 20ms", "must be a metric, a comparison and a number"),
        ("p98 < 50ms", 'unknown metric "p98"'),
        ("latency < 50ms", 'unknown metric "latency"'),
        ("status{401} == 0", 'a status is judged as its share of the responses, written like "401% == 0"'),
        ("STATUS{4xx} <= 1", 'a status is judged as its share of the responses, written like "401% == 0"'),
        ("p(98) < 50ms", 'unknown metric "p(98)"'),
        ("p99 == 50ms", "p99 is measured, never exactly one value: use <, <=, > or >="),
        ("p99 = 50ms", "the comparison must be <, <=, >, >= or =="),
        ("p99 != 50ms", "the comparison must be <, <=, >, >= or =="),
        ("p99 < 50", "p99 is a latency: give its unit, ns, us, ms or s"),
        ("max < 50kb", '"kb" is not a unit of time'),
        ("p99 < 50%", '"%" is not a unit of time'),
        ("errors% <= 0.1ms", 'errors% is a percentage: write a number like "errors% <= 0.1"'),
        ("goal% >= 101", "goal% is a percentage, from 0 to 100, so this rule can never hold"),
        ("p99 < 1\u0661ms", '"\u0661ms" is not a unit of time'),  # an Arabic-Indic digit is not a digit here
        ("p99 < \u0661ms", "must be a metric, a comparison and a number"),
        ("p\uff19\uff19 < 1ms", 'unknown metric "p\uff19\uff19"'),  # fullwidth digits
        ("p99 < 1_0ms", '"_0ms" is not a unit of time'),
        ("rate >= 95ms", "rate is in requests per second"),
    ],
)
def test_bad_rules_say_what_is_wrong_in_one_line(text: str, says: str) -> None:
    with pytest.raises(ThresholdError) as raised:
        parse_rule(text)
    assert says in str(raised.value)
    assert "\n" not in str(raised.value)


NEVER_OR_ALWAYS = [
    # can never hold: no measured value keeps them
    ("skipped% > 100", "skipped% is a percentage, from 0 to 100, so this rule can never hold"),
    ("goal% > 100", "goal% is a percentage, from 0 to 100, so this rule can never hold"),
    ("errors% < 0", "errors% is a percentage, from 0 to 100, so this rule can never hold"),
    ("max < 0ns", "max is a latency, never below 0, so this rule can never hold"),
    ("p99 < 0ms", "p99 is a latency, never below 0, so this rule can never hold"),
    ("rate < 0", "rate is in requests per second, never below 0, so this rule can never hold"),
    # always hold: no measured value breaks them
    ("goal% <= 100", "goal% is a percentage, from 0 to 100, so this rule always holds and checks nothing"),
    ("errors% <= 150", "errors% is a percentage, from 0 to 100, so this rule always holds and checks nothing"),
    ("skipped% < 101", "skipped% is a percentage, from 0 to 100, so this rule always holds and checks nothing"),
    ("bad% >= 0", "bad% is a percentage, from 0 to 100, so this rule always holds and checks nothing"),
    ("p999 >= 0s", "p999 is a latency, never below 0, so this rule always holds and checks nothing"),
    ("rate >= 0/s", "rate is in requests per second, never below 0, so this rule always holds and checks nothing"),
]


@pytest.mark.parametrize(("text", "says"), NEVER_OR_ALWAYS)
def test_a_rule_that_can_never_break_or_never_hold_is_refused(text: str, says: str) -> None:
    """`skipped% > 100` and `max < 0ns` were accepted while `goal% >= 101` was refused: one rule for all."""
    with pytest.raises(ThresholdError) as raised:
        parse_rule(text)
    assert str(raised.value) == says


@pytest.mark.parametrize("metric", ["errors", "goal", "failed", "bad", "skipped", "Errors"])
def test_a_percentage_without_its_percent_sign_is_refused(metric: str) -> None:
    """`errors <= 1` silently meant `errors% <= 1`, though a reader may take it for one error; with a
    `%` after the number it says what it means, and is read."""
    with pytest.raises(ThresholdError) as raised:
        parse_rule(f"{metric} <= 1")
    assert str(raised.value) == (f'{metric} without % could be a count or a percentage; rules measure percentages '
                                 f'of the sends: write "{metric.lower()}% <= 1"')
    assert parse_rule(f"{metric} <= 1%").metric == f"{metric.lower()}%"


def test_every_metric_can_be_read() -> None:
    for metric in METRICS:
        unit = "ms" if metric in LATENCIES else ""
        assert parse_rule(f"{metric} < 1{unit}").metric == metric


def test_rules_for_puts_run_rules_first_and_refuses_goal_in_a_bench() -> None:
    rules = rules_for(["p99 < 5ms"], ["goal% >= 99", "errors% <= 1"], "soak")
    assert [(r.scope, r.text) for r in rules] == [("run", "p99 < 5ms"), ("interval", "goal% >= 99"),
                                                  ("interval", "errors% <= 1")]
    assert len(rules_for(["errors% <= 1"], [], "bench")) == 1
    with pytest.raises(UsageError, match='thresholds: "goal% >= 99" is not allowed in bench mode'):
        rules_for(["goal% >= 99"], [], "bench")
    with pytest.raises(UsageError, match="intervalThresholds"):
        rules_for([], ["goal% >= 99"], "bench")


@pytest.mark.parametrize(
    ("text", "holds", "breaks"),
    [("p99 < 50ms", 49.9 * MS, 50 * MS), ("p99 <= 50ms", 50 * MS, 50.001 * MS),
     ("goal% > 99", 99.01, 99), ("goal% >= 99", 99, 98.99)],
)
def test_comparisons(text: str, holds: float, breaks: float) -> None:
    rule = parse_rule(text)
    assert rule.holds(holds) and not rule.holds(breaks)


def test_measured_latencies_are_shown_in_the_unit_that_keeps_their_precision() -> None:
    """Whatever unit the rule is in: `12.346ms`, not `0.012s` or `12345.678us`."""
    for rule in ("p99 < 50ms", "p99 < 50us", "p99 < 1s"):
        assert parse_rule(rule).show(12_345_678) == "12.346ms"
    assert parse_rule("max < 1s").show(1234) == "1.234us"
    assert parse_rule("max < 1s").show(999) == "999ns"
    assert parse_rule("max < 1ms").show(1_500_000_000) == "1.5s"
    assert parse_rule("max < 1ms").show(999_999_700) == "1s", "rounded up to the next unit, not `1000ms`"
    assert parse_rule("max < 1ms").show(999_400_000) == "999.4ms"
    assert parse_rule("errors% <= 1").show(0.5) == "0.5%"
    assert parse_rule("errors% <= 1").show(0) == "0%"
    assert parse_rule("rate >= 1").show(99.95) == "99.95 req/s"
    assert parse_rule("p99 < 50ms").in_unit(12_345_678) == 12.345678
    assert number(100.0) == "100" and number(0.0004) == "0.0004" and number(2.5) == "2.5"


# --- measuring -----------------------------------------------------------------------------------


def test_latencies_are_those_of_good_and_bad_responses() -> None:
    tally = tally_of([k * US for k in range(1, 1001)], bad=10)  # 1 us .. 1 ms, and ten 503s at 1 ms
    span = span_of(tally, 1.0, 1010)
    p50 = measure("p50", span)
    assert p50 is not None and 500 * US <= p50 <= 510 * US
    assert measure("max", span) == MS
    assert measure("mean", span) == pytest.approx(tally.mean_ns)
    for metric in LATENCIES:
        assert measure(metric, span_of(tally_of([], failed=3), 1.0, 3)) is None  # no response: nothing to measure


def test_percentages() -> None:
    tally = tally_of([MS] * 90, bad=6, failed=4, skipped=10)  # 100 requests, 110 sends due
    span = span_of(tally, 1.0, 110)
    assert measure("errors%", span) == 10
    assert measure("bad%", span) == 6
    assert measure("failed%", span) == 4
    assert measure("skipped%", span) == pytest.approx(100 / 11)
    assert measure("goal%", span) == pytest.approx(96 / 110 * 100)  # good + bad against t
    assert measure("rate", span) == 100
    assert measure("goal%", span_of(tally, 1.0, 50)) == 100  # capped, as goal% is in the lines


def test_nothing_to_measure_is_none() -> None:
    empty = span_of(Tally(), 0.0, 0)
    assert all(measure(metric, empty) is None for metric in METRICS)
    tally = tally_of([MS] * 10)
    assert measure("goal%", span_of(tally, 1.0, None)) is None  # a bench has no goal
    assert measure("goal%", span_of(tally, 0.1, 10, whole=False)) is None  # a partial interval
    assert measure("rate", span_of(tally, 0.1, 10, whole=False)) is None
    assert measure("errors%", span_of(tally, 0.1, 10, whole=False)) == 0  # counts are fair on any span


# --- telling early ---------------------------------------------------------------------------------


def can_hold(text: str, so_far: Tally, plan: Plan) -> bool:
    return parse_rule(text).can_hold(*bounds(parse_rule(text).metric, so_far, plan))


def test_errors_beyond_reach_even_if_every_remaining_send_succeeds() -> None:
    plan = Plan(sends=1000, target=1000, seconds=10)
    so_far = tally_of([MS] * 95, failed=5)  # 5 errors so far; at best 5 in 1000 = 0.5%
    assert can_hold("errors% <= 0.5", so_far, plan)
    assert not can_hold("errors% < 0.5", so_far, plan)
    assert not can_hold("errors% <= 0.4", so_far, plan)
    assert not can_hold("failed% <= 0.4", so_far, plan)
    assert can_hold("bad% <= 0", so_far, plan)
    assert can_hold("errors% <= 0.4", so_far, Plan(None, None, None))  # no planned end: never certain


def test_goal_beyond_reach_once_too_many_sends_are_lost() -> None:
    plan = Plan(sends=1000, target=1000, seconds=10)
    assert can_hold("goal% >= 99", tally_of([MS] * 80, failed=10), plan)  # at best 990 responses
    assert not can_hold("goal% >= 99", tally_of([MS] * 80, failed=11), plan)
    assert not can_hold("goal% >= 99", tally_of([MS] * 80, skipped=11), plan)
    assert can_hold("goal% >= 99", tally_of([MS] * 80, skipped=10), plan)


def test_skipped_and_rate_bounds() -> None:
    plan = Plan(sends=1000, target=1000, seconds=10)
    assert not can_hold("skipped% <= 1", tally_of([], skipped=11), plan)
    assert can_hold("skipped% <= 1", tally_of([], skipped=10), plan)
    assert not can_hold("rate >= 100", tally_of([MS] * 10, skipped=1), plan)  # at most 999 in 10 s
    assert can_hold("rate >= 99.9", tally_of([MS] * 10, skipped=1), plan)
    assert can_hold("rate >= 100", tally_of([MS] * 10, skipped=1), Plan(1000, 1000, None))


def test_in_a_counted_run_skipped_sends_do_not_use_up_the_count() -> None:
    """totalRequests counts sends made: 30 skipped early leave all 300 still to be made, so 10
    errors% among the first 70 can still end at 40/300 = 13.3% (a review's run that aborted at
    errors% <= 15, and passed without abortOnThreshold)."""
    plan = Plan(sends=300, target=None, seconds=None, counted=True)
    so_far = tally_of([MS] * 30, failed=40, skipped=30)
    assert can_hold("errors% <= 15", so_far, plan)
    assert not can_hold("errors% <= 13", so_far, plan)  # 40 of at most 300
    # goal% at best: 30 answered + the 230 sends to come, against t = 300 made + the 30 skipped so far
    assert can_hold("goal% >= 78", so_far, plan) and not can_hold("goal% >= 79", so_far, plan)
    assert not can_hold("skipped% <= 9", so_far, plan)  # at least 30 / 330
    assert can_hold("skipped% <= 10", so_far, plan)


def test_a_shard_judges_the_rate_of_the_whole_run() -> None:
    """A shard of 2 sends half the run's rate; `rate >= 95` is about the run, so its 50 req/s
    count as 100 (every pod of a healthy 100 req/s run failed its Job with 50 req/s BROKEN)."""
    half = tally_of([MS] * 500)
    assert parse_rule("rate >= 95").holds(measure("rate", span_of(half, 10.0, 500.0, shares=2)))
    assert not parse_rule("rate >= 95").holds(measure("rate", span_of(half, 10.0, 500.0)))
    assert can_hold("rate >= 95", half, Plan(sends=1000, target=1000, seconds=20, shares=2))


def test_latency_bounds_assume_every_remaining_response_is_instant() -> None:
    plan = Plan(sends=1000, target=1000, seconds=10)
    slow = tally_of([100 * MS] * 11)  # 11 of at most 1000 responses at 100 ms
    assert not can_hold("p99 < 100ms", slow, plan)  # more than 1% are already that slow
    assert can_hold("p99 < 100ms", tally_of([100 * MS] * 9), plan)
    assert not can_hold("max < 100ms", tally_of([100 * MS]), plan)
    assert not can_hold("max < 100ms", tally_of([100 * MS]), Plan(None, None, None))  # max never falls
    assert can_hold("mean <= 1ms", tally_of([100 * MS] * 10), plan)  # 1 s over 1000 responses: 1 ms at best
    assert not can_hold("mean < 1ms", tally_of([100 * MS] * 10), plan)
    assert can_hold("p99 < 100ms", slow, Plan(None, None, None))


def test_bounds_are_exact_when_nothing_is_left() -> None:
    so_far = tally_of([k * US for k in range(1, 101)], bad=5, failed=5, skipped=2)
    plan = Plan(sends=so_far.requests + so_far.skipped, target=112, seconds=1.0)
    span = span_of(so_far, 1.0, 112)
    for metric in METRICS:
        low, high = bounds(metric, so_far, plan)
        measured = measure(metric, span)
        assert measured is not None
        if metric in LATENCIES and metric not in ("max", "mean"):
            assert low <= measured == high, metric  # a percentile's bound is one rank lower, to be safe
        else:
            assert low == pytest.approx(measured) and high == pytest.approx(measured), metric


@pytest.mark.parametrize("seed", range(20))
def test_a_run_that_can_still_pass_is_never_called_lost(seed: int) -> None:
    """Whatever the run does next, if it passes at the end, no earlier bound said it could not."""
    import random

    rng = random.Random(seed)
    sends = 400
    plan = Plan(sends=sends, target=sends, seconds=4.0)
    rules = [parse_rule(text) for text in ("p99 < 5ms", "p90 <= 3ms", "mean < 2ms", "max < 20ms", "errors% <= 2",
                                           "goal% >= 97", "skipped% <= 1", "rate >= 97", "failed% < 1.5")]
    so_far = Tally()
    history: list[dict[Rule, bool]] = []
    for _ in range(sends):
        kind = rng.random()
        if kind < 0.01:
            so_far.add(Result(error="refused", error_text="x"), 0, 0)
        elif kind < 0.02:
            so_far.skipped += 1
        else:
            so_far.add(Result(status=200), int(rng.expovariate(1 / MS)), 0)
        if len(history) < so_far.requests // 10:  # every tenth send, as an interval would close
            history.append({rule: rule.can_hold(*bounds(rule.metric, so_far, plan)) for rule in rules})
    final = span_of(so_far, 4.0, sends)
    for rule in rules:
        measured = measure(rule.metric, final)
        assert measured is not None
        if rule.holds(measured):
            assert all(step[rule] for step in history), rule.text


def test_rule_can_hold_looks_at_the_side_that_matters() -> None:
    rule = Rule("p99 < 5ms", "p99", "<", 5 * MS, "ms")
    assert rule.can_hold(4 * MS, math.inf) and not rule.can_hold(5 * MS, math.inf)
    rule = Rule("goal% >= 99", "goal%", ">=", 99, "%")
    assert rule.can_hold(0, 99) and not rule.can_hold(0, 98.9)


# --- rules scoped to a URL -------------------------------------------------------------------


@pytest.mark.parametrize(("text", "url"), [
    ("p99{url=/checkout} < 200ms", "/checkout"),
    ("p99 {url=/checkout}<200ms", "/checkout"),
    ('errors%{url="http://a.example/x?y=1"} <= 1', "http://a.example/x?y=1"),
    ("p(99.9){url='/a'} < 1s", "/a"),
    ("rate{url=/a} >= 5", "/a"),
])
def test_a_rule_scoped_to_a_url(text: str, url: str) -> None:
    rule = parse_rule(text)
    assert rule.url == url and rule.text == " ".join(text.split())
    assert parse_rule("p99 < 200ms").url is None


@pytest.mark.parametrize(("text", "message"), [
    ("p99{host=a} < 2ms", 'a rule is scoped to one URL by its path or whole URL, like "p99{url=/checkout} < 200ms"; '
                          "not {host=a}"),
    ("p99{url=} < 2ms", "a rule is scoped to one URL"),
    ("goal%{url=/a} >= 99", "goal% is the run's, not a URL's"),
    ("skipped%{url=/a} <= 1", "skipped% is the run's, not a URL's"),
])
def test_a_bad_scope_says_what_a_scope_is(text: str, message: str) -> None:
    with pytest.raises(ThresholdError) as caught:
        parse_rule(text)
    assert str(caught.value).startswith(message)


def test_a_scoped_interval_rule_is_refused() -> None:
    with pytest.raises(UsageError, match="a rule scoped to a URL is judged on the whole run; put it in thresholds"):
        rules_for([], ["p99{url=/a} < 2ms"], "soak")


def test_a_scope_matches_a_urls_path_or_the_whole_url() -> None:
    from runner.config.targets import URL_SERIES_CAP, matching, scope_problem

    urls = ["http://a.example/checkout", "http://b.example/checkout", "http://u:p@a.example/x?y=1", "http://c/"]
    assert matching("/checkout", urls) == [0, 1]  # the same path on two hosts: both
    assert matching("http://b.example/checkout", urls) == [1]
    assert matching("/x?y=1", urls) == matching("/x", urls) == matching("http://a.example/x?y=1", urls) == [2]
    assert matching("/", urls) == [3]
    assert scope_problem("/nope", urls).startswith("names no URL of the run")
    many = [f"http://h/{n}" for n in range(URL_SERIES_CAP + 1)]
    assert scope_problem(f"/{URL_SERIES_CAP - 1}", many) == ""
    assert "beyond the first 20" in scope_problem(f"/{URL_SERIES_CAP}", many)


# --- backends ------------------------------------------------------------------------------------


def answered_by(*backends: str) -> Tally:
    """A response from each of these backends ("" for one without the header)."""
    tally = Tally()
    for backend in backends:
        tally.add(Result(status=200), MS, 0, backend=backend)
    return tally


def test_backends_is_a_whole_count_without_a_unit_and_needs_a_backend_header() -> None:
    rule = parse_rule("backends >= 10")
    assert (rule.metric, rule.op, rule.limit, rule.unit) == ("backends", ">=", 10, "")
    assert rule.show(1) == "1 backend" and rule.show(7) == "7 backends" and rule.in_unit(7) == 7
    for text in ("backends >= 10ms", "backends >= 9.5", "backends >= 10%"):
        with pytest.raises(ThresholdError, match="^backends counts the backends that answered: write a whole number"):
            parse_rule(text)
    with pytest.raises(ThresholdError, match="always holds"):
        parse_rule("backends >= 0")
    with pytest.raises(ThresholdError, match="can never hold"):
        parse_rule("backends < 0")
    assert len(rules_for(["backends >= 10"], ["backends >= 2"], "soak", "X-Soak-Backend")) == 2
    for run, interval, setting in ((["backends >= 10"], [], "thresholds"), ([], ["backends >= 2"], "intervalThresholds")):
        with pytest.raises(UsageError, match=f'^{setting}: "backends >= .*" needs backendHeader'):
            rules_for(run, interval, "soak")


def test_backends_measures_the_names_that_answered() -> None:
    ten = answered_by(*(f"nginx-{i}" for i in range(10)), "nginx-3", "", "")  # "": no header, not a backend
    assert measure("backends", span_of(ten, 1.0, 13)) == 10
    assert parse_rule("backends >= 10").holds(10) and not parse_rule("backends >= 10").holds(9)
    failed = tally_of([], failed=3)  # every send failed: no backend reached, which the rule is there to catch
    assert measure("backends", span_of(failed, 1.0, 3)) == 0
    assert measure("backends", span_of(Tally(), 1.0, 0)) is None  # nothing sent
    assert measure("backends", span_of(ten, 0.1, 13, whole=False)) is None  # a partial interval: not judged


def test_a_backends_rule_beyond_the_names_counted_is_refused_with_one_line() -> None:
    """Backends are counted by name up to BACKENDS_KEPT (100), then as "at least 100": a rule whose
    verdict differs between 100 and more (`backends >= 101` always broke with 300 answering;
    `backends <= 100` held with 300) can never be judged right, so validate refuses it."""
    header = "X-Soak-Backend"
    for text in (f"backends >= {BACKENDS_KEPT}", f"backends < {BACKENDS_KEPT}", f"backends > {BACKENDS_KEPT - 1}",
                 f"backends <= {BACKENDS_KEPT - 1}", "backends >= 10"):
        assert rules_for([text], [text], "soak", header)
    for text in (f"backends >= {BACKENDS_KEPT + 1}", f"backends > {BACKENDS_KEPT}", f"backends <= {BACKENDS_KEPT}",
                 f"backends < {BACKENDS_KEPT + 1}", "backends >= 300"):
        for run, interval, setting in (([text], [], "thresholds"), ([], [text], "intervalThresholds")):
            with pytest.raises(UsageError) as refused:
                rules_for(run, interval, "soak", header)
            assert str(refused.value) == (
                f'{setting}: "{text}" is not allowed: backends are counted by name up to 100 and beyond that only as '
                '"at least 100", so this rule could not be judged: >= and < take a number up to 100, > and <= up to 99')
    rule = parse_rule("backends >= 50")
    assert rule.show(99) == "99 backends" and rule.show(BACKENDS_KEPT) == "at least 100 backends"


def test_backends_beyond_the_names_counted_read_as_100_whatever_the_order() -> None:
    """A response without the header, or the count of "other", took one of the 100 names' places: 300
    backends answering after a response without the header read as 99, and a tally read back from a
    record (its names sorted, "other" among them) as 98 or 99."""
    names = [f"pod-{i:03}" for i in range(300)]
    rng = random.Random(7)
    for _ in range(50):
        tallies = []
        for _ in range(rng.randint(1, 4)):
            tally = Tally()
            for name in rng.sample(names + [NO_BACKEND] * 20, rng.randint(1, 250)):
                tally.count_backend(name)
            tallies.append(tally)
        whole = Tally()
        for tally in tallies:
            whole.merge(tally_from_record(json.loads(json.dumps(tally_record(tally)))))
        for tally in (*tallies, whole):  # "other" only ever beside 100 names: 100 means at least 100
            assert (OTHER_BACKENDS in tally.backends) <= (backends_reached(tally.backends) == BACKENDS_KEPT)
        named = {b for t in tallies for b in t.backends if b not in (NO_BACKEND, OTHER_BACKENDS)}
        assert backends_reached(whole.backends) == min(len(named), BACKENDS_KEPT)
        assert sum(whole.backends.values()) == sum(sum(t.backends.values()) for t in tallies)
    first_none = Tally()
    for name in [NO_BACKEND, *names]:
        first_none.count_backend(name)
    assert backends_reached(first_none.backends) == BACKENDS_KEPT and first_none.backends[OTHER_BACKENDS] == 200


def test_backends_reached_never_fall_and_any_send_to_come_may_reach_one_more() -> None:
    so_far = answered_by("a", "b", "c")
    assert bounds("backends", so_far, Plan(sends=None, target=None, seconds=None)) == (3, math.inf)
    assert bounds("backends", so_far, Plan(sends=10, target=10, seconds=1.0)) == (3, math.inf)
    assert bounds("backends", so_far, Plan(sends=3, target=3, seconds=1.0)) == (3, 3)
    assert bounds("backends", so_far, Plan(sends=3, target=3, seconds=1.0, counted=True)) == (3, 3)
    assert not parse_rule("backends <= 2").can_hold(*bounds("backends", so_far, Plan(10, 10, 1.0)))  # broken already
    assert not parse_rule("backends >= 4").can_hold(*bounds("backends", so_far, Plan(3, 3, 1.0)))
    assert parse_rule("backends >= 4").can_hold(*bounds("backends", so_far, Plan(4, 4, 1.0)))


# --- status rules --------------------------------------------------------------------------------


def answered(*statuses: int, failed: int = 0) -> Tally:
    """One response of each status (1 ms), then `failed` refused sends, which have none."""
    tally = Tally()
    for status in statuses:
        tally.add(Result(status=status), MS, 0)
    for _ in range(failed):
        tally.add(Result(error="refused", error_text="connection refused"), 0, 0)
    return tally


@pytest.mark.parametrize(
    ("text", "metric", "op", "limit"),
    [
        ("4xx% <= 1", "4xx%", "<=", 1),
        ("4XX% <= 1", "4xx%", "<=", 1),
        ("4xx <= 1%", "4xx%", "<=", 1),
        ("4xx%<=1", "4xx%", "<=", 1),
        ("5xx% < 0.1", "5xx%", "<", 0.1),
        ("2xx% >= 99.9", "2xx%", ">=", 99.9),
        ("3xx% > 0", "3xx%", ">", 0),
        ("401% <= 0", "401%", "<=", 0),
        ("200% >= 99", "200%", ">=", 99),
        ("599% < 1", "599%", "<", 1),
        ("999% <= 0", "999%", "<=", 0),
        ("9xx% <= 0", "9xx%", "<=", 0),
        # == states a percentage at its end, and is judged as the bound it is
        ("401% == 0", "401%", "<=", 0),
        ("5xx% == 0%", "5xx%", "<=", 0),
        ("5xx% == 0.0", "5xx%", "<=", 0),
        ("2xx% == 100", "2xx%", ">=", 100),
        ("errors% == 0", "errors%", "<=", 0),
        ("bad% == 0", "bad%", "<=", 0),
        ("goal% == 100", "goal%", ">=", 100),
        ("skipped% == 0", "skipped%", "<=", 0),
    ],
)
def test_status_rules_read_as_written(text: str, metric: str, op: str, limit: float) -> None:
    rule = parse_rule(text)
    assert (rule.metric, rule.op, rule.limit, rule.unit, rule.url) == (metric, op, limit, "%", None)
    assert rule.text == " ".join(text.split())  # as written: `== 0` stays on every line that shows it
    assert parse_rule(text, "interval").scope == "interval"


def test_every_status_and_class_names_its_statuses_and_nothing_else_does() -> None:
    """200 to 999 and 2xx to 9xx, exhaustively; a 1xx is interim, never a response, and is no metric."""
    for code in range(200, 1000):
        assert status_codes(f"{code}%") == range(code, code + 1)
        assert parse_rule(f"{code}% <= 1").metric == f"{code}%"
    for first in range(2, 10):
        assert status_codes(f"{first}xx%") == range(first * 100, first * 100 + 100)
    assert [m for m in STATUS_CLASSES] == ["2xx%", "3xx%", "4xx%", "5xx%"]
    for name in ("1xx%", "100%", "101%", "199%", "0xx%", "099%", "1000%", "40x%", "4x1%", "4xx", "401", "xxx%",
                 "errors%", "p99", "4xxx%", "40%", "4XX%", "+401%", "٤٠١%"):
        assert status_codes(name) is None, name  # 4XX is read as 4xx% by parse_rule, not by status_codes
    for text in ("1xx% <= 1", "101% <= 0", "100% <= 0", "1000% <= 1", "40x% <= 1", "4xxx% <= 1", "٤٠١% <= 1"):
        with pytest.raises(ThresholdError, match="^unknown metric .*: the metrics are .*2xx% 3xx% 4xx% 5xx% or one "
                                                 r"status like 401% \(percentages of the responses\)"):
            parse_rule(text)
    assert is_percentage("4xx%") and is_percentage("401%") and is_percentage("errors%")
    assert not is_percentage("p99") and not is_percentage("rate") and not is_percentage("backends")


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("4xx <= 1", '4xx without % could be a count or a percentage; rules measure percentages of the responses: '
                     'write "4xx% <= 1"'),
        ("401 == 0", '401 without % could be a count or a percentage; rules measure percentages of the responses: '
                     'write "401% == 0"'),
        ("errors == 0", 'errors without % could be a count or a percentage; rules measure percentages of the sends: '
                        'write "errors% == 0"'),
        ("4xx% <= 1ms", '4xx% is a percentage: write a number like "4xx% <= 0.1" or "4xx% <= 0.1%", without "ms"'),
        ("4xx% == 50", '== is for a percentage at 0 or 100 ("4xx% == 0": none); 4xx% is seldom exactly 50%: use <, '
                       "<=, > or >="),
        ("goal% == 99.5", '== is for a percentage at 0 or 100 ("goal% == 0": none); goal% is seldom exactly 99.5%: '
                          "use <, <=, > or >="),
        ("p99 == 0ms", 'p99 is measured, never exactly one value: use <, <=, > or >= (== is for a percentage at 0 or '
                       '100, like "5xx% == 0")'),
        ("rate == 100", "rate is measured, never exactly one value"),
        ("backends == 10", '== is for a percentage at 0 or 100; say which way backends may not go: "backends >= 10" '
                           'or "backends <= 10"'),
        ("401% != 0", 'the comparison must be <, <=, >, >= or == (== only for a percentage at 0 or 100: "5xx% == 0"), '
                      'like "p99 < 50ms", "goal% >= 99" or "errors% <= 0.1"'),
        ("401% = 0", "the comparison must be <, <=, >, >= or =="),
        ("4xx% > 100", "4xx% is a percentage, from 0 to 100, so this rule can never hold"),
        ("401% < 0", "401% is a percentage, from 0 to 100, so this rule can never hold"),
        ("4xx% <= 100", "4xx% is a percentage, from 0 to 100, so this rule always holds and checks nothing"),
        ("2xx% >= 0", "2xx% is a percentage, from 0 to 100, so this rule always holds and checks nothing"),
        ("connect.4xx% <= 1", "connect is a phase of the responses' time: name one of its latencies"),
        ("4xx%{host=a} <= 1", "a rule is scoped to one URL by its path or whole URL"),
    ],
)
def test_a_bad_status_rule_says_what_is_wrong_in_one_line(text: str, says: str) -> None:
    with pytest.raises(ThresholdError) as raised:
        parse_rule(text)
    assert str(raised.value).startswith(says)
    assert "\n" not in str(raised.value)


def test_a_status_rule_may_be_scoped_to_a_url_in_thresholds_only() -> None:
    for text, metric in (("4xx%{url=/api} <= 1", "4xx%"), ("401%{url=/api} == 0", "401%"),
                         ('5xx% {url="http://a.example/api"} < 0.1', "5xx%")):
        rule = parse_rule(text)
        assert rule.metric == metric and rule.url in ("/api", "http://a.example/api")
    assert parse_rule("401%{url=/api} == 0").op == "<="
    with pytest.raises(UsageError, match='^intervalThresholds: "4xx%{url=/a} <= 1" is not allowed: a rule scoped to a '
                                         "URL is judged on the whole run; put it in thresholds$"):
        rules_for([], ["4xx%{url=/a} <= 1"], "soak")
    assert [r.text for r in rules_for(["4xx%{url=/a} <= 1"], ["4xx% <= 5", "401% == 0"], "bench")] == [
        "4xx%{url=/a} <= 1", "4xx% <= 5", "401% == 0"]  # a bench has answers too
    with pytest.raises(ThresholdError, match=r"scope a latency, errors%, failed%, bad%, a status \(4xx%, 401%\) or "
                                             "rate"):
        parse_rule("goal%{url=/a} >= 99")


@pytest.mark.parametrize(("text", "holds", "breaks"), [
    ("5xx% == 0", 0, 0.001), ("401% == 0", 0, 1e-9), ("2xx% == 100", 100, 99.999), ("4xx% <= 1", 1, 1.0001),
    ("4xx% < 1", 0.999, 1), ("2xx% >= 99", 99, 98.99), ("2xx% > 99", 99.01, 99),
])
def test_status_comparisons(text: str, holds: float, breaks: float) -> None:
    rule = parse_rule(text)
    assert rule.holds(holds) and not rule.holds(breaks)
    assert rule.show(holds) == f"{number(holds)}%" and rule.in_unit(breaks) == round(breaks, 6)


def test_status_rules_measure_shares_of_the_responses() -> None:
    """Of 10 responses (and 5 failed sends, which have no status): two 200s, a 204, a 301, three 401s,
    a 404, a 503, a 999. Each share is of the 10 responses; bad% and errors% stay shares of the 15 sends."""
    statuses = (200, 200, 204, 301, 401, 401, 401, 404, 503, 999)
    span = span_of(answered(*statuses, failed=5), 1.0, 15)
    assert span.figures.statuses == {200: 2, 204: 1, 301: 1, 401: 3, 404: 1, 503: 1, 999: 1}
    expected = {"2xx%": 30, "3xx%": 10, "4xx%": 40, "5xx%": 10, "9xx%": 10, "6xx%": 0, "200%": 20, "204%": 10,
                "401%": 30, "404%": 10, "403%": 0, "503%": 10, "999%": 10, "500%": 0}
    for metric, share in expected.items():
        assert measure(metric, span) == pytest.approx(share), metric
    assert measure("bad%", span) == pytest.approx(2 / 15 * 100)  # the 503 and the 999, of the sends
    assert measure("errors%", span) == pytest.approx(7 / 15 * 100)  # ... and the 5 failed ones: the 401s are good
    for code in range(200, 1000):  # every status's share, exhaustively: its count of the 10 responses
        assert measure(f"{code}%", span) == pytest.approx(statuses.count(code) * 10), code
    for first in range(2, 10):
        assert measure(f"{first}xx%", span) == pytest.approx(sum(s // 100 == first for s in statuses) * 10)
    # Status rules are judged on any span: a partial interval's answers are as fair as a whole one's.
    assert measure("4xx%", span_of(answered(*statuses), 0.1, 15, whole=False)) == pytest.approx(40)


def test_a_status_rule_has_nothing_to_measure_without_a_response() -> None:
    """A target that refuses every connection gave no status: `4xx% <= 1` is not kept by it, as a run
    rule with nothing to measure breaks (a latency rule's rule), while errors% sees the refusals."""
    for tally in (answered(failed=7), Tally()):
        span = span_of(tally, 1.0, 7)
        assert all(measure(metric, span) is None for metric in (*STATUS_CLASSES, "401%", "200%"))
    assert measure("failed%", span_of(answered(failed=7), 1.0, 7)) == 100


def test_status_figures_survive_every_record_of_a_span() -> None:
    """The statuses a rule measures are the tally's, through a merge (intervals into a run, shards into
    one) and a shard's JSON record, where the per-URL and interval tallies travel."""
    from runner.stats.record import tally_from_record, tally_record

    a, b = answered(200, 401), answered(401, 503, failed=2)
    merged = Tally()
    merged.merge(a)
    merged.merge(b)
    back = tally_from_record(json.loads(json.dumps(tally_record(merged))))
    for tally in (merged, back):
        assert measure("4xx%", span_of(tally, 1.0, 6)) == 50 and measure("401%", span_of(tally, 1.0, 6)) == 50
        assert Figures.of(tally, 6, SECOND).statuses == {200: 1, 401: 2, 503: 1}


def test_status_bounds_take_each_send_to_come_as_either_status() -> None:
    plan = Plan(sends=1000, target=1000, seconds=10)
    so_far = answered(*[200] * 88, *[401] * 2, failed=10)  # 2 401s of 90 responses; 900 sends to come
    assert bounds("4xx%", so_far, plan) == pytest.approx((2 / 990 * 100, 902 / 990 * 100))
    assert can_hold("4xx% <= 0.21", so_far, plan) and not can_hold("4xx% <= 0.2", so_far, plan)
    assert not can_hold("401% == 0", so_far, plan) and can_hold("5xx% == 0", so_far, plan)
    assert can_hold("2xx% >= 99.79", so_far, plan) and not can_hold("2xx% >= 99.8", so_far, plan)  # 988 of 990
    assert bounds("4xx%", so_far, Plan(None, None, None)) == UNBOUNDED  # no planned end: never certain
    counted = Plan(sends=100, target=None, seconds=None, counted=True)  # its 100 sends made: none to come
    assert bounds("4xx%", so_far, counted) == pytest.approx((2 / 90 * 100,) * 2)
    assert bounds("4xx%", answered(failed=3), Plan(sends=3, target=3, seconds=1.0)) == UNBOUNDED  # no response, none to come
    assert bounds("4xx%", answered(failed=3), Plan(sends=4, target=4, seconds=1.0)) == (0, 100)


@pytest.mark.parametrize("seed", range(20))
def test_a_status_rule_that_can_still_hold_is_never_called_lost(seed: int) -> None:
    """Whatever the run does next, if a status rule holds at the end, no earlier bound said it could not;
    and once nothing is left to come, the bounds are the value."""
    import random

    rng = random.Random(seed)
    sends = 300
    plan = Plan(sends=sends, target=sends, seconds=3.0)
    rules = [parse_rule(text) for text in ("4xx% <= 2", "401% == 0", "2xx% >= 97", "5xx% < 1", "3xx% <= 0.5")]
    so_far = Tally()
    history: list[dict[Rule, bool]] = []
    for _ in range(sends):
        kind = rng.random()
        status = 401 if kind < 0.01 else 503 if kind < 0.015 else 302 if kind < 0.02 else 200
        if kind > 0.99:
            so_far.add(Result(error="refused", error_text="x"), 0, 0)
        else:
            so_far.add(Result(status=status), MS, 0)
        if len(history) < so_far.requests // 10:
            history.append({rule: rule.can_hold(*bounds(rule.metric, so_far, plan)) for rule in rules})
    final = span_of(so_far, 3.0, sends)
    for rule in rules:
        measured = measure(rule.metric, final)
        assert measured is not None
        assert bounds(rule.metric, so_far, plan) == pytest.approx((measured, measured))
        if rule.holds(measured):
            assert all(step[rule] for step in history), rule.text
