"""Running a soak from the command line (runner.commands.execute) on a scripted clock: exit codes, stop
reasons, and what it prints where.

execute() runs here as the CLI runs it, with its standard reporters writing to stdout and stderr,
its verdict and exit code, but the run is sent on tests/support/clock.py's scripted clock,
transport and signals (its `launcher`), in one process or split over scripted workers
(tests/support/crew.py). So each test knows exactly what a run must print and exit with: what
tests/integration/test_signals.py, test_thresholds_cli.py, test_scaleout.py and
test_termination_message.py hold the real CLI to.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pytest

from runner.commands.execute import Launch, execute
from runner.config.settings import merge, settings_from
from runner.core.errors import (
    EXIT_INTERRUPTED,
    EXIT_NO_RESPONSE,
    EXIT_OK,
    EXIT_THRESHOLDS,
    EXIT_WORKER_FAILED,
)
from runner.report.base import Reporter
from runner.run import workers
from runner.run.build import Parts
from runner.run.soak import Soak
from tests.conftest import assert_counts_add_up, parse_interval
from tests.support.clock import ScriptedClock, ScriptedSignals, ScriptedTransport
from tests.support.crew import ScriptedCrew
from tests.unit.test_driver import MS, STALL, T0, URL

ENGINE = "soak: engine: python\n"  # the first line on stderr of every run here


def scripted(latency: int = MS, *, signals: Sequence[tuple[int, str]] = (),
             kills: Sequence[tuple[int, int]] = ()) -> Launch:
    """Sends the run on a scripted clock: `signals` (offset from the first send, name) to the process
    (the parent, when the run is split over workers), `kills` (offset, worker) of workers that die."""

    def launch(parts: Parts, reporters: Sequence[Reporter], metrics: Any) -> None:
        clock = ScriptedClock(T0)
        transport = ScriptedTransport(clock, lambda _: latency)
        heard = ScriptedSignals()
        settings = parts.settings
        if settings.split.workers > 1:
            crew = ScriptedCrew(clock, transport, kills=kills, signals=signals, parent=heard)
            workers.run(settings, parts.urls, parts.url_source, reporters, parts.shard.pod(), None,
                        parts.engine.name, clock=clock, signals=heard, spawn=crew.spawn)
            return

        async def main() -> None:
            soak = Soak(replace(parts, transport=transport), reporters, clock=clock, signals=heard)
            first = soak.info.start_ns - settings.pace.warmup_ns
            for offset, name in signals:
                clock.call_at(first + offset, lambda name=name: heard.send(name))  # type: ignore[misc]
            await soak.run()

        clock.run(main())

    return launch


@dataclass
class Ran:
    """What execute() returned and printed."""

    code: int
    stdout: str
    err: str  # stderr, whole

    @property
    def out(self) -> list[str]:
        return self.stdout.splitlines()

    @property
    def summary(self) -> dict[str, Any]:
        """The JSON summary, checked to be printed once, last, and to add up with the interval lines."""
        return assert_counts_add_up(self.stdout)

    @property
    def intervals(self) -> list[Any]:
        return [parse_interval(line) for line in self.out if line[:1].isdigit()]


def run(capsys: pytest.CaptureFixture[str], config: dict[str, Any], launch: Launch) -> Ran:
    """execute() as the CLI calls it, with `config` (the Python engine's, to URL), sent by `launch`."""
    settings = settings_from(merge({"engine": "python", **config}))
    code = execute(settings, [URL], None, launch)
    captured = capsys.readouterr()
    return Ran(code, captured.out, captured.err)


LONG = {"qps": 20, "concurrency": 2, "interval": "1s", "iterations": 600}


def test_a_run_to_its_end_exits_0_its_lines_on_stdout_and_only_the_engine_on_stderr(
        capsys: pytest.CaptureFixture[str]) -> None:
    ran = run(capsys, {"qps": 10, "concurrency": 2, "interval": "1s", "iterations": 2}, scripted())
    assert (ran.code, ran.err) == (EXIT_OK, ENGINE)
    assert ran.out[0] == f"# sending 10 GET req/s with concurrency=2 to {URL} ..."
    assert len(ran.intervals) == 2
    summary = ran.summary
    assert summary["stopReason"] == "iterations" and summary["requests"] == summary["good"] == 20


@pytest.mark.parametrize("sig", ["SIGTERM", "SIGINT"])
def test_a_signal_exits_7_and_stderr_ends_with_the_one_line_that_says_so(capsys: pytest.CaptureFixture[str],
                                                                          sig: str) -> None:
    """test_signals.py's signalled run: exit 7 (it was 0: an evicted pod passed), and one line says why."""
    ran = run(capsys, LONG, scripted(signals=[(1550 * MS, sig)]))
    assert ran.code == EXIT_INTERRUPTED
    assert ran.err == ENGINE + (f"soak: stopped by {sig} before its planned end, after 1.55s of 10m0s: the results "
                                f"cover only that (exit code {EXIT_INTERRUPTED})\n")
    assert ran.summary["stopReason"] == f"signal {sig}"
    assert len(ran.intervals) == 2


def test_a_signal_with_no_answer_yet_exits_8_naming_the_cancelled(capsys: pytest.CaptureFixture[str]) -> None:
    """test_signals.py's stalled run: not one response came back, which says more than the signal."""
    ran = run(capsys, {**LONG, "timeout": "60s"}, scripted(STALL, signals=[(1350 * MS, "SIGTERM")]))
    assert ran.code == EXIT_NO_RESPONSE
    lines = ran.err.splitlines()
    assert lines[0] == ENGINE.strip() and lines[-1].endswith(f"(exit code {EXIT_NO_RESPONSE})")
    assert "cancelled" in lines[-1]
    assert ran.summary["stopReason"] == "signal SIGTERM" and ran.summary["failed"] == ran.summary["requests"] > 0


def test_broken_thresholds_exit_3_and_the_verdict_is_on_stdout(capsys: pytest.CaptureFixture[str]) -> None:
    ran = run(capsys, {"qps": 10, "concurrency": 1, "interval": "1s", "iterations": 2, "thresholds": ["max < 1ms"]},
              scripted(5 * MS))
    assert ran.code == EXIT_THRESHOLDS
    assert "# thresholds: 1 of 1 broken" in ran.out
    assert ran.err == ENGINE  # the verdict's lines say it: nothing more on stderr
    assert ran.summary["thresholds"]["passed"] is False and ran.summary["stopReason"] == "iterations"


def test_abort_on_threshold_stops_the_run_early_with_exit_3(capsys: pytest.CaptureFixture[str]) -> None:
    """test_thresholds_cli.py: a run of ten minutes stops itself after its first interval, prints
    everything once, and says why in its summary."""
    ran = run(capsys, {**LONG, "intervalThresholds": ["p50 < 1ns"], "abortOnThreshold": True}, scripted())
    assert ran.code == EXIT_THRESHOLDS
    summary = ran.summary
    assert summary["stopReason"] == "threshold interval p50 < 1ns"
    assert summary["thresholds"]["stoppedEarly"] == "interval p50 < 1ns broken in interval 0"
    assert len(ran.intervals) == 2 and ran.intervals[0].interval == "1s"  # the last one cut short, as after a signal


def test_a_split_run_with_a_dead_worker_exits_5_and_names_it_on_stderr(capsys: pytest.CaptureFixture[str]) -> None:
    """test_scaleout.py's SIGKILLed worker, through the command: exit 5, its line on stderr, its
    failure in the summary."""
    ran = run(capsys, {"qps": 20, "concurrency": 2, "interval": "1s", "iterations": 3, "workers": 2},
              scripted(kills=[(1500 * MS, 1)]))
    assert ran.code == EXIT_WORKER_FAILED
    assert ran.err == ENGINE + "soak: worker 1 failed: exited with code -9 before its summary\n"
    assert ran.summary["failedWorkers"] == {"1": "exited with code -9 before its summary"}
    assert len(ran.intervals) == 3


def test_a_split_run_signalled_exits_7(capsys: pytest.CaptureFixture[str]) -> None:
    """test_scaleout.py's workers stopped together by SIGTERM: exit 7 (it was 0), stopped by the signal."""
    ran = run(capsys, {**LONG, "workers": 2}, scripted(signals=[(1550 * MS, "SIGTERM")]))
    assert ran.code == EXIT_INTERRUPTED
    assert ran.summary["stopReason"] == "signal SIGTERM"
    assert ran.err.endswith(f"the results cover only that (exit code {EXIT_INTERRUPTED})\n")


def test_the_termination_message_says_the_exit_code_and_why(capsys: pytest.CaptureFixture[str],
                                                            tmp_path: Path) -> None:
    """test_termination_message.py: where Kubernetes shows why the container ended."""
    message = tmp_path / "termination-log"
    ran = run(capsys, {**LONG, "terminationMessagePath": str(message)}, scripted(signals=[(1550 * MS, "SIGTERM")]))
    assert ran.code == EXIT_INTERRUPTED
    assert message.read_text() == ("exit code 7: stopped by SIGTERM before its planned end, after 1.55s of 10m0s: "
                                   "the results cover only that\n")
