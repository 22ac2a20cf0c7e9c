"""A run split over local worker processes, merged back into one output as it goes.

asyncio runs on one core; a runner that must send more than one core can, or that shares
a machine with the service it tests, splits the run over worker processes (one event loop
each). Each worker runs its part of the schedule (see shards.py) and sends every closed
interval, whole, back to this process, which adds the workers' intervals up (merge.py) and
prints the usual output, interval by interval, as if one process had done it all. A bench
splits the same way (its clients and -n, see shards.py); its workers also send their ab
figures so far with each interval, and their counts of finished sends for ab's progress lines.

Each worker has a pipe of its own home, not a shared multiprocessing.Queue: a Queue's named
semaphores are followed by multiprocessing's resource tracker, and a tracker killed during
the run (an OOM kill, a `kill` of the wrong process) made every exit print `KeyError: '/mp-...'`
tracebacks. A pipe registers nothing with the tracker, and its end closing tells that the
worker has gone.
"""

from __future__ import annotations

import multiprocessing
import os
import queue
import signal
import sys
import threading
from collections.abc import Callable, Sequence
from dataclasses import field, replace
from multiprocessing import resource_tracker
from multiprocessing.connection import Connection, wait
from typing import TYPE_CHECKING, Any, Protocol, cast

from runner.config.settings import Settings
from runner.config.targets import as_targets
from runner.core.lazymethods import dataclass
from runner.load.clock import RunClock, SystemClock
from runner.load.shards import Shard, aligned_start
from runner.report.base import Reporter
from runner.run.signals import STOP_SIGNALS, HandledSignals, Signals
from runner.stats.merge import RunTotal, merged_bench, merged_interval, merged_summary, merged_warmup_interval
from runner.stats.record import (
    ShardRun,
    bench_from_record,
    bench_record,
    interval_record,
    run_record,
)
from runner.stats.recorder import Interval
from runner.stats.runinfo import RunInfo, RunSummary

if TYPE_CHECKING:
    from runner.metrics.tally import MetricsTally, UrlSlots, WorkerTallies

# From starting the workers to send 0: enough for a worker to start Python, import the
# runner and set up its clients (about a quarter of a second each, two at a time here).
LEAD_S = 1.5
POLL_S = 0.1
JOIN_S = 5.0  # at the end, how long each worker may take to exit once it has sent its summary

# What a worker sends home (its _Courier): (kind, worker, payload), read by _Gather._receive.
Message = tuple[str, int, Any]


class Crew(Protocol):
    """The parent's view of its workers: the processes it started (_Processes), or a script in the unit
    tier (tests/support/crew.py), so that how the parent merges, and reacts to a worker that dies, to
    a signal and to the end of the run, is tested without processes or pipes."""

    def __len__(self) -> int:
        """How many workers there are (worker w is 0 <= w < len)."""
        ...

    def receive(self, timeout_s: float) -> list[Message]:
        """The messages that have come home, waiting at most `timeout_s` for one; none if none came."""
        ...

    def exit_code(self, worker: int) -> int | None:
        """The worker's exit code once it has exited (negative: the signal that killed it); None while it runs."""
        ...

    def signal(self, sig: signal.Signals) -> None:
        """Send `sig` to every worker still running."""
        ...

    def join(self, timeout_s: float) -> None:
        """Wait for the workers to exit, at most `timeout_s` for each."""
        ...

    def close(self) -> None:
        """Release the pipes home, whether or not the run ended."""
        ...


# Starts the workers: (settings, urls, source, pod, agreed start as a Unix time, metric slots, progress step).
Spawn = Callable[[Settings, Sequence[str], "str | None", Shard, float, "UrlSlots | None", int], Crew]


def run(settings: Settings, urls: Sequence[str], source: str | None, reporters: Sequence[Reporter],
        pod: Shard, counts: WorkerTallies | None = None, engine: str = "python",
        clock: RunClock | None = None, signals: Signals | None = None, spawn: Spawn | None = None) -> RunSummary:
    """Run with `settings.split.workers` processes; tell `reporters` about the merged run.

    `engine`: which one the workers send with (each builds its own parts from the same settings,
    so each chooses as the parent did: runner.run.build.engine_for). `clock`: where the parent
    reads the time that the workers' agreed start and the merged run are set from. `signals`:
    where it hears of SIGINT and SIGTERM, which it passes on to the workers (default: the
    process's own); `spawn`: what starts the workers (default: processes). The last three are
    given as values so that the unit tier can drive the parent with scripted workers.

    With `counts` (Prometheus metrics), each worker also counts its results for metrics and
    sends its counts home before each interval and its summary, and `counts` gets them.
    """
    clock = clock if clock is not None else SystemClock()
    start_wall = clock.wall_s() + LEAD_S
    if not pod.alone:
        start_wall = aligned_start(start_wall, settings.pace.interval_ns / 1e9)
    slots = counts.slots if counts is not None else None
    spawn = spawn if spawn is not None else _spawn
    crew = spawn(settings, urls, source, pod, start_wall, slots, _progress_step(reporters))
    try:
        # The run begins where the workers' warm-ups (if any) end, as in each worker (runner.run.soak).
        warmup_ns = settings.pace.warmup_ns
        info = RunInfo(settings, list(urls), source,
                       clock.now_ns() + round((start_wall - clock.wall_s()) * 1e9) + warmup_ns,
                       start_wall + warmup_ns / 1e9, pod, as_targets(urls).weights, engine)
        return _Gather(info, reporters, crew, counts).collect(signals if signals is not None else HandledSignals())
    finally:
        crew.close()


def _spawn(settings: Settings, urls: Sequence[str], source: str | None, pod: Shard, start_wall: float,
           slots: UrlSlots | None, step: int) -> _Processes:
    """Start one process per worker, each told the agreed start, with a pipe home of its own.

    SIGINT and SIGTERM are held while the workers start: they inherit the held mask and take
    the signals only once their handlers are in place (see Soak), so a Ctrl-C in the first
    moments stops them cleanly instead of killing them halfway through starting. The parent
    holds them until its own handlers are in place (HandledSignals.install; _Processes.close
    restores the mask however the run ends).
    """
    context = multiprocessing.get_context("spawn")  # a fresh interpreter: no inherited event loop
    workers = settings.split.workers
    pipes = [context.Pipe(duplex=False) for _ in range(workers)]  # (this end, the worker's end)
    processes = [
        context.Process(target=_work, args=(settings, urls, source, Shard(pod.index, pod.count, w, workers),
                                            start_wall, pipes[w][1], slots, step), daemon=True)
        for w in range(workers)
    ]
    # Spawning starts multiprocessing's resource tracker if it is not running, and starting it
    # unblocks both signals here: so it is started first, before they are held.
    resource_tracker.ensure_running()
    held = signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)
    crew = _Processes(processes, [ours for ours, _ in pipes], held)
    try:
        for process in processes:
            process.start()
    except BaseException:
        crew.close()
        raise
    finally:
        for _, theirs in pipes:
            theirs.close()  # the worker holds its own copy: when it exits, this end reads EOF
    return crew


def _progress_step(reporters: Sequence[Reporter]) -> int:
    """Every how many finished sends a worker tells home (0: never), for the reporters that follow
    progress (ab's "Completed N requests"): a tenth of their step, so the parent, which adds the
    workers' counts up, passes each step at most a tenth of a step per worker late."""
    every = min((r.progress_every for r in reporters if r.progress_every > 0), default=0)
    return max(1, every // 10) if every else 0


def _work(settings: Settings, urls: Sequence[str], source: str | None, shard: Shard, start_wall: float,
          home: Connection, slots: UrlSlots | None, progress_every: int = 0) -> None:
    """A worker process: run its part, sending each closed interval and the summary home.

    It leaves the terminal's process group, so a Ctrl-C reaches only the parent, which
    passes it on once: a worker sees one signal, not two (the second would cut its grace).
    """
    from runner.run import launch
    from runner.run.build import build

    os.setpgrp()
    outbox = _Outbox(home)
    try:
        parts = build(settings, urls, source, shard)  # this process's own requests and HTTP client
        tally = None
        if slots is not None:  # the parent's, so every worker counts each URL where the parent labels it
            from runner.metrics.tally import MetricsTally

            tally = MetricsTally(slots, parts.model, parts.shown if settings.report.backend_header else None)
        launch.run(parts, [_Courier(outbox, tally, progress_every)], start_wall,
                   metrics=tally)
    except Exception as e:  # reported by the parent, which prints it; the traceback helps no one
        outbox.put(("failed", shard.worker, f"{type(e).__name__}: {e}"))
    finally:
        outbox.close()


class _Outbox:
    """A worker's messages home, sent by a thread of their own, in order.

    The event loop only queues a message: it never waits for the parent to read the pipe
    (the parent may be busy pushing metrics), as it never waited with a multiprocessing.Queue.
    """

    def __init__(self, home: Connection) -> None:
        self._home = home
        self._queue: queue.SimpleQueue[tuple[str, int, Any] | None] = queue.SimpleQueue()
        self._parent_gone = False
        self._thread = threading.Thread(target=self._send_all, name="outbox", daemon=True)
        self._thread.start()

    def put(self, message: tuple[str, int, Any]) -> None:
        if not self._parent_gone:
            self._queue.put(message)

    def close(self) -> None:
        """Send what is queued, then close: the parent reads the end of the pipe after the last message."""
        self._queue.put(None)
        self._thread.join()
        self._home.close()

    def _send_all(self) -> None:
        while (message := self._queue.get()) is not None:
            try:
                self._home.send(message)
            except OSError:  # the parent is gone: there is no one left to tell
                self._parent_gone = True
                return


class _Courier(Reporter):
    """A worker's only reporter: hands its intervals and its run, whole, to the parent, each
    after a copy of the worker's metric counts when it keeps them (so a push after an interval
    holds at least that interval); a bench's figures so far with each interval; and, when the
    parent's reporters follow progress, its count of finished sends every `progress_every`."""

    def __init__(self, outbox: _Outbox, tally: MetricsTally | None, progress_every: int = 0) -> None:
        self._outbox = outbox
        self._tally = tally
        self.progress_every = progress_every

    def progress(self, info: RunInfo, done: int) -> None:
        self._outbox.put(("progress", info.shard.worker, done))

    def interval(self, info: RunInfo, interval: Interval) -> None:
        self._send_counts(info.shard.worker)
        if interval.bench is not None:  # encoded now: the live tally goes on counting
            self._outbox.put(("bench", info.shard.worker, bench_record(interval.bench, info.start_ns)))
        self._outbox.put(("interval", info.shard.worker, interval_record(info, interval)))

    def warmup(self, info: RunInfo, interval: Interval) -> None:
        self._outbox.put(("warmup", info.shard.worker, warmup_interval_record(info, interval)))

    def finish(self, summary: RunSummary) -> None:
        self._send_counts(summary.info.shard.worker)
        self._outbox.put(("run", summary.info.shard.worker, run_record(summary, [])))

    def _send_counts(self, worker: int) -> None:
        if self._tally is not None:
            self._outbox.put(("counts", worker, self._tally.snapshot()))


class _Processes:
    """The workers as the processes _spawn started, each with this end of its pipe home (a Crew)."""

    def __init__(self, processes: Sequence[multiprocessing.process.BaseProcess], inboxes: list[Connection],
                 held: set[int | signal.Signals]) -> None:
        self._processes = processes  # worker w is processes[w]
        self._inboxes = inboxes  # worker w's is inboxes[w]
        self._open = list(inboxes)  # those whose worker has not closed its end
        self._held = held  # the signal mask before the stop signals were held for the start

    def __len__(self) -> int:
        return len(self._processes)

    def receive(self, timeout_s: float) -> list[Message]:
        """One message from each pipe that has one; a pipe whose worker has gone is read no more
        (exit_code tells how it went, once it has exited)."""
        messages = []
        for inbox in cast(list[Connection], wait(self._open, timeout=timeout_s)):  # some of those it was given
            try:
                messages.append(inbox.recv())
            except (EOFError, OSError):
                self._open.remove(inbox)
        return messages

    def exit_code(self, worker: int) -> int | None:
        process = self._processes[worker]
        return None if process.is_alive() else process.exitcode

    def signal(self, sig: signal.Signals) -> None:
        for process in self._processes:
            if process.is_alive() and process.pid is not None:
                try:
                    os.kill(process.pid, sig)
                except ProcessLookupError:
                    pass

    def join(self, timeout_s: float) -> None:
        for process in self._processes:
            process.join(timeout=timeout_s)

    def close(self) -> None:
        signal.pthread_sigmask(signal.SIG_SETMASK, self._held)
        for inbox in self._inboxes:
            inbox.close()


@dataclass
class _Gather:
    """The parent's side: merges an interval as soon as every running worker has closed it.

    The workers share one start, so their k-th intervals are the same stretch of time:
    interval k is merged once, from the k-th record of each worker that has one.
    """

    info: RunInfo
    reporters: Sequence[Reporter]
    crew: Crew
    counts: WorkerTallies | None
    intervals: dict[int, list[dict[str, Any]]] = field(default_factory=dict)
    warmups: dict[int, list[dict[str, Any]]] = field(default_factory=dict)  # each worker's warm-up intervals
    warmed: int = 0  # the warm-up intervals merged and told so far
    runs: dict[int, dict[str, Any]] = field(default_factory=dict)
    failures: dict[int, str] = field(default_factory=dict)
    benches: dict[int, dict[str, Any]] = field(default_factory=dict)  # each worker's latest bench record
    done: dict[int, int] = field(default_factory=dict)  # each worker's finished sends, as last told
    told: int = 0  # the finished sends the reporters that follow progress have been told of
    merged: RunTotal = field(default_factory=RunTotal)  # the intervals merged so far, added up (on offsets)
    stop_reason: str | None = None  # why a reporter stopped the run early (abortOnThreshold), if one did

    @property
    def workers(self) -> int:
        return len(self.crew)

    def collect(self, signals: Signals) -> RunSummary:
        """Merge the workers' messages as they come, until each has sent its summary or failed;
        meanwhile every SIGINT and SIGTERM from `signals` is passed on to them (each stops cleanly)."""
        signals.install(lambda name, pending: self.crew.signal(signal.Signals[name]))
        try:
            for reporter in self.reporters:
                reporter.bind_stop(self._stop)
                reporter.start(self.info)
            while len(self.runs.keys() | self.failures.keys()) < self.workers:  # a worker may report both
                messages = self.crew.receive(POLL_S)
                if not messages:
                    self._note_deaths()
                for kind, worker, payload in messages:
                    self._receive(kind, worker, payload)
                    self._emit(final=False)
            self.crew.join(JOIN_S)
            for worker, text in sorted(self.failures.items()):
                print(f"soak: worker {worker} failed: {text}", file=sys.stderr)
            return self._finish()
        finally:
            signals.remove()

    def _stop(self, reason: str) -> None:
        """A reporter's early stop: the workers stop as on SIGTERM, and the run says why it stopped."""
        if self.stop_reason is None:
            self.stop_reason = reason
            self.crew.signal(signal.SIGTERM)

    def _receive(self, kind: str, worker: int, payload: Any) -> None:
        if kind == "interval":
            self.intervals.setdefault(worker, []).append(payload)
        elif kind == "warmup":
            self.warmups.setdefault(worker, []).append(payload)
        elif kind == "run":
            self.runs[worker] = payload
            if "bench" in payload:
                self.benches[worker] = payload["bench"]
        elif kind == "bench":
            self.benches[worker] = payload
        elif kind == "progress":
            self.done[worker] = payload
            self._progress(sum(self.done.values()))
        elif kind == "counts":
            if self.counts is not None:
                self.counts.update(worker, payload)
        else:
            self.failures[worker] = str(payload)

    def _progress(self, done: int) -> None:
        """Tell the reporters that follow progress of every step that `done` finished sends have passed."""
        for reporter in self.reporters:
            if every := reporter.progress_every:
                for n in range((self.told // every + 1) * every, done + 1, every):
                    reporter.progress(self.info, n)
        self.told = max(self.told, done)

    def _note_deaths(self) -> None:
        """A worker that exited before its summary failed: how it exited, once it has."""
        for worker in range(self.workers):
            code = self.crew.exit_code(worker)
            if code is not None and worker not in self.runs and worker not in self.failures:
                self.failures[worker] = f"exited with code {code} before its summary"

    def _emit(self, final: bool) -> None:
        """Merge and tell every interval that all still-running workers have closed (all, at the end)."""
        self._emit_warmups(final)
        while True:
            k = self.merged.intervals
            have = [w for w in range(self.workers) if len(self.intervals.get(w, [])) > k]
            running = [w for w in range(self.workers) if w not in self.runs and w not in self.failures]
            if not have or (not final and any(w not in have for w in running)):
                return
            # A worker that failed before this interval still owed its share of it.
            failed = sum(1 for w in self.failures if w not in have)
            interval = merged_interval(self.info, k, k, [(0, self.intervals[w][k]) for w in have], self.workers,
                                       failed)
            self.merged.add(interval)
            for reporter in self.reporters:
                reporter.interval(self.info, _on_clock(self.info, interval))

    def _emit_warmups(self, final: bool) -> None:
        """Merge and tell every warm-up interval that all workers still warming up have closed (all, at
        the end). A worker that has sent a run interval has finished its warm-up: it is waited for no more."""
        while True:
            k = self.warmed
            have = [w for w in range(self.workers) if len(self.warmups.get(w, [])) > k]
            warming = [w for w in range(self.workers)
                       if w not in self.runs and w not in self.failures and not self.intervals.get(w)]
            if not have or (not final and any(w not in have for w in warming)):
                return
            interval = merged_warmup_interval(k, [self.warmups[w][k] for w in have])
            self.warmed += 1
            for reporter in self.reporters:
                reporter.warmup(self.info, _on_clock(self.info, interval))

    def _finish(self) -> RunSummary:
        self._emit(final=True)
        pod = self.info.shard
        runs = [ShardRun(pod.index, pod.count, self.info.wall_start, self.info.settings.effective, self.info.urls,
                         self.info.url_source, self.intervals.get(w, []), self.runs[w]) for w in sorted(self.runs)]
        summary = merged_summary(self.info, self.merged, runs, None)
        shift = self.info.start_ns
        # A bench's figures, which a worker keeps for the whole run only: each worker's latest, so
        # a worker that died keeps what it sent (the client's own figures and the drain come with
        # the run records, merged by merged_summary).
        bench = None
        if self.info.model.ab_phases:
            bench = merged_bench([bench_from_record(self.benches[w], shift) for w in sorted(self.benches)])
        summary = replace(_summary_on_clock(summary, shift), failed_workers=dict(sorted(self.failures.items())) or None,
                          stop_reason=self.stop_reason or summary.stop_reason, bench=bench)
        self._progress(summary.tally.requests)  # the steps passed since the workers last told
        for reporter in self.reporters:
            reporter.finish(summary)
        return summary


def warmup_interval_record(info: RunInfo, interval: Interval) -> dict[str, Any]:
    """A worker's warm-up interval, whole, with the sends its own warm-up schedule made due in it
    (the run's schedule, which merged_interval works them out from, is not the warm-up's)."""
    return {**interval_record(info, interval), "due": interval.due, "dueNs": interval.due_span_ns}


def _summary_on_clock(summary: RunSummary, shift: int) -> RunSummary:
    """A summary merged on offsets from the start, put back on this process's clock: every
    moment it holds, so that the spans between them (the drain's) stay what they were."""
    last = summary.last_interval_end_ns
    return replace(summary, end_ns=summary.end_ns + shift, sending_end_ns=summary.sending_end_ns + shift,
                   last_interval_end_ns=None if last is None else last + shift)


def _on_clock(info: RunInfo, interval: Interval) -> Interval:
    """An interval merged on offsets from the start, put back on this process's clock."""
    shift = info.start_ns
    sending = None if interval.sending_end_ns is None else interval.sending_end_ns + shift
    return replace(interval, start_ns=interval.start_ns + shift, end_ns=interval.end_ns + shift,
                   sending_end_ns=sending)
