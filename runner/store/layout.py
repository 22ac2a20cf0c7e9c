"""Where each thing goes in a store: the keys, made and read back. Pure.

    runs/JOB/RUN/run.json                 the run's record: one process's, or its shards' merged
    runs/JOB/RUN/shard-001-of-003.json    each shard's own record, for the merge
    index/20261201T100000.000000Z_JOB_RUN.json   one small entry per run, for `soak history`

JOB is the name the runs of one soak share (pushgatewayJob, as in Prometheus), RUN the run's
own (resultsRun: the Kubernetes Job's name in the pallet, which every shard of the run knows
alike, so their records meet under one prefix). The index is one object per run under one
prefix, never a file appended to: S3 cannot append, and a read-modify-write of one index
object by concurrent shards or runs would lose entries unless every store honoured If-Match.
An object per run is correct on any store, and its key starts with the run's start time (UTC,
fixed width), so the listing is in time order and a range (`--since 7d`) is one listing from
a key on. A run's entry is written again in place when its merge is made again (a shard that
came late), so a run has one entry.
"""

from __future__ import annotations

import re
import secrets
from datetime import UTC, datetime
from urllib.parse import quote

RUNS = "runs/"
INDEX = "index/"
RUN_RECORD = "run.json"
_STAMP = "%Y%m%dT%H%M%S.%fZ"
_SHARD = re.compile(r"^shard-(\d{3,})-of-(\d{3,})\.json$")


def stamp(wall: float) -> str:
    """A time as a key's fixed-width part: `20261201T102043.123456Z` (UTC), sorting as time does."""
    return datetime.fromtimestamp(wall, UTC).strftime(_STAMP)


def from_stamp(text: str) -> float:
    """The time a stamp() says; ValueError if it is not one."""
    return datetime.strptime(text, _STAMP).replace(tzinfo=UTC).timestamp()


def name_part(name: str) -> str:
    """A job's or run's name as one part of a key: characters beyond letters, digits, `.`, `-` and
    `_` percent-encoded, so a name cannot add a `/` (a level) or be `..`."""
    return quote(name, safe="") if name not in (".", "..") else quote(name, safe="").replace(".", "%2E")


def run_prefix(job: str, run: str) -> str:
    return f"{RUNS}{name_part(job)}/{name_part(run)}/"


def run_key(job: str, run: str) -> str:
    """The run's record: one process's run, or the run its shards make merged."""
    return run_prefix(job, run) + RUN_RECORD


def shard_key(job: str, run: str, index: int, count: int) -> str:
    """Shard `index` of `count`'s record (numbers zero-padded, so a listing is in shard order)."""
    return run_prefix(job, run) + f"shard-{index:03d}-of-{count:03d}.json"


def shard_of(key: str) -> tuple[int, int] | None:
    """(index, count) of a shard_key(); None for any other key."""
    found = _SHARD.match(key.rpartition("/")[2])
    if found is None:
        return None
    index, count = int(found.group(1)), int(found.group(2))
    return (index, count) if 0 <= index < count else None


def index_key(start_wall: float, job: str, run: str) -> str:
    return f"{INDEX}{stamp(start_wall)}_{name_part(job)}_{name_part(run)}.json"


def index_after(wall: float) -> str:
    """The key a listing of the index starts after to find the runs that started at `wall` or later."""
    return f"{INDEX}{stamp(wall)}"[:-1]  # the stamp without its Z: every key of that instant sorts after


def new_run_name(start_wall: float) -> str:
    """A name for a run that was given none: when it started, and a random part (two runs may start together)."""
    return f"{datetime.fromtimestamp(start_wall, UTC).strftime('%Y%m%dT%H%M%SZ')}-{secrets.token_hex(3)}"
