"""A split run's shards, read back from the store and merged, exactly as `soak merge` merges their logs.

Each shard's record holds its JSON summary as printed, `shard` record and all; read back, it
goes through the very code that reads a pod's log (runner.readback.podlogs.read_pods): the
same checks of each shard against itself, the same refusal of shards of different runs, the
same merge (runner.stats.merge) and the same reporters, writing to nowhere. So the merged
record's summary and verdict are what `soak merge` prints for the pods' logs, and a shard
missing (never written: its pod was killed) or damaged is said as it says it, exit code 5.
"""

from __future__ import annotations

import io
from collections.abc import Callable
from dataclasses import field
from typing import Any

from runner.core.errors import EXIT_SHARD_MISSING
from runner.core.lazymethods import dataclass
from runner.readback.podlogs import PodLogs, read_pods
from runner.report.base import Reporter
from runner.report.compactjson import compact_json
from runner.report.outcome import ExitCode, verdict_lines
from runner.report.summary import JsonSummaryReporter
from runner.report.verdict import Verdict
from runner.stats.merge import merge_shards
from runner.stats.runinfo import RunSummary
from runner.store.backends import Store
from runner.store.layout import run_prefix, shard_of
from runner.store.record import record_from


@dataclass
class StoredShards:
    """A run's shard records as the store holds them: which there are, and what they say."""

    keys: dict[int, str] = field(default_factory=dict)  # shard index: its record's key
    count: int | None = None  # the shard count the keys speak of
    has_run_record: bool = False  # whether the run's own (merged) record is there yet


def listed(store: Store, job: str, run: str) -> StoredShards:
    """What a listing of the run's prefix shows: its shards' records, and whether it has its merged one."""
    found = StoredShards()
    for key in store.keys(run_prefix(job, run)):
        which = shard_of(key)
        if which is not None:
            found.keys[which[0]] = key
            found.count = max(found.count or 0, which[1])
        elif key == run_prefix(job, run) + "run.json":
            found.has_run_record = True
    return found


def read_shards(store: Store, job: str, run: str) -> PodLogs:
    """The run's shards from their records, as read_pods reads them from logs, with notes.

    A record that cannot be read (damaged, crafted, not a record) is a shard whose output has
    no usable summary, named by its key. A UsageError, as from `soak merge`, when the
    records are of more than one run (a run name given twice).
    """
    shards = listed(store, job, run)
    texts: list[tuple[str, str]] = []
    damaged: list[tuple[int, str]] = []
    for index, key in sorted(shards.keys.items()):
        data = store.get(key)
        if data is None:
            continue  # listed, then deleted
        try:
            summary = record_from(data)["summary"]
        except ValueError as e:
            damaged.append((index, f"{key}: shard {index}'s record cannot be read: {e}"))
            continue
        texts.append((key, compact_json(summary) + "\n"))
    found = read_pods(texts) if texts else PodLogs()
    for index, note in damaged:
        found.notes.append(note)
        found.incomplete = sorted({*found.incomplete, index})
    if shards.count is not None:
        found.expected = max(found.expected or 0, shards.count)
    return found


@dataclass(frozen=True)
class MergedRun:
    """The merged run as `soak merge` would print it: its summary's data, exit code and what was said."""

    data: dict[str, Any]
    summary: RunSummary
    code: int
    said: list[str]
    notes: list[str]
    complete: bool


def merged_run(found: PodLogs) -> MergedRun:
    """The shards merged (found.shards must not be empty), through `soak merge`'s reporters, printing nothing."""
    merged = merge_shards(found.shards, found.expected, found.incomplete)
    nowhere = io.StringIO()
    verdict = Verdict.for_settings(merged.info.settings, nowhere)
    if verdict is not None:  # a stop it asks for (abortOnThreshold) has nothing to stop: the shards have ended,
        verdict.bind_stop(_ended)  # and by default it would SIGTERM this process, a shard that merges
    said: list[str] = []
    outcome = ExitCode(said.append, verdict, also=[] if merged.complete else [EXIT_SHARD_MISSING])
    kept: dict[str, Any] = {}
    reporters: list[Reporter] = [*([verdict] if verdict is not None else []),
                                 JsonSummaryReporter(nowhere, sections=[verdict.section] if verdict else [],
                                                     stored=_keep(kept)),
                                 outcome]
    for reporter in reporters:
        reporter.start(merged.info)
    for interval in merged.intervals:
        for reporter in reporters:
            reporter.interval(merged.info, interval)
    summary = merged.summary()
    for reporter in reporters:
        reporter.finish(summary)
    own, *others = outcome.said or [""]
    return MergedRun(kept["data"], summary, outcome.code, [own, *verdict_lines(verdict), *others],
                     [*found.notes, *merged.notes], merged.complete)


def _ended(reason: str) -> None:
    """The merged run's stop: it has ended already, each shard where its own verdict stopped it."""


def _keep(kept: dict[str, Any]) -> Callable[[RunSummary, dict[str, Any]], dict[str, Any]]:
    def keep(summary: RunSummary, data: dict[str, Any]) -> dict[str, Any]:
        kept["data"] = dict(data)
        return {}
    return keep
