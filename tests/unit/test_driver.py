"""The run's driver (runner.run.soak.Soak) on a scripted clock: intervals, stops, grace, drain, warm-up.

Soak runs here as a real run runs it, built from its settings (runner.run.build), on the Python
engine, with its reporters, but on tests/support/clock.py's ScriptedClock: time moves only when
everything waits, the "server" answers after a latency the test chooses, and signals arrive at
moments the test chooses. So each test knows to the nanosecond when every interval must close,
when sending must stop and why, how long requests in flight may take, and what each count must
be, and checks them exactly: what tests/integration/test_signals.py, test_stages.py and the
native engine's tests hold real runs to, in milliseconds and at any load.
"""

from __future__ import annotations

import asyncio
import io
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from fractions import Fraction
from typing import Any

import pytest

from runner.commands.execute import reporters_for
from runner.config.settings import merge, settings_from
from runner.core.errors import EXIT_INTERRUPTED, EXIT_NO_RESPONSE, EXIT_OK, EXIT_THRESHOLDS
from runner.core.units import NS_PER_S
from runner.load.schedule import Ramp
from runner.report.base import Reporter
from runner.report.outcome import ExitCode
from runner.report.verdict import Verdict
from runner.run.build import build
from runner.run.soak import CANCEL_WAIT_NS, LEAD_NS, STOP_GRACE_NS, Soak
from runner.stats.recorder import Interval
from runner.stats.runinfo import RunInfo, RunSummary
from tests.support.clock import ScriptedClock, ScriptedSignals, ScriptedTransport

MS = 1_000_000
S = NS_PER_S
T0 = 10**12  # the scripted clock's time when the run is made
URL = "http://127.0.0.1:8080/"
STALL = 10**15  # a latency no run waits out: the request is answered only if nothing cuts it off
# test_stages.py's ramp: up from 0 to 20 req/s over 1 s, 20 for 1 s, down to 0 over 1 s.
STAGES = [{"duration": "1s", "qps": 20}, {"duration": "1s", "qps": 20}, {"duration": "1s", "qps": 0}]


class Heard(Reporter):
    """Everything a reporter is told, in order."""

    def __init__(self, progress_every: int = 0) -> None:
        self.progress_every = progress_every
        self.intervals: list[Interval] = []
        self.warmups: list[Interval] = []
        self.told: list[int] = []  # each progress step, as told
        self.info: RunInfo | None = None
        self.summary: RunSummary | None = None

    def start(self, info: RunInfo) -> None:
        self.info = info

    def progress(self, info: RunInfo, done: int) -> None:
        self.told.append(done)

    def interval(self, info: RunInfo, interval: Interval) -> None:
        self.intervals.append(interval)

    def warmup(self, info: RunInfo, interval: Interval) -> None:
        self.warmups.append(interval)

    def finish(self, summary: RunSummary) -> None:
        assert self.summary is None, "a second summary"
        self.summary = summary


@dataclass
class Driven:
    """One run on the scripted clock: what it reported, what the server saw, and when it ended."""

    summary: RunSummary
    heard: Heard
    transport: ScriptedTransport
    start_ns: int  # send 0 was due then (the run's, after any warm-up)
    first_send_ns: int  # where sending began: the warm-up's start, or the run's
    ended_ns: int  # the clock when run() returned
    said: list[str] = field(default_factory=list)  # the lines ExitCode said
    code: int = EXIT_OK  # the exit code

    def at(self, t_ns: int) -> int:
        """A moment of the run, as an offset from its start."""
        return t_ns - self.start_ns

    @property
    def spans(self) -> list[tuple[int, int]]:
        """Each interval's (start, end), as offsets from the run's start."""
        return [(self.at(i.start_ns), self.at(i.end_ns)) for i in self.heard.intervals]


def drive(config: dict[str, Any], latency: int | Callable[[int], int] = MS, *,
          signals: Sequence[tuple[int, str]] = (), pending: tuple[str, ...] = (),
          reporters: Sequence[Reporter] = (), heard: Heard | None = None, judged: bool = False,
          late_ns: int = 0, transport: type[ScriptedTransport] = ScriptedTransport) -> Driven:
    """Run `config` (the Python engine's, sending to URL) on a scripted clock.

    `latency`: how long the server takes to answer (by the count of sends answered so far);
    `signals`: (offset from the run's first send, name) of each signal sent; `pending`: signals
    already waiting when the run starts (a local worker's, held while it started); `judged`:
    with the thresholds' verdict and the exit code, as the CLI runs (runner.commands.execute);
    `late_ns`: how long the process takes from planning the run's start to running it.
    """
    settings = settings_from(merge({"engine": "python", **config}))
    clock = ScriptedClock(T0)
    scripted_transport = transport(clock, latency if callable(latency) else lambda _: latency)
    parts = replace(build(settings, [URL], None), transport=scripted_transport)
    heard = heard if heard is not None else Heard()
    said: list[str] = []
    chain: list[Reporter] = [heard, *reporters]
    outcome = None
    if judged:
        verdict = Verdict.for_settings(settings, io.StringIO())
        outcome = ExitCode(said.append, verdict)
        chain += [*(r for r in reporters_for(settings, parts.model, verdict) if isinstance(r, Verdict)), outcome]
    scripted = ScriptedSignals(pending)

    async def main() -> tuple[Soak, RunSummary]:
        soak = Soak(parts, chain, clock=clock, signals=scripted)
        await clock.sleep_until(clock.now_ns() + late_ns)
        first = soak.info.start_ns - settings.pace.warmup_ns
        for offset, name in signals:
            clock.call_at(first + offset, lambda name=name: scripted.send(name))  # type: ignore[misc]
        return soak, await soak.run()

    soak, summary = clock.run(main())
    assert heard.summary is summary
    start = soak.info.start_ns
    return Driven(summary, heard, scripted_transport, start, start - settings.pace.warmup_ns, clock.t, said,
                  outcome.code if outcome is not None else EXIT_OK)


def due_before(start_ns: int, qps: float, t_ns: int) -> int:
    """Sends of an even schedule from `start_ns` due before `t_ns`."""
    return max(0, -(-(t_ns - start_ns) * int(qps) // S))


# --- a run to its planned end ------------------------------------------------------------


def test_intervals_close_on_the_grid_and_a_run_of_iterations_ends_with_the_last() -> None:
    run = drive({"qps": 10, "concurrency": 2, "interval": "1s", "iterations": 3})
    assert run.spans == [(0, S), (S, 2 * S), (2 * S, 3 * S)]
    assert [i.index for i in run.heard.intervals] == [0, 1, 2]
    assert [(i.tally.good, i.due) for i in run.heard.intervals] == [(10, 10.0)] * 3
    assert all(i.sending_end_ns is None for i in run.heard.intervals[:-1])
    summary = run.summary
    assert summary.stop_reason == "iterations"
    assert (summary.intervals, summary.tally.requests, summary.tally.skipped) == (3, 30, 0)
    assert run.at(summary.sending_end_ns) == run.at(summary.end_ns) == 3 * S
    assert summary.drain is None and summary.due == 30
    assert run.ended_ns == summary.end_ns  # it waited for nothing more


def test_a_result_counts_in_the_interval_it_ended_in() -> None:
    """Each send takes 700 ms (the open model sends each at its due time): the one sent at 0.5 s
    ends in the second interval, not the first."""
    run = drive({"qps": 2, "concurrency": 1, "interval": "1s", "iterations": 3, "loadModel": "open"}, 700 * MS)
    assert [i.tally.good for i in run.heard.intervals] == [1, 2, 2]
    assert [i.tally.latency.max for i in run.heard.intervals] == [700 * MS] * 3


def test_the_first_send_is_due_a_lead_after_the_start_and_a_bench_has_none() -> None:
    paced = drive({"qps": 10, "concurrency": 1, "interval": "1s", "iterations": 1})
    assert paced.start_ns == T0 + LEAD_NS and paced.transport.started[0] == paced.start_ns
    bench = drive({"mode": "bench", "concurrency": 1, "totalRequests": 5})
    assert bench.start_ns == T0 and bench.transport.started[0] == T0


def test_a_duration_that_is_no_whole_number_of_intervals_ends_with_a_partial_one() -> None:
    run = drive({"qps": 10, "concurrency": 2, "interval": "1s", "duration": "2500ms"})
    assert run.spans == [(0, S), (S, 2 * S), (2 * S, 2500 * MS)]
    assert [i.due for i in run.heard.intervals] == [10.0, 10.0, 5.0]
    assert run.summary.stop_reason == "duration" and run.summary.tally.requests == 25


@pytest.mark.parametrize("model", ["closed", "open"])
def test_a_ramps_interval_goals_are_its_sends_due_in_each_and_every_one_is_sent_or_skipped(model: str) -> None:
    """test_stages.py's ramp, 0 -> 20 -> 20 -> 0 req/s over 3 s in 500 ms lines."""
    ramp = Ramp.of([(S, 20), (S, 20), (S, 0)])
    run = drive({"stages": STAGES, "interval": "500ms", "concurrency": 2, "loadModel": model})
    half = S // 2
    assert run.spans == [(i * half, (i + 1) * half) for i in range(6)]
    assert [Fraction(i.due) for i in run.heard.intervals] == [ramp.sends_between(i * half, (i + 1) * half)  # type: ignore[arg-type]
                                                              for i in range(6)]
    summary = run.summary
    assert summary.stop_reason == "stages"
    assert summary.tally.requests + summary.tally.skipped == summary.due == 40
    assert len(run.transport.started) == summary.tally.requests


def test_total_requests_stops_sending_with_the_last_and_its_slot_ends_the_run() -> None:
    """15 sends at 10 req/s take 15 slots of 100 ms: sending time ends at 1.5 s, mid-interval."""
    run = drive({"qps": 10, "concurrency": 1, "interval": "1s", "iterations": 0, "totalRequests": 15})
    summary = run.summary
    assert summary.stop_reason == "totalRequests"
    assert summary.tally.requests == len(run.transport.started) == 15 and summary.tally.skipped == 0
    assert run.at(summary.sending_end_ns) == 1500 * MS
    assert run.spans == [(0, S), (S, 1500 * MS)]
    assert [i.due for i in run.heard.intervals] == [10.0, 5.0]


def test_a_count_answered_intervals_after_it_was_sent_keeps_the_intervals_it_spanned() -> None:
    """The last of totalRequests comes back 2.5 s after it was sent: the intervals that passed
    meanwhile were reported as they passed, whole, and the last one ends when it came back."""
    run = drive({"qps": 10, "concurrency": 1, "interval": "1s", "iterations": 0, "totalRequests": 3},
                lambda answered: 2500 * MS if answered == 2 else MS)
    summary = run.summary
    assert summary.stop_reason == "totalRequests" and summary.tally.good == 3
    assert run.spans[:2] == [(0, S), (S, 2 * S)]
    assert run.at(run.heard.intervals[-1].end_ns) == run.at(summary.end_ns) == 2700 * MS


# --- requests still out at the end: the drain ----------------------------------------------


def test_responses_after_the_last_interval_are_the_drain_and_the_run_ends_with_the_last() -> None:
    run = drive({"qps": 2, "concurrency": 1, "interval": "1s", "iterations": 2, "loadModel": "open"}, 700 * MS)
    summary = run.summary
    assert summary.stop_reason == "iterations"
    assert [i.tally.good for i in run.heard.intervals] == [1, 2]
    assert summary.drain is not None and summary.drain.good == 1  # sent at 1.5 s, back at 2.2 s
    assert summary.tally.good == 4  # the drain is in the run's counts
    assert run.at(summary.last_interval_end_ns) == run.at(summary.sending_end_ns) == 2 * S  # type: ignore[arg-type]
    assert run.at(summary.end_ns) == 2200 * MS


def test_the_wait_for_the_last_requests_is_bounded_by_their_timeout_and_a_grace() -> None:
    run = drive({"qps": 2, "concurrency": 1, "interval": "1s", "iterations": 1, "timeout": "2s"}, STALL)
    summary = run.summary
    assert summary.stop_reason == "iterations"
    assert run.at(run.ended_ns) == S + 2 * S + STOP_GRACE_NS  # then abandoned
    assert summary.tally.errors == {"cancelled": 1} and summary.tally.requests == 1
    assert summary.tally.requests + summary.tally.skipped == 2  # the send due while it hung, skipped
    assert summary.unanswered


def test_a_signal_while_the_last_requests_are_awaited_cuts_the_wait_to_the_grace() -> None:
    """The schedule had ended: the stop reason stays the schedule's, and no `stopped by` line."""
    run = drive({"qps": 2, "concurrency": 1, "interval": "1s", "iterations": 1, "timeout": "60s"}, STALL,
                signals=[(1500 * MS, "SIGTERM")], judged=True)
    assert run.at(run.ended_ns) == 1500 * MS + STOP_GRACE_NS
    assert run.summary.stop_reason == "iterations" and run.summary.tally.errors == {"cancelled": 1}
    assert run.code == EXIT_NO_RESPONSE and not any("stopped by" in line for line in run.said)


# --- stopped by a signal -------------------------------------------------------------------


@pytest.mark.parametrize("sig", ["SIGTERM", "SIGINT"])
def test_a_signal_ends_sending_at_once_and_the_last_interval_there(sig: str) -> None:
    stop = 1550 * MS
    run = drive({"qps": 10, "concurrency": 2, "interval": "1s", "iterations": 600}, signals=[(stop, sig)],
                judged=True)
    summary = run.summary
    assert summary.stop_reason == f"signal {sig}"
    assert run.spans == [(0, S), (S, stop)]
    assert run.at(summary.sending_end_ns) == run.at(summary.end_ns) == stop
    assert max(run.at(t) for t in run.transport.started) < stop  # nothing sent after it
    assert summary.tally.requests + summary.tally.skipped == due_before(0, 10, stop) == 16
    assert summary.tally.good == summary.tally.requests
    assert run.code == EXIT_INTERRUPTED
    assert run.said == [f"stopped by {sig} before its planned end, after 1.55s of 10m0s: the results cover only that"
                        f" (exit code {EXIT_INTERRUPTED})"]


def test_requests_stuck_at_a_signal_get_a_grace_then_are_cancelled_and_counted() -> None:
    """test_signals.py's stalled run: each client stuck on its first request; sends due meanwhile skipped."""
    stop = 1350 * MS
    run = drive({"qps": 10, "concurrency": 3, "interval": "1s", "iterations": 600, "timeout": "60s"}, STALL,
                signals=[(stop, "SIGTERM")], judged=True)
    summary = run.summary
    assert run.at(run.ended_ns) == stop + STOP_GRACE_NS
    assert summary.stop_reason == "signal SIGTERM"
    assert summary.tally.requests == summary.tally.failed == 3 and summary.tally.errors == {"cancelled": 3}
    assert summary.tally.requests + summary.tally.skipped == due_before(0, 10, stop)
    assert run.spans[-1] == (S, stop)  # the cancelled ones in the last interval, which ends at the signal
    assert run.code == EXIT_NO_RESPONSE  # stopped, but not one answer came: that says more than 7


def test_a_second_signal_cuts_the_grace_short() -> None:
    run = drive({"qps": 10, "concurrency": 3, "interval": "1s", "iterations": 600, "timeout": "60s"}, STALL,
                signals=[(1350 * MS, "SIGTERM"), (1450 * MS, "SIGTERM")])
    assert run.at(run.ended_ns) == 1450 * MS
    assert run.summary.stop_reason == "signal SIGTERM" and run.summary.tally.errors == {"cancelled": 3}


def test_requests_that_finish_within_the_grace_are_counted_as_answered() -> None:
    run = drive({"qps": 10, "concurrency": 1, "interval": "1s", "iterations": 600}, 400 * MS,
                signals=[(1050 * MS, "SIGTERM")])
    summary = run.summary
    # Sent at 0, 0.4 and 0.8 s (each due while the last was out went when it came back): the one
    # out at the signal came back at 1.2 s, and the run waited no longer.
    assert run.at(run.ended_ns) == 1200 * MS
    assert summary.tally.errors == {} and summary.tally.good == len(run.transport.started) == 3
    assert run.at(summary.sending_end_ns) == run.at(summary.last_interval_end_ns) == 1050 * MS  # type: ignore[arg-type]
    # What came back after the signal is the drain: in the run's counts, in no interval.
    assert [i.tally.good for i in run.heard.intervals] == [2, 0]
    assert summary.drain is not None and summary.drain.good == 1 and run.at(summary.end_ns) == 1200 * MS


def test_a_signal_pending_at_the_start_is_a_run_of_0_seconds_that_sent_nothing() -> None:
    run = drive({"qps": 20, "concurrency": 3, "interval": "1s", "iterations": 5}, pending=("SIGTERM",), judged=True)
    summary = run.summary
    assert run.transport.started == []
    assert summary.stop_reason == "signal SIGTERM" and summary.tally.requests == 0
    assert summary.sending_ns == summary.elapsed_ns == 0
    assert run.spans == [(0, 0)]
    assert run.code == EXIT_INTERRUPTED and run.said[-1].startswith("stopped by SIGTERM before its planned end, after"
                                                                    " 0s of 5s")


def test_a_signal_before_the_first_send_is_a_run_of_0_seconds() -> None:
    """test_signals.py's shard waiting for its agreed start: stopped within its lead, it sent nothing
    and lasted 0 s (it once printed a negative duration)."""
    run = drive({"qps": 10, "concurrency": 1, "interval": "1s", "iterations": 600}, signals=[(-20 * MS, "SIGTERM")])
    summary = run.summary
    assert run.transport.started == [] and summary.tally.requests == summary.tally.skipped == 0
    assert summary.sending_ns == summary.elapsed_ns == 0 and run.spans == [(0, 0)]


def test_a_signal_held_while_the_process_started_late_stops_it_where_it_starts() -> None:
    """test_signals.py's late worker: the run's first sends were already due when it could first
    handle the signal that came while it started, and none may go out: sending ends at the start."""
    run = drive({"qps": 100, "concurrency": 4, "interval": "1s", "iterations": 2}, pending=("SIGTERM",),
                late_ns=LEAD_NS + 30 * MS)
    summary = run.summary
    assert run.transport.started == []
    assert summary.stop_reason == "signal SIGTERM" and summary.tally.requests == 0
    assert summary.sending_ns == 0


def test_a_send_due_at_the_stop_is_neither_sent_nor_skipped_nor_due() -> None:
    """A stop at t ends the run's sends at t: those due before it are the run's (sent, or skipped and
    counted), one due at t is not. A signal held while the process started stops it where send 0
    is due; that send counted as skipped while the goal, due before the stop, was 0: requests +
    skipped = due broke by one. Late or not, sending ends at the start and nothing is owed."""
    for late_ns in (0, LEAD_NS + 30 * MS):
        run = drive({"qps": 20, "concurrency": 3, "interval": "1s", "iterations": 5}, pending=("SIGTERM",),
                    late_ns=late_ns)
        summary = run.summary
        assert (summary.tally.requests, summary.tally.skipped, summary.due) == (0, 0, 0), late_ns


def test_a_stop_asked_for_by_a_reporter_ends_the_run_as_a_signal_does() -> None:
    """abortOnThreshold's way: the reporter asks, the run stops at once with its reason."""

    class Quitter(Reporter):
        def bind_stop(self, stop: Callable[[str], None]) -> None:
            self._stop = stop

        def interval(self, info: RunInfo, interval: Interval) -> None:
            if interval.index == 1:
                self._stop("threshold interval p99 < 1ms")

    # 999 ms lines: no send is due at a boundary, where which of the driver and a client moves first
    # would be the scripted clock's choice.
    run = drive({"qps": 10, "concurrency": 1, "interval": "999ms", "iterations": 10}, reporters=[Quitter()])
    assert run.summary.stop_reason == "threshold interval p99 < 1ms"
    boundary = 2 * 999 * MS
    assert run.spans == [(0, 999 * MS), (999 * MS, boundary), (boundary, boundary)]  # the last one is empty
    assert run.at(run.summary.sending_end_ns) == boundary
    assert run.summary.tally.requests == len(run.transport.started) == 20 and run.summary.due == pytest.approx(19.98)


# --- the warm-up ---------------------------------------------------------------------------


def test_a_warmup_sends_first_counted_apart_and_the_run_begins_where_it_ends() -> None:
    """test_stages.py's warm-up: 3 s at 4 req/s in 1 s lines, then the run's 2 intervals."""
    run = drive({"warmup": "3s", "qps": 4, "concurrency": 2, "interval": "1s", "iterations": 2})
    summary = run.summary
    assert run.start_ns == run.first_send_ns + 3 * S
    warmups = run.heard.warmups
    assert [(w.start_ns - run.first_send_ns, w.end_ns - run.first_send_ns) for w in warmups] == [
        (0, S), (S, 2 * S), (2 * S, 3 * S)]
    assert summary.warmup is not None and summary.warmup.intervals == 3
    assert summary.warmup.tally.requests + summary.warmup.tally.skipped == 12
    assert sum(w.tally.requests for w in warmups) == summary.warmup.tally.requests
    assert run.spans == [(0, S), (S, 2 * S)]
    assert summary.tally.requests + summary.tally.skipped == summary.due == 8
    assert len(run.transport.started) == summary.warmup.tally.requests + summary.tally.requests


def test_the_warmups_stragglers_are_the_warmups() -> None:
    """A warm-up send still out when the run begins is counted as the warm-up's, not the run's."""
    run = drive({"warmup": "1s", "qps": 2, "concurrency": 1, "interval": "1s", "iterations": 2}, 700 * MS)
    summary = run.summary
    assert summary.warmup is not None and summary.warmup.tally.good == 2  # sent at 0 and 0.5 s
    assert [w.tally.good for w in run.heard.warmups] == [1]  # only the first came back within it
    assert summary.tally.good + summary.tally.skipped + summary.tally.failed == 4


def test_a_signal_during_the_warmup_ends_it_and_the_run_before_the_run_sends() -> None:
    run = drive({"warmup": "10m", "qps": 20, "concurrency": 2, "interval": "1s", "iterations": 60},
                signals=[(2525 * MS, "SIGTERM")], judged=True)
    summary = run.summary
    assert summary.stop_reason == "signal SIGTERM"
    assert summary.tally.requests == summary.tally.skipped == 0
    assert [(w.start_ns - run.first_send_ns, w.end_ns - run.first_send_ns) for w in run.heard.warmups] == [
        (0, S), (S, 2 * S), (2 * S, 2525 * MS)]
    assert summary.warmup is not None and summary.warmup.intervals == 3
    assert summary.warmup.tally.requests == len(run.transport.started) == due_before(0, 20, 2525 * MS)
    assert summary.warmup.span_ns == 2525 * MS
    assert run.code == EXIT_INTERRUPTED


# --- what the run says at its end ------------------------------------------------------------


def test_a_run_that_kept_its_thresholds_exits_0_and_one_that_broke_them_3() -> None:
    kept = drive({"qps": 10, "concurrency": 1, "interval": "1s", "iterations": 2, "thresholds": ["max < 10ms"]},
                 5 * MS, judged=True)
    assert (kept.code, kept.said) == (EXIT_OK, [])
    broken = drive({"qps": 10, "concurrency": 1, "interval": "1s", "iterations": 2, "thresholds": ["max < 1ms"]},
                   5 * MS, judged=True)
    assert broken.code == EXIT_THRESHOLDS


def test_a_capacity_search_stops_at_the_first_broken_interval() -> None:
    """test_stages.py's search, with a target that slows down after its 20th answer."""
    run = drive({"stages": [{"duration": "4s", "qps": 40}], "interval": "1s", "concurrency": 4, "intervalThresholds": ["p99 < 50ms"],
                 "stopAtBrokenRule": True}, lambda answered: MS if answered < 20 else 100 * MS, judged=True)
    summary = run.summary
    assert summary.stop_reason == "threshold interval p99 < 50ms"
    assert run.code == EXIT_THRESHOLDS
    broken = next(i for i in run.heard.intervals if i.tally.latency.max >= 100 * MS)
    assert len(run.heard.intervals) <= broken.index + 2  # at most the partial one the stop landed in follows
    assert max(run.at(t) for t in run.transport.started) <= run.at(summary.sending_end_ns)  # none after the stop


def test_progress_is_told_at_every_step_of_finished_sends() -> None:
    heard = Heard(progress_every=7)
    run = drive({"mode": "bench", "concurrency": 2, "totalRequests": 30}, heard=heard)
    assert run.summary.stop_reason == "totalRequests"
    assert heard.told == [7, 14, 21, 28]


def test_progress_counts_sends_finished_not_sends_skipped() -> None:
    """A slow server makes a paced client skip: only the sends made (answered or failed) are progress."""
    heard = Heard(progress_every=2)
    run = drive({"qps": 10, "concurrency": 1, "interval": "1s", "iterations": 2}, 250 * MS, heard=heard)
    summary = run.summary
    assert summary.tally.skipped > 0
    assert heard.told == list(range(2, summary.tally.requests + 1, 2))


class Stubborn(ScriptedTransport):
    """Its sessions never answer, and the first cancel does not end a send (a transport's bug)."""

    def session(self) -> Any:
        transport = self

        class Session:
            async def send(self, request: Any, hash_body: bool) -> Any:
                transport.started.append(transport._clock.now_ns())
                try:
                    await transport._clock.sleep_until(STALL)
                except asyncio.CancelledError:
                    await transport._clock.sleep_until(STALL)  # the next cancel (the loop's end) ends it
                raise AssertionError("never answered")

            async def aclose(self) -> None:
                pass

        return Session()


def test_clients_that_do_not_wind_up_once_cancelled_hold_the_end_up_no_longer_than_the_cancel_wait() -> None:
    run = drive({"qps": 10, "concurrency": 3, "interval": "1s", "iterations": 600, "timeout": "60s"},
                signals=[(1350 * MS, "SIGTERM")], transport=Stubborn)
    assert run.at(run.ended_ns) == 1350 * MS + STOP_GRACE_NS + CANCEL_WAIT_NS
    assert run.summary.stop_reason == "signal SIGTERM" and len(run.transport.started) == 3
