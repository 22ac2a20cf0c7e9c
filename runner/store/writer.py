"""Writing a finished run's record to the resultsStore: an output, like the Pushgateway push.

The JSON summary reporter hands the finished summary here before printing it
(runner.report.summary.JsonSummaryReporter's `stored`), so the record keeps exactly what is
printed, and the summary can say where the record went: its `resultsStore` key. A run
writes its record and its index entry; a shard of a split run writes its own record, then
makes the run's merged record and index entry if it is the one to (below).

A store is never allowed to change a run's outcome. Everything that touches it runs on a
thread of its own, and the run waits for it at most STORE_WAIT_S (a shard: plus its
resultsMergeWait and MERGE_BUDGET_S); past that, or on any failure, one line on stderr says
what became of the record, the summary's `resultsStore` key says the same, and the run ends
with the exit code and summary it would have had without a store.

Who merges a split run. Shards end together (one grid, one length), but nothing tells a
shard that it is the last, and a killed pod writes nothing. So each shard, once its own
record is stored, lists the run's records: the shard that finds all of them there merges
them, at once. A shard that does not find them all looks again every POLL_S until the others'
records and the merged one are there, for at most resultsMergeWait; then the lowest-numbered
shard present merges what there is, naming the shards that are missing (exit code 5 in the
merged record). Two shards may merge at once (they are started and stopped by different
machines): a merge of every shard overwrites (every such merge is the same record, the merge
being exact and deterministic), a merge with shards missing is only created, never over
another (If-None-Match), so a whole merge is never replaced by a partial one, and a shard
that comes late replaces a partial merge with the whole one.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import field
from typing import Any

from runner.config.settings import Settings
from runner.config.storeurl import STORE_WAIT_S, parse_store_url
from runner.core import redact
from runner.core.durations import format_duration
from runner.core.errors import EXIT_OUTPUT, UsageError, exit_code
from runner.core.lazymethods import dataclass
from runner.report.outcome import judged, said_texts, verdict_lines
from runner.report.verdict import Verdict
from runner.stats.runinfo import RunSummary
from runner.store.backends import Store, StoreError, open_store
from runner.store.layout import index_key, new_run_name, run_key, shard_key
from runner.store.merging import listed, merged_run, read_shards
from runner.store.record import encoded, index_entry, make_record, shown_command, tallies, verdict_word

MERGE_BUDGET_S = 30.0  # a shard's merge, once the records are in: reading, adding up, writing
POLL_S = 1.0  # how often a shard waiting for the others lists the run's records
KEY = "resultsStore"  # the summary's key saying where the record went


@dataclass
class _Outcome:
    """What the store's thread did: the lines to say, and what the summary says of it."""

    stored: bool = False
    error: str = ""
    merged: dict[str, Any] | None = None
    lines: list[str] = field(default_factory=list)


class StoreWriter:
    """The JsonSummaryReporter's `stored` hook of a run with a resultsStore.

    Made before the run starts, so that a store it cannot use at all (an s3:// one without the
    S3 client installed) stops the run before it sends anything, with exit code 2.
    """

    def __init__(self, settings: Settings, verdict: Verdict | None, argv: Sequence[str], say: Callable[[str], None],
                 *, environ: Mapping[str, str] = os.environ, wait_s: float = STORE_WAIT_S,
                 sleep: Callable[[float], None] = time.sleep, output_lost: Callable[[], bool] = lambda: False) -> None:
        self._results = settings.results
        self._url = parse_store_url(self._results.store)
        self._store: Store = open_store(self._url, environ)
        self._verdict = verdict
        self._command = shown_command(["soak", *argv[1:]])
        self._say = say
        self._wait_s = wait_s
        self._sleep = sleep
        self._output_lost = output_lost  # an output failed already (6), as the run's ExitCode asks it

    def __call__(self, summary: RunSummary, data: dict[str, Any]) -> dict[str, Any]:
        info = summary.info
        found = judged(summary, self._verdict)
        if self._output_lost():
            found.append((EXIT_OUTPUT, ""))
        code = exit_code(c for c, _ in found)
        own, *others = said_texts(found, code)
        split = info.shard.count > 1
        job, run = self._results.job, self._results.run or new_run_name(info.wall_start)
        key = shard_key(job, run, info.shard.index, info.shard.count) if split else run_key(job, run)
        record = make_record("shard" if split else "run", job, run,
                             (info.shard.index, info.shard.count) if split else None, code,
                             [own, *verdict_lines(self._verdict), *others], self._command, data, tallies(summary))
        outcome = _Outcome()
        budget = self._wait_s + (self._results.merge_wait_ns / 1e9 + MERGE_BUDGET_S if split else 0)

        def work() -> None:
            try:
                self._store_record(outcome, key, record, summary, split)
                if split and outcome.stored:
                    self._merge_when_last(outcome, job, run, info.shard.index, info.shard.count)
            except Exception as e:  # noqa: BLE001 - whatever it is, a line, never a traceback from the thread
                outcome.error = outcome.error or f"{type(e).__name__}: {e}"
                outcome.lines.append(f"{key}: {'stored, but then ' if outcome.stored else ''}failed: "
                                     f"{type(e).__name__}: {e}")

        thread = threading.Thread(target=work, name="results-store", daemon=True)
        thread.start()
        thread.join(budget)
        section: dict[str, Any] = {"store": str(self._url), "record": key, "stored": outcome.stored}
        if thread.is_alive():
            section["error"] = f"no answer within {budget:g}s"
            self._line(f"{key}: stored, but the shards' merge was not done within {budget:g}s" if outcome.stored else
                       f"{key}: no answer within {budget:g}s: the run's record may not have been stored")
        else:
            if outcome.error:
                section["error"] = outcome.error
            for line in outcome.lines:
                self._line(line)
        if split:
            section["merged"] = outcome.merged
        return {KEY: section}

    def _line(self, text: str) -> None:
        self._say(f"resultsStore {self._url}: {redact.printable(text)}")

    def _store_record(self, outcome: _Outcome, key: str, record: dict[str, Any], summary: RunSummary,
                      split: bool) -> None:
        """The run's (or the shard's) record, then a whole run's index entry."""
        try:
            self._store.put(key, encoded(record))
            outcome.stored = True
            if not split:
                self._store.put(*self._entry(record, key, summary))
        except StoreError as e:
            outcome.error = str(e)
            outcome.lines.append(f"{key}: {'not stored' if not outcome.stored else 'no index entry'}: {e}")

    def _entry(self, record: dict[str, Any], key: str, summary: RunSummary) -> tuple[str, bytes]:
        """The index entry of a run's record stored at `key`: its key, and its bytes."""
        figures = summary.figures
        p99 = figures.latency.percentiles["p99"] if figures.responses else None
        entry = index_entry(record, key, p99, figures.goal_percent)
        return index_key(summary.info.wall_start, record["job"], record["run"]), encoded(entry)

    def _merge_when_last(self, outcome: _Outcome, job: str, run: str, index: int, count: int) -> None:
        """Merge the run's shards if this one is the last of them, or the lowest present once the wait is over."""
        wait_s = self._results.merge_wait_ns / 1e9
        deadline = time.monotonic() + wait_s
        try:
            shards = listed(self._store, job, run)
            if len(shards.keys) >= count:
                self._merge(outcome, job, run, count)  # this shard's record made them all
                return
            while time.monotonic() < deadline:
                self._sleep(min(POLL_S, max(deadline - time.monotonic(), 0.0)))
                shards = listed(self._store, job, run)
                if len(shards.keys) >= count and shards.has_run_record:
                    return  # the last shard has merged them
            if wait_s and shards.keys and index == min(shards.keys):
                self._merge(outcome, job, run, count)
        except (StoreError, UsageError, ValueError) as e:
            outcome.lines.append(f"the run {run} was not merged: {e}")

    def _merge(self, outcome: _Outcome, job: str, run: str, count: int) -> None:
        """The shards' records merged into the run's, and its index entry; created only if no merge is
        there yet when shards are missing, replacing any otherwise."""
        found = read_shards(self._store, job, run)
        if not found.shards:
            outcome.lines.append(f"the run {run} was not merged: no shard's record can be merged")
            return
        merged = merged_run(found)
        key = run_key(job, run)
        record = make_record("merged", job, run, None, merged.code, merged.said, self._command, merged.data,
                             tallies(merged.summary))
        if not self._store.put(key, encoded(record), create=not merged.complete):
            return  # another shard merged first, as many shards or more
        self._store.put(*self._entry(record, key, merged.summary), create=not merged.complete)
        report = merged.data.get("shards") or {}
        missing = sorted([*report.get("missing", []), *report.get("incomplete", [])])
        parts = f"{len(report.get('merged', []))} of the run's {count} shards"
        if missing:
            parts += f" (not merged: shard{'s' if len(missing) > 1 else ''} {', '.join(map(str, missing))})"
        outcome.merged = {"record": key, "exitCode": merged.code, "verdict": verdict_word(merged.code)}
        wait = format_duration(self._results.merge_wait_ns) if missing else ""
        outcome.lines.append(f"merged {parts} into {key}" + (f" after waiting {wait}" if wait else "")
                             + f": {verdict_word(merged.code)} (exit code {merged.code})")

