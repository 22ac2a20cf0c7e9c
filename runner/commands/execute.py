"""Running a soak or a bench from the command line: its parts, its reporters, its exit code.

`soak run`, `soak demo` and `soak bench` all end here once they have their settings and
URLs. This wires the parts together and chooses nothing that the settings do not say.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from runner.commands.outputs import OUTPUTS
from runner.commands.termination import ended
from runner.config.files import open_output
from runner.config.settings import Settings
from runner.core.errors import EXIT_PROXY_NOT_READY
from runner.load.model import Bench, LoadModel
from runner.load.shards import Shard
from runner.report.abreport import AbReporter
from runner.report.abreport import report_with_notes as ab_report
from runner.report.base import Reporter
from runner.report.outcome import ExitCode
from runner.report.slowcooker import SlowCookerReporter
from runner.report.summary import JsonSummaryReporter
from runner.run import launch
from runner.run.build import EngineChoice, Parts, build
from runner.run.linkerd import proxy_lifecycle
from runner.stats.runinfo import RunSummary

if TYPE_CHECKING:  # what only some settings ask for loads when they do (JUnit's XML, ssl)
    from runner.metrics.collector import Metrics
    from runner.report.junit import JUnitReporter
    from runner.report.verdict import Verdict

PROG = "soak"
# The resultsStore writer's hook (runner.store.writer.StoreWriter): the finished summary in, its keys out.
Stored = Callable[[RunSummary, dict[str, Any]], dict[str, Any]]
# Sends the built run, telling its reporters (and its metrics, when they are on): launched, or in
# the unit tier the same run on a scripted clock, transport and signals.
Launch = Callable[[Parts, Sequence[Reporter], "Metrics | None"], object]


def execute(settings: Settings, urls: Sequence[str], source: str | None, launcher: Launch | None = None) -> int:
    """Run one soak (or bench) with the standard reporters; the exit code.

    Split over local worker processes when `workers` asks for it; as one shard of a run
    split over pods when `shards` does. The exit code is worked out from the finished run by
    the last reporter (runner.report.outcome), which also says why on stderr. `launcher`: what
    sends the run (default: launched, in real time).
    """
    parts = build(settings, urls, source)  # everything a run refuses stops here, before any load
    if settings.client.insecure:
        from runner.load.tls import INSECURE_WARNING

        say(INSECURE_WARNING)
    verdict = _verdict(settings)  # thresholds: judged as the run goes; exit code 3
    stored = _stored(settings, verdict)
    # OUTPUTS.watch() first: stdout's reader may leave.
    reporters = [OUTPUTS.watch(), *reporters_for(settings, parts.model, verdict, stored)]
    # Listening before any load is sent.
    metrics = _metrics(settings, parts.model, urls, verdict, parts.shard.pod(), parts.shown)
    if metrics is not None:
        reporters.append(metrics.reporter)
    outcome = ExitCode(say, verdict, output_lost=lambda: OUTPUTS.failed)
    reporters.append(outcome)  # last: its line comes after everything else the run prints
    junit = junit_reporter(settings.report.junit, verdict, outcome)
    if junit is not None:
        reporters.append(junit)  # after the exit code: its file says which codes applied
    with proxy_lifecycle(settings, say) as proxy_ready:  # linkerdAwait, linkerdShutdown
        if not proxy_ready:
            if junit is not None:
                junit.not_run(EXIT_PROXY_NOT_READY, "the Linkerd proxy was not ready in time; nothing was sent")
            return ended(settings, EXIT_PROXY_NOT_READY, verdict)
        say(engine_line(parts.engine))  # the run starts: which engine measures it (a refused run gets its one line)
        (launcher if launcher is not None else launched)(parts, reporters, metrics)
    return ended(settings, outcome.code, verdict, outcome.said)  # and says why, in the termination message too


def launched(parts: Parts, reporters: Sequence[Reporter], metrics: Metrics | None) -> None:
    """The run itself, on the system's clock and the process's signals: in this process, or split over
    local worker processes when `workers` asks for it."""
    settings = parts.settings
    if settings.split.workers > 1:
        from runner.run import workers  # multiprocessing loads only for a run split over processes

        workers.run(settings, parts.urls, parts.url_source, reporters, parts.shard.pod(),
                    metrics.workers if metrics else None, parts.engine.name)
    else:
        launch.run(parts, reporters, metrics=metrics.tally if metrics else None)


def reporters_for(settings: Settings, model: LoadModel, verdict: Verdict | None = None,
                  stored: Stored | None = None) -> list[Reporter]:
    """A soak prints slow_cooker's lines, a bench ab's; then the thresholds' verdict; both end with the JSON summary.

    `stored` keeps the summary in the resultsStore before it is printed (runner.store.writer):
    made even when noLatencySummary prints none, as the record holds it whole.
    """
    reporters: list[Reporter]
    judged: list[Reporter] = [verdict] if verdict is not None else []
    sections = [verdict.section] if verdict is not None else []
    printed = not settings.report.no_latency_summary
    if isinstance(model, Bench):
        reporters = [
            AbReporter(sys.stdout, sys.stderr, settings.pace.total_requests),
            *judged,
            JsonSummaryReporter(sys.stdout, before=ab_report, with_json=printed, sections=sections, stored=stored),
        ]
    else:
        reporters = [SlowCookerReporter(sys.stdout, sys.stderr), *judged]
        if printed or stored is not None:
            reporters.append(JsonSummaryReporter(sys.stdout, with_json=printed, sections=sections, stored=stored))
    if settings.report.report_latencies_csv:
        from runner.report.csvreport import CsvReporter

        path = settings.report.report_latencies_csv
        reporters.append(CsvReporter(open_output(path, "reportLatenciesCSV"), f"reportLatenciesCSV: {path}",
                                     OUTPUTS.failure))
    return reporters


def _verdict(settings: Settings) -> Verdict | None:
    """The thresholds' verdict (Verdict.for_settings): its code loads only for a run that states thresholds."""
    if not settings.thresholds.rules:
        return None
    from runner.report.verdict import Verdict

    return Verdict.for_settings(settings, sys.stdout)


def _stored(settings: Settings, verdict: Verdict | None) -> Stored | None:
    """The run's record for the resultsStore, when the settings name one (the store's code loads only then)."""
    if not settings.results.wanted:
        return None
    from runner.store.writer import StoreWriter

    return StoreWriter(settings, verdict, sys.argv, say, output_lost=lambda: OUTPUTS.failed)
def junit_reporter(path: str, verdict: Verdict | None, outcome: ExitCode) -> JUnitReporter | None:
    """The JUnit XML writer (the junit setting, or merge's --junit), its file opened now; None without a path."""
    if not path:
        return None
    from runner.report.junit import JUnitReporter

    return JUnitReporter(open_output(path, "junit"), f"junit: {path}", verdict, outcome, OUTPUTS.failure,
                         OUTPUTS.exit_code)


def _metrics(settings: Settings, model: LoadModel, urls: Sequence[str], verdict: Verdict | None,
             pod: Shard, shown: Callable[[str], str]) -> Metrics | None:
    """The run's Prometheus metrics, when the settings ask for them (prometheus_client loads only then)."""
    if not settings.metrics.wanted:
        return None
    from runner.metrics.collector import Metrics

    return Metrics(settings, model, urls, verdict, sys.stderr, pod, shown)


def engine_line(engine: EngineChoice) -> str:
    """`engine: native`, or `engine: python (<why not native>)`: which engine measures this run."""
    return f"engine: {engine.name}" + (f" (the native engine cannot send this run: {engine.why})" if engine.why else "")


def say(line: str) -> None:
    """A line about the run itself, on stderr beside the failures, prefixed like an error line."""
    print(f"{PROG}: {line}", file=sys.stderr)
