"""A run's record, as stored, and its entry in the index: made, and read back checked. Pure.

The record is everything a report needs, so that none ever has to find the pod's log again:

    soakRecord   1, the layout's version
    kind         "run" (one process, or one pod's local workers), "shard", or "merged" (the shards' run)
    job, run     the names it is stored under (runner.store.layout)
    shard        {"index", "count"} of a shard; null otherwise
    start        the run's start, RFC 3339 UTC (the summary's `start`)
    exitCode     the run's exit code as its results give it (before stdout itself could fail, 6)
    verdict      a word for it: passed, broken, inconclusive, incomplete, interrupted, no response
    said         what the run's end said of it: the lines the termination message shows
    command      the command line, its secrets hidden (runner.core.redact)
    summary      the JSON summary exactly as printed (config included, secrets hidden; a shard's
                 with its `shard` record, which the merge reads), histograms and all
    tallies      the run's whole tally and each URL's, with their HDR histograms and the phases'
                 ones, and the sends due: what adds runs of a range up exactly (runner.store.runs)

Its index entry is a few of those (start, job, run, kind, shards, exitCode, verdict, p99 and
goal%) and the record's key: what `soak history` prints, one line a run. Both are read back
from a store that anyone with access may have written to, so reading never trusts them:
record_from() and entry_from() raise ValueError naming the first thing wrong.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from runner.core import redact
from runner.core.errors import (
    EXIT_INCONCLUSIVE,
    EXIT_INTERRUPTED,
    EXIT_NO_RESPONSE,
    EXIT_OK,
    EXIT_OUTPUT,
    EXIT_THRESHOLDS,
    EXIT_WORKER_FAILED,
    shortened,
)
from runner.core.lazymethods import dataclass
from runner.core.units import rfc3339
from runner.stats.record import tally_record
from runner.stats.runinfo import RunSummary

VERSION = 1
KINDS = ("run", "shard", "merged")
VERDICTS = {EXIT_OK: "passed", EXIT_THRESHOLDS: "broken", EXIT_INCONCLUSIVE: "inconclusive",
            EXIT_WORKER_FAILED: "incomplete", EXIT_INTERRUPTED: "interrupted", EXIT_NO_RESPONSE: "no response",
            EXIT_OUTPUT: "output lost"}
MAX_RECORD_BYTES = 1 << 30  # a record larger than this is not read (a crafted one could be any size)
MAX_ENTRY_BYTES = 1 << 16  # an index entry is some 300 bytes


def verdict_word(code: int) -> str:
    return VERDICTS.get(code, f"exit {code}")


def shown_command(argv: Sequence[str]) -> list[str]:
    """The command line as it may be kept: URLs' passwords and secret values hidden (runner.core.redact)."""
    secrets = redact.Secrets(redact.argv_secrets(argv))
    return [secrets.hidden(redact.in_text(word)) for word in argv]


def tallies(summary: RunSummary) -> dict[str, Any]:
    """The run's tallies, whole: what runs of a range are added up from (runner.store.runs)."""
    return {
        "run": tally_record(summary.tally),
        "perUrl": None if summary.per_url is None else [tally_record(t) for t in summary.per_url],
        "due": summary.due,
        "sendingNs": summary.sending_ns,
        "elapsedNs": summary.elapsed_ns,
        "intervals": summary.intervals,
    }


def make_record(kind: str, job: str, run: str, shard: tuple[int, int] | None, code: int, said: Sequence[str],
                command: Sequence[str], summary: Mapping[str, Any], whole: Mapping[str, Any]) -> dict[str, Any]:
    """A record as stored (the module's docstring says each key)."""
    return {
        "soakRecord": VERSION,
        "kind": kind,
        "job": job,
        "run": run,
        "shard": None if shard is None else {"index": shard[0], "count": shard[1]},
        "start": summary.get("start"),
        "exitCode": code,
        "verdict": verdict_word(code),
        "said": [line for line in said if line],
        "command": list(command),
        "summary": dict(summary),
        "tallies": dict(whole),
    }


def encoded(value: Mapping[str, Any]) -> bytes:
    """A record or entry as stored: JSON, every URL in it shown as stdout shows it (redact.in_text)."""
    return redact.in_text(json.dumps(value, ensure_ascii=False, separators=(",", ":"))).encode()


def index_entry(record: Mapping[str, Any], key: str, p99_ns: float | None, goal: float | None) -> dict[str, Any]:
    """The record's line in the index: `key` is the record's, p99 and goal% the run's own."""
    summary = record["summary"]
    shards = summary.get("shards")
    return {
        "soakIndex": VERSION,
        "start": record["start"],
        "job": record["job"],
        "run": record["run"],
        "kind": record["kind"],
        "shards": None if not isinstance(shards, dict) else {
            "count": shards.get("count"), "merged": len(shards.get("merged") or []),
            "missing": sorted([*shards.get("missing", []), *shards.get("incomplete", [])])},
        "exitCode": record["exitCode"],
        "verdict": record["verdict"],
        "p99Ms": None if p99_ns is None else round(p99_ns / 1e6, 3),
        "goalPercent": None if goal is None else round(goal, 2),
        "record": key,
    }


@dataclass(frozen=True)
class Entry:
    """A run as the index lists it."""

    key: str  # the entry's own key
    start: float
    start_text: str
    job: str
    run: str
    kind: str
    exit_code: int
    verdict: str
    p99_ms: float | None
    goal_percent: float | None
    record: str  # the record's key
    shards: int | None = None  # of a merged run: how many it had
    missing: tuple[int, ...] = ()  # of a merged run: those not merged


def entry_from(data: bytes, key: str) -> Entry:
    """An index entry read back; ValueError naming what is wrong with a damaged or crafted one."""
    value = _json(data, MAX_ENTRY_BYTES)
    if value.get("soakIndex") != VERSION:
        raise ValueError(f"not a soak index entry of version {VERSION}")
    start_text = _text(value, "start")
    shards = value.get("shards")
    count, missing = None, ()
    if shards is not None:
        if not isinstance(shards, dict):
            raise ValueError(f"shards: {_shown(shards)} is not an object")
        count = _whole(shards, "count", 1)
        listed = shards.get("missing")
        if not isinstance(listed, list) or not all(type(i) is int and 0 <= i < count for i in listed):
            raise ValueError(f"shards.missing: {_shown(listed)} is not a list of shard numbers")
        missing = tuple(listed)
    kind = _text(value, "kind")
    if kind not in KINDS:
        raise ValueError(f"kind: {_shown(kind)} is none of {', '.join(KINDS)}")
    return Entry(key, start_time(start_text), start_text, _text(value, "job"), _text(value, "run"), kind,
                 _whole(value, "exitCode", 0, 255), _text(value, "verdict"), _number(value, "p99Ms"),
                 _number(value, "goalPercent"), _text(value, "record"), count, missing)


def record_from(data: bytes) -> dict[str, Any]:
    """A record read back, its keys of the right kinds; ValueError naming what is wrong."""
    value = _json(data)
    if value.get("soakRecord") != VERSION:
        raise ValueError(f"not a soak record of version {VERSION}")
    for key in ("kind", "job", "run", "start", "verdict"):
        _text(value, key)
    if value["kind"] not in KINDS:
        raise ValueError(f"kind: {_shown(value['kind'])} is none of {', '.join(KINDS)}")
    start_time(value["start"])
    _whole(value, "exitCode", 0, 255)
    for key in ("summary", "tallies"):
        if not isinstance(value.get(key), dict):
            raise ValueError(f"{key}: {_shown(value.get(key))} is not an object")
    return value


def start_time(text: str) -> float:
    """Seconds since 1970 of an RFC 3339 start (`2026-12-01T10:20:43.123456Z`); ValueError if it is not one."""
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        raise ValueError(f"start: {_shown(text)} is not a time") from None
    if moment.tzinfo is None:
        raise ValueError(f"start: {_shown(text)} has no time zone")
    return moment.timestamp()


def start_text(wall: float) -> str:
    return rfc3339(wall, fraction=True)


def _json(data: bytes, most: int = MAX_RECORD_BYTES) -> dict[str, Any]:
    if len(data) > most:
        raise ValueError(f"{len(data)} bytes, more than one can be")
    try:
        value = json.loads(data)
    except (ValueError, RecursionError) as e:  # UnicodeDecodeError is a ValueError
        raise ValueError(f"not JSON ({shortened(str(e), 80)})") from None
    if not isinstance(value, dict):
        raise ValueError("not a JSON object")
    return value


def _text(value: Mapping[str, Any], key: str) -> str:
    found = value.get(key)
    if not isinstance(found, str) or not found:
        raise ValueError(f"{key}: {_shown(found)} is not a text")
    return found


def _whole(value: Mapping[str, Any], key: str, low: int, high: int = 1 << 31) -> int:
    found = value.get(key)
    if type(found) is not int or not low <= found <= high:
        raise ValueError(f"{key}: {_shown(found)} is not a whole number from {low} to {high}")
    return found


def _number(value: Mapping[str, Any], key: str) -> float | None:
    found = value.get(key)
    if found is None:
        return None
    if isinstance(found, bool) or not isinstance(found, int | float) or not math.isfinite(found) or found < 0:
        raise ValueError(f"{key}: {_shown(found)} is not a number, at least 0")
    return float(found)


def _shown(value: Any) -> str:
    return redact.printable(shortened(json.dumps(value, ensure_ascii=False, default=str)))
