"""The run's exit code, from what the finished run did, and the one line that says why.

A failed Job is read from its exit code: each way a run can go wrong has its own
(runner.core.errors), and when several apply the precedence there picks one. This reporter
hears the end of the run last, works out every code that applies (pure: applying()), and
says on stderr, one line each, those that no other line says: the run was stopped by a
signal before its planned end, or not one response came back; the line of the code the run
exits with comes last, the last line of `kubectl logs`. Broken thresholds have their
own lines (the verdict's) and a failed worker its own (`soak: worker N failed: ...`); an inconclusive
verdict (its rules broke only where the client's own delay may have changed their figures) gets one
here too, as the verdict lines alone would read as a failure of the service.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from runner.core.durations import format_duration
from runner.core.errors import (
    EXIT_INCONCLUSIVE,
    EXIT_INTERRUPTED,
    EXIT_NO_RESPONSE,
    EXIT_OK,
    EXIT_OUTPUT,
    EXIT_WORKER_FAILED,
    exit_code,
)
from runner.core.redact import printable
from runner.report.base import Reporter
from runner.report.slowcooker import to_ms
from runner.stats.runinfo import SIGNAL_STOP, RunSummary, before_the_others

if TYPE_CHECKING:  # a run without thresholds has no verdict and loads none (commands.execute)
    from runner.report.verdict import Verdict

Said = tuple[int, str]  # an exit code that applies, and its line ("" when another line says it)


def applying(summary: RunSummary, verdict_code: int = EXIT_OK, verdict_line: str = "") -> list[Said]:
    """Every exit code that applies to the finished run, each with the line that says why.

    `verdict_code` is the thresholds' (0, 3 or 9), `verdict_line` what to say of it, if anything.
    """
    found: list[Said] = []
    if summary.failed_workers:
        found.append((EXIT_WORKER_FAILED, ""))  # each failed worker has had its line
    if summary.unanswered:
        found.append((EXIT_NO_RESPONSE, no_response_line(summary)))
    if verdict_code != EXIT_OK:
        found.append((verdict_code, verdict_line))
    if summary.stop_signal is not None:
        found.append((EXIT_INTERRUPTED, interrupted_line(summary)))
    return found


def no_response_line(summary: RunSummary) -> str:
    """`no response at all: 10 requests sent, none answered (refused 10)`."""
    figures = summary.figures
    # printable: a merged run's kinds come from logs, which anyone may have written
    kinds = ", ".join(f"{printable(kind)} {n}" for kind, n in Counter(figures.errors).most_common() if n)
    return f"no response at all: {_requests(figures.requests)} sent, none answered ({kinds})"


def interrupted_line(summary: RunSummary) -> str:
    """`stopped by SIGTERM before its planned end, after 12.3s of 1m0s: the results cover only that`;
    for a merged run, which shards were stopped and when (`... before its planned end: shard 1 of 3
    after 10m0s of 59m0s: its share of the rest was not sent`), for the run's own end may be planned."""
    info = summary.info
    pace = info.settings.pace
    stopped = (summary.shards or {}).get("stopped")
    if stopped:
        return _shards_interrupted_line(summary, stopped)
    sent = format_duration(to_ms(max(summary.sending_ns, 0)))
    if pace.run_ns is not None:
        part = f"after {sent} of {format_duration(pace.run_ns)}"
    elif pace.total_requests:
        part = f"after {summary.figures.requests} of {_requests(info.shard.share(pace.total_requests))}"
    else:
        part = f"after {sent}"
    return f"stopped by {summary.stop_signal} before its planned end, {part}: the results cover only that"


def _shards_interrupted_line(summary: RunSummary, stopped: Sequence[dict[str, Any]]) -> str:
    """interrupted_line() of a merged run, from its summary's `shards.stopped` (runner.stats.merge)."""
    info = summary.info
    planned = info.settings.pace.run_ns
    of = f" of {format_duration(planned)}" if planned is not None else ""
    count = (summary.shards or {}).get("count")
    parts = [f"shard {stop['shard']} of {count} after {format_duration(to_ms(round(stop['sendingSeconds'] * 1e9)))}{of}"
             for stop in stopped]
    signals = sorted({str(stop["stopReason"]).removeprefix(SIGNAL_STOP) for stop in stopped})
    early = sum(before_the_others(stop, info.settings.pace.interval_ns) for stop in stopped)
    why = ("the results cover only that" if not early else
           f"{'its share' if early == 1 else 'their shares'} of the rest was not sent while the others went on, and "
           "stays in the goal")
    return f"stopped by {' and '.join(signals)} before its planned end: {', '.join(parts)}: {why}"


def _requests(n: int) -> str:
    return f"{n} request" if n == 1 else f"{n} requests"


def said_lines(found: list[Said], code: int) -> list[str]:
    """The lines of `found` as they are said on stderr: the line of `code`, the one the run exits
    with, last (the last line of `kubectl logs`), ending in `(exit code N)`."""
    ordered = sorted(found, key=lambda said: said[0] == code)  # stable: the others keep their order
    return [f"{text} (exit code {c})" if c == code else text for c, text in ordered if text]


def judged(summary: RunSummary, verdict: Verdict | None, also: Sequence[int] = ()) -> list[Said]:
    """Every exit code that applies to the finished run, its thresholds judged by `verdict`, with
    `also` (codes known beforehand, said by lines of their own): exit_code() of them is the run's."""
    if verdict is not None:
        verdict.judge(summary)  # worked out once; the verdict's own finish has usually done it
    code = verdict.exit_code if verdict is not None else EXIT_OK
    line = verdict.inconclusive_line() if verdict is not None and code == EXIT_INCONCLUSIVE else ""
    return [*((known, "") for known in also), *applying(summary, code, line)]


class ExitCode(Reporter):
    """Hears the finished run last; its `code` is the run's exit code, and it says why with `say`
    (a line on stderr). `verdict` judges the thresholds, if the run has any. `said` holds what
    it said for the termination message (commands.termination): the exit code's own line ("" when
    another says it, as the verdict's lines say a 3), then the others; `applying` every code that
    applies, with its line (runner.report.junit makes the run's test case of them)."""

    def __init__(self, say: Callable[[str], None], verdict: Verdict | None = None, also: Sequence[int] = (),
                 output_lost: Callable[[], bool] = lambda: False) -> None:
        self._say = say
        self._verdict = verdict
        self._also = also  # codes known to apply beforehand, said by lines of their own (a shard missing)
        # Whether an output could not be written (6: its own line said which) by the time the run ends,
        # so that no line here claims a code of lower precedence (a signal's 7) for the exit code.
        self._output_lost = output_lost
        self.code = EXIT_OK
        self.said: list[str] = []
        self.applying: list[Said] = []

    def finish(self, summary: RunSummary) -> None:
        found = judged(summary, self._verdict, self._also)
        if self._output_lost():
            found.append((EXIT_OUTPUT, ""))
        self.applying = found
        self.code = exit_code(code for code, _ in found)
        for line in said_lines(found, self.code):
            self._say(line)
        self.said = said_texts(found, self.code)


def said_texts(found: list[Said], code: int) -> list[str]:
    """What the run's end said of its codes, for the termination message and the run's record: the line
    of `code`, the one it exits with, first ("" when another line says it, as the verdict's say a 3),
    then the others."""
    own = [text for c, text in found if c == code]
    return [own[0] if own else "", *(text for c, text in found if c != code and text)]


def verdict_lines(verdict: Verdict | None) -> list[str]:
    """What the verdict says of the finished run: how many thresholds held, then each that did not,
    as its line in the log says it (`threshold run errors% <= 1: 100% BROKEN`, or `... INCONCLUSIVE`
    when it broke only where the client's own delay may have changed its figure). Nothing without
    thresholds, or when no run was judged."""
    if verdict is None or verdict.outcomes is None:
        return []
    outcomes = verdict.outcomes
    failing = [o for o in outcomes if not o.ok]
    rules = f"{len(outcomes)} threshold{'s' if len(outcomes) > 1 else ''}"
    broken = sum(not o.inconclusive for o in failing)
    parts = [f"{broken} of {rules} broken"] if broken else []
    if len(failing) > broken:
        parts.append(f"{len(failing) - broken} of {len(outcomes) if parts else rules} inconclusive")
    total = ", ".join(parts) or f"{len(outcomes)} of {rules} kept"
    return [total, *(o.line().removeprefix("# ").rstrip("\n") for o in failing)]
