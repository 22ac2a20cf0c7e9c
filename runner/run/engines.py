"""The engine a run sends with, as one interface (EngineRun), and the one place that builds it.

Two engines can send a process's part of a run: the Python one (runner.load.engine), whose
results a Recorder counts one by one, and the native one (runner/load/native), which counts
them itself and hands each interval over whole (runner.stats.native.TakenRecorder). A run's
driver (runner.run.soak) sees only EngineRun: run it, stop it, cancel what is in flight, take
each interval as it closes, and the run's totals at the end. How each engine's results reach
the recorder, the Prometheus tally and the reporters that follow progress is wired here, once.
Which engine sends was decided before anything was built (runner.run.build.engine_for, on
runner.load.native.engine.refusal's answer).
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Generic, Protocol, TypeVar

from runner.config.targets import url_slots
from runner.core.redact import printable
from runner.load.clock import RunClock
from runner.load.model import Load
from runner.load.native.engine import Counting, MetricsConfig, NativeEngine
from runner.load.result import Result
from runner.load.schedule import Grid, Schedule, Skips
from runner.load.transport import TransportOptions
from runner.run.build import Parts
from runner.run.probe import LoopWatch
from runner.run.progress import Progress
from runner.stats.client import LATE_NS, PROBE_PERIOD_NS, WATCH_GAP_NS, ClientMeter, PaceTerms
from runner.stats.histogram import LatencyHistogram
from runner.stats.native import TakenRecorder
from runner.stats.recorder import ERROR_GROUPS, GROUP_URLS, OTHER_LENGTHS, BenchTally, Interval, Recorder, Tally

if TYPE_CHECKING:
    from runner.load.engine import Engine, Sink  # the Python engine loads where it sends (engine_run)
    from runner.load.handoff import Handoff
    from runner.metrics.tally import MetricsTally  # a run without metrics does not load them


class Counted(Protocol):
    """What a run counted in all, for its summary (runner.stats.runinfo.RunSummary): the run-wide
    figures of Recorder and of TakenRecorder alike."""

    @property
    def total(self) -> Tally:
        """Every interval's counts, the drain's included."""
        ...

    @property
    def uncorrected(self) -> LatencyHistogram | None:
        """Open model: latency from the actual send."""
        ...

    @property
    def send_lag(self) -> LatencyHistogram | None:
        """Paced runs: how late sends went out."""
        ...

    @property
    def in_unit(self) -> LatencyHistogram | None:
        """With a latency CSV: latencies in its unit."""
        ...

    @property
    def bench(self) -> BenchTally | None:
        """Bench mode: ab's figures."""
        ...

    @property
    def connections(self) -> Counter[str]:
        """Connections that carried a response, by protocol."""
        ...

    @property
    def drain(self) -> Tally | None:
        """What came back after the last interval."""
        ...

    @property
    def drain_end_ns(self) -> int:
        """... and when its last response came (0: none did)."""
        ...

    @property
    def per_url(self) -> list[Tally] | None:
        """Per URL slot, when the URLs have more than one."""
        ...


class EngineRun(Protocol):
    """One engine sending one process's schedule, with the counts of what it sent: all a run's
    driver knows of the engine that sends."""

    client: ClientMeter  # how the client itself fares: its loop's lag, CPU, lateness

    async def run(self) -> None:
        """Send until the schedule ends, the count is spent or a stop; return once every client is done."""
        ...

    def begin(self, cpu_s: float, now_ns: int) -> None:
        """The client's own figures count from here: the process's CPU seconds and the clock now."""
        ...

    def stop(self, at_ns: int) -> None:
        """Send nothing more from `at_ns`; what fell due before it and was not sent is skipped,
        and requests in flight may finish."""
        ...

    def cancel(self) -> None:
        """Abandon the requests still in flight: each is counted, as `cancelled`."""
        ...

    def drain_from(self, t_ns: int) -> None:
        """Results that end at or after `t_ns` are the drain."""
        ...

    @property
    def next_index(self) -> int:
        """The next interval to take."""
        ...

    @property
    def sent(self) -> int:
        """Requests sent so far."""
        ...

    @property
    def stopped_sending_ns(self) -> int | None:
        """When sending stopped before the schedule's end (a stop, or totalRequests spent), if it did."""
        ...

    def take(self, end_ns: int | None = None, *, final: bool = False, sending_end_ns: int | None = None,
             cpu_s: float, now_ns: int) -> Interval:
        """Close the next interval, at its grid boundary or at `end_ns`, with every skip the engine
        knows of that fell due before its end (Recorder.close says the rest); `cpu_s` and
        `now_ns` for the client's figures."""
        ...

    def totals(self) -> Counted:
        """What the run counted in all, once its last interval is taken."""
        ...

    def leftover(self) -> Tally:
        """What was counted and no closed interval holds (a warm-up's sends that came back after it
        ended), added up, once the engine is done; no interval is closed."""
        ...


class _Engine(Protocol):
    """What _Run asks of an engine, Engine and NativeEngine alike."""

    @property
    def sent(self) -> int:
        ...

    @property
    def stopped_sending_ns(self) -> int | None:
        ...

    def stop(self, at_ns: int | None = None) -> None:
        ...

    def cancel_in_flight(self) -> None:
        ...


class _Recorder(Counted, Protocol):
    """What _Run asks of the recorder that counts an engine's results, Recorder and TakenRecorder alike."""

    @property
    def client(self) -> ClientMeter:
        ...

    @property
    def next_index(self) -> int:
        ...

    def drain_from(self, t_ns: int) -> None:
        ...

    def leftover(self) -> Tally:
        ...


E = TypeVar("E", bound=_Engine)
R = TypeVar("R", bound=_Recorder)


class _Run(Generic[E, R]):
    """The part of EngineRun both engines do alike, handed to the engine or to its recorder: written
    once here, so that a change to what the driver asks of a run cannot reach one engine and miss
    the other. What differs (how each runs, begins and takes an interval) is in PythonRun and NativeRun."""

    def __init__(self, engine: E, recorder: R) -> None:
        self.engine = engine
        self.recorder = recorder
        self.client = recorder.client

    def stop(self, at_ns: int) -> None:
        self.engine.stop(at_ns=at_ns)

    def cancel(self) -> None:
        self.engine.cancel_in_flight()

    def drain_from(self, t_ns: int) -> None:
        self.recorder.drain_from(t_ns)

    @property
    def next_index(self) -> int:
        return self.recorder.next_index

    @property
    def sent(self) -> int:
        return self.engine.sent

    @property
    def stopped_sending_ns(self) -> int | None:
        return self.engine.stopped_sending_ns

    def totals(self) -> Counted:
        return self.recorder

    def leftover(self) -> Tally:
        return self.recorder.leftover()


class PythonRun(_Run["Engine", Recorder]):  # a string: the Python engine is imported only where it sends
    """The Python engine, its results counted by a Recorder; its pacing wake-ups measure the loop's
    lag (the run's LoopWatch, started with the client's figures)."""

    def __init__(self, engine: Engine, recorder: Recorder, grid: Grid, watch: LoopWatch) -> None:
        super().__init__(engine, recorder)
        self._grid = grid
        self._watch = watch

    async def run(self) -> None:
        await self.engine.run()

    def begin(self, cpu_s: float, now_ns: int) -> None:
        self.client.begin(cpu_s, now_ns)
        self._watch.start(now_ns)

    def take(self, end_ns: int | None = None, *, final: bool = False, sending_end_ns: int | None = None,
             cpu_s: float, now_ns: int) -> Interval:
        self.engine.skip_due_before(self._grid.end_of(self.recorder.next_index) if end_ns is None else end_ns)
        return self.recorder.close(end_ns, final=final, sending_end_ns=sending_end_ns, cpu_s=cpu_s, now_ns=now_ns)


class NativeRun(_Run[NativeEngine, TakenRecorder]):
    """The native engine, the intervals it takes (TakenRecorder), and its finished sends told to
    progress at each step; the engine's own timer measures its loop's lag (TakenRecorder.close)."""

    def __init__(self, engine: NativeEngine, recorder: TakenRecorder, progress: Progress | None) -> None:
        super().__init__(engine, recorder)
        self._progress = progress

    async def run(self) -> None:
        """Run the engine; with progress followed, its finished sends told as C's thread passes each
        reporter's step (NativeEngine.follow), and at the end all of them (ab's `Completed N requests`
        lines come a loop's turn late, never early)."""
        progress = self._progress
        if progress is not None:
            self.engine.follow(progress.next_step, lambda done: _reached(progress, done))
        await self.engine.run()

    def begin(self, cpu_s: float, now_ns: int) -> None:
        self.client.begin(cpu_s, now_ns)

    def take(self, end_ns: int | None = None, *, final: bool = False, sending_end_ns: int | None = None,
             cpu_s: float, now_ns: int) -> Interval:
        """The next interval: the engine counts the skips due before its end as it hands it over."""
        return self.recorder.close(end_ns, final=final, sending_end_ns=sending_end_ns, cpu_s=cpu_s, now_ns=now_ns)


def _reached(progress: Progress, done: int) -> int:
    """Tell progress of `done` finished sends; the step to be told of next."""
    progress.reached(done)
    return progress.next_step


def native_run(schedule: Schedule, load: Load, options: TransportOptions, grid: Grid, *, unit_ns: int | None = None,
               metrics: MetricsConfig | None = None, shown: Callable[[str], str] = printable,
               slot_of: Sequence[int] = (), terms: PaceTerms | None = None,
               hash_value: int = 0, live_bench: bool = True) -> tuple[NativeEngine, TakenRecorder]:
    """The native engine for a load and the recorder of what it counts, as Parts.recorder() would count it
    (`slot_of`: each URL's slot, as Recorder takes it; backends counted when the options name a backendHeader;
    `terms`: for judging each interval's pace, as Recorder takes them; `hash_value`: what a hashed body is
    checked against, as Recorder takes it; `live_bench`: a bench's figures with every interval, for a local
    worker, as TakenRecorder takes it), with the stats layer's constants for the rules both engines count by."""
    model = load.model
    counting = Counting(grid, model.corrected, unit_ns or 0, LATE_NS, ERROR_GROUPS, GROUP_URLS, OTHER_LENGTHS, metrics,
                        probe_ns=PROBE_PERIOD_NS, gap_ns=WATCH_GAP_NS, url_slots=tuple(slot_of), hash_value=hash_value)
    engine = NativeEngine(schedule, load, options, counting)
    due = schedule.sends_due if model.paced else None
    return engine, TakenRecorder(engine, grid, model, due=due, unit_ns=unit_ns, shown=shown, terms=terms,
                                 live_bench=live_bench)


def native_of(parts: Parts, schedule: Schedule, grid: Grid, load: Load,
              metrics: MetricsTally | None = None) -> tuple[NativeEngine, TakenRecorder]:
    """The native engine sending `load` on `schedule` for this process, counted on `grid` as
    parts.recorder() counts (a run's, or its warm-up's)."""
    return native_run(schedule, load, parts.options, grid, unit_ns=parts.unit_ns,
                      metrics=None if metrics is None else metrics.layout(), shown=parts.shown,
                      slot_of=url_slots(parts.urls).slot_of, terms=parts.pace_terms,
                      hash_value=parts.settings.report.hash_value, live_bench=parts.shard.workers > 1)


def engine_run(parts: Parts, grid: Grid, schedule: Schedule, clock: RunClock, watch: LoopWatch, *,
               load: Load | None = None, metrics: MetricsTally | None = None, progress: Progress | None = None,
               take_sessions: Handoff | NativeEngine | None = None) -> PythonRun | NativeRun:
    """The engine parts.engine names, sending `load` (the run's, parts.load(), unless given) on
    `schedule`, counted on `grid`, on the run's `clock`.

    `watch`: the loop-lag watch the Python engine's pacing wake-ups are told to (the native
    engine measures its own loop); `metrics`: this process's Prometheus counts, fed every result
    after the recorder (the native engine counts them itself); `progress`: told of each
    finished send; `take_sessions`: where a warm-up's connections come from, the same engine as
    this one: the Python engine's Handoff, or the native engine that sends the warm-up, whose
    clients hand theirs on in C (NativeEngine.give_to).
    """
    load = parts.load() if load is None else load
    if parts.engine.name == "native":
        native, taken = native_of(parts, schedule, grid, load, metrics)
        if take_sessions is not None:
            assert isinstance(take_sessions, NativeEngine), "a native run's warm-up is the native engine's"
            take_sessions.give_to(native)
        if metrics is not None:
            metrics.follow(native.metrics)
            taken.backends_counted = metrics.add_backends
        return NativeRun(native, taken, progress)
    from runner.load.engine import Engine  # here: a run the native engine sends needs none of the Python engine
    from runner.load.handoff import Handoff

    recorder = parts.recorder(grid, schedule)
    sink: Sink = recorder.record if progress is None else _counting(recorder.record, progress)
    if metrics is not None:  # every result, after the recorder has counted it
        sink = _both(sink, metrics.record)
    if take_sessions is not None:  # the run's clients go on over the warm-up's connections, its own from then
        assert isinstance(take_sessions, Handoff), "a Python run's warm-up is the Python engine's"
        take_sessions.taken = recorder.took_over if metrics is None else _both_taken(recorder.took_over,
                                                                                     metrics.took_over)
        load = dataclasses.replace(load, take_sessions=take_sessions)
    engine = Engine(schedule, load, parts.transport, sink, clock.for_engine(load.model.precise, watch))
    return PythonRun(engine, recorder, grid, watch)


def warmup_run(parts: Parts, grid: Grid, schedule: Schedule, clock: RunClock,
               watch: LoopWatch) -> tuple[PythonRun | NativeRun, Handoff | NativeEngine]:
    """A warm-up's engine (runner.run.warmup), built as the run's is, and where its clients' sessions
    go when it is done, for the run's engine_run to take: the Python engine's Handoff, or the native
    warm-up engine itself (NativeEngine.give_to). It counts no totalRequests: those are the run's."""
    load = dataclasses.replace(parts.load(), total_requests=0)
    if parts.engine.name == "native":
        run = engine_run(parts, grid, schedule, clock, watch, load=load)
        assert isinstance(run, NativeRun)
        return run, run.engine
    from runner.load.handoff import Handoff

    handoff = Handoff()
    given = dataclasses.replace(load, give_sessions=handoff)
    return engine_run(parts, grid, schedule, clock, watch, load=given), handoff


def _counting(record: Sink, progress: Progress) -> Sink:
    """A sink that records each result, then counts each finished send for progress: one call and
    one comparison per result; the reporters are looked at only when a step is reached."""
    one = progress.one

    def sink(result: Result | Skips) -> None:
        record(result)
        if not isinstance(result, Skips):
            one()

    return sink


def _both(first: Sink, second: Sink) -> Sink:
    """A sink that hands each result to `first`, then to `second`."""

    def sink(result: Result | Skips) -> None:
        first(result)
        second(result)

    return sink


def _both_taken(first: Callable[[list[str], int], None],
                second: Callable[[list[str], int], None]) -> Callable[[list[str], int], None]:
    """Connections taken over from a warm-up, told to `first`, then to `second` (as _both does results)."""

    def taken(protocols: list[str], free_ns: int) -> None:
        first(protocols, free_ns)
        second(protocols, free_ns)

    return taken
