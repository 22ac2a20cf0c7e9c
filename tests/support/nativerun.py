"""Running the native engine (and the Python one, to compare) the way a soak runs an engine.

`native_engine_module` compiles runner.load.native._engine from the tree's sources into a
directory and makes it the one `runner.load.native.engine` imports, so a test always runs the
C in the tree, however the package was installed (as replay.native_parser does for the parser).

`drive` is runner/run/soak.py's `_drive` and `_finish` without the reporters: it closes an
interval at every grid boundary, stops sending at the schedule's end, at `stop_after`, or
when the count is spent, lets requests in flight finish (boundedly), abandons the rest, and
closes the last interval; `Ran` holds what came out, in the figures the invariants of
tests/conftest.py are stated in.
"""

from __future__ import annotations

import asyncio
import importlib.util
import shlex
import subprocess
import sys
import sysconfig
import time
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from runner.load.engine import Engine, Load
from runner.load.fast_transport import FastTransport
from runner.load.model import Bench, Closed, LoadModel, Open
from runner.load.request import Request
from runner.load.schedule import Grid, Schedule
from runner.load.transport import Lifetime, TransportOptions
from runner.stats.native import NativeRecorder, native_run
from runner.stats.recorder import Interval, Recorder, Tally

REPO = Path(__file__).resolve().parents[2]
NATIVE = REPO / "runner" / "load" / "native"
SOURCES = ("engine.c", "core.c", "response.c")
GRACE_NS = 1_000_000_000  # soak.STOP_GRACE_NS
MS = 1_000_000


def build_engine(build_dir: Path, flags: tuple[str, ...] = ("-O2",)) -> Path:
    """Compile the engine extension from the tree's sources into `build_dir`; its path."""
    target = build_dir / f"_engine{sysconfig.get_config_var('EXT_SUFFIX')}"
    compiler = shlex.split(sysconfig.get_config_var("CC") or "cc")
    command = [*compiler, "-std=c11", "-shared", "-fPIC", *flags, f"-I{sysconfig.get_paths()['include']}", "-o",
               str(target), *(str(NATIVE / source) for source in SOURCES), "-lm"]
    done = subprocess.run(command, capture_output=True, text=True, timeout=300)
    if done.returncode != 0 or not target.exists():
        pytest.fail("the native engine did not build (it needs a C compiler and the Python headers: "
                    f"apt-get install -y gcc python3-dev):\n{done.stdout}{done.stderr}")
    return target


def native_engine_module(build_dir: Path) -> ModuleType:
    """The tree's engine, built and made runner.load.native._engine for this process."""
    target = build_engine(build_dir)
    spec = importlib.util.spec_from_file_location("runner.load.native._engine", target)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    sys.modules["runner.load.native._engine"] = module
    return module


@dataclass
class Plan:
    """One process's run: what both engines are made from."""

    urls: list[str]
    qps: float = 100.0
    clients: int = 2
    seconds: float | None = 2.0  # None: no end (a count or a stop ends it)
    interval_s: float = 0.5
    timeout_s: float = 10.0
    open_model: bool = False
    max_in_flight: int = 1000
    total_requests: int = 0
    bench: bool = False
    no_reuse: bool = False
    max_requests: int = 0  # maxRequestsPerConnection (transport.Lifetime)
    max_age_s: float = 0.0  # maxConnectionAge
    method: str = "GET"
    stop_after_s: float | None = None  # a stop (a signal's) this long after the start, or as soon after as the loop gets to it
    cancel: bool = False  # after a stop, abandon what is in flight at once (no grace)
    unit_ns: int | None = None
    metrics: Any = None  # MetricsTally.native_config() for the native engine
    lead_s: float = 0.05  # soak.LEAD_NS

    @property
    def model(self) -> LoadModel:
        if self.bench:
            return Bench()
        return Open(self.max_in_flight) if self.open_model else Closed()

    def parts(self) -> tuple[Schedule, Load, TransportOptions, Grid]:
        start = time.monotonic_ns() + int(self.lead_s * 1e9)
        end = None if self.seconds is None else start + int(self.seconds * 1e9)
        schedule = Schedule(start, self.qps, self.clients, end)
        requests = [Request(self.method, url, (), b"") for url in self.urls]
        load = Load(requests, self.model, total_requests=self.total_requests)
        options = TransportOptions(timeout_ns=int(self.timeout_s * 1e9), no_reuse=self.no_reuse, compress=False,
                                   max_connections=self.max_in_flight if self.open_model else 1,
                                   lifetime=Lifetime(self.max_requests, int(self.max_age_s * 1e9)))
        return schedule, load, options, Grid(start, int(self.interval_s * 1e9))


@dataclass
class Ran:
    """What one run counted."""

    intervals: list[Interval]
    run: Tally
    drain: Tally | None
    sending_end_ns: int
    schedule: Schedule
    recorder: Recorder | NativeRecorder
    engine: Engine | Any
    wall_s: float

    @property
    def requests(self) -> int:
        return self.run.requests

    @property
    def due(self) -> float:
        """The goal: sends due while this process was sending, the sum of its intervals' `t`."""
        return sum(interval.figures.due or 0.0 for interval in self.intervals)

    def summary(self) -> dict[str, Any]:
        """The figures tests/conftest.py's invariants read, as the JSON summary names them."""
        return {"requests": self.run.requests, "skipped": self.run.skipped,
                "intervalStats": [{"t": i.figures.due} for i in self.intervals],
                "config": {}}


def run_native(plan: Plan, timeout_s: float = 60) -> Ran:
    schedule, load, options, grid = plan.parts()
    engine, recorder = native_run(schedule, load, options, grid, unit_ns=plan.unit_ns, metrics=plan.metrics)
    return asyncio.run(asyncio.wait_for(drive(engine, recorder, plan, schedule, grid), timeout_s))


def run_python(plan: Plan, timeout_s: float = 60) -> Ran:
    schedule, load, options, grid = plan.parts()
    recorder = Recorder(grid, load.model, due=schedule.sends_due if load.model.paced else None, unit_ns=plan.unit_ns)

    async def go() -> Ran:
        engine = Engine(schedule, load, FastTransport(options), recorder.record)
        return await drive(engine, recorder, plan, schedule, grid)

    return asyncio.run(asyncio.wait_for(go(), timeout_s))


async def drive(engine: Any, recorder: Any, plan: Plan, schedule: Schedule, grid: Grid) -> Ran:
    """soak.Soak._drive and _finish, for one engine and its recorder."""
    began = time.monotonic()
    end_ns = schedule.end_ns
    if end_ns is not None:
        recorder.drain_from(end_ns)
    stop_ns = None if plan.stop_after_s is None else grid.start_ns + int(plan.stop_after_s * 1e9)
    task = asyncio.ensure_future(engine.run())
    intervals: list[Interval] = []
    timeout_ns = int(plan.timeout_s * 1e9)

    def close(end: int | None = None, **how: Any) -> Interval:
        if hasattr(engine, "skip_due_before"):
            engine.skip_due_before(grid.end_of(recorder.next_index) if end is None else end)
        interval: Interval = recorder.close(end, **how)
        intervals.append(interval)
        return interval

    while True:
        boundary = grid.end_of(recorder.next_index)
        final = end_ns is not None and boundary >= end_ns
        until = end_ns if final else boundary
        assert until is not None
        if stop_ns is not None and stop_ns <= until:
            await _until(stop_ns, task)
            if time.monotonic_ns() >= stop_ns:
                at = time.monotonic_ns()  # as soak.stop() on a signal: sending stops now, when it is told
                engine.stop(at_ns=at)
                recorder.drain_from(at)
                if not plan.cancel:
                    await _settle(task, GRACE_NS)
                await _abandon(engine, task)
                sending_end = at
                break
        await _until(until, task)
        if task.done() and task.exception() is not None:
            raise task.exception()  # type: ignore[misc]
        if task.done() and plan.total_requests and engine.sent >= plan.total_requests:
            stopped = engine.stopped_sending_ns
            sending_end = stopped if stopped is not None else time.monotonic_ns()
            break
        if time.monotonic_ns() < until:
            continue
        if final:
            await _settle(task, timeout_ns + GRACE_NS)
            await _abandon(engine, task)
            sending_end = until
            break
        close(sending_end_ns=engine.stopped_sending_ns)
    while grid.end_of(recorder.next_index) < sending_end:
        close(sending_end_ns=sending_end)
    open_start = grid.end_of(recorder.next_index - 1)
    last_end = sending_end if sending_end >= open_start else time.monotonic_ns()
    close(last_end, final=True, sending_end_ns=sending_end)
    if task.done() and not task.cancelled() and task.exception() is not None:
        raise task.exception()  # type: ignore[misc]
    return Ran(intervals, recorder.total, recorder.drain, sending_end, schedule, recorder, engine,
               time.monotonic() - began)


async def _until(t_ns: int, task: asyncio.Future[Any]) -> None:
    delay = t_ns - time.monotonic_ns()
    if delay > 0 and not task.done():
        await asyncio.wait([task], timeout=delay / 1e9)


async def _settle(task: asyncio.Future[Any], bound_ns: int) -> None:
    if not task.done():
        await asyncio.wait([task], timeout=bound_ns / 1e9)


async def _abandon(engine: Any, task: asyncio.Future[Any]) -> None:
    if not task.done():
        engine.cancel_in_flight()
        await asyncio.wait([task], timeout=10)
