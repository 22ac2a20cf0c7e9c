"""The verdict as JUnit XML, the file CI systems read: a test case per threshold rule, and the run.

Jenkins, GitLab, GitHub's and Azure's test reports all read the JUnit XML that Ant's JUnit task
wrote first, so a soak in a pipeline shows there as tests: which rule broke, by how much, and
whether the run itself went wrong, without anyone reading the log. The mapping, one place:

- each threshold rule is a test case named by its scope and its text as written, which holds
  its URL scope and its phase (`run p99{url=/checkout} < 200ms`, `interval connect.p99 < 5ms`):
  kept, it passes; BROKEN, it fails with the measured value; INCONCLUSIVE (broken only where
  the client's own delay may have changed its figure: runner.report.verdict), it is skipped with that reason, as
  it says nothing of the service either way;
- the run itself is a test case `run` that errors, with the reason, when a code applies that
  says the run went wrong whatever its rules say (RUN_ERRORS: a part missing, 5; stopped by a
  signal, 7; not one response, 8; the Linkerd proxy never ready, 4). It is there too when the
  run has no rules, passing, so the file always holds a case; with rules and no error it is
  left out, so the cases are the rules, one for one.

Every case is built from Outcome records (never from the text of the verdict's lines), and
every text from them is escaped by ElementTree after the characters XML 1.0 cannot hold at all
are replaced, and URLs' secrets hidden as on stdout: a rule, a URL or a log read back may hold
anything.
junit_xml() is pure; JUnitReporter writes it at the end of a run, to a file opened before it.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from collections.abc import Callable, Sequence
from typing import TextIO

from runner.core import redact
from runner.core.errors import EXIT_INTERRUPTED, EXIT_NO_RESPONSE, EXIT_PROXY_NOT_READY, EXIT_WORKER_FAILED
from runner.core.lazymethods import dataclass
from runner.core.units import rfc3339
from runner.report.base import Reporter
from runner.report.outcome import ExitCode
from runner.report.verdict import Outcome, Verdict
from runner.stats.runinfo import RunSummary

# Exit codes that make the run's own test case an error: the run went wrong, whatever its rules say.
RUN_ERRORS = (EXIT_PROXY_NOT_READY, EXIT_WORKER_FAILED, EXIT_INTERRUPTED, EXIT_NO_RESPONSE)
_RUN_ERROR_WORDS = {
    EXIT_PROXY_NOT_READY: "the Linkerd proxy was not ready in time; nothing was sent",
    EXIT_WORKER_FAILED: "part of the run is missing",
    EXIT_INTERRUPTED: "stopped by a signal before its planned end",
    EXIT_NO_RESPONSE: "not one response came back",
}
SUITE = "soak"
RULES_CLASS = "soak.thresholds"
RUN_CLASS = "soak"
RUN_CASE = "run"
_LISTED_INTERVALS = 10
# What XML 1.0 cannot hold, escaped or not: control characters but tab, LF and CR; surrogates; U+FFFE/F.
_NOT_XML = re.compile("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


@dataclass(frozen=True)
class RunError:
    """A code that says the run itself went wrong, and why."""

    code: int
    reason: str


@dataclass(frozen=True)
class Case:
    """One test case: `kind` is passed, failure, skipped or error; `message` short, `text` the detail."""

    name: str
    classname: str
    kind: str = "passed"
    message: str = ""
    text: str = ""


@dataclass(frozen=True)
class Suite:
    """What the file says of one run (or one run read back): its cases, and when and how long."""

    cases: tuple[Case, ...]
    name: str = SUITE  # a run read back by `soak report`: its file's name
    timestamp: str | None = None  # the run's start, as the summary writes it
    seconds: float | None = None  # how long it ran
    properties: tuple[tuple[str, str], ...] = ()  # exit code, source, ...: shown beside the cases


def rule_case(outcome: Outcome) -> Case:
    """A rule's test case: passed, a failure with the measured value, or skipped with the reason."""
    rule = outcome.rule
    name = f"{rule.scope} {rule.text}"
    value = measured_text(outcome)
    if outcome.ok:
        return Case(name, RULES_CLASS, "passed", text=f"kept: {value}")
    if outcome.inconclusive:
        reason = f"inconclusive: broken only where the client's own delay may have changed its figure ({value}"
        if rule.scope == "run" and outcome.kept is not None:
            reason += f"; {rule.show(outcome.kept)} where it kept pace"
        reason += "): this says nothing of the service"
        return Case(name, RULES_CLASS, "skipped", message=reason, text=reason)
    return Case(name, RULES_CLASS, "failure", message=f"broken: {value}",
                text=f"{name}: broken: {value}{broken_intervals(outcome)}")


def measured_text(outcome: Outcome) -> str:
    """`measured 12.3ms`, `worst 12.3ms (interval 4)`, or that there was nothing to measure."""
    if outcome.elsewhere:
        return "not sent to by this shard (other shards send to it)"
    if outcome.measured is None:
        return "nothing to measure" if outcome.rule.scope == "run" else "no interval to measure"
    shown = outcome.rule.show(outcome.measured)
    if outcome.rule.scope == "run":
        return f"measured {shown}"
    return f"worst {shown} (interval {outcome.worst})"


def broken_intervals(outcome: Outcome) -> str:
    """`, broken in 3 of 10 intervals (2, 5, 7)` for an interval rule; empty for a run rule."""
    if outcome.rule.scope != "interval" or not outcome.broken:
        return ""
    listed = ", ".join(map(str, outcome.broken[:_LISTED_INTERVALS]))
    more = ", ..." if len(outcome.broken) > _LISTED_INTERVALS else ""
    return f", broken in {len(outcome.broken)} of {outcome.judged} intervals ({listed}{more})"


def run_case(errors: Sequence[RunError]) -> Case:
    """The run's own test case: an error saying each code that applies, or a pass."""
    if not errors:
        return Case(RUN_CASE, RUN_CLASS, "passed", text="the run went to its end")
    codes = ", ".join(str(e.code) for e in errors)
    return Case(RUN_CASE, RUN_CLASS, "error", message="; ".join(e.reason for e in errors),
                text="\n".join(f"exit code {e.code}: {e.reason}" for e in errors) + f"\n(exit codes {codes} apply)")


def error_case(reason: str) -> Case:
    """The run's case when what is read back holds no verdict, or a damaged one: an error saying so."""
    return Case(RUN_CASE, RUN_CLASS, "error", message=reason, text=reason)


def cases(outcomes: Sequence[Outcome], errors: Sequence[RunError]) -> tuple[Case, ...]:
    """The rules' cases, and the run's when it errs or there is no rule to say anything."""
    found = [rule_case(o) for o in outcomes]
    if errors or not found:
        found.append(run_case(errors))
    return tuple(found)


def junit_xml(*suites: Suite) -> str:
    """The JUnit XML document: <testsuites> with a <testsuite> of cases per run (one, but for a
    range of runs read back by `soak report`)."""
    root = ET.Element("testsuites", {"name": SUITE})
    totals = dict.fromkeys(("tests", "failures", "errors"), 0)
    for suite in suites:
        counts = {"tests": len(suite.cases), "failures": sum(c.kind == "failure" for c in suite.cases),
                  "errors": sum(c.kind == "error" for c in suite.cases),
                  "skipped": sum(c.kind == "skipped" for c in suite.cases)}
        attributes = {"name": _safe(suite.name), **{key: str(n) for key, n in counts.items()}}
        if suite.seconds is not None:
            attributes["time"] = f"{max(suite.seconds, 0.0):.3f}"
        if suite.timestamp is not None:
            attributes["timestamp"] = _safe(suite.timestamp)
        element = ET.SubElement(root, "testsuite", attributes)
        if suite.properties:
            properties = ET.SubElement(element, "properties")
            for key, value in suite.properties:
                ET.SubElement(properties, "property", {"name": _safe(key), "value": _safe(value)})
        for case in suite.cases:
            _case_element(element, case)
        totals = {key: totals[key] + counts[key] for key in totals}
    root.attrib.update({key: str(n) for key, n in totals.items()})
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"


def _case_element(parent: ET.Element, case: Case) -> None:
    element = ET.SubElement(parent, "testcase", {"name": _safe(case.name), "classname": case.classname,
                                                 "time": "0"})
    if case.kind != "passed":
        detail = ET.SubElement(element, case.kind, {"message": _safe(case.message)})
        if case.kind != "skipped":
            detail.set("type", {"failure": "ThresholdBroken", "error": "RunError"}[case.kind])
        detail.text = _safe(case.text)
    elif case.text:
        ET.SubElement(element, "system-out").text = _safe(case.text)


def _safe(text: str) -> str:
    """Text XML can hold: URLs' secrets hidden (as on stdout), characters XML 1.0 has no place for
    replaced by U+FFFD; ElementTree escapes the rest (&, <, >, quotes)."""
    return _NOT_XML.sub("\ufffd", redact.in_text(text))


# --- A run's file ---------------------------------------------------------------------------


def run_errors(summary: RunSummary, applying: Sequence[tuple[int, str]]) -> list[RunError]:
    """The codes that apply to the finished run (ExitCode.applying) that make its case an error,
    each with the line the run's end said of it, or what the summary tells where none was said
    (a failed worker's and a missing shard's have lines of their own)."""
    found: list[RunError] = []
    for code, line in applying:
        if code not in RUN_ERRORS or any(e.code == code for e in found):
            continue
        found.append(RunError(code, line or _missing_part(summary) or _RUN_ERROR_WORDS[code]))
    return found


def _missing_part(summary: RunSummary) -> str:
    """What part of the run is missing: failed workers, or a merged run's missing or cut shards."""
    parts = [f"worker {n} failed: {text}" for n, text in sorted((summary.failed_workers or {}).items())]
    shards = summary.shards or {}
    count = shards.get("count")
    for key, words in (("missing", "missing"), ("incomplete", "cut off or damaged")):
        for index in shards.get(key) or ():
            parts.append(f"shard {index} of {count}: {words}")
    return "; ".join(parts)


def run_suite(summary: RunSummary, outcomes: Sequence[Outcome], errors: Sequence[RunError], code: int) -> Suite:
    """The suite of a finished run."""
    return Suite(cases(outcomes, errors), SUITE, rfc3339(summary.info.wall_start, fraction=True),
                 summary.elapsed_ns / 1e9, (("exitCode", str(code)), ("stopReason", summary.stop_reason)))


class JUnitReporter(Reporter):
    """Writes the JUnit XML at the end, to a file opened before the run (runner.config.files.open_output).

    It hears the end after `outcome` (the run's ExitCode), whose `applying` codes it reads; the
    thresholds' outcomes are `verdict`'s, worked out once. A write that fails is handed to
    `failed` with the output's `name`, as the CSV's is (runner.commands.outputs)."""

    def __init__(self, file: TextIO, name: str, verdict: Verdict | None, outcome: ExitCode,
                 failed: Callable[[str, OSError], None], final: Callable[[int], int] = lambda code: code) -> None:
        self._file = file
        self._name = name
        self._verdict = verdict
        self._outcome = outcome
        self._failed = failed
        self._final = final  # the exit code as the process ends with it (an output lost makes it 6)

    def finish(self, summary: RunSummary) -> None:
        outcomes = self._verdict.judge(summary) if self._verdict is not None else []
        errors = run_errors(summary, self._outcome.applying)
        self.write(junit_xml(run_suite(summary, outcomes, errors, self._final(self._outcome.code))))

    def not_run(self, code: int, reason: str) -> None:
        """The run never started (the Linkerd proxy was not ready): its case errors with `reason`."""
        self.write(junit_xml(Suite((run_case([RunError(code, reason)]),), properties=(("exitCode", str(code)),))))

    def write(self, text: str) -> None:
        """Write the document and close the file; a failure goes to `failed`."""
        try:
            with self._file:
                self._file.write(text)
        except OSError as e:
            self._failed(self._name, e)
