"""Reading the shards of a run back from logs: `kubectl logs --prefix` output, or one file each.

`kubectl logs -l job-name=soak-123 --prefix --tail=-1` interleaves the pods' lines, each
behind `[pod/NAME/CONTAINER] `. Split on that prefix, each pod's log is what one shard
printed: its JSON summary holds its shard record, which is what gets merged. A log cut
before its summary still says, in its startup line, which shard it was, so it can be
named as incomplete instead of silently left out.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field

from runner.merge import ShardRun
from runner.results import load_run

_PREFIX = re.compile(r"^\[(pod/[^\]/]+/[^\]]+)\] ?(.*)$")
_SHARD = re.compile(r"^# sending .* \(shard (\d+) of (\d+)(?:, worker \d+ of \d+)?\) \.\.\.$", re.M)


@dataclass
class PodLogs:
    """What the logs hold: the shards that finished, the ones cut short, and what was skipped."""

    shards: list[ShardRun] = field(default_factory=list)
    incomplete: list[int] = field(default_factory=list)
    expected: int | None = None  # the shard count the logs speak of
    notes: list[str] = field(default_factory=list)


def split_by_pod(text: str, name: str) -> list[tuple[str, str]]:
    """(source, text) per pod when the lines carry kubectl's `--prefix`; else the whole text as one."""
    pods: dict[str, list[str]] = {}
    plain: list[str] = []
    for line in text.splitlines():
        found = _PREFIX.match(line)
        if found:
            pods.setdefault(found.group(1), []).append(found.group(2))
        else:
            plain.append(line)
    if not pods:
        return [(name, text)]
    groups = [(source, "\n".join(lines) + "\n") for source, lines in pods.items()]
    if any(line.strip() for line in plain):
        groups.append((f"{name} (lines without a pod prefix)", "\n".join(plain) + "\n"))
    return groups


def read_pods(texts: Iterable[tuple[str, str]]) -> PodLogs:
    """Every shard found in the named texts (each maybe several pods' interleaved logs)."""
    found = PodLogs()
    for name, text in texts:
        for source, log in split_by_pod(text, name):
            _read_one(found, source, log)
    counts = [s.count for s in found.shards]
    found.expected = max(counts) if counts else found.expected
    return found


def _read_one(found: PodLogs, source: str, log: str) -> None:
    startup = _SHARD.search(log)
    if startup:
        found.expected = max(found.expected or 0, int(startup.group(2)))
    summary = load_run(log, source).summary
    if summary is not None:
        try:
            shard = ShardRun.from_summary(summary)
        except ValueError as e:
            if not startup:
                found.notes.append(f"{source}: skipped: {e}")
                return
        else:
            if any(s.index == shard.index for s in found.shards):
                found.notes.append(f"{source}: shard {shard.index} appears twice; this copy is skipped")
            else:
                found.shards.append(shard)
            return
    if startup:
        found.incomplete.append(int(startup.group(1)))
        found.notes.append(f"{source}: shard {startup.group(1)}'s log has no complete summary (cut off?)")
    elif log.strip():
        found.notes.append(f"{source}: skipped: not a soak shard's output")
