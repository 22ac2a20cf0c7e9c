"""Where the time went: phase rules read, phases timed per response, their figures, records and bounds."""

from __future__ import annotations

import itertools
import random

import pytest

from runner.config.rules import LATENCIES, PHASES, ThresholdError, parse_rule
from runner.load.result import Result
from runner.stats.figures import Figures, phase_figures
from runner.stats.histogram import LatencyHistogram, slot
from runner.stats.phases import PhaseTally, waiting_ns
from runner.stats.record import phases_from_record, phases_record, tally_from_record, tally_record
from runner.stats.recorder import Tally, phased
from runner.stats.thresholds import Plan, Span, bounds, measure

MS = 1_000_000


# --- rules -----------------------------------------------------------------------------------


@pytest.mark.parametrize(("phase", "metric"), list(itertools.product(PHASES, LATENCIES)))
def test_every_phase_takes_every_latency(phase: str, metric: str) -> None:
    rule = parse_rule(f"{phase}.{metric} < 5ms")
    assert (rule.phase, rule.metric, rule.limit, rule.unit) == (phase, metric, 5 * MS, "ms")
    assert rule.text == f"{phase}.{metric} < 5ms"  # the broken line names the phase as written


def test_phase_rules_as_written() -> None:
    assert parse_rule("connect.p99 < 5ms").phase == "connect"
    assert parse_rule("TTFB.p(99.9) <= 0.2s").phase == "ttfb"
    assert parse_rule("TTFB.p(99.9) <= 0.2s").metric == "p999"
    assert parse_rule("ttfb.p50<50ms", "interval").scope == "interval"
    # A dot in a percentile names no phase.
    assert parse_rule("p99.9 < 5ms").phase is None
    assert parse_rule("p(99.9) < 5ms").metric == "p999"
    assert parse_rule("p99 < 5ms").phase is None


@pytest.mark.parametrize(("text", "says"), [
    ("conect.p99 < 5ms", 'unknown phase "conect": the phases are dns connect tls ttfb body'),
    ("connect.goal% >= 99", "connect is a phase of the responses' time: name one of its latencies"),
    ("ttfb.errors% <= 1", "ttfb is a phase of the responses' time"),
    ("body.rate >= 5", "body is a phase of the responses' time"),
    ("ttfb.p99{url=/x} < 5ms", "a phase rule is judged on the whole run's responses: ttfb is not timed per URL"),
    ("ttfb.p99 < 50", "p99 is a latency: give its unit"),
    ("dns.max < 0ns", "so this rule can never hold"),
    (".p99 < 5ms", 'unknown phase ""'),
])
def test_bad_phase_rules_say_what_is_wrong(text: str, says: str) -> None:
    with pytest.raises(ThresholdError, match=None) as refused:
        parse_rule(text)
    assert says in str(refused.value)


# --- timing one response ---------------------------------------------------------------------


def response(start: int, *, resolved: int = 0, tcp: int = 0, connected: int = 0, written: int = 0, headers: int = 0,
             end: int = 0) -> Result:
    return Result(start_ns=start, resolved_ns=resolved, tcp_ns=tcp, connected_ns=connected, written_ns=written,
                  headers_ns=headers, end_ns=end, status=200)


def single(histogram: LatencyHistogram) -> int:
    assert histogram.count == 1 and histogram.min == histogram.max
    return histogram.min


@pytest.mark.parametrize(("looked_up", "tls"), list(itertools.product((False, True), repeat=2)))
def test_a_new_connection_times_each_phase(looked_up: bool, tls: bool) -> None:
    start = 1000
    resolved = start + 7 if looked_up else 0
    tcp_done = (resolved or start) + 11
    connected = tcp_done + (13 if tls else 0)
    written = connected + 2
    result = response(start, resolved=resolved, tcp=tcp_done if tls else connected, connected=connected,
                      written=written, headers=written + 17, end=written + 17 + 19)
    tally = PhaseTally()
    tally.add(result)
    found = {name: single(h) for name, h in tally.histograms().items()}
    assert found == {"dns": 7 if looked_up else 0, "connect": 11, "tls": 13 if tls else 0, "ttfb": 17, "body": 19}
    # They add up to the latency less the request's writing (2), and with body to the whole request.
    assert sum(found[p] for p in ("dns", "connect", "tls", "ttfb")) == result.latency_ns - 2
    assert sum(found.values()) == result.end_ns - result.start_ns - 2


def test_a_reused_connection_has_no_dns_connect_or_tls() -> None:
    tally = PhaseTally()
    tally.add(response(100, written=103, headers=150, end=170))
    assert tally.reused == 1 and tally.connect_new.count == 0  # two values recorded, not five
    found = {name: single(h) for name, h in tally.histograms().items()}
    assert found == {"dns": 0, "connect": 0, "tls": 0, "ttfb": 47, "body": 20}


def test_ttfb_is_bench_waiting() -> None:
    result = response(100, written=103, headers=150, end=170)
    assert waiting_ns(result) == 47
    assert waiting_ns(response(100, headers=150, end=170)) == 50  # never written: from the send


def test_random_responses_against_brute_force() -> None:
    rng = random.Random(24)
    tally, expected = PhaseTally(), {p: [] for p in PHASES}
    for _ in range(500):
        start = rng.randrange(10**9)
        new = rng.random() < 0.3
        dns, connect, tls = (rng.randrange(10**6) if new else 0 for _ in range(3))
        ttfb, body, write = rng.randrange(10**8), rng.randrange(10**7), rng.randrange(1000)
        resolved = start + dns if new and dns else 0
        tcp = (resolved or start) + connect
        connected = tcp + tls if new else 0
        written = (connected or start) + write
        tally.add(response(start, resolved=resolved, tcp=tcp if new else 0, connected=connected, written=written,
                           headers=written + ttfb, end=written + ttfb + body))
        for name, value in zip(PHASES, (dns, connect if new else 0, tls, ttfb, body), strict=True):
            expected[name].append(value)
    for name, histogram in tally.histograms().items():
        values = expected[name]
        assert (histogram.count, histogram.min, histogram.max, histogram.sum) == (
            len(values), min(values), max(values), sum(values)), name


def test_merged_tallies_are_the_sum() -> None:
    a, b, whole = PhaseTally(), PhaseTally(), PhaseTally()
    results = [response(0, connected=5, tcp=5, written=6, headers=60, end=61),
               response(0, written=1, headers=9, end=30), response(0, resolved=3, tcp=8, connected=20, written=21,
                                                                   headers=40, end=90)]
    for i, result in enumerate(results):
        (a if i % 2 else b).add(result)
        whole.add(result)
    a.merge(b)
    assert a.reused == whole.reused == 1
    for name in PHASES:
        mine, theirs = a.histograms()[name], whole.histograms()[name]
        assert (mine.count, mine.min, mine.max, mine.sum, mine.sum_sq) == (
            theirs.count, theirs.min, theirs.max, theirs.sum, theirs.sum_sq)


# --- tallies, figures, records ---------------------------------------------------------------


def test_a_tally_times_responses_not_failures() -> None:
    from runner.load.result import ErrorKind
    tally = phased()
    tally.add(response(0, written=1, headers=41 * MS, end=71 * MS), 41 * MS, 0)
    tally.add(Result(start_ns=0, end_ns=5, error=ErrorKind.REFUSED, error_text="refused"), 0, 0)
    assert tally.phases is not None and tally.phases.count == 1
    plain = Tally()  # a per-URL tally: no phases
    plain.add(response(0, written=1, headers=2, end=3), 2, 0)
    assert plain.phases is None
    plain.merge(tally)  # but it takes them from a tally that has them
    assert plain.phases is not None and plain.phases.count == 1


def test_figures_have_each_phase() -> None:
    tally = phased()
    for ttfb in range(40, 50):
        tally.add(response(0, written=1, headers=1 + ttfb * MS, end=1 + ttfb * MS + 30 * MS), ttfb * MS, 0)
    f = Figures.of(tally, None, 10**9)
    assert list(f.phases) == list(PHASES)
    assert f.phases["ttfb"].min_ns == 40 * MS and f.phases["ttfb"].max_ns == 49 * MS
    assert f.phases["body"].min_ns == f.phases["body"].max_ns == 30 * MS
    assert f.phases["connect"].max_ns == 0 and f.phases["connect"].count == 10
    assert phase_figures(None) == {} and phase_figures(PhaseTally()) == {}
    assert Figures.of(Tally(), None, 1).phases == {}


def test_records_round_trip() -> None:
    tally = phased()
    tally.add(response(0, resolved=2, tcp=5, connected=9, written=10, headers=30, end=45), 30, 0)
    tally.add(response(0, written=1, headers=20, end=21), 20, 0)
    back = tally_from_record(tally_record(tally))
    assert back.phases is not None and tally.phases is not None
    assert phases_record(back.phases) == phases_record(tally.phases)
    old = tally_record(tally)
    del old["phases"]  # an earlier version's record: no phases, still read
    assert tally_from_record(old).phases is None
    with pytest.raises(ValueError, match="not a phases record"):
        phases_from_record({**phases_record(tally.phases), "reused": -1})
    with pytest.raises(ValueError, match="not a latency histogram record"):
        phases_from_record({"reused": 0})


# --- judging ---------------------------------------------------------------------------------


def test_a_phase_rule_measures_its_phase() -> None:
    tally = phased()
    tally.add(response(0, tcp=3 * MS, connected=3 * MS, written=3 * MS, headers=50 * MS, end=80 * MS), 50 * MS, 0)
    span = Span(Figures.of(tally, None, 10**9))
    assert measure("p99", span, "connect") == 3 * MS
    assert measure("max", span, "ttfb") == 47 * MS
    assert measure("mean", span, "body") == 30 * MS
    assert measure("max", span) == 50 * MS  # no phase: the latency
    assert measure("p99", Span(Figures.of(Tally(), None, 1)), "connect") is None  # nothing timed


def test_phase_bounds_are_the_latency_bounds_of_its_histogram() -> None:
    tally = phased()
    for ms in (1, 2, 3, 1000):
        tally.add(response(0, tcp=ms * MS, connected=ms * MS, written=ms * MS, headers=ms * MS + 5, end=ms * MS + 6),
                  ms * MS + 5, 0)
    plan = Plan(sends=4, target=4.0, seconds=4.0)
    assert bounds("max", tally, plan, "connect") == (1000.0 * MS, 1000.0 * MS)  # nothing more to come
    assert bounds("max", tally, Plan(sends=10, target=10.0, seconds=10.0), "connect")[0] == 1000.0 * MS
    assert not parse_rule("connect.max < 5ms").can_hold(*bounds("max", tally, plan, "connect"))
    assert parse_rule("ttfb.max < 5ms").can_hold(*bounds("max", tally, plan, "ttfb"))
    assert bounds("max", Tally(), plan, "connect") == (-float("inf"), float("inf"))


def test_counts_up_to_against_brute_force() -> None:
    rng = random.Random(5)
    histogram = LatencyHistogram()
    values = [rng.randrange(1, 10**10) for _ in range(2000)] + [0, 5, 2047, 2048]
    for v in values:
        histogram.record(v)
    edges = sorted(rng.randrange(0, 2 * 10**10) for _ in range(50))
    for edge, found in zip(edges, histogram.counts_up_to(edges), strict=True):
        assert found == sum(1 for v in values if slot(v) <= slot(edge)), edge
    assert LatencyHistogram().counts_up_to([1, 2]) == [0, 0]


def test_phase_metric_buckets_add_up_each_interval() -> None:
    from runner.metrics.collector import PhaseBuckets, phase_family
    from runner.metrics.tally import DURATION

    rng = random.Random(7)
    buckets, values = PhaseBuckets.empty(), []
    for _ in range(3):  # three intervals
        tally = PhaseTally()
        for _ in range(200):
            ttfb = rng.choice((rng.randrange(10**5), rng.randrange(10**9), rng.randrange(10**11)))
            values.append(ttfb)
            tally.add(response(0, written=1, headers=1 + ttfb, end=2 + ttfb))
        buckets = buckets.plus(tally)
    family = phase_family(buckets)
    samples = {(s.name, s.labels["phase"], s.labels.get("le")): s.value for s in family.samples}
    assert samples[("soak_phase_seconds_count", "ttfb", None)] == len(values)
    assert samples[("soak_phase_seconds_sum", "ttfb", None)] == pytest.approx(sum(values) / 1e9)
    assert samples[("soak_phase_seconds_bucket", "connect", "+Inf")] == len(values)
    assert samples[("soak_phase_seconds_bucket", "connect", "0.0001")] == len(values)  # reused: all 0
    for bound in DURATION.bounds:
        edge = DURATION.last_ns(bound)
        le = [key for key in samples if key[1] == "ttfb" and key[2] not in (None, "+Inf")
              and float(key[2]) == bound][0]
        # Exact to the HDR bucket: a value in the edge's own bucket counts as at or below it.
        assert samples[le] == sum(1 for v in values if slot(v) <= slot(edge)), bound


def test_a_bench_waiting_is_the_ttfb_timed_once_per_response() -> None:
    from runner.load.model import Bench
    from runner.load.schedule import Grid
    from runner.stats.recorder import BenchTally, Recorder

    rng = random.Random(3)
    recorder, alone = Recorder(Grid(0, 10 * MS), Bench()), BenchTally()
    recorder.drain_from(30 * MS)
    for _ in range(300):  # three intervals, the drain after them
        start = rng.randrange(35 * MS)
        written = start + rng.randrange(1000)
        result = response(start, written=written, headers=written + rng.randrange(MS), end=written + 2 * MS)
        recorder.record(result)
        alone.add(result)
    for k in range(3):
        recorder.close(final=k == 2)
    assert recorder.bench is not None and recorder.drain is not None
    mine, theirs = recorder.bench.waiting, alone.waiting
    assert (mine.count, mine.min, mine.max, mine.sum, mine.sum_sq) == (theirs.count, theirs.min, theirs.max,
                                                                        theirs.sum, theirs.sum_sq) == (
        300, theirs.min, theirs.max, theirs.sum, theirs.sum_sq)
    assert recorder.bench.total.count == 300
