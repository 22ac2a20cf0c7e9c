"""A shard's figures against each other: a log whose counts contradict themselves is not merged.

Every value of a shard's summary can be well formed (runner.stats.record checks that) and the
figures still disagree: an interval whose good count is 1,000 above the responses its latency
histogram holds, a run whose total is not its intervals' sum. A log is text anyone may have
edited, or a version with a bug may have written, and nothing says which of two figures is the
true one; merged, the lie would go into the run's verdict unseen, and a verdict on figures that
cannot all be true is worth nothing. So each shard is checked against itself before it is merged:

- each interval: good + bad is what its latency histogram holds; its status codes count good
  (200-499) and bad (any other); its errors by kind add up to failed; no more responses were
  hash-checked or kernel-timed than there were, no more hashes mismatched than were checked;
  and it starts after the interval before it;
- the run: requests is good + bad + failed; each of its counts, status codes and errors is its
  intervals' sum with the drain's; `intervals` is the number of interval records; its latency
  histogram holds good + bad;
- what its records carry beyond the counts (CARRIED: the phases' histograms, the backends
  counted), which an earlier version's lack: every interval record the first one's, and, across
  the shards of a merge (runner.readback.podlogs), every shard the others' (carried()): merged,
  a part without them made figures of a part (phases of some responses, backends of some).

Each contradiction is one line naming the interval (or the run); a shard with any is left out
of the merge, as a damaged one is (runner.readback.podlogs). Pure: nothing here prints.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping
from typing import Any

from hdrh.histogram import HdrHistogram

from runner.load.result import is_good
from runner.report import keys as k
from runner.stats.record import ShardRun, tally_from_record
from runner.stats.recorder import Tally

# The run's counts in the summary, and the tally's attribute each is the sum of.
_RUN_COUNTS = ((k.REQUESTS, "requests"), (k.GOOD, "good"), (k.BAD, "bad"), (k.FAILED, "failed"),
               (k.SKIPPED, "skipped"), (k.LATE, "late"), (k.HASH_CHECKED, "hash_checked"),
               (k.HASH_MISMATCHES, "hash_mismatches"), (k.BYTES_IN, "bytes_in"), (k.BYTES_OUT, "bytes_out"))


# What a version's tally records carry beyond the counts, with what a line calls them.
CARRIED = {"phases": "phase timings", "backends": "backend counts"}


def carried(record: Mapping[str, Any]) -> frozenset[str]:
    """Which of CARRIED an interval record's tally holds (an earlier version's: none)."""
    tally = record.get("tally")
    return frozenset(key for key in CARRIED if isinstance(tally, dict) and key in tally)


def carried_difference(has: frozenset[str], other: frozenset[str]) -> tuple[bool, str]:
    """How what a record carries (`has`) differs from what another carries: (whether it lacks what
    the other has, the things it lacks or has beyond it, in words: `phase timings nor backend
    counts` when it lacks them, `phase timings and backend counts` when it has them)."""
    lacking = [words for key, words in CARRIED.items() if key in other - has]
    if lacking:
        return True, " nor ".join(lacking)
    return False, " and ".join(words for key, words in CARRIED.items() if key in has - other)


def contradictions(summary: Mapping[str, Any], shard: ShardRun) -> list[str]:
    """Every contradiction between a shard's figures, each as `interval 3: ...` or `the run: ...`.

    `shard` is the one from_summary() made of `summary`: its records have been checked to
    read back, and are read here one at a time.
    """
    found: list[str] = []
    total = _Counts()
    previous: int | None = None
    first: frozenset[str] | None = None
    for index, record in enumerate(shard.intervals):
        tally = tally_from_record(record["tally"])
        found += [f"interval {index}: {problem}" for problem in tally_contradictions(tally)]
        has = carried(record)
        if first is None:
            first = has
        elif has != first:
            lacks, words = carried_difference(has, first)
            found.append(f"interval {index}: its record has no {words}, which interval 0's has" if lacks else
                         f"interval {index}: its record has {words}, which interval 0's has not")
        start = int(record["startNs"])
        if previous is not None and start <= previous:
            found.append(f"interval {index}: starts at {start} ns, not after interval {index - 1} ({previous} ns)")
        previous = start
        total.add(tally)
    drain = (shard.totals or {}).get("drain")
    if drain is not None:
        total.add(tally_from_record(drain))
    return found + [f"the run: {problem}" for problem in _run_contradictions(summary, total, len(shard.intervals))]


def tally_contradictions(tally: Tally) -> list[str]:
    """What in one span's counts contradicts the rest of them; nothing for a tally that was counted."""
    found = []
    responses = tally.responses
    if tally.latency.count != responses:
        found.append(f"good + bad is {responses}, its latency histogram holds {tally.latency.count}")
    good, bad = _statuses(tally.statuses)
    if good != tally.good:
        found.append(f"good is {tally.good}, its status codes 200-499 count {good}")
    if bad != tally.bad:
        found.append(f"bad is {tally.bad}, its other status codes count {bad}")
    if (errors := sum(tally.errors.values())) != tally.failed:
        found.append(f"failed is {tally.failed}, its errors by kind add up to {errors}")
    for name, value in (("hashChecked", tally.hash_checked), ("kernelClocked", tally.kernel_clocked)):
        if value > responses:
            found.append(f"{name} is {value}, more than its {responses} responses")
    if tally.hash_mismatches > tally.hash_checked:
        found.append(f"hashMismatches is {tally.hash_mismatches}, more than the {tally.hash_checked} checked")
    return found


class _Counts:
    """The intervals' counts added up, without their histograms: what the run's totals must be."""

    def __init__(self) -> None:
        self.counts: Counter[str] = Counter()
        self.statuses: Counter[int] = Counter()
        self.errors: Counter[str] = Counter()
        self.latencies = 0

    def add(self, tally: Tally) -> None:
        self.counts.update({name: getattr(tally, name) for _, name in _RUN_COUNTS})
        self.statuses.update(tally.statuses)
        self.errors.update(tally.errors)
        self.latencies += tally.latency.count


def _run_contradictions(summary: Mapping[str, Any], total: _Counts, intervals: int) -> list[str]:
    """The summary's run figures against its intervals' sum: each that is there must agree."""
    found = []
    counts = [summary.get(key) for key in (k.GOOD, k.BAD, k.FAILED)]
    whole = [n for n in counts if type(n) is int]
    if k.REQUESTS in summary and len(whole) == len(counts) and summary[k.REQUESTS] != sum(whole):
        found.append(f"requests is {_shown(summary[k.REQUESTS])}, good + bad + failed is {sum(whole)}")
    sums: list[tuple[str, Any]] = [(key, total.counts[name]) for key, name in _RUN_COUNTS]
    sums += [(k.STATUS_CODES, _positive({str(code): n for code, n in total.statuses.items()})),
             (k.ERRORS, _positive(total.errors)), (k.INTERVALS, intervals)]
    for key, expected in sums:
        value = summary.get(key)
        if key in summary and (_positive(value) if isinstance(value, dict) else value) != expected:
            found.append(f"{key} is {_shown(value)}, its intervals and drain add up to {_shown(expected)}")
    held = _histogram_count(summary.get(k.HISTOGRAM))
    if held is not None and held != total.latencies:
        found.append(f"its latency histogram holds {held}, its intervals' responses are {total.latencies}")
    return found


def _statuses(statuses: Mapping[int, int]) -> tuple[int, int]:
    """(responses with a good status, with a bad one), by slow_cooker's rule."""
    good = sum(n for status, n in statuses.items() if is_good(status))
    return good, sum(statuses.values()) - good


def _positive(counts: Mapping[str, Any]) -> dict[str, Any]:
    """The counts without those of 0: a kind that never happened, however it was written."""
    return {str(key): n for key, n in counts.items() if n != 0}


def _histogram_count(section: Any) -> int | None:
    """How many values the summary's encoded histogram holds; None when it has none that reads."""
    encoded = section.get(k.HISTOGRAM_HDR) if isinstance(section, dict) else None
    if not isinstance(encoded, str) or not encoded:
        return None
    try:
        return int(HdrHistogram.decode(encoded).get_total_count())
    except Exception:  # noqa: BLE001 - damaged base64/zlib/struct data; unused by the merge, so not judged
        return None


def _shown(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, default=str, sort_keys=True)

