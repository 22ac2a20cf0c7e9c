"""One run through time: start the engine, close an interval at every grid boundary, stop.

A run stops when the schedule ends (iterations or duration), when totalRequests have been
sent and answered, or on SIGINT/SIGTERM. However it stops, requests in flight get a
bounded time to finish and are counted, the last (possibly partial) interval is reported,
and the summary is produced exactly once.

Every moment it reads and every wait it makes go through the clock it is given
(runner.load.clock.RunClock), and its signals come from the source it is given
(runner.run.signals): the real ones in a run, scripted ones in the unit tier. Whichever
engine sends, it sees only an EngineRun (runner.run.engines).
"""

from __future__ import annotations

import asyncio
import resource
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from runner.config.settings import Settings
from runner.load.clock import RunClock, SystemClock
from runner.load.schedule import Grid
from runner.load.shards import Shard, aligned_start
from runner.report.base import Reporter
from runner.run.build import Parts
from runner.run.engines import EngineRun, engine_run
from runner.run.probe import LoopWatch
from runner.run.progress import progress_of
from runner.run.signals import ProcessSignals, Signals
from runner.stats.client import ClientMeter
from runner.stats.recorder import Interval
from runner.stats.runinfo import SIGNAL_STOP, RunInfo, RunSummary, Warmup

if TYPE_CHECKING:
    from runner.metrics.tally import MetricsTally  # a run without metrics does not load them
    from runner.run.warmup import WarmUpPhase  # nor one without a warm-up (Soak.__init__)

LEAD_NS = 50_000_000  # from planning to send 0, so every client is waiting when it is due
STOP_GRACE_NS = 1_000_000_000  # after a signal, how long requests in flight may finish
CANCEL_WAIT_NS = 2_000_000_000  # after cancelling, how long to wait for the clients to wind up


class Soak:
    """Runs one soak and tells the reporters about it."""

    def __init__(self, parts: Parts, reporters: Sequence[Reporter], start_wall: float | None = None,
                 metrics: MetricsTally | None = None, clock: RunClock | None = None,
                 signals: Signals | None = None) -> None:
        """`metrics`: this process's Prometheus counts, when metrics are on: the Python engine's sink
        feeds them every result after the recorder; the native engine counts them itself. `clock`:
        what the run reads the time and waits on (default: the system's); `signals`: where it hears of
        stop signals from (default: the process's SIGINT and SIGTERM)."""
        settings, shard = parts.settings, parts.shard
        self._settings = settings
        self._reporters = reporters
        self._shard = shard
        self._clock = clock = clock if clock is not None else SystemClock()
        self._signals = signals if signals is not None else ProcessSignals()
        start_ns, wall_start = _start(settings, shard, start_wall, clock)
        # The loop's lag, from the Python engine's pacing wake-ups (the native engine measures its own).
        self._watch = LoopWatch(lambda due, ran: self._meter().tick(due, ran), lambda due: self._meter().expect(due),
                                clock)
        # A warm-up sends first, from the start agreed on; the measured run begins where it ends.
        self._warmup: WarmUpPhase | None = None
        if settings.pace.warmup_ns:  # only then the warm-up's module loads (and the Python engine, where it sends)
            from runner.run.warmup import WarmUpPhase

            self._warmup = WarmUpPhase(parts, start_ns, clock, self._watch)
        self._first_send_ns = start_ns
        start_ns, wall_start = start_ns + settings.pace.warmup_ns, wall_start + settings.pace.warmup_ns / 1e9
        run_ns = settings.pace.run_ns
        self._end_ns = start_ns + run_ns if run_ns is not None else None
        self._grid = Grid(start_ns, settings.pace.interval_ns)
        self._schedule = parts.schedule(start_ns)
        progress = progress_of(reporters, lambda reporter, done: reporter.progress(self.info, done))
        handoff = self._warmup.handoff if self._warmup is not None else None  # the warm-up's connections go on
        self._run: EngineRun = engine_run(parts, self._grid, self._schedule, clock, self._watch, metrics=metrics,
                                          progress=progress, take_sessions=handoff)
        if self._end_ns is not None:  # what comes back after the schedule's end is the drain
            self._run.drain_from(self._end_ns)
        self.info = RunInfo(settings, list(parts.urls), parts.url_source, start_ns, wall_start, shard,
                            parts.urls.weights, parts.engine.name)
        self._signal = asyncio.Event()
        self._second_signal = asyncio.Event()
        self._stop_reason = ""
        self._signal_ns = 0

    async def run(self) -> RunSummary:
        """Run to the end and return the summary (also given to every reporter)."""
        clock = self._clock
        cpu_before = clock.cpu_s()
        for reporter in self._reporters:
            reporter.bind_stop(self.stop)
            reporter.start(self.info)
        warmup = self._warmup
        began_ns = clock.now_ns()  # the client's own figures from here, the probe's first tick a period on
        if warmup is not None:
            warmup.start(cpu_before, began_ns)
        engine = asyncio.ensure_future(self._run.run())  # its clients wait for the run's first due time
        # How late the loop runs what is due: told by the Python engine's pacing timer as it fires, with
        # a fallback tick where none is due for long (probe.LoopWatch); the native engine's own timer
        # measures its loop's lag the same way, handed over with each interval (TakenRecorder.close).
        self._run.begin(clock.cpu_s(), began_ns)
        # Before the engine's first step: a signal already pending stops a run before it sends.
        self._signals.install(self._on_signal)
        try:
            if warmup is not None:
                await self._warm_up(warmup)
                cpu_before = clock.cpu_s()  # the run's CPU and client figures are its own, not the warm-up's
                self._run.begin(cpu_before, clock.now_ns())  # the loop's ticks go to the run's meter from here
            sending_end_ns, reason = await self._drive(engine)
            warmed = await warmup.finish(CANCEL_WAIT_NS) if warmup is not None else None
            # Still handled while the summary is reported: a SIGTERM during the final push to a
            # slow Pushgateway must not kill the process before the summary and the push are out.
            summary = self._finish(sending_end_ns, reason, clock.cpu_s() - cpu_before, warmed)
        finally:
            self._watch.stop()
            self._signals.remove()
        if engine.done() and not engine.cancelled() and engine.exception() is not None:
            raise engine.exception()  # type: ignore[misc]  # a bug: reported after the summary
        return summary

    async def _warm_up(self, warmup: WarmUpPhase) -> None:
        """Close the warm-up's intervals as the clock passes them, until it ends or a signal stops it.

        Its requests still in flight at its end finish beside the run and are counted as the
        warm-up's (WarmUpPhase.finish); a stop during it ends it and the run alike.
        """
        assert warmup.task is not None
        clock = self._clock
        while not warmup.over:
            until = warmup.next_end_ns()
            await self._wait(until, warmup.task)
            if self._signal.is_set():
                end = max(min(self._signal_ns, warmup.end_ns), warmup.grid.start_ns)
                while warmup.grid.end_of(warmup.run.next_index) < end:
                    self._emit_warmup(warmup.close(warmup.grid.end_of(warmup.run.next_index), clock.cpu_s(),
                                                   clock.now_ns()))
                self._emit_warmup(warmup.close(end, clock.cpu_s(), clock.now_ns()))
                return
            if clock.now_ns() >= until:
                self._emit_warmup(warmup.close(until, clock.cpu_s(), clock.now_ns()))

    def _meter(self) -> ClientMeter:
        """Whose client figures the loop's lag goes to: the warm-up's while it lasts, then the run's."""
        warmup = self._warmup
        return warmup.run.client if warmup is not None and not warmup.over else self._run.client

    def _emit_warmup(self, interval: Interval) -> None:
        for reporter in self._reporters:
            reporter.warmup(self.info, interval)

    async def _drive(self, engine: asyncio.Future[None]) -> tuple[int, str]:
        """Close intervals as the clock passes them; return when sending stopped, and why.

        Sending stops at the schedule's end, at a signal, or with the last send of
        totalRequests; no sends are due after that, so the goal `t` stops growing there.
        Requests still in flight are waited for (boundedly) and counted in the last interval.
        """
        while True:
            boundary = self._grid.end_of(self._run.next_index)
            final = self._end_ns is not None and boundary >= self._end_ns
            until = self._end_ns if final else boundary
            assert until is not None
            await self._wait(until, engine)
            if self._signal.is_set():
                await self._settle(engine, STOP_GRACE_NS, self._second_signal)
                await self._abandon(engine)
                # The engine's own stop time: C's thread may have sent on while the stop waited for it.
                stopped = self._run.stopped_sending_ns
                stopped_ns = self._signal_ns if stopped is None else stopped
                return max(stopped_ns, self._grid.start_ns), self._stop_reason  # before send 0: 0 s
            if engine.done() and engine.exception() is not None:
                return self._clock.now_ns(), "error"
            if engine.done() and self._count_reached():
                stopped = self._run.stopped_sending_ns
                return stopped if stopped is not None else self._clock.now_ns(), "totalRequests"
            if self._clock.now_ns() < until:
                continue  # the engine ran out of sends early; the interval still runs to its end
            if final:  # in flight get their timeout; a signal now cuts that to the grace a signal gives
                bound = self._settings.client.timeout_ns + STOP_GRACE_NS
                if not await self._settle(engine, bound, self._signal) and self._signal.is_set():
                    await self._settle(engine, STOP_GRACE_NS, self._second_signal)
                await self._abandon(engine)
                return until, _end_reason(self._settings)
            self._emit(self._close(sending_end_ns=self._run.stopped_sending_ns))

    async def _wait(self, until_ns: int, engine: asyncio.Future[None]) -> None:
        """Until the clock reaches `until_ns`, the engine finishes, or a signal arrives."""
        signal_wait: asyncio.Future[Any] = asyncio.ensure_future(self._signal.wait())
        try:
            while self._clock.now_ns() < until_ns and not self._signal.is_set():
                engine_done = engine.done()
                await self._clock.wait([signal_wait] if engine_done else [signal_wait, engine], until_ns)
                if not engine_done and engine.done():
                    return
        finally:
            signal_wait.cancel()

    async def _settle(self, engine: asyncio.Future[None], bound_ns: int, cut: asyncio.Event) -> bool:
        """Let requests in flight finish for at most `bound_ns`, or until `cut` is set; whether they did.

        After a first signal, a second one cuts the grace; at the end of a run, a first signal
        cuts the wait for stragglers (which could be the whole timeout) down to a signal's
        grace, so Kubernetes' SIGTERM is honoured.
        """
        cut_wait: asyncio.Future[Any] = asyncio.ensure_future(cut.wait())
        try:
            await self._clock.wait([engine, cut_wait], self._clock.now_ns() + bound_ns)
        finally:
            cut_wait.cancel()
        return engine.done()

    async def _abandon(self, engine: asyncio.Future[None]) -> None:
        """Abandon the requests still in flight, each a `cancelled` Result, and let the clients wind up."""
        if not engine.done():
            self._run.cancel()
            await self._clock.wait([engine], self._clock.now_ns() + CANCEL_WAIT_NS)

    def _count_reached(self) -> bool:
        limit = self._shard.share(self._settings.pace.total_requests)
        return bool(limit) and self._run.sent >= limit

    def _close(self, end_ns: int | None = None, **how: Any) -> Interval:
        """Take the engine's next interval, with the CPU time used so far for the client's figures."""
        return self._run.take(end_ns, cpu_s=self._clock.cpu_s(), now_ns=self._clock.now_ns(), **how)

    def _emit(self, interval: Interval) -> None:
        for reporter in self._reporters:
            reporter.interval(self.info, interval)

    def _finish(self, sending_end_ns: int, reason: str, cpu_seconds: float, warmup: Warmup | None = None) -> RunSummary:
        """Report the last interval and the summary.

        Intervals that ended before sending stopped are whole; the one it stopped in is
        the last. If the last requests came back intervals later (totalRequests with slow
        responses), those intervals were reported as they passed and the last one ends now.
        """
        while self._grid.end_of(self._run.next_index) < sending_end_ns:
            self._emit(self._close(sending_end_ns=sending_end_ns))
        open_start = self._grid.end_of(self._run.next_index - 1)
        end_ns = sending_end_ns if sending_end_ns >= open_start else self._clock.now_ns()
        self._emit(self._close(end_ns, final=True, sending_end_ns=sending_end_ns))
        totals = self._run.totals()
        summary = RunSummary(
            info=self.info,
            intervals=self._run.next_index,
            end_ns=max(end_ns, totals.drain_end_ns),  # the whole run, the drain included
            sending_end_ns=sending_end_ns,
            tally=totals.total,
            uncorrected=totals.uncorrected,
            send_lag=totals.send_lag,
            in_unit=totals.in_unit,
            stop_reason=reason,
            cpu_seconds=cpu_seconds,
            max_rss_bytes=_peak_rss_bytes(),
            bench=totals.bench,
            connections=dict(totals.connections),
            client=self._run.client.run(self._clock.cpu_s(), self._clock.now_ns()),
            drain=totals.drain,
            per_url=None if totals.per_url is None else tuple(totals.per_url),
            last_interval_end_ns=end_ns,
            due=self._schedule.sends_due(self.info.start_ns, sending_end_ns) if self.info.model.paced else None,
            warmup=warmup,
        )
        for reporter in self._reporters:
            reporter.finish(summary)
        return summary

    def _on_signal(self, name: str, pending: bool) -> None:
        """First signal: stop sending and wind down. Second: stop waiting for stragglers.

        One that was pending before the run could handle it (a local worker's, held while it
        started) stops it where it starts: nothing was sent before it was taken."""
        if self._signal.is_set():
            self._second_signal.set()
            return
        self.stop(f"{SIGNAL_STOP}{name}", self._first_send_ns if pending else None)

    def stop(self, reason: str, at_ns: int | None = None) -> None:
        """Stop sending and wind down, as on a first signal; `reason` becomes the stop reason.

        A signal stops a run this way, and so does a reporter that knows the run has
        already failed (abortOnThreshold): one way to stop, whoever asks, and the last
        interval and the summary are reported exactly once, as after a signal. Sending stops
        at `at_ns`, by default now.
        """
        if self._signal.is_set():
            return
        self._stop_reason = reason
        self._signal_ns = self._clock.now_ns() if at_ns is None else at_ns
        # At once, not when the run's driver next wakes up: a client whose send falls due in
        # between would send after the stop, beyond the goal that ends with it.
        self._run.stop(self._signal_ns)
        if self._warmup is not None and not self._warmup.over:
            self._warmup.stop(self._signal_ns)
        self._run.drain_from(max(self._signal_ns, self._grid.start_ns))
        self._signal.set()


def _end_reason(settings: Settings) -> str:
    """Why a run that reached its planned end stopped: the stages' end, its duration, or its iterations."""
    pace = settings.pace
    return "stages" if pace.stages else "duration" if pace.duration_ns is not None else "iterations"


def _start(settings: Settings, shard: Shard, start_wall: float | None, clock: RunClock) -> tuple[int, float]:
    """When send 0 is due: on the monotonic clock, and as a Unix time.

    Alone, right away: a paced run after a short lead so every client is waiting when its
    first send is due; a bench (flat out, nothing due) with none, as ab starts. As one of several
    shards, at the wall-clock instant they all agree on, so their intervals coincide; that
    instant is kept exactly as the run's start (not re-read from the clock, which would put
    each shard a few microseconds off the others in the merge), unless it had already passed.
    """
    now_ns, now_wall = clock.now_ns(), clock.wall_s()
    if start_wall is None:
        if shard.alone:
            lead = LEAD_NS if settings.pace.mode != "bench" else 0
            return now_ns + lead, now_wall + lead / 1e9
        start_wall = aligned_start(now_wall, settings.pace.interval_ns / 1e9)
    if start_wall <= now_wall:
        return now_ns, now_wall
    return now_ns + round((start_wall - now_wall) * 1e9), start_wall


def _peak_rss_bytes() -> int:
    """This process's peak resident memory.

    From /proc's VmHWM where there is one: getrusage's ru_maxrss survives exec on Linux, so
    a runner started from a large process (a test runner, a shell script's parent) would
    report its parent's size instead of its own.
    """
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
