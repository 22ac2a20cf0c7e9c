"""The local workers' parent (runner.run.workers.run) with scripted workers: merging, deaths, signals, the end.

Each worker is a real Soak of its shard on the scripted clock (tests/support/crew.py), sending home
what a worker process sends; only the processes and pipes are scripted. So the parent is held to
what tests/integration/test_scaleout.py, test_bench_workers.py, test_signals.py and
test_thresholds_cli.py hold real split runs to: one merged output on the run's grid, a worker that
dies named and its share missing, a signal passed on to every worker, a reporter's stop, the
warm-up merged apart, ab's progress added up, and the exit code.
"""

from __future__ import annotations

import io
import signal
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import pytest

from runner.commands.execute import reporters_for
from runner.config.settings import merge, settings_from
from runner.core.errors import EXIT_INTERRUPTED, EXIT_OK, EXIT_THRESHOLDS, EXIT_WORKER_FAILED
from runner.load.shards import Shard
from runner.report.base import Reporter
from runner.report.outcome import ExitCode
from runner.report.verdict import Verdict
from runner.run import workers
from runner.run.build import build
from runner.run.signals import STOP_SIGNALS, HandledSignals
from runner.stats.recorder import Interval
from runner.stats.runinfo import RunInfo, RunSummary
from tests.support.clock import ScriptedClock, ScriptedSignals, ScriptedTransport
from tests.support.crew import ScriptedCrew
from tests.unit.test_driver import MS, T0, URL, Heard, S, due_before


class Timeline(Heard):
    """Everything a reporter is told, and in which order: ("warmup" | "interval", index)."""

    def __init__(self, progress_every: int = 0) -> None:
        super().__init__(progress_every)
        self.order: list[tuple[str, int]] = []

    def interval(self, info: RunInfo, interval: Interval) -> None:
        super().interval(info, interval)
        self.order.append(("interval", interval.index))

    def warmup(self, info: RunInfo, interval: Interval) -> None:
        super().warmup(info, interval)
        self.order.append(("warmup", interval.index))


@dataclass
class Split:
    """One split run: what the parent told its reporters, what the "server" saw, and the workers."""

    summary: RunSummary
    heard: Timeline
    transport: ScriptedTransport
    crew: ScriptedCrew
    said: list[str] = field(default_factory=list)  # the lines ExitCode said
    code: int = EXIT_OK

    def at(self, t_ns: int) -> int:
        """A moment of the run, as an offset from its start (after any warm-up)."""
        return t_ns - self.summary.info.start_ns

    @property
    def spans(self) -> list[tuple[int, int]]:
        return [(self.at(i.start_ns), self.at(i.end_ns)) for i in self.heard.intervals]


def split(config: dict[str, Any], latency: int = MS, *, kills: Sequence[tuple[int, int]] = (),
          signals: Sequence[tuple[int, str]] = (), pending: tuple[str, ...] = (), judged: bool = False,
          progress_every: int = 0) -> Split:
    """Run `config` (the Python engine's, to URL) split over its `workers` on a scripted clock.

    `kills`: (moment, worker) of each worker killed; `signals`: (moment, name) of each signal to the
    parent; `pending`: signals it got while the workers started; moments are offsets from the agreed
    start. `judged`: with the thresholds' verdict and the exit code, as the CLI runs.
    """
    settings = settings_from(merge({"engine": "python", **config}))
    clock = ScriptedClock(T0)
    transport = ScriptedTransport(clock, lambda _: latency)
    parent = ScriptedSignals(pending)
    crew = ScriptedCrew(clock, transport, kills=kills, signals=signals, parent=parent)
    heard = Timeline(progress_every)
    said: list[str] = []
    chain: list[Reporter] = [heard]
    outcome = None
    if judged:
        verdict = Verdict.for_settings(settings, io.StringIO())
        outcome = ExitCode(said.append, verdict)
        model = build(settings, [URL], None).model
        chain += [*(r for r in reporters_for(settings, model, verdict) if isinstance(r, Verdict)), outcome]
    summary = workers.run(settings, [URL], None, chain, Shard(0, 1), clock=clock, signals=parent, spawn=crew.spawn)
    assert heard.summary is summary and crew.joined
    return Split(summary, heard, transport, crew, said, outcome.code if outcome is not None else EXIT_OK)


# --- a run to its planned end --------------------------------------------------------------


def test_workers_split_the_run_and_the_parent_tells_one_merged_run() -> None:
    """test_scaleout.py's split run: the lines are the whole run's, on its grid, adding up to what was sent."""
    run = split({"qps": 20, "concurrency": 4, "interval": "1s", "iterations": 3, "workers": 2}, judged=True)
    summary = run.summary
    assert run.spans == [(0, S), (S, 2 * S), (2 * S, 3 * S)]
    assert [i.index for i in run.heard.intervals] == [0, 1, 2]
    assert [i.due for i in run.heard.intervals] == [20.0, 20.0, 20.0]  # the whole run's goal, not a worker's
    assert [i.tally.good for i in run.heard.intervals] == [
        sum(1 for t in run.transport.started if k * S <= run.at(t) < (k + 1) * S) for k in range(3)]
    assert summary.stop_reason == "iterations" and summary.failed_workers is None
    assert summary.tally.requests == summary.tally.good == len(run.transport.started) == 60
    assert summary.tally.requests + summary.tally.skipped == summary.due == 60
    assert summary.info.settings.split.workers == 2 and summary.info.shard.alone
    assert (run.code, run.said) == (EXIT_OK, [])
    assert run.crew.signalled == []


# --- a worker that dies --------------------------------------------------------------------


def test_a_worker_that_dies_fails_the_run_and_its_share_shows_as_missing(capsys: pytest.CaptureFixture[str]) -> None:
    """test_scaleout.py's SIGKILLed worker: the other finishes, stderr names the one that died and how,
    its share stays in the goal of every interval it did not close, and the exit code is 5."""
    run = split({"qps": 20, "concurrency": 2, "interval": "1s", "iterations": 3, "workers": 2},
                kills=[(1500 * MS, 1)], judged=True)
    summary = run.summary
    assert summary.failed_workers == {1: "exited with code -9 before its summary"}
    assert capsys.readouterr().err == "soak: worker 1 failed: exited with code -9 before its summary\n"
    assert run.code == EXIT_WORKER_FAILED
    assert summary.stop_reason == "iterations"  # the other went to the planned end
    assert run.spans == [(0, S), (S, 2 * S), (2 * S, 3 * S)]
    assert [i.due for i in run.heard.intervals] == [20.0, 20.0, 20.0]  # its share still owed
    assert [i.tally.requests for i in run.heard.intervals] == [20, 10, 10]  # but sent by one worker only
    assert summary.tally.requests == 40 and summary.due == 60


def test_a_worker_that_dies_before_its_first_interval_is_named_too(capsys: pytest.CaptureFixture[str]) -> None:
    run = split({"qps": 20, "concurrency": 2, "interval": "1s", "iterations": 2, "workers": 2},
                kills=[(-10 * MS, 0)], judged=True)
    assert run.summary.failed_workers == {0: "exited with code -9 before its summary"}
    assert capsys.readouterr().err == "soak: worker 0 failed: exited with code -9 before its summary\n"
    assert [i.tally.requests for i in run.heard.intervals] == [10, 10]
    assert [i.due for i in run.heard.intervals] == [20.0, 20.0]
    assert run.code == EXIT_WORKER_FAILED


# --- signals -------------------------------------------------------------------------------


@pytest.mark.parametrize("sig", ["SIGTERM", "SIGINT"])
def test_a_signal_to_the_parent_stops_every_worker_together(sig: str) -> None:
    """test_scaleout.py's and test_bench_workers.py's signalled runs: passed on once to each worker,
    sending ends there, the merged run says why, and exits 7."""
    stop = 1550 * MS
    run = split({"qps": 20, "concurrency": 2, "interval": "1s", "iterations": 600, "workers": 2},
                signals=[(stop, sig)], judged=True)
    summary = run.summary
    assert run.crew.signalled == [(stop, sig, [0, 1])]
    assert summary.stop_reason == f"signal {sig}" and summary.failed_workers is None
    assert run.spans == [(0, S), (S, stop)]
    assert max(run.at(t) for t in run.transport.started) < stop  # nothing sent after it
    assert summary.tally.requests == len(run.transport.started)
    assert summary.tally.requests + summary.tally.skipped == due_before(0, 20, stop) == 31
    assert run.code == EXIT_INTERRUPTED
    assert run.said == [f"stopped by {sig} before its planned end, after 1.55s of 10m0s: the results cover only that"
                        f" (exit code {EXIT_INTERRUPTED})"]


def test_a_signal_while_the_workers_start_stops_them_before_any_send() -> None:
    """test_signals.py's split run signalled at once: held while the workers started, then passed on
    to each; each takes it as it starts, so the run sent nothing and lasted 0 s."""
    run = split({"qps": 20, "concurrency": 2, "interval": "1s", "iterations": 600, "workers": 2},
                pending=("SIGTERM",), judged=True)
    summary = run.summary
    assert run.crew.signalled == [(-workers_lead_ns(), "SIGTERM", [0, 1])]
    assert run.transport.started == []
    assert summary.stop_reason == "signal SIGTERM" and summary.tally.requests == summary.tally.skipped == 0
    assert summary.sending_ns == summary.elapsed_ns == 0
    assert run.code == EXIT_INTERRUPTED


def workers_lead_ns() -> int:
    return round(workers.LEAD_S * S)


def test_a_signal_after_a_worker_died_stops_the_others_and_the_dead_one_stays_failed() -> None:
    stop = 2500 * MS
    run = split({"qps": 20, "concurrency": 2, "interval": "1s", "iterations": 600, "workers": 2},
                kills=[(1500 * MS, 0)], signals=[(stop, "SIGTERM")], judged=True)
    assert run.summary.stop_reason == "signal SIGTERM"
    assert run.summary.failed_workers == {0: "exited with code -9 before its summary"}
    assert run.spans == [(0, S), (S, 2 * S), (2 * S, stop)]
    assert run.code == EXIT_WORKER_FAILED  # which says more than 7


def test_a_reporters_stop_stops_every_worker_and_the_run_says_the_reporters_reason() -> None:
    """test_thresholds_cli.py's abortOnThreshold with workers: the parent stops them as on SIGTERM, once,
    and the run says the rule (the workers' own runs said `signal SIGTERM`); exit 3."""
    run = split({"qps": 20, "concurrency": 2, "interval": "1s", "iterations": 600, "workers": 2,
                 "intervalThresholds": ["p50 < 1ns"], "abortOnThreshold": True}, judged=True)
    summary = run.summary
    assert summary.stop_reason == "threshold interval p50 < 1ns"
    assert [sig for _, sig, _ in run.crew.signalled] == ["SIGTERM"]
    moment = run.crew.signalled[0][0]
    assert moment >= S  # when interval 0 was merged and judged
    assert len(run.heard.intervals) == 2 and run.spans[0] == (0, S)  # the last one cut short, as after a signal
    assert max(run.at(t) for t in run.transport.started) <= moment  # none after the workers were told
    assert run.code == EXIT_THRESHOLDS


# --- the warm-up ---------------------------------------------------------------------------


def test_workers_warm_up_together_and_the_parent_tells_one_merged_warmup() -> None:
    """test_scaleout.py's split warm-up: one merged warm-up line per interval at the whole run's rate,
    all before the run's first, each part adding up apart."""
    run = split({"warmup": "2s", "qps": 20, "concurrency": 4, "interval": "1s", "iterations": 2, "workers": 2})
    summary = run.summary
    assert run.heard.order == [("warmup", 0), ("warmup", 1), ("interval", 0), ("interval", 1)]
    assert [w.due for w in run.heard.warmups] == [20.0, 20.0]
    assert [(w.start_ns - run.crew.start_ns, w.end_ns - run.crew.start_ns) for w in run.heard.warmups] == [
        (0, S), (S, 2 * S)]
    assert summary.warmup is not None and summary.warmup.intervals == 2
    assert summary.warmup.tally.requests + summary.warmup.tally.skipped == 40
    assert summary.tally.requests + summary.tally.skipped == 40
    assert len(run.transport.started) == summary.warmup.tally.requests + summary.tally.requests
    assert run.spans == [(0, S), (S, 2 * S)] and summary.info.start_ns == run.crew.start_ns + 2 * S


# --- a bench -------------------------------------------------------------------------------


def test_a_bench_over_workers_sends_exactly_n_and_its_progress_adds_the_workers_up() -> None:
    """test_bench_workers.py: -n split so the parts add up (10 over 3 is 4, 3 and 3), ab's progress
    steps told from the workers' counts added up, and the run's figures merged."""
    run = split({"mode": "bench", "concurrency": 3, "totalRequests": 10, "workers": 3}, progress_every=2)
    summary = run.summary
    assert summary.stop_reason == "totalRequests"
    assert summary.tally.requests == len(run.transport.started) == 10
    assert run.heard.told == [2, 4, 6, 8, 10]
    assert summary.bench is not None


def test_a_benchs_progress_is_told_as_the_workers_go() -> None:
    """Not all at the end: the first step is told while the workers are still sending."""
    told_at: list[int] = []

    class When(Timeline):
        def progress(self, info: RunInfo, done: int) -> None:
            super().progress(info, done)
            told_at.append(len(transport_seen))

    transport_seen: list[int] = []
    settings = settings_from(merge({"engine": "python", "mode": "bench", "concurrency": 4, "totalRequests": 200,
                                    "workers": 2}))
    clock = ScriptedClock(T0)
    transport = ScriptedTransport(clock, lambda _: 100 * MS)
    transport_seen = transport.started
    crew = ScriptedCrew(clock, transport)
    heard = When(progress_every=100)
    summary = workers.run(settings, [URL], None, [heard], Shard(0, 1), clock=clock, signals=ScriptedSignals(),
                          spawn=crew.spawn)
    assert heard.told == [100, 200] and summary.tally.requests == 200
    assert told_at[0] < 200, "the first step was told only when every request had been sent"


# --- the parent's own signals ----------------------------------------------------------------


def test_the_parents_signals_are_handled_those_held_while_the_workers_started_first() -> None:
    """HandledSignals, with this process's real signals: one that came while the workers started (held:
    runner.run.workers._spawn) is told, as pending, when the handlers go in; one after is told as it
    comes; remove() puts back the handlers that were there."""
    heard: list[tuple[str, bool]] = []
    before = {sig: signal.getsignal(sig) for sig in STOP_SIGNALS}
    held = signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)
    try:
        signal.raise_signal(signal.SIGTERM)  # held, so pending
        signals = HandledSignals()
        signals.install(lambda name, pending: heard.append((name, pending)))
        try:
            assert heard == [("SIGTERM", True)]
            signal.raise_signal(signal.SIGINT)
            assert heard == [("SIGTERM", True), ("SIGINT", False)]
        finally:
            signals.remove()
    finally:
        signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)
        while signal.sigtimedwait(STOP_SIGNALS, 0) is not None:  # none left to reach pytest's own handlers
            pass
        signal.pthread_sigmask(signal.SIG_SETMASK, held)
    assert {sig: signal.getsignal(sig) for sig in STOP_SIGNALS} == before
