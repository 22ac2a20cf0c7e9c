"""A finished run's figures, as a JSON summary tells them or as its intervals rebuild them.

runner.readback.results finds the summary and the interval lines in what was kept; this
turns each into RunFigures, and fills what the summary lacks from the intervals, saying
which figures were rebuilt and which are only estimates. Pure.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import field, fields
from typing import Any

from hdrh.histogram import HdrHistogram

from runner.core.columns import LINE_PERCENTILES
from runner.core.lazymethods import dataclass
from runner.core.units import UNIT_NS
from runner.readback.logscan import IntervalRow, Startup
from runner.report import keys as k
from runner.report.slowcooker import shown_percent
from runner.stats.estimate import estimate, interval_points
from runner.stats.figures import PERCENTILES, SUMMARY_PERCENTILES, goal_percent

LATENCY_KEYS = (*SUMMARY_PERCENTILES, k.MIN, k.MEAN, k.MAX)
URL_COUNTS = (k.REQUESTS, k.GOOD, k.BAD, k.FAILED)


_INTERVAL_QUANTILES = {key: PERCENTILES[key].fraction for key in LINE_PERCENTILES}  # an interval row's columns


_ESTIMATED_QUANTILES = {key: PERCENTILES[key].fraction for key in SUMMARY_PERCENTILES}


@dataclass(frozen=True)
class RunFigures:
    """The run as a whole, for reports: each figure None when nothing in the file tells it.

    Latencies are in nanoseconds, so runs measured in different units compare directly.
    """

    requests: int | None = None
    good: int | None = None
    bad: int | None = None
    failed: int | None = None
    skipped: int | None = None
    goal_percent: float | None = None
    rate_target: float | None = None
    rate_achieved: float | None = None
    duration_seconds: float | None = None
    intervals: int | None = None
    bench_rps: float | None = None  # a bench run's requests per second, from its "bench" section
    backends_reached: int | None = None  # with a backendHeader: how many backends answered
    connections_opened: int | None = None
    connections_closed: int | None = None
    latency_ns: Mapping[str, float] = field(default_factory=dict)  # p50 ... p999, min, mean, max
    estimated: frozenset[str] = frozenset()  # latency keys that are estimates from interval rows
    # Where the time went: the summary's phases section, in ns, by phase and key (min, mean, p50 ...).
    phases_ns: Mapping[str, Mapping[str, float]] = field(default_factory=dict)
    # Each URL's part of the run, by its label (the summary's perUrl): URL_COUNTS as counted, and the
    # LATENCY_KEYS in ns; empty for a run of one URL, or a summary without it.
    urls: Mapping[str, Mapping[str, float]] = field(default_factory=dict)

    @property
    def failed_percent(self) -> float | None:
        if self.failed is None or not self.requests:
            return None
        return self.failed / self.requests * 100


def figures(
    summary: Mapping[str, Any] | None,
    intervals: Sequence[IntervalRow],
    unit: str,
    slow_cooker: bool,
    startup: Startup | None,
    notes: list[str],
) -> RunFigures:
    """The summary's figures, each missing one rebuilt from the intervals, with notes saying which."""
    told = _from_summary(summary, unit, slow_cooker, notes) if summary is not None else RunFigures()
    # Estimating latencies walks every interval's figures: only done for latencies the summary lacks.
    estimate = not set(LATENCY_KEYS) <= told.latency_ns.keys()
    rebuilt = _from_intervals(intervals, unit, startup, estimate) if intervals else RunFigures()
    merged, filled = _merge(told, rebuilt)
    n = len(intervals)
    lines = f"{n} interval{'s' if n != 1 else ''}"
    if summary is None and intervals:
        notes.append(f"no JSON summary (the log was cut off, or the run had noLatencySummary): figures from {lines}")
    elif filled:
        notes.append(f"not in the JSON summary, so from the {lines}: {', '.join(filled)}")
    if merged.estimated:
        estimated = [key for key in LATENCY_KEYS if key in merged.estimated]
        notes.append(f"estimated from the intervals' percentiles, not measured: {', '.join(estimated)}")
    return merged


_FIGURE_NAMES = {"goal_percent": "goal%", "rate_target": "target rate", "rate_achieved": "achieved rate",
                 "duration_seconds": "duration", "bench_rps": "bench req/s", "backends_reached": "backends reached",
                 "connections_opened": "connections opened", "connections_closed": "connections closed"}


def _merge(told: RunFigures, rebuilt: RunFigures) -> tuple[RunFigures, list[str]]:
    """`told`, with each figure it lacks taken from `rebuilt`; and the names of those taken."""
    values: dict[str, Any] = {}
    filled = []
    for f in fields(RunFigures):
        if f.name in ("latency_ns", "estimated"):
            continue
        mine, theirs = getattr(told, f.name), getattr(rebuilt, f.name)
        values[f.name] = mine if mine is not None else theirs
        if mine is None and theirs is not None:
            filled.append(_FIGURE_NAMES.get(f.name, f.name))
    latency = dict(told.latency_ns)
    for key, value in rebuilt.latency_ns.items():
        if key not in latency:
            latency[key] = value
            if key not in rebuilt.estimated:
                filled.append(key)
    estimated = frozenset(k for k in rebuilt.estimated if k not in told.latency_ns)
    return RunFigures(**values, latency_ns=latency, estimated=estimated), filled


def _from_summary(summary: Mapping[str, Any], unit: str, slow_cooker: bool, notes: list[str]) -> RunFigures:
    """What the JSON summary itself tells."""
    scale = UNIT_NS[unit]
    told = {key: value * scale for key in LATENCY_KEYS if (value := json_number(summary.get(key))) is not None}
    latency = told | _histogram_latencies(summary, notes)
    if "min" in told:
        # The histogram's min is the lowest value of its bucket, up to 0.1% under the exact min.
        # The summary's key is that min truncated to the unit (older summaries, slow_cooker's) or
        # to three decimals of it, up to half a thousandth over: the larger of the two, and never
        # above a percentile (the highest value of its bucket), as the exact min is not.
        lowest = [latency[key] for key in SUMMARY_PERCENTILES if key in latency]
        latency["min"] = min(max(latency["min"], told["min"]), *lowest) if lowest else max(latency["min"], told["min"])
    if slow_cooker:
        latency.pop("p999", None)
    rate, bench = _section(summary, k.RATE), _section(summary, k.BENCH)
    return RunFigures(
        requests=_count(summary.get(k.REQUESTS)),
        good=_count(summary.get(k.GOOD)),
        bad=_count(summary.get(k.BAD)),
        failed=_count(summary.get(k.FAILED)),
        skipped=_count(summary.get(k.SKIPPED)),
        goal_percent=json_number(summary.get(k.GOAL_PERCENT)),
        rate_target=json_number(rate.get(k.RATE_TARGET)),
        rate_achieved=json_number(rate.get(k.RATE_ACHIEVED)),
        duration_seconds=json_number(summary.get(k.DURATION_SECONDS)),
        intervals=_count(summary.get(k.INTERVALS)),
        bench_rps=json_number(bench.get(k.BENCH_REQUESTS_PER_SECOND)),
        backends_reached=_count(summary.get(k.BACKENDS_REACHED)),
        connections_opened=_count(summary.get(k.CONNECTIONS_OPENED)),
        connections_closed=_count(summary.get(k.CONNECTIONS_CLOSED)),
        latency_ns=latency,
        phases_ns=_phases(summary),
        urls=_urls(summary, scale),
    )


def _urls(summary: Mapping[str, Any], scale: int) -> dict[str, dict[str, float]]:
    """The summary's perUrl entries by their label: counts, and latencies in ns (they are in the unit)."""
    found: dict[str, dict[str, float]] = {}
    entries = summary.get(k.PER_URL)
    for entry in entries if isinstance(entries, list) else []:
        if isinstance(entry, dict) and isinstance(entry.get(k.URL), str) and entry[k.URL] not in found:
            counts = {key: float(c) for key in URL_COUNTS if (c := _count(entry.get(key))) is not None}
            latencies = {key: v * scale for key in LATENCY_KEYS if (v := json_number(entry.get(key))) is not None}
            found[entry[k.URL]] = counts | latencies
    return found


def _phases(summary: Mapping[str, Any]) -> dict[str, dict[str, float]]:
    """The summary's phases section in ns (it is in ms): each number a phase has, the rest left out."""
    found: dict[str, dict[str, float]] = {}
    for phase, values in _section(summary, k.PHASES).items():
        if isinstance(values, dict):
            numbers = {key: n * 1e6 for key, value in values.items()
                       if key != k.COUNT and (n := json_number(value)) is not None}
            if numbers:
                found[str(phase)] = numbers
    return found


def _histogram_latencies(summary: Mapping[str, Any], notes: list[str]) -> dict[str, float]:
    """p50 ... p999, min and max in ns from the summary's HDR histogram.

    To 0.1%, where older summaries' own keys are truncated to whole units: a 0.4 ms p50 is 0
    there. Taking min and max from the same histogram keeps every percentile between them.
    """
    histogram = _section(summary, k.HISTOGRAM)
    encoded = histogram.get(k.HISTOGRAM_HDR)
    if not isinstance(encoded, str) or histogram.get(k.HISTOGRAM_UNIT, "ns") != "ns":
        return {}
    try:
        hdr = HdrHistogram.decode(encoded)
        if not hdr.get_total_count():
            return {}
        found = hdr.get_percentile_to_value_dict([PERCENTILES[key].rank for key in SUMMARY_PERCENTILES])
        low, high = hdr.get_min_value(), hdr.get_max_value()
    except Exception:  # noqa: BLE001 - any damage to untrusted base64/zlib/struct data reads as "unreadable"
        notes.append("the JSON summary's histogram cannot be read; its percentile keys are used instead")
        return {}
    return {**{key: float(found[PERCENTILES[key].rank]) for key in SUMMARY_PERCENTILES}, "min": float(low),
            "max": float(high)}


def _from_intervals(intervals: Sequence[IntervalRow], unit: str, startup: Startup | None,
                    latencies: bool = True) -> RunFigures:
    """What the intervals tell of the whole run: counts and rate exactly, percentiles as estimates
    (with `latencies`; without, none)."""
    good = sum(i.good for i in intervals)
    bad = sum(i.bad for i in intervals)
    failed = sum(i.failed for i in intervals)
    seconds = [s for i in intervals if (s := i.seconds) is not None]
    duration = sum(seconds) if len(seconds) == len(intervals) else None
    skipped = [i.skipped for i in intervals]
    goals = [i.t for i in intervals]
    goal = sum(t for t in goals if t is not None) if None not in goals else None  # a bench has none
    rate_target = startup.rate if startup is not None and startup.rate is not None else (
        goal / duration if goal and duration else None)
    return RunFigures(
        requests=good + bad + failed,
        good=good,
        bad=bad,
        failed=failed,
        skipped=sum(s for s in skipped if s is not None) if None not in skipped else None,
        goal_percent=shown_percent(goal_percent(good + bad, goal)) if goal is not None else None,
        rate_target=rate_target,
        rate_achieved=round((good + bad + failed) / duration, 3) if duration else None,
        duration_seconds=round(duration, 3) if duration is not None else None,
        intervals=len(intervals),
        **(_interval_latencies(intervals, UNIT_NS[unit]) if latencies else {}),
    )


def _interval_latencies(intervals: Sequence[IntervalRow], scale: int) -> dict[str, Any]:
    """min and max exactly (to the unit); percentiles and mean estimated from each interval's row."""
    answered = [i for i in intervals if i.responses]
    if not answered:
        return {}
    groups = [
        (i.responses, interval_points(i.min, {q: getattr(i, key) for key, q in _INTERVAL_QUANTILES.items()}, i.max))
        for i in answered
    ]
    found = estimate(groups, _ESTIMATED_QUANTILES)
    if any(i.p999 is None for i in answered):
        found.pop("p999", None)  # slow_cooker's rows have no real p999 to estimate it from
    latency = {key: round(value, 3) * scale for key, value in found.items()}
    latency["min"] = min(i.min for i in answered) * scale
    latency["max"] = max(i.max for i in answered) * scale
    return {"latency_ns": latency, "estimated": frozenset(found)}


def _section(summary: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    """A nested object of the summary, or an empty one when it is missing or not an object."""
    value = summary.get(key)
    return value if isinstance(value, dict) else {}


def json_number(value: Any) -> float | None:
    """A finite JSON number, or None for anything else (strings, booleans, null, NaN, and integers
    beyond the 64 bits every run counts in, which no float arithmetic could take)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    if isinstance(value, int):
        return value if abs(value) < 2**63 else None
    return value if math.isfinite(value) else None


def _count(value: Any) -> int | None:
    return value if json_int(value) and value >= 0 else None


def json_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)
