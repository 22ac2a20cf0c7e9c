"""One result from the shards of a run: counts added, histograms merged, nothing averaged.

Each shard's record (runner.stats.record) holds every interval's whole tally. Merging adds
the tallies interval by interval, so every merged percentile comes from the merged buckets,
exactly as if one process had recorded every request. Intervals are matched by where they
start on the shards' common grid, so a shard that started one interval late still lines
up, and last intervals cut short at slightly different moments still merge into one. The
same merge serves `soak merge` (records read back from pods' logs) and local workers
(records sent by the worker processes).

A decoded tally holds HDR histograms of up to 270 KB each, so the merge streams: it walks the
shards' intervals in lockstep, decodes one record per shard at a time, hands each merged
interval on and keeps only the run's running total (RunTotal). However long the run, it holds
the decoded histograms of one interval per shard and the run's own, never one per interval
(two 5,000-interval shards took 2.7 GB when every interval was kept; bench/merge_cost.py).
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import field
from itertools import groupby
from typing import Any

from runner.config.settings import Settings, merge, settings_from
from runner.core.lazymethods import dataclass
from runner.core.units import NS_PER_S
from runner.load.model import ramp_of
from runner.load.schedule import Schedule
from runner.stats.client import ClientFigures
from runner.stats.histogram import LatencyHistogram
from runner.stats.record import (
    ShardRun,
    client_from_record,
    histogram_from_record,
    run_settings,
    tally_from_record,
    warmup_from_record,
)
from runner.stats.recorder import BenchTally, Interval, Tally
from runner.stats.runinfo import SIGNAL_STOP, RunInfo, RunSummary, Warmup, before_the_others, early_stop

CLOCK_SLACK_NS = 1_000_000  # how far apart the shards' ends of one full interval may be


@dataclass
class RunTotal:
    """The merged intervals so far, added up: all the run's summary needs of them, without keeping them."""

    tally: Tally = field(default_factory=Tally)
    intervals: int = 0
    due: float | None = None  # the sends due: each interval's, added (None without a schedule)
    last_end_ns: int | None = None
    saturation: ClientFigures = field(default_factory=ClientFigures)  # the saturated intervals (count_saturated)

    def add(self, interval: Interval) -> None:
        self.tally.merge(interval.tally)
        self.intervals += 1
        if interval.pace.saturated:  # judged on the merged interval, as one process would have judged it
            self.saturation.count_saturated(interval.index, interval.pace)
        if interval.due is not None:
            self.due = interval.due + (self.due or 0.0)
        self.last_end_ns = interval.end_ns


class Merged:
    """The merged run, ready for the usual reporters, and what the merge had to say.

    `intervals` yields the run's intervals once, in order, each merged as it is asked for;
    summary() is the run's summary, once they have all gone by (it reads any left first).
    """

    def __init__(self, info: RunInfo, shards: Sequence[ShardRun], count: int, report: dict[str, Any],
                 notes: list[str]) -> None:
        self.info = info
        self.notes = notes
        self.report = report  # the summary's `shards` section: count, merged, missing, incomplete
        self._shards = shards
        self._total = RunTotal()
        self.intervals: Iterator[Interval] = self._added(merge_intervals(info, shards, count))
        self._summary: RunSummary | None = None

    @property
    def complete(self) -> bool:
        """Whether every shard of the run was merged, whole: none missing, none cut off or refused, none
        stopped by a signal an interval or more before the others (its share of the rest is missing)."""
        return not self.report["missing"] and not self.report["incomplete"] and not any(
            before_the_others(stop, self.info.settings.pace.interval_ns) for stop in self.report["stopped"])

    def _added(self, intervals: Iterator[Interval]) -> Iterator[Interval]:
        """The intervals, each added to the run's total as it goes by."""
        for interval in intervals:
            self._total.add(interval)
            yield interval

    def summary(self) -> RunSummary:
        """The run's summary, from its total: any interval not yet asked for is merged (and added) first."""
        if self._summary is None:
            for _ in self.intervals:
                pass
            self._summary = merged_summary(self.info, self._total, self._shards, self.report)
        return self._summary


def merge_shards(shards: Sequence[ShardRun], expected: int | None = None, incomplete: Iterable[int] = ()) -> Merged:
    """The shards' run as one: intervals matched by their end and added, histograms merged.

    `expected` is the number of shards the run had; `incomplete` the ones whose output was
    cut short: both are reported in the summary's `shards` section and in the notes.
    """
    if not shards:
        raise ValueError("no shard finished: nothing to merge")
    count = expected or max(s.count for s in shards)
    info = merged_info(shards)
    present = sorted(s.index for s in shards)
    gone = sorted(set(range(count)) - set(present) - set(incomplete))
    cut = sorted(set(incomplete))
    notes = [f"shard {i} of {count}: no output found, not merged" for i in gone]
    notes += [f"shard {i} of {count}: its output has no usable summary (cut off or damaged), not merged"
              for i in cut]
    notes += _apart(info, shards)
    stopped = [stop.record() for stop in stopped_early(info, shards)]
    notes += [f"{early_stop(stop, count, info)}: its share of the rest was not sent, and stays in the goal"
              for stop in stopped if before_the_others(stop, info.settings.pace.interval_ns)]
    return Merged(info, shards, count, {"count": count, "merged": present, "missing": gone, "incomplete": cut,
                                        "stopped": stopped}, notes)


@dataclass(frozen=True)
class Stop:
    """A shard stopped by a signal (an evicted pod's, that kept its log): when, on the merged clock."""

    index: int
    reason: str  # `signal SIGTERM`
    sending_end_ns: int  # when it stopped sending
    others_end_ns: int  # when the last shard stopped sending: its share was due until then

    @property
    def not_sent_ns(self) -> int:
        return max(self.others_end_ns - self.sending_end_ns, 0)

    def record(self) -> dict[str, Any]:
        """The summary's `shards.stopped` item."""
        return {"shard": self.index, "stopReason": self.reason,
                "sendingSeconds": round(self.sending_end_ns / NS_PER_S, 6),
                "notSentSeconds": round(self.not_sent_ns / NS_PER_S, 6)}


def stopped_early(info: RunInfo, shards: Sequence[ShardRun]) -> list[Stop]:
    """The shards a signal stopped before their planned end, in index order. Each still owes its share
    from its stop until the last shard stopped sending (merge_intervals): the others' intervals
    went on, and left alone they would count only the shards still sending, so that a pod evicted
    at minute 10 of 59 shrank the goal, and goal% read 99.9% "ok" for a run that lacked a third of
    its load from then on."""
    ends = {s.index: _offset_ns(info, s) + int(s.totals["sendingEndNs"]) for s in shards if s.totals is not None}
    if not ends:
        return []
    last = max(ends.values())
    return [Stop(s.index, reason, ends[s.index], last) for s in sorted(shards, key=lambda s: s.index)
            if s.totals is not None and (reason := _signal_reason(str(s.totals.get("stopReason", ""))))]


def _signal_reason(reason: str) -> str:
    """The stop reason of a shard that a signal stopped (`signal SIGTERM`), else ""."""
    return reason if reason.startswith(SIGNAL_STOP) else ""


def merged_info(shards: Sequence[ShardRun]) -> RunInfo:
    """The run as a whole: its full settings, URLs, and a start at the earliest shard's."""
    first = min(shards, key=lambda s: s.index)
    settings: Settings = settings_from(merge(run_settings(first.config)))
    start_wall = min(s.start_wall for s in shards)
    return RunInfo(settings, first.urls, first.url_source, 0, start_wall, engine=merged_engine(shards))


def merged_engine(shards: Sequence[ShardRun]) -> str:
    """The engine that sent the shards: theirs when they agree, "mixed" when they do not (a record
    from before the engine was recorded counts as the Python engine's, the only one there was)."""
    engines = {str((s.totals or {}).get("engine", "python")) for s in shards}
    return engines.pop() if len(engines) == 1 else "mixed"


def merge_intervals(info: RunInfo, shards: Sequence[ShardRun], count: int) -> Iterator[Interval]:
    """The run's intervals: each shard's matched by its start on the common grid, and added.

    The shards are walked in lockstep, each in its own order of time (a shard's intervals
    follow one another; runner.readback.shardcheck refuses a log whose records do not), so
    only the records of one grid slot are decoded at a time. Of the
    run's `count` shards, those with no output count as sending all through every interval
    (their load was due, and nothing says it was sent); those merged count for the time they
    were sending.
    """
    unknown = count - len(shards)
    owing = [(stop, _offset_ns(info, shard)) for stop in stopped_early(info, shards) for shard in shards
             if shard.index == stop.index and stop.not_sent_ns]
    slots = heapq.merge(*(_slotted(info, shard, order) for order, shard in enumerate(shards)))
    for k, (slot, parts) in enumerate(groupby(slots, key=lambda part: part[0])):
        yield merged_interval(info, k, slot, [(offset, record) for _, _, _, offset, record in parts], count, unknown,
                              _owed(owing, slot * info.settings.pace.interval_ns, info.settings.pace.interval_ns))


def _owed(owing: Sequence[tuple[Stop, int]], start: int, length: int) -> list[tuple[int, int, int]]:
    """(begin, stop, offset): when, in the interval from `start`, each shard a signal stopped was due and
    did not send while others did; less than the clocks' slack is their noise, not a span."""
    spans = []
    for stop, offset in owing:
        begin, until = max(start, stop.sending_end_ns), min(start + length, stop.others_end_ns)
        if until - begin >= CLOCK_SLACK_NS:
            spans.append((begin, until, offset))
    return spans


def _slotted(info: RunInfo, shard: ShardRun, order: int) -> Iterator[tuple[int, int, int, int, dict[str, Any]]]:
    """(grid slot, the shard's place, the record's place, clock offset, record) for each interval
    record of a shard, decoded as it is reached; sorting on the first three keeps, within a slot,
    the shards' order and each shard's own."""
    offset = _offset_ns(info, shard)
    for position, record in enumerate(shard.intervals):
        yield round((offset + int(record["startNs"])) / info.settings.pace.interval_ns), order, position, offset, record


def merged_interval(info: RunInfo, index: int, slot: int, parts: Sequence[tuple[int, dict[str, Any]]],
                    shares: int, unknown: int = 0, owed: Sequence[tuple[int, int, int]] = ()) -> Interval:
    """Interval `index` of the run, at grid slot `slot`: the shards' records (each with its
    shard's clock offset) added up.

    The run is split into `shares` equal parts (shards, or workers); its goal in this
    interval is each part's for the time it was sending here (`unknown` parts: all of it;
    `owed`: the (begin, stop, offset) spans in which a part stopped by a signal was due and
    did not send, as the others did: stopped_early()). A shard that started an interval late,
    or had stopped at the run's end, adds nothing to it, so the edge intervals of shards
    started on different boundaries keep a true goal.

    The shards' clocks agree to a few microseconds, not exactly: an interval that every
    shard ran in full is exactly one interval long, not a hair more, so its goal `t` is
    the interval's and not a fraction of a request above it.
    """
    length = info.settings.pace.interval_ns
    start = slot * length
    tally, client = _added_up([record for _, record in parts])
    end = max(offset + int(r["endNs"]) for offset, r in parts)
    if abs(end - (start + length)) < CLOCK_SLACK_NS:
        end = start + length
    # A shard that sent to the interval's end (None) keeps the whole interval's goal: the
    # run's sending stopped only where every shard's had.
    sending = [None if r.get("sendingEndNs") is None else offset + int(r["sendingEndNs"]) for offset, r in parts]
    spans = [(*_sending_span(offset, r, start, start + length), offset) for offset, r in parts]
    spans += [(start, start + length, 0)] * unknown
    spans += [(begin, stop if abs(stop - (start + length)) >= CLOCK_SLACK_NS else start + length, offset)
              for begin, stop, offset in owed]
    due_ns = round(sum(stop - begin for begin, stop, _ in spans) / shares)
    return Interval(index, start, end, tally, None if None in sending else max(s for s in sending if s is not None),
                    due_ns, client, due=_sends_due(info, shares, spans), terms=info.pace_terms)


def merged_warmup_interval(index: int, parts: Sequence[dict[str, Any]]) -> Interval:
    """Warm-up interval `index`: the local workers' records (runner.run.workers: one grid, one
    start) added up, with the sends each one's warm-up schedule made due in it."""
    tally, client = _added_up(parts)
    dues = [record["due"] for record in parts]
    sending = [record["sendingEndNs"] for record in parts]
    return Interval(index, min(int(r["startNs"]) for r in parts), max(int(r["endNs"]) for r in parts), tally,
                    None if None in sending else max(sending), max(int(r["dueNs"]) for r in parts), client,
                    due=None if None in dues else sum(dues))


def _added_up(records: Iterable[dict[str, Any]]) -> tuple[Tally, ClientFigures]:
    """The interval records' tallies and client figures, each added up."""
    tally, client = Tally(), ClientFigures()
    for record in records:
        tally.merge(tally_from_record(record["tally"]))
        client.merge(client_from_record(record.get("client")))
    return tally, client


def _sends_due(info: RunInfo, shares: int, spans: Sequence[tuple[int, int, int]]) -> float | None:
    """The sends due in an interval of the merged run: each part's for the span (begin, stop) it
    was sending (a part is one of `shares` equal shares of the run), as its schedule makes them
    due from its own start (`offset` on the merged clock: a ramp runs from each part's own
    start); None without a schedule (a bench)."""
    if not info.model.paced:
        return None
    ramp = ramp_of(info.settings.pace)
    return sum(Schedule(offset if ramp is not None else 0, info.qps, 1, stride=shares, ramp=ramp).sends_due(begin, stop)
               for begin, stop, offset in spans)


def _sending_span(offset: int, record: dict[str, Any], start: int, end: int) -> tuple[int, int]:
    """When, within [start, end), the shard of this interval record was sending (begin = stop: not at all)."""
    begin = max(start, offset + int(record["startNs"]))
    stop = min(end, offset + int(record["endNs"]))
    if record.get("sendingEndNs") is not None:
        stop = min(stop, offset + int(record["sendingEndNs"]))
    if abs(stop - end) < CLOCK_SLACK_NS:
        stop = end
    if abs(begin - start) < CLOCK_SLACK_NS:
        begin = start
    return begin, max(begin, stop)


def merged_summary(info: RunInfo, total: RunTotal, shards: Sequence[ShardRun],
                   report: dict[str, Any] | None) -> RunSummary:
    """The run's summary: the intervals' total, every shard's histograms merged, its CPU added up."""
    tally = Tally()
    tally.merge(total.tally)  # a copy: the drain is added to the run's, not to the intervals' total
    runs = [(s, s.totals) for s in shards if s.totals is not None]
    drain = _merged_drain(run.get("drain") for _, run in runs)
    if drain is not None:
        tally.merge(drain)
    ends = [_offset_ns(info, s) + int(run["endNs"]) for s, run in runs] or [total.last_end_ns or 0]
    sending = [_offset_ns(info, s) + int(run["sendingEndNs"]) for s, run in runs] or ends
    reasons = sorted({str(run["stopReason"]) for _, run in runs})
    return RunSummary(
        info=info,
        intervals=total.intervals,
        end_ns=max(ends),
        sending_end_ns=max(sending),
        tally=tally,
        uncorrected=_merged_histogram(run.get("uncorrected") for _, run in runs),
        send_lag=_merged_histogram(run.get("sendLag") for _, run in runs),
        in_unit=_merged_histogram(run.get("inUnit") for _, run in runs),
        stop_reason=", ".join(reasons) or "unknown",
        cpu_seconds=sum(float(run["cpuSeconds"]) for _, run in runs),
        max_rss_bytes=max((int(run["maxRssBytes"]) for _, run in runs), default=0),
        connections=_added(run.get("connections") for _, run in runs),
        shards=report,
        due=total.due,
        client=_merged_client((run.get("client") for _, run in runs), total.saturation),
        drain=drain,
        per_url=_merged_per_url([run.get("perUrl") for _, run in runs]),
        last_interval_end_ns=total.last_end_ns,
        warmup=_merged_warmup(run.get("warmup") for _, run in runs),
    )


def _merged_per_url(records: Sequence[Any]) -> tuple[Tally, ...] | None:
    """The shards' per-URL tallies added up, slot by slot (every shard slots the same URL list
    alike); None when none has them, or when one finished without (an earlier version's, which
    would leave its sends out) or with other slots (another list)."""
    if not records or any(r is None for r in records) or len({len(r) for r in records}) != 1:
        return None
    per_url = tuple(Tally() for _ in records[0])
    for record in records:
        for tally, part in zip(per_url, record, strict=True):
            tally.merge(tally_from_record(part))
    return per_url


def _merged_warmup(records: Iterable[Any]) -> Warmup | None:
    """The shards' warm-ups added up, apart from the run as each shard kept its own: counts and
    histograms added, sends due added (unknown if one shard's is), the longest span and the most
    lines (the shards warm up side by side, on one grid); None when no shard warmed up."""
    parts = [warmup_from_record(r) for r in records if r is not None]
    if not parts:
        return None
    tally = Tally()
    for part in parts:
        tally.merge(part.tally)
    dues = [part.due for part in parts]
    due = None if any(d is None for d in dues) else sum(d for d in dues if d is not None)
    return Warmup(tally, due, max(p.span_ns for p in parts), max(p.intervals for p in parts),
                  _added(p.connections for p in parts) or {})


def _merged_drain(records: Iterable[Any]) -> Tally | None:
    """The shards' drains added up: what came back after their last intervals; None if none had one."""
    present = [r for r in records if r is not None]
    if not present:
        return None
    drain = Tally()
    for record in present:
        drain.merge(tally_from_record(record))
    return drain


def _merged_client(records: Iterable[Any], saturation: ClientFigures) -> ClientFigures:
    """The processes' own figures over the run: the busiest CPU, every loop-lag sample; saturated in
    the merged intervals that were (`saturation`: each judged on the merged figures)."""
    client = ClientFigures()
    for record in records:
        client.merge(client_from_record(record))
    client.saturated, client.saturated_intervals = saturation.saturated, saturation.saturated_intervals
    client.named, client.pace = saturation.named, saturation.pace
    return client


def merged_bench(parts: Sequence[BenchTally]) -> BenchTally:
    """Local workers' ab figures as one process would have them, their moments on one clock.

    Histograms and counts add up; the first response (its length, ab's "Document Length") and
    the first Server header are the earliest of any worker, ties to the first part; Length
    counts again every response whose body differs from that first one. Exact while each worker
    met at most OTHER_LENGTHS body lengths besides its own first (recorder.BenchTally). The
    result is reported, never merged again: its other_lengths stay empty.
    """
    whole = BenchTally()
    for part in parts:
        for histogram in ("waiting", "total_reused", "connect_new", "processing_new", "total_new"):
            getattr(whole, histogram).add(getattr(part, histogram))
        whole.kept_alive += part.kept_alive
        whole.header_bytes += part.header_bytes
        whole.last_end_ns = max(whole.last_end_ns, part.last_end_ns)
    if served := [p for p in parts if p.server is not None]:
        first = min(served, key=lambda p: p.server_ns)
        whole.server, whole.server_ns = first.server, first.server_ns
    if answered := [p for p in parts if p.document_length is not None]:
        first = min(answered, key=lambda p: p.first_response_ns)
        length = whole.document_length = first.document_length or 0  # never None: it answered
        whole.first_response_ns = first.first_response_ns
        whole.length_mismatches = whole.waiting.count - sum(_of_length(p, length) for p in answered)
    return whole


def _of_length(part: BenchTally, length: int) -> int:
    """How many of a worker's responses had a body of `length` bytes."""
    if part.document_length == length:
        return part.waiting.count - part.length_mismatches
    return part.other_lengths[length]


def _added(counts: Iterable[dict[str, int] | None]) -> dict[str, int] | None:
    """Per-key sums of the shards' counts; None if no shard had any."""
    present = [c for c in counts if c is not None]
    if not present:
        return None
    total: dict[str, int] = {}
    for count in present:
        for key, n in count.items():
            total[key] = total.get(key, 0) + int(n)
    return total


def _merged_histogram(records: Iterable[dict[str, Any] | None]) -> LatencyHistogram | None:
    present = [r for r in records if r is not None]
    if not present:
        return None
    return LatencyHistogram.merged(*(histogram_from_record(r) for r in present))


def _apart(info: RunInfo, shards: Sequence[ShardRun]) -> list[str]:
    """A note when the shards did not all start on the same interval boundary.

    Each pod starts at the next boundary by its own clock, so pods that come up on either side
    of one start an interval apart. Their intervals still line up and add up, and each
    interval's goal counts the shards sending in it, but the first and last intervals then
    hold only some shards' load: a rate lower than the run's, worth a word.
    """
    slots = {s.index: round(_offset_ns(info, s) / info.settings.pace.interval_ns) for s in shards}
    if len(set(slots.values())) < 2:
        return []
    late = ", ".join(f"shard {i}: {n} interval{'s' if n > 1 else ''} late" for i, n in sorted(slots.items()) if n)
    return [f"the shards did not start together ({late}); the first and last intervals hold only some shards' load"]


def _offset_ns(info: RunInfo, shard: ShardRun) -> int:
    """Where a shard's own time 0 falls on the merged run's clock."""
    return round((shard.start_wall - info.wall_start) * NS_PER_S)

