"""What the HTML report and the JUnit file of `soak report` show of a run read back. Pure.

A run read back (runner.readback.results) is whatever the file held: its summary's members,
each of any type a crafted or damaged log gives them. So every value is taken only when it is
what it should be (a finite number, a count, a string) and left out otherwise, never raising:
the page shows what the file tells and says the rest is not there.

The verdict is read from the summary's `thresholds` section as Outcome records, so the page
and the JUnit file show it as the run's own verdict did (runner.report.verdict); the exit code
from what the summary kept of each reason a run fails, which runner.report.outcome.applying
decides for a live run: failed workers or missing shards (5), not one response (8), a rule
broken (3) or inconclusive (9), a signal (7).
"""

from __future__ import annotations

from collections.abc import Mapping
from itertools import accumulate
from typing import Any

from hdrh.histogram import HdrHistogram

from runner.config.rules import LATENCIES, TIME_UNITS, ThresholdError, parse_rule
from runner.core.errors import (
    EXIT_INCONCLUSIVE,
    EXIT_INTERRUPTED,
    EXIT_NO_RESPONSE,
    EXIT_OK,
    EXIT_THRESHOLDS,
    EXIT_WORKER_FAILED,
    exit_code,
)
from runner.core.units import UNIT_NS, time_text
from runner.readback.figures import json_int, json_number
from runner.readback.results import LoadedRun
from runner.report import keys as k
from runner.report.htmlreport import LATENCY_LINES, IntervalPoint, Judgement, RunView, Table, duration_text
from runner.report.junit import RULES_CLASS, RUN_ERRORS, Case, RunError, Suite, cases, error_case
from runner.report.verdict import Outcome
from runner.stats.figures import PHASE_PERCENTILES
from runner.stats.runinfo import SIGNAL_STOP

NINES_STEPS = 10  # points of the distribution per nine (90%, 99%, ...)
_SHOWN_ROWS = 100  # rows of a table from the file (URLs, backends) at most; the rest summed in one


def run_view(run: LoadedRun) -> RunView:
    """The page's view of one run."""
    summary = run.summary or {}
    f = run.figures
    start = _text(summary.get(k.START))
    return RunView(
        source=run.source,
        start=start,
        judgement=judgement(run.summary),
        facts=tuple(_facts(run)),
        intervals=tuple(interval_points(run)),
        distribution=tuple(distribution(summary)),
        distribution_note=_distribution_note(summary),
        tables=tuple(t for t in (per_url(summary, run.latency_unit), phases(summary), responses(summary),
                                 backends(summary)) if t.rows),
        notes=run.notes,
        p99_ns=f.latency_ns.get("p99"),
        goal_percent=f.goal_percent,
        target_rate=f.rate_target,
    )


# --- The verdict ----------------------------------------------------------------------------


def judgement(summary: Mapping[str, Any] | None) -> Judgement:
    """The run's verdict as its summary kept it; code None without a summary."""
    if summary is None:
        return Judgement(None)
    section = _section(summary, k.THRESHOLDS)
    outcomes, unreadable = outcomes_of(section.get(k.RULES))
    errors = run_errors(summary)
    broken = any(not o.ok and not o.inconclusive for o in outcomes)
    verdict = EXIT_THRESHOLDS if broken or unreadable else \
        EXIT_INCONCLUSIVE if any(o.inconclusive for o in outcomes) else EXIT_OK
    return Judgement(exit_code([verdict, *(e.code for e in errors)]), tuple(outcomes), tuple(errors),
                     tuple(unreadable), _text(section.get(k.STOPPED_EARLY)))


def outcomes_of(records: Any) -> tuple[list[Outcome], list[str]]:
    """The summary's `thresholds.rules` as Outcome records, and a line for each one that is not one."""
    outcomes: list[Outcome] = []
    unreadable: list[str] = []
    if records is None:
        return outcomes, unreadable
    if not isinstance(records, list):
        return outcomes, ["thresholds.rules is not a list: the verdict cannot be read"]
    for index, record in enumerate(records):
        found = _outcome(record)
        if isinstance(found, str):
            unreadable.append(f"thresholds.rules[{index}]: {found}")
        else:
            outcomes.append(found)
    return outcomes, unreadable


def _outcome(record: Any) -> Outcome | str:
    """One rule's Outcome, or why the record is not one."""
    if not isinstance(record, dict):
        return "not a rule's record"
    text, scope, ok = record.get("rule"), record.get("scope"), record.get("ok")
    inconclusive = record.get("inconclusive", False)
    if not isinstance(text, str) or scope not in ("run", "interval") or not isinstance(ok, bool) \
            or not isinstance(inconclusive, bool):
        return "not a rule's record (rule, scope, ok and inconclusive)"
    try:
        rule = parse_rule(text, scope)
    except ThresholdError as e:
        return f"{text}: {e}"
    measured = json_number(record.get("measured"))
    unit = record.get("unit")
    if measured is not None and rule.metric in LATENCIES:
        measured *= TIME_UNITS[unit if isinstance(unit, str) and unit in TIME_UNITS else rule.unit]
    broken = record.get("brokenIntervals")
    return Outcome(rule, ok, measured,
                   worst=record["worstInterval"] if json_int(record.get("worstInterval")) else None,
                   judged=record["judgedIntervals"] if json_int(record.get("judgedIntervals")) else 0,
                   broken=tuple(i for i in broken if json_int(i)) if isinstance(broken, list) else (),
                   inconclusive=inconclusive)


def run_errors(summary: Mapping[str, Any]) -> list[RunError]:
    """What made the run itself go wrong, as the summary tells it: a part missing, no response, a signal."""
    found = []
    missing = _missing_part(summary)
    if missing:
        found.append(RunError(EXIT_WORKER_FAILED, missing))
    requests, good, bad = (_int(summary.get(key)) for key in (k.REQUESTS, k.GOOD, k.BAD))
    if requests is not None and requests > 0 and good == 0 and bad == 0:
        found.append(RunError(EXIT_NO_RESPONSE, f"no response at all: {requests} request"
                              f"{'s' if requests != 1 else ''} sent, none answered"))
    reason = summary.get(k.STOP_REASON)
    signals = [r[len(SIGNAL_STOP):] for r in reason.split(", ") if r.startswith(SIGNAL_STOP)] \
        if isinstance(reason, str) else []
    if signals:
        found.append(RunError(EXIT_INTERRUPTED, f"stopped by {signals[0]} before its planned end: the results "
                              "cover only that"))
    return found


def _missing_part(summary: Mapping[str, Any]) -> str:
    workers = _section(summary, k.FAILED_WORKERS)
    parts = [f"worker {n} failed: {text}" for n, text in workers.items() if isinstance(text, str)]
    shards = _section(summary, k.SHARDS)
    count = shards.get("count")
    for key, words in (("missing", "missing"), ("incomplete", "cut off or damaged")):
        found = shards.get(key)
        for index in found if isinstance(found, list) else ():
            if json_int(index):
                parts.append(f"shard {index} of {count if json_int(count) else '?'}: {words}")
    return "; ".join(parts)


def junit_suite(run: LoadedRun, view: RunView) -> Suite:
    """The run's JUnit suite, named by its file: its rules' cases as its verdict had them, and the
    run's own case when it went wrong or holds no verdict to read."""
    j = view.judgement
    if j.code is None:
        found: tuple[Case, ...] = (error_case("no JSON summary in the file (cut off, or slow_cooker's log): "
                                              "no verdict to read"),)
    else:
        found = cases(j.outcomes, [e for e in j.errors if e.code in RUN_ERRORS])
        found += tuple(Case(f"unreadable rule {i}", RULES_CLASS, "error", text, text)
                       for i, text in enumerate(j.unreadable, 1))
    properties = (("source", run.source),) + ((("exitCode", str(j.code)),) if j.code is not None else ())
    return Suite(found, run.source, view.start, run.figures.duration_seconds, properties)


# --- The figures ----------------------------------------------------------------------------


def _facts(run: LoadedRun) -> list[tuple[str, str]]:
    summary = run.summary or {}
    f = run.figures
    facts: list[tuple[str, str | None]] = [
        ("start", _text(summary.get(k.START))),
        ("duration", None if f.duration_seconds is None else duration_text(f.duration_seconds)),
        ("intervals", _count(f.intervals)),
        ("target rate", None if f.rate_target is None else f"{_figure(f.rate_target)} req/s"),
        ("achieved rate", None if f.rate_achieved is None else f"{_figure(f.rate_achieved)} req/s"),
        ("requests", _count(f.requests)),
        ("good / bad / failed", None if None in (f.good, f.bad, f.failed) else f"{f.good} / {f.bad} / {f.failed}"),
        ("skipped", _count(f.skipped)),
        ("goal%", None if f.goal_percent is None else f"{_figure(f.goal_percent)}%"),
        *((key, _latency(f.latency_ns.get(key), key in f.estimated)) for key in ("p50", "p99", "p999", "max")),
        ("stop reason", _text(summary.get(k.STOP_REASON))),
        ("client saturated", _saturated(summary)),
    ]
    return [(label, value) for label, value in facts if value is not None]


def _latency(ns: float | None, estimated: bool) -> str | None:
    return None if ns is None else ("~" if estimated else "") + time_text(ns)


def _saturated(summary: Mapping[str, Any]) -> str | None:
    n, total = _section(summary, k.CLIENT).get(k.SATURATED_INTERVALS), summary.get(k.INTERVALS)
    if not json_int(n):
        return None
    return f"{n} of {total} intervals" if json_int(total) else f"{n} intervals"


def interval_points(run: LoadedRun) -> list[IntervalPoint]:
    """Each interval for the charts; x is its end in seconds since the start (its number when a
    length cannot be read)."""
    rows = run.intervals
    lengths = [row.seconds for row in rows]
    xs = list(accumulate(s for s in lengths if s is not None)) if None not in lengths else \
        [float(row.iter + 1) for row in rows]
    scale = UNIT_NS[run.latency_unit]
    points = []
    for x, row, seconds in zip(xs, rows, lengths, strict=True):
        answered = row.responses > 0
        latencies = {key: (value * scale if answered and (value := getattr(row, key)) is not None else None)
                     for key in LATENCY_LINES}
        sends = row.good + row.bad + row.failed
        points.append(IntervalPoint(x, f"interval {row.iter}, {row.timestamp}", latencies,
                                    None if row.goal_percent is None else float(row.goal_percent),
                                    sends / seconds if seconds else None, row.bad + row.failed))
    return points


def distribution(summary: Mapping[str, Any]) -> list[tuple[float, float]]:
    """(percentile, latency ns) from the summary's exact HDR histogram: NINES_STEPS points per nine
    up to the last response, then the max; none when there is no histogram to read."""
    hdr = _histogram(summary)
    if hdr is None:
        return []
    total = hdr.get_total_count()
    points = []
    step = 0
    while True:
        remaining = 10 ** (-step / NINES_STEPS)
        if remaining * total < 1:
            break
        percentile = 100 * (1 - remaining)
        points.append((percentile, float(hdr.get_value_at_percentile(percentile))))
        step += 1
    points.append((100 * (1 - 1 / (2 * total)), float(hdr.get_max_value())))
    return points


def _histogram(summary: Mapping[str, Any]) -> Any:
    """The decoded histogram, or None (missing, in another unit, empty or damaged)."""
    section = _section(summary, k.HISTOGRAM)
    encoded = section.get(k.HISTOGRAM_HDR)
    if not isinstance(encoded, str) or section.get(k.HISTOGRAM_UNIT, "ns") != "ns":
        return None
    try:
        hdr = HdrHistogram.decode(encoded)
        return hdr if hdr.get_total_count() > 0 else None
    except Exception:  # noqa: BLE001 - damaged base64/zlib/struct data from a file is "unreadable"
        return None


def _distribution_note(summary: Mapping[str, Any]) -> str:
    hdr = _histogram(summary)
    if hdr is None:
        return ("No readable HDR histogram in the file (no JSON summary, a damaged one, or slow_cooker's log): "
                "the distribution needs the summary's histogram.")
    return (f"From the summary's HDR histogram of all {hdr.get_total_count()} responses, exact to 0.1%: "
            "each point is the latency that share of the responses took at most.")


def per_url(summary: Mapping[str, Any], unit: str) -> Table:
    entries = summary.get(k.PER_URL)
    rows = []
    scale = UNIT_NS[unit] if unit in UNIT_NS else 1
    for entry in entries[:_SHOWN_ROWS] if isinstance(entries, list) else ():
        if not isinstance(entry, dict):
            continue
        label = _text(entry.get(k.URL)) or "?"
        if json_int(entry.get(k.URLS)):
            label += f" ({entry[k.URLS]} URLs)"
        counts = [_count(entry.get(key)) or "-" for key in (k.REQUESTS, k.GOOD, k.BAD, k.FAILED)]
        latencies = [_latency_in(entry.get(key), scale) for key in ("p50", "p99", k.MAX)]
        rows.append((label, *counts, *latencies))
    return Table("Per URL", ("url", "requests", "good", "bad", "failed", "p50", "p99", "max"), tuple(rows))


def phases(summary: Mapping[str, Any]) -> Table:
    rows = []
    for phase, values in _section(summary, k.PHASES).items():
        if isinstance(values, dict):
            rows.append((str(phase), _count(values.get(k.COUNT)) or "-",
                         *(_latency_in(values.get(key), 1_000_000) for key in (k.MIN, *PHASE_PERCENTILES, k.MAX,
                                                                                 k.MEAN))))
    return Table("Where the time went, per phase", ("phase", "count", "min", *PHASE_PERCENTILES, "max", "mean"),
                 tuple(rows), "Each phase of every response: dns, connect, tls, ttfb (to the first byte), body.")


def responses(summary: Mapping[str, Any]) -> Table:
    """Statuses and failure kinds, with their share of the requests."""
    requests = _int(summary.get(k.REQUESTS))
    total = requests if requests is not None and requests > 0 else None
    rows = [(f"status {code}", n) for code, n in _section(summary, k.STATUS_CODES).items() if json_int(n)]
    rows += [(f"failed: {kind}", n) for kind, n in _section(summary, k.ERRORS).items() if json_int(n) and n]
    return Table("Responses and failures", ("what", "count", "share"),
                 tuple((what, str(n), _share(n, total)) for what, n in rows[:_SHOWN_ROWS]))


def backends(summary: Mapping[str, Any]) -> Table:
    counts = [(str(name), n) for name, n in _section(summary, k.BACKENDS).items() if json_int(n)]
    total = sum(n for _, n in counts)
    reached = summary.get(k.BACKENDS_REACHED)
    note = f"{reached} backends reached." if json_int(reached) else ""
    return Table("Backends", ("backend", "responses", "share"),
                 tuple((name, str(n), _share(n, total or None)) for name, n in counts[:_SHOWN_ROWS]), note)


# --- Values from untrusted JSON -------------------------------------------------------------


def _section(summary: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    value = summary.get(key)
    return value if isinstance(value, dict) else {}


def _int(value: Any) -> int | None:
    return value if json_int(value) else None


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _count(value: Any) -> str | None:
    return str(value) if json_int(value) else None


def _figure(value: float) -> str:
    return f"{value:.3f}".rstrip("0").rstrip(".")


def _latency_in(value: Any, scale: float) -> str:
    number = json_number(value)
    return "-" if number is None else time_text(number * scale)


def _share(n: int, total: int | None) -> str:
    return "-" if not total else f"{_figure(n * 100 / total)}%"

