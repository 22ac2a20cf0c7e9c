"""Running the native engine (and the Python one, to compare) the way a soak runs an engine.

`native_engine_module` compiles runner.load.native._engine from the tree's sources into a
directory and makes it the one `runner.load.native.engine` imports, so a test always runs the
C in the tree, however the package was installed (as replay.native_parser does for the parser).

`run_native` and `run_python` run a Plan the way `soak` does: its settings built into the
run's parts (runner.run.build) and driven by runner.run.soak.Soak itself, with its intervals,
its stop (a signal's, `stop_after_s`) and its drain, on the engine named; `Ran` holds what came
out, in the figures the invariants of tests/conftest.py are stated in. `Plan.parts()` gives
the engines' own inputs, for tests that drive an engine directly.
"""

from __future__ import annotations

import asyncio
import importlib.util
import shlex
import sys
import sysconfig
import time
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from runner.config.settings import Settings, merge, settings_from
from runner.core.durations import format_duration
from runner.load.engine import Engine
from runner.load.model import Bench, Closed, Load, LoadModel, Open
from runner.load.request import Request
from runner.load.schedule import Grid, Schedule
from runner.load.transport import Lifetime, TransportOptions
from runner.metrics.tally import MetricsTally, url_slots
from runner.report.base import Reporter
from runner.run.build import build
from runner.run.engines import NativeRun, PythonRun
from runner.run.soak import Soak
from runner.stats.native import TakenRecorder
from runner.stats.recorder import Interval, Recorder, Tally
from runner.stats.runinfo import RunInfo
from tests.support.cbuild import OUTPUT, compiled

REPO = Path(__file__).resolve().parents[2]
NATIVE = REPO / "runner" / "load" / "native"
SOURCES = ("engine.c", "core.c", "response.c", "body.c", "tls.c")
MS = 1_000_000


def build_engine(build_dir: Path, flags: tuple[str, ...] = ("-O2",)) -> Path:
    """The engine extension compiled from the tree's sources with `flags`; its path. Compiled once per
    test run (tests/support/cbuild.py), so `build_dir` is only where a failure's output is kept."""
    compiler = shlex.split(sysconfig.get_config_var("CC") or "cc")
    command = [*compiler, "-std=c11", "-shared", "-fPIC", *flags, f"-I{sysconfig.get_paths()['include']}", "-o",
               OUTPUT, *(str(NATIVE / source) for source in SOURCES), "-lm", "-lz", "-lssl", "-lcrypto"]
    target, done = compiled(command, f"_engine{sysconfig.get_config_var('EXT_SUFFIX')}")
    if not target.exists():
        output = f"{done.stdout}{done.stderr}" if done is not None else ""
        (build_dir / "compiler.log").write_text(output)
        pytest.fail("the native engine did not build (it needs a C compiler, the Python headers and OpenSSL's: "
                    f"apt-get install -y gcc python3-dev libssl-dev):\n{output}")
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
    stop_dated_back_s: float = 0.0  # the stop asked for at a time this long before it reaches the engine (a wait)
    unit_ns: int | None = None
    metrics: bool = False  # count Prometheus' metrics too (Soak's `metrics`, a MetricsTally the engine counts into)
    backend_header: str = ""  # backendHeader: responses counted by its value
    ca_bundle: str = ""  # caBundle: the CAs an https URL's server is verified against
    lead_s: float = 0.05  # soak.LEAD_NS
    # False: each interval is dropped once reported, as a real run drops it, so the process's memory
    # does not grow with the count of intervals (Ran.intervals is then empty and Ran.due 0).
    keep_intervals: bool = True

    @property
    def model(self) -> LoadModel:
        if self.bench:
            return Bench()
        return Open(self.max_in_flight) if self.open_model else Closed()

    def settings(self, engine: str) -> Settings:
        """The run as its configuration says it, for Soak on `engine`."""
        config: dict[str, Any] = {
            "mode": "bench" if self.bench else "soak", "qps": self.qps, "concurrency": self.clients,
            "interval": format_duration(round(self.interval_s * 1e9)),
            "timeout": format_duration(round(self.timeout_s * 1e9)),
            "loadModel": "open" if self.open_model else "closed", "maxInFlight": self.max_in_flight,
            "totalRequests": self.total_requests, "noReuse": self.no_reuse, "method": self.method,
            "maxRequestsPerConnection": self.max_requests,
            "maxConnectionAge": format_duration(round(self.max_age_s * 1e9)), "engine": engine,
            "backendHeader": self.backend_header, "caBundle": self.ca_bundle,
        }
        if self.seconds is None:
            config["iterations"] = 0
        else:
            config["duration"] = format_duration(round(self.seconds * 1e9))
        if self.unit_ns is not None:
            config["reportLatenciesCSV"] = "/dev/null"
            config["latencyUnit"] = {1: "ns", 1000: "us", 1_000_000: "ms"}[self.unit_ns]
        return settings_from(merge(config))

    def parts(self) -> tuple[Schedule, Load, TransportOptions, Grid]:
        start = time.monotonic_ns() + int(self.lead_s * 1e9)
        end = None if self.seconds is None else start + int(self.seconds * 1e9)
        schedule = Schedule(start, self.qps, self.clients, end)
        requests = [Request(self.method, url, (), b"") for url in self.urls]
        load = Load(requests, self.model, total_requests=self.total_requests)
        options = TransportOptions(timeout_ns=int(self.timeout_s * 1e9), no_reuse=self.no_reuse, compress=False,
                                   max_connections=self.max_in_flight if self.open_model else 1,
                                   lifetime=Lifetime(self.max_requests, int(self.max_age_s * 1e9)),
                                   backend_header=self.backend_header, ca_bundle=self.ca_bundle)
        return schedule, load, options, Grid(start, int(self.interval_s * 1e9))


@dataclass
class Ran:
    """What one run counted."""

    intervals: list[Interval]
    run: Tally
    drain: Tally | None
    sending_end_ns: int
    schedule: Schedule
    recorder: Recorder | TakenRecorder
    engine: Engine | Any  # the native one: runner.load.native.engine's
    wall_s: float
    metrics: MetricsTally | None = None  # what the metrics counted, with Plan.metrics

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
    """The plan run as `soak` runs it (runner.run.build and runner.run.soak.Soak), on the native engine."""
    return run_soak_engine(plan, "native", timeout_s)


def run_python(plan: Plan, timeout_s: float = 60) -> Ran:
    """The same on the Python engine (on httpx, the `fast` transport's client there): the reference."""
    return run_soak_engine(plan, "python", timeout_s)


class _Intervals(Reporter):
    """Keeps every interval the run reports (each with its tally and histograms), or none."""

    def __init__(self, keep: bool) -> None:
        self.keep = keep
        self.intervals: list[Interval] = []

    def interval(self, info: RunInfo, interval: Interval) -> None:
        if self.keep:
            self.intervals.append(interval)


def run_soak_engine(plan: Plan, engine: str, timeout_s: float = 60) -> Ran:
    """The plan run by Soak itself on `engine`: the same driver, stops and drain as a real run."""
    settings = plan.settings(engine)
    parts = build(settings, plan.urls, None)
    assert parts.engine.name == engine, parts.engine
    kept = _Intervals(plan.keep_intervals)
    shown = parts.shown if plan.backend_header else None
    metrics = MetricsTally(url_slots(plan.urls), parts.model, shown) if plan.metrics else None

    async def go() -> Ran:
        began = time.monotonic()
        soak = Soak(parts, [kept], metrics=metrics)
        if plan.stop_after_s is not None:  # as a SIGTERM (and, to cancel at once, a second) that long after the start
            delay = (soak.info.start_ns - time.monotonic_ns()) / 1e9 + plan.stop_after_s
            loop = asyncio.get_running_loop()
            back_ns = round(plan.stop_dated_back_s * 1e9)  # a stop that waited for the engine: asked for that long ago
            loop.call_later(max(0.0, delay), lambda: soak.stop("signal SIGTERM", at_ns=time.monotonic_ns() - back_ns))
            if plan.cancel:
                loop.call_later(max(0.0, delay), soak._second_signal.set)
        summary = await soak.run()
        run = soak._run
        assert isinstance(run, NativeRun | PythonRun)
        return Ran(kept.intervals, summary.tally, summary.drain, summary.sending_end_ns, soak._schedule,
                   run.recorder, run.engine, time.monotonic() - began, metrics)

    return asyncio.run(asyncio.wait_for(go(), timeout_s))
