"""Runs read back from a store: the index listed (`soak history`), and a run or a range of runs
loaded for `soak compare` and `soak plot`, as a log file would be.

A store argument is the store's URL with what to take from it in its query, so each argument
of a compare says its own range ("this Tuesday against the last eight Tuesdays"):

    s3://bucket/soak?run=soak-28400460                        one run, by name
    file:///data/soak?from=2026-12-01&to=2026-12-02           the runs that started that day (UTC)
    s3://bucket/soak?since=8w&weekday=tue&job=checkout         Tuesdays of the last 8 weeks, one job's

One run loads from its stored summary exactly as its log would (the summary is what was
printed), so its figures are those `soak compare` shows for the log. Several runs are added up
into one: counts, sends due and the times added, and every latency figure, the phases' too,
from their whole histograms merged, never from their percentiles; their intervals follow one
another, for plot. Each index entry and record is checked as it is read (runner.store.record):
one that is damaged or crafted is left out with a note naming its key, never a traceback.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import field, replace
from datetime import UTC, datetime
from typing import Any
from urllib.parse import parse_qsl, urlsplit

from runner.config.storeurl import StoreUrl, parse_store_url, store_url_problem
from runner.core.columns import LATENCY_COLUMNS
from runner.core.errors import UsageError, shortened
from runner.core.lazymethods import dataclass
from runner.core.units import UNIT_NS
from runner.readback.figures import figures
from runner.readback.results import IntervalRow, LoadedRun, load_run
from runner.report import keys as k
from runner.report.compactjson import compact_json
from runner.report.slowcooker import shown_percent
from runner.report.summary import latency_figure, percentile_keys, phases_dict
from runner.stats.figures import Figures
from runner.stats.record import tally_from_record
from runner.stats.recorder import Tally
from runner.store.backends import Store, StoreError
from runner.store.layout import INDEX, index_after
from runner.store.record import Entry, entry_from, record_from

READERS = 8  # index entries and records fetched at once
WEEKDAYS = ("mon", "tue", "wed", "thu", "fri", "sat", "sun")
_AGO = re.compile(r"^(\d{1,6})([mhdw])$")
_AGO_SECONDS = {"m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}
_QUERY_KEYS = ("run", "job", "since", "from", "to", "weekday")


@dataclass(frozen=True)
class Selection:
    """Which runs of a store an argument asks for: all of them, unless a field narrows it."""

    url: StoreUrl
    text: str  # the argument as given, to name its column
    run: str | None = None
    job: str | None = None
    start_from: float | None = None  # seconds since 1970, inclusive
    start_to: float | None = None  # exclusive
    weekdays: frozenset[int] = frozenset()  # Monday 0 ... Sunday 6, of the start in UTC

    def wants(self, entry: Entry) -> bool:
        return ((self.run is None or entry.run == self.run) and (self.job is None or entry.job == self.job)
                and (self.start_from is None or entry.start >= self.start_from)
                and (self.start_to is None or entry.start < self.start_to)
                and (not self.weekdays or datetime.fromtimestamp(entry.start, UTC).weekday() in self.weekdays))


def selection(text: str, *, since: str | None = None, job: str | None = None, now: float | None = None) -> Selection:
    """What a store argument asks for (its query; `since` and `job` from options, for history).
    A UsageError, in one line, for a URL or a query that says nothing this can read."""
    problem = store_url_problem(text, query=True)
    if problem:
        raise UsageError(f"{shortened(text, 80)} {problem}")
    query = urlsplit(text).query
    given: dict[str, str] = {}
    for key, value in parse_qsl(query, keep_blank_values=True, strict_parsing=bool(query)):
        if key not in _QUERY_KEYS:
            raise UsageError(f"{shortened(text, 80)}: ?{key}= is none of ?{'=, ?'.join(_QUERY_KEYS)}=")
        if key in given:
            raise UsageError(f"{shortened(text, 80)}: ?{key}= is given twice")
        given[key] = value
    now = time.time() if now is None else now
    since = given.get("since", since)
    start_from = _time(given["from"], "from", text) if "from" in given else None
    if since is not None:
        start_from = max(start_from or 0.0, now - _ago(since, text))
    return Selection(
        parse_store_url(text), text, given.get("run") or None, given.get("job", job) or None, start_from,
        _time(given["to"], "to", text) if "to" in given else None,
        frozenset(_weekday(day, text) for day in given["weekday"].split(",")) if given.get("weekday") else frozenset())


def _ago(text: str, where: str) -> float:
    found = _AGO.match(text)
    if found is None:
        raise UsageError(f"{shortened(where, 80)}: since {text!r} is not an age: a number and m, h, d or w, like 7d")
    return int(found.group(1)) * _AGO_SECONDS[found.group(2)]


def _time(text: str, key: str, where: str) -> float:
    """An RFC 3339 time or a date (midnight UTC) as seconds since 1970."""
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00") if text.endswith("Z") else text)
    except ValueError:
        raise UsageError(f"{shortened(where, 80)}: {key} {text!r} is not a time: 2026-12-01 or "
                         "2026-12-01T10:00:00Z") from None
    return (moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)).timestamp()


def _weekday(text: str, where: str) -> int:
    day = text.strip().lower()[:3]
    if day not in WEEKDAYS:
        raise UsageError(f"{shortened(where, 80)}: weekday {text!r} is none of {', '.join(WEEKDAYS)}")
    return WEEKDAYS.index(day)


# --- the index -------------------------------------------------------------------------------


def entries(store: Store, wanted: Selection, notes: list[str]) -> list[Entry]:
    """The runs the index lists that `wanted` asks for, in order of start; what could not be read, in notes.

    A run has one entry, but a merge made again after a late shard may have started it at
    another key: of two entries of one run, the one with fewer shards missing (then the later) is kept.
    """
    after = index_after(wanted.start_from) if wanted.start_from is not None else ""
    keys = [key for key in store.keys(INDEX, after) if key.endswith(".json")]
    found: dict[tuple[str, str], Entry] = {}
    for key, data in _fetched(store, keys):
        if data is None:
            continue
        try:
            entry = entry_from(data, key)
        except ValueError as e:
            notes.append(f"{key}: skipped, not an index entry this version reads: {e}")
            continue
        if wanted.wants(entry):
            kept = found.get((entry.job, entry.run))
            if kept is None or (len(entry.missing), -entry.start) <= (len(kept.missing), -kept.start):
                found[(entry.job, entry.run)] = entry
    return sorted(found.values(), key=lambda e: (e.start, e.key))


def _fetched(store: Store, keys: Sequence[str]) -> Iterator[tuple[str, bytes | None]]:
    """Each key with its object, fetched a few at a time, in the keys' order."""
    with ThreadPoolExecutor(READERS) as pool:
        yield from zip(keys, pool.map(store.get, keys), strict=True)


def history_line(entry: Entry) -> str:
    """A run as `soak history` prints it: start, job, run, verdict and exit code, p99, goal%, shards."""
    p99 = "-" if entry.p99_ms is None else f"{entry.p99_ms:g}ms"
    goal = "-" if entry.goal_percent is None else f"{entry.goal_percent:g}%"
    shards = ""
    if entry.shards is not None:
        shards = f"  {entry.shards - len(entry.missing)} of {entry.shards} shards"
        if entry.missing:
            shards += f" (missing {', '.join(map(str, entry.missing))})"
    return (f"{entry.start_text}  {entry.job}  {entry.run}  {entry.verdict} (exit {entry.exit_code})  "
            f"p99 {p99}  goal% {goal}{shards}")


# --- runs and ranges for compare and plot -------------------------------------------------------


def load_selection(store: Store, wanted: Selection, assumed_unit: str = "ms") -> LoadedRun:
    """The runs an argument asks for as one LoadedRun: a run as its log would load, or a range added up.

    A UsageError when no run of the store is what it asks for.
    """
    notes: list[str] = []
    listed = entries(store, wanted, notes)
    runs: list[tuple[dict[str, Any], LoadedRun]] = []
    for entry, data in zip(listed, (d for _, d in _fetched(store, [e.record for e in listed])), strict=True):
        try:
            if data is None:
                raise ValueError("listed in the index, but not in the store")
            record = record_from(data)
        except ValueError as e:
            notes.append(f"{entry.record}: skipped, not a record this version reads: {e}")
            continue
        runs.append((record, load_run(compact_json(record["summary"]) + "\n", wanted.text, assumed_unit)))
    if not runs:
        unread = f" ({len(notes)} entr{'y' if len(notes) == 1 else 'ies'} could not be read)" if notes else ""
        raise UsageError(f"{wanted.text}: no run in the store is what it asks for{unread}")
    if len(runs) == 1:
        run = runs[0][1]
        return replace(run, notes=(*notes, *run.notes))
    return _added_up(runs, wanted.text, notes)


@dataclass
class _Whole:
    """Runs' tallies added up, and what else a range's summary needs of them."""

    tally: Tally = field(default_factory=Tally)
    urls: dict[str, Tally] = field(default_factory=dict)  # by label: one URL in two runs' lists is added up
    due: float | None = 0.0
    sending_ns: int = 0
    elapsed_ns: int = 0
    intervals: int = 0

    def add(self, record: dict[str, Any]) -> None:
        """A run's record added; ValueError (nothing added) if its tallies cannot be read."""
        whole = record["tallies"]
        try:
            tally = tally_from_record(whole["run"])
            labels = [str(entry[k.URL]) for entry in record["summary"].get(k.PER_URL) or []]
            urls = [(label, tally_from_record(part)) for label, part in zip(labels, whole["perUrl"] or [],
                                                                             strict=True)]
            due = None if whole["due"] is None else float(whole["due"])
            sending, elapsed, intervals = int(whole["sendingNs"]), int(whole["elapsedNs"]), int(whole["intervals"])
        except (KeyError, TypeError, ValueError, AttributeError) as e:
            raise ValueError(f"its tallies cannot be read: {e}") from None
        self.tally.merge(tally)
        for label, part in urls:
            self.urls.setdefault(label, Tally()).merge(part)
        self.due = None if self.due is None or due is None else self.due + due
        self.sending_ns += sending
        self.elapsed_ns += elapsed
        self.intervals += intervals


def _added_up(runs: Sequence[tuple[dict[str, Any], LoadedRun]], source: str, notes: list[str]) -> LoadedRun:
    """Runs as one: their tallies added (histograms merged) and their intervals one after another."""
    unit = runs[0][1].latency_unit
    whole = _Whole()
    rows: list[IntervalRow] = []
    added = 0
    for record, run in runs:
        try:
            whole.add(record)
        except ValueError as e:
            notes.append(f"run {record['run']}: skipped, {e}")
            continue
        rows += _in_unit(run.intervals, run.latency_unit, unit)
        added += 1
    if not added:
        raise UsageError(f"{source}: no run in the store that it asks for can be read")
    summary = summary_of(whole.tally, Figures.of(whole.tally, whole.due, whole.sending_ns), unit, whole.elapsed_ns,
                         whole.intervals, {label: Figures.of(part, None, whole.sending_ns)
                                           for label, part in whole.urls.items()})
    notes.append(f"{added} runs added up: counts and times added, latencies from their merged histograms")
    told = figures(summary, [], unit, False, None, notes)
    return LoadedRun(source, tuple(rows), summary, told, unit, False, None, tuple(notes))


def summary_of(tally: Tally, f: Figures, unit: str, elapsed_ns: int, intervals: int,
               urls: Mapping[str, Figures]) -> dict[str, Any]:
    """A summary of added-up runs, in the printed summary's keys and units (runner.report.summary), so
    that it is read back as a run's is; `urls`: each URL's figures, by its label."""
    summary: dict[str, Any] = {
        **percentile_keys(f.latency, unit),
        k.LATENCY_UNIT: unit,
        k.MIN: latency_figure(f.latency.min_ns, unit),
        k.MEAN: latency_figure(f.latency.mean_ns, unit),
        k.MAX: latency_figure(f.latency.max_ns, unit),
        k.REQUESTS: f.requests, k.GOOD: f.good, k.BAD: f.bad, k.FAILED: f.failed, k.SKIPPED: f.skipped,
        k.GOAL_PERCENT: None if f.goal_percent is None else shown_percent(f.goal_percent),
        k.RATE: {k.RATE_TARGET: None if f.rate_target is None else round(f.rate_target, 6),
                 k.RATE_ACHIEVED: round(f.rate_achieved, 3)},
        k.DURATION_SECONDS: round(elapsed_ns / 1e9, 3),
        k.INTERVALS: intervals,
        k.CONNECTIONS_OPENED: f.connections_opened,
        k.CONNECTIONS_CLOSED: f.connections_closed,
        k.HISTOGRAM: {k.HISTOGRAM_UNIT: "ns", k.HISTOGRAM_HDR: tally.latency.encode()},
    }
    if tally.backends:
        summary[k.BACKENDS_REACHED] = f.backends_reached
    if f.phases:
        summary[k.PHASES] = phases_dict(f.phases)
    if urls:
        summary[k.PER_URL] = [{k.URL: label, k.REQUESTS: u.requests, k.GOOD: u.good, k.BAD: u.bad, k.FAILED: u.failed,
                               k.MIN: latency_figure(u.latency.min_ns, unit),
                               k.MEAN: latency_figure(u.latency.mean_ns, unit),
                               k.MAX: latency_figure(u.latency.max_ns, unit), **percentile_keys(u.latency, unit)}
                              for label, u in urls.items()]
    return summary


def _in_unit(rows: Sequence[IntervalRow], unit: str, wanted: str) -> list[IntervalRow]:
    """Interval rows with their latencies in another unit."""
    if unit == wanted:
        return list(rows)
    scale = UNIT_NS[unit] / UNIT_NS[wanted]
    scaled: list[IntervalRow] = []
    for row in rows:
        changed: dict[str, Any] = {name: None if getattr(row, name) is None else round(getattr(row, name) * scale, 3)
                                   for name in LATENCY_COLUMNS}
        scaled.append(replace(row, **changed))
    return scaled


def open_selection(text: str, **options: Any) -> tuple[Store, Selection]:
    """The store an argument names, opened, and what it asks for of it."""
    from runner.store.backends import open_store

    wanted = selection(text, **options)
    return open_store(wanted.url), wanted


def reading(error: StoreError, url: StoreUrl) -> UsageError:
    """A store that could not be read, as the one-line error a command exits 2 with."""
    return UsageError(f"{url}: cannot be read: {error}")

