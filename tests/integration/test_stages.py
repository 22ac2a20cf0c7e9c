"""Stages, the capacity search and the warm-up, through real runs on loopback.

A ramp's per-interval goals add up to the sends the ramp defines, and nginx's own access
count agrees with what the run says it sent; a capacity search stops at the first broken
interval and names the last rate that held; a warm-up against a target that starts slow
breaks its rule without failing the run, and what it sent is in its own summary section,
so the warm-up's and the run's requests add up to what the server saw. Each holds however
slow the machine: counts and sums, never that the client kept pace.
"""

from __future__ import annotations

import json
import signal
from fractions import Fraction

import pytest

from runner.core.errors import EXIT_INTERRUPTED
from runner.core.units import NS_PER_S
from runner.load.schedule import Ramp
from tests.conftest import DEFAULT, Nginx, assert_counts_add_up, parse_interval, run_soak
from tests.support.faultserver import FaultServer
from tests.support.liverun import EXIT_WITHIN_S, LiveRun, wait_until

# Stages are the run driver's, not the transport's: every test here runs once, as a user's run goes
# (stages and warm-ups on the native engine where it is built, as `auto` chooses).
pytestmark = [pytest.mark.usefixtures("transport"), pytest.mark.transports(DEFAULT)]

# Up from 0 to 20 req/s over 1 s, 20 for 1 s, down to 0 over 1 s: 10 + 20 + 10 sends.
STAGES = "1s:20,1s:20,1s:0"
RAMP = Ramp.of([(NS_PER_S, 20), (NS_PER_S, 20), (NS_PER_S, 0)])


@pytest.mark.parametrize("model", ["closed", "open"])
def test_a_ramps_interval_goals_add_up_to_its_sends_and_nginx_saw_them(nginx: Nginx, model: str) -> None:
    before = nginx.requests_logged()
    run = run_soak("--stages", STAGES, "--interval", "500ms", "--concurrency", "2", "--loadModel", model, nginx.url)
    assert run.returncode == 0, run.stderr
    summary = assert_counts_add_up(run.stdout)
    assert summary["stopReason"] == "stages"
    # Its shape, not its peak as if it were its rate (issue 32: `sending 20 GET req/s`).
    assert run.lines[0] == f"# sending up to 20 GET req/s in 3 stages with concurrency=2 to {nginx.url} ..."
    stats = summary["intervalStats"]
    assert len(stats) == 6
    # Each interval's goal is the ramp's sends due in it, exactly: 2.5, 7.5, 10, 10, 7.5, 2.5.
    half = NS_PER_S // 2
    assert [Fraction(s["t"]) for s in stats] == [RAMP.sends_between(i * half, (i + 1) * half) for i in range(6)]
    assert sum(Fraction(s["t"]) for s in stats) == RAMP.total == 40
    # The lines print the same goals, rounded, in slow_cooker's layout.
    assert [parse_interval(line).target for line in run.interval_lines] == [3, 8, 10, 10, 8, 3]
    # Every send the ramp made due was sent or skipped, and nginx logged every one sent.
    assert summary["requests"] + summary["skipped"] == 40
    assert nginx.requests_logged() - before == summary["requests"]
    assert summary["rate"]["target"] == pytest.approx(40 / 3, abs=1e-3)


def test_validate_agrees_with_the_run_on_the_ramps_sends(nginx: Nginx) -> None:
    run = run_soak("validate", "--stages", STAGES, "--interval", "500ms", nginx.url)
    assert run.returncode == 0, run.stderr
    assert "for 3s (the stages' sum), one line every 500ms, 40 requests in all" in run.lines
    assert "  stage 1: 0 -> 20 req/s over 1s (10 requests)" in run.lines


def test_stages_with_iterations_that_disagree_are_refused_before_sending(nginx: Nginx) -> None:
    before = nginx.requests_logged()
    run = run_soak("--stages", STAGES, "--interval", "1s", "--iterations", "5", nginx.url)
    assert run.returncode == 2
    assert run.stderr == ("soak: stages and iterations: the stages last 3s in all, iterations 5 of interval 1s make "
                          "5s; give one of them, or make them agree\n")
    assert run.stdout == "" and nginx.requests_logged() == before


def test_a_capacity_search_stops_at_the_first_broken_interval_and_names_the_last_rate_that_held(
        fault_server: FaultServer) -> None:
    # A ramp from 0 to 40 req/s over 4 s (5, 15, 25, 35 sends due in its seconds) against a
    # target that gives way after its 20th request: the search stops once errors% breaks.
    run = run_soak("--stages", "4s:40", "--interval", "1s", "--concurrency", "4", "--intervalThresholds",
                   "errors% < 50", "--stopAtBrokenRule", fault_server.url("/fail-after/20"))
    assert run.returncode == 3, run.stderr
    summary = run.summary
    stats = summary["intervalStats"]
    broken = summary["thresholds"]["rules"][0]["brokenIntervals"]
    assert broken, summary["thresholds"]
    first = broken[0]
    assert summary["stopReason"] == "threshold interval errors% < 50"
    # It stopped at the first broken interval: at most the partial one in which the stop landed follows it.
    assert len(stats) <= first + 2
    held = [s for s in stats[:first] if s["interval"] == "1s"]
    expected = held[-1]["t"] / 1.0 if held else None  # t sends due over 1 s: its target rate
    assert summary["lastGoodRate"] == (None if expected is None else pytest.approx(expected, abs=1e-6))
    assert any(line.startswith("# capacity: ") for line in run.lines)
    fault_server.wait_idle()
    assert fault_server.seen("/fail-after/20") == summary["requests"]


@pytest.mark.parametrize("model", ["closed", "open"])
def test_a_slow_warmup_breaks_its_rule_without_failing_the_run_and_is_counted_apart(
        fault_server: FaultServer, model: str) -> None:
    # Slow (1.5 s) for what arrives in the first 1.5 s after the first request, then fast: only
    # the warm-up's first second and a half is cold. The run's rule would break on any of those.
    path = "/slow-first/1500/1"
    run = run_soak("--warmup", "3s", "--qps", "4", "--concurrency", "2", "--interval", "1s", "--iterations", "2",
                   "--loadModel", model,
                   "--intervalThresholds", "p99 < 1s", "--thresholds", "max < 1s", fault_server.url(path))
    assert run.returncode == 0, run.stdout + run.stderr
    summary = assert_counts_add_up(run.stdout)  # the run's lines only: the warm-up's start with "# warmup "
    warmup = summary["warmup"]
    marked = [line[len("# warmup "):] for line in run.lines if line.startswith("# warmup ")]
    assert len(marked) == warmup["intervals"] == 3
    warm_lines = [parse_interval(line) for line in marked]
    # The warm-up broke the run's interval rule (p99 of 1.5 s), and that failed nothing.
    assert max(line.latency("p99") for line in warm_lines) >= 1500
    assert warmup["max"] >= 1500 and summary["max"] < 1000
    interval_rule, = (rule for rule in summary["thresholds"]["rules"] if rule["scope"] == "interval")
    assert summary["thresholds"]["passed"] and interval_rule["judgedIntervals"] == 2
    # Nothing measured is lost: the warm-up's requests and the run's are what the server saw.
    assert warmup["requests"] == warmup["good"] >= 1
    fault_server.wait_idle()
    assert fault_server.seen(path) == warmup["requests"] + summary["requests"]
    assert warmup["requests"] + warmup["skipped"] == 12  # 3 s at 4 req/s, each sent or skipped
    assert summary["requests"] + summary["skipped"] == 8


def test_a_warmups_connections_closed_in_the_run_were_opened_in_it(nginx: Nginx) -> None:
    """With maxRequestsPerConnection, the run ends connections the warm-up opened: up to any
    interval, it has closed no more than it opened (those taken over included), and so has the
    warm-up, whose connections still open at its end are the ones the run took over."""
    run = run_soak("--warmup", "1s", "--qps", "20", "--concurrency", "2", "--interval", "500ms", "--iterations", "4",
                   "--maxRequestsPerConnection", "3", nginx.url)
    assert run.returncode == 0, run.stderr
    summary = assert_counts_add_up(run.stdout)
    warmup = summary["warmup"]
    assert 0 <= warmup["connectionsClosed"] <= warmup["connectionsOpened"]
    opened = closed = 0
    for stats in summary["intervalStats"]:
        opened, closed = opened + stats["connectionsOpened"], closed + stats["connectionsClosed"]
        assert closed <= opened, summary["intervalStats"]
    assert summary["connectionsClosed"] <= summary["connectionsOpened"]
    assert summary["connectionsClosed"] > 0  # 80 requests, a connection ended every 3


def test_a_signal_during_the_warmup_ends_the_run_before_it_sends_with_the_warmup_counted(
        fault_server: FaultServer) -> None:
    with LiveRun("--warmup", "10m", "--qps", "20", "--concurrency", "2", "--interval", "1s", "--iterations", "60",
                 fault_server.url("/ok")) as live:
        wait_until(lambda: "# warmup " in live.stdout, timeout=30)
        assert "# warmup " in live.stdout, live.stdout + live.stderr
        elapsed = live.wait(live.send(signal.SIGTERM), timeout=30)
    assert live.process.returncode == EXIT_INTERRUPTED, live.stderr  # stopped before its planned end: no pass
    assert elapsed < EXIT_WITHIN_S + 10  # generous: gone within seconds, not after the warm-up's ten minutes
    lines = live.stdout.splitlines()
    summary = json.loads("\n".join(lines[lines.index("{"):]))
    assert summary["stopReason"] == "signal SIGTERM"
    assert summary["requests"] == summary["skipped"] == 0  # the run itself never started sending
    warmup = summary["warmup"]
    assert warmup["requests"] >= 1 and warmup["intervals"] == sum(line.startswith("# warmup 2") for line in lines)
    fault_server.wait_idle()
    assert fault_server.seen("/ok") == warmup["requests"]


def test_the_run_goes_on_over_the_connections_its_warmup_opened(fault_server: FaultServer) -> None:
    """And counts them as its own, opened at its start (issue 32: it said it opened none,
    `connectionsOpened` 0 and `connections` {}, over the two connections it sent on)."""
    run = run_soak("--warmup", "1s", "--qps", "10", "--concurrency", "2", "--interval", "500ms", "--iterations", "2",
                   fault_server.url("/ok"))
    assert run.returncode == 0, run.stderr
    summary = assert_counts_add_up(run.stdout)
    fault_server.wait_idle()
    assert fault_server.seen("/ok") == summary["warmup"]["requests"] + summary["requests"]
    # One connection per client, opened by the warm-up and kept by the run: it opened none itself,
    # and counts the two it took over as opened in its interval 0.
    assert fault_server.connections_accepted == 2
    warmup = summary["warmup"]
    assert (warmup["connectionsOpened"], warmup["connectionsClosed"]) == (2, 0)
    assert (summary["connectionsOpened"], summary["connectionsClosed"]) == (2, 0)
    assert summary["intervalStats"][0]["connectionsOpened"] == 2
    assert summary["connections"] == warmup["connections"] == {"HTTP/1.1": 2}
