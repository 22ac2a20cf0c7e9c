"""Reading the shards of a run back from logs: `kubectl logs --prefix` output, or one file each.

`kubectl logs -l job-name=soak-123 --prefix --tail=-1` interleaves the pods' lines, each
behind `[pod/NAME/CONTAINER] `. Split on that prefix, each pod's log is what one shard
printed: its JSON summary holds its shard record, which is what gets merged. Logs without
the prefix may still hold several shards (`cat pod-0.log pod-1.log`): each begins at its
startup line. A log cut before its summary still says, in its startup line, which shard it
was, so it can be named as incomplete instead of silently left out.

`kubectl logs -l app=soak` also picks up the pods of the Jobs kept from earlier runs, and
merging shards of different runs would make up a run that never happened. So the logs must
hold one run: the same settings, shard count, no shard twice, and starts at most one
interval apart; anything else is refused, naming what differs.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import field
from typing import Any, TypeVar

from runner.config.schema import shortened
from runner.core.durations import format_duration, parse_duration
from runner.core.errors import UsageError
from runner.core.lazymethods import dataclass
from runner.core.units import NS_PER_S, rfc3339
from runner.readback.logscan import Startup, startup_line, without_timestamp
from runner.readback.results import load_run
from runner.readback.shardcheck import carried, carried_difference, contradictions
from runner.stats.merge import CLOCK_SLACK_NS
from runner.stats.record import ShardRun, run_settings

_PREFIX = re.compile(r"^\[(pod/[^\]/]+/[^\]]+)\] ?(.*)$")
_SHARD = re.compile(r"\(shard (\d+) of (\d+)(?:, worker \d+ of \d+)?\)$")
_JOB_POD = re.compile(r"^pod/(.+)-\d+-[a-z0-9]{5}/")  # an Indexed Job's pod: JOB-INDEX-RANDOM
_NOT_A_SHARD = "not a soak shard's output"
_SHOWN_SETTINGS = 3  # differing settings named in the message, at most
_SHOWN_CHARS = 40
MAX_CONTRADICTIONS = 10  # a shard's contradictions said one a line; the rest are counted
_UNSET = object()  # a setting one shard's config does not have
_T = TypeVar("_T")


@dataclass(frozen=True)
class CutLog:
    """A shard's log that ends before its summary (or whose summary cannot be merged)."""

    index: int
    count: int
    source: str
    text: str


@dataclass
class PodLogs:
    """What the logs hold: the shards that finished, the ones cut short, and what was skipped."""

    shards: list[ShardRun] = field(default_factory=list)
    incomplete: list[int] = field(default_factory=list)
    expected: int | None = None  # the shard count the logs speak of
    notes: list[str] = field(default_factory=list)
    cut: list[CutLog] = field(default_factory=list)  # the incomplete shards' logs, to tell runs apart


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


def split_runs(text: str, source: str) -> list[tuple[str, str]]:
    """(source, text) per run in one log, each named by its first line when there are several.

    Logs joined without prefixes (`cat pod-0.log pod-1.log`, or pods' logs saved in one
    file) hold one run after another: each begins at its startup line, or, for summaries
    saved alone, at a summary that follows a whole one. Lines before the first run's
    startup line (a warning on stderr) belong to it.
    """
    lines = text.splitlines(keepends=True)
    starts = [0]
    started = summarized = False
    for number, raw in enumerate(lines):
        line = without_timestamp(raw).rstrip()
        startup = startup_line(line) is not None
        if (startup and (started or summarized)) or (line.startswith("{") and summarized):
            starts.append(number)
            started = summarized = False
        started = started or startup
        summarized = summarized or line == "}" or (line.startswith("{") and line.endswith("}"))
    if len(starts) == 1:
        return [(source, text)]
    ends = [*starts[1:], len(lines)]
    return [(f"{source} line {start + 1}", "".join(lines[start:end])) for start, end in zip(starts, ends, strict=True)]


def read_pods(texts: Iterable[tuple[str, str]]) -> PodLogs:
    """Every shard found in the named texts (each maybe several pods' interleaved logs, or runs joined).

    A UsageError if they hold the shards of more than one run: those cannot be merged.
    """
    found = PodLogs()
    for name, text in texts:
        for source, log in split_by_pod(text, "stdin" if name == "-" else name):
            for part, run in split_runs(log, source):
                _read_one(found, part, run)
    _drop_copies(found)
    _one_run(found)
    _one_version(found.shards)
    found.incomplete = sorted({cut.index for cut in found.cut})
    counts = [s.count for s in found.shards]
    found.expected = max(counts) if counts else found.expected
    return found


def _read_one(found: PodLogs, source: str, log: str) -> None:
    """One run's log: a shard to merge, a shard cut short (or damaged), or something else, noted.

    A shard whose figures contradict each other is damaged too: each contradiction is a note
    (runner.readback.shardcheck), and the shard is left out, named by its record if no
    startup line names it.
    """
    loaded = load_run(log, source)
    said = _shard_said(loaded.startup)
    summary = loaded.summary
    problem = None
    if summary is not None and "shard" in summary:
        try:
            shard = ShardRun.from_summary(summary, source)
        except ValueError as e:
            problem = str(e)
        else:
            wrong = contradictions(summary, shard)
            if not wrong:
                found.shards.append(shard)
                return
            found.notes += _contradiction_notes(source, shard.index, wrong)
            problem = f"its figures contradict each other ({len(wrong)} contradiction{'s' * (len(wrong) > 1)})"
            said = said or (shard.index, shard.count)
    elif summary is not None and said is None:
        problem = "the summary has no shard record (was the run split over shards?)"
    if said:
        found.expected = max(found.expected or 0, said[1])
        found.cut.append(CutLog(said[0], said[1], source, log))
        found.notes.append(f"{source}: shard {said[0]}'s summary cannot be merged: {problem}" if problem else
                           f"{source}: shard {said[0]}'s log has no complete summary (cut off?)")
    elif problem or log.strip():
        found.notes.append(f"{source}: skipped: {problem or _NOT_A_SHARD}")


def _contradiction_notes(source: str, index: int, wrong: Sequence[str]) -> list[str]:
    """One note per contradiction, naming the shard and where: the first MAX_CONTRADICTIONS, then how many more."""
    notes = [f"{source}: shard {index}, {what}" for what in wrong[:MAX_CONTRADICTIONS]]
    if len(wrong) > MAX_CONTRADICTIONS:
        notes.append(f"{source}: shard {index}: {len(wrong) - MAX_CONTRADICTIONS} more contradictions")
    return notes


def _shard_said(startup: Startup | None) -> tuple[int, int] | None:
    """(index, count) from the startup line's `(shard i of N)`; None for a run that was not split."""
    found = _SHARD.search(startup.target) if startup is not None else None
    return (int(found.group(1)), int(found.group(2))) if found else None


# --- one run, or a refusal -------------------------------------------------------------------


def _drop_copies(found: PodLogs) -> None:
    """The same shard's log given twice (the same file twice, say) is one shard: later copies are dropped."""
    kept: list[ShardRun] = []
    for shard in found.shards:
        if any(k.index == shard.index and (k.totals, k.config) == (shard.totals, shard.config) for k in kept):
            found.notes.append(f"{shard.source}: shard {shard.index} appears twice, the same log; this copy is skipped")
        else:
            kept.append(shard)
    found.shards = kept
    cuts: list[CutLog] = []
    for cut in found.cut:
        if any((c.index, c.text) == (cut.index, cut.text) for c in cuts):
            found.notes.append(f"{cut.source}: shard {cut.index} appears twice, the same log; this copy is skipped")
        else:
            cuts.append(cut)
    found.cut = cuts


def _one_run(found: PodLogs) -> None:
    """A UsageError saying what differs when the shards are of more than one run."""
    problem = (_twice(found.shards, found.cut) or _counts_differ(found.shards, found.cut)
               or _settings_differ(found.shards) or _starts_apart(found.shards))
    if problem:
        raise UsageError(f"merge: the logs hold more than one run{_jobs(found)}: {problem}; merge one run's logs "
                         "at a time (kubectl logs -l job-name=JOB --prefix --tail=-1 | soak merge)")


def _one_version(shards: Sequence[ShardRun]) -> None:
    """A UsageError naming a shard whose records lack what another's carry (shardcheck.CARRIED): an
    earlier version wrote it, and merged, the phases and backends would count some of the responses
    only, against every other figure that counts them all."""
    present = [(carried(s.intervals[0]), s) for s in shards if len(s.intervals)]
    if len({has for has, _ in present}) < 2:
        return
    least, odd = min(present, key=lambda p: len(p[0]))
    usual = next(s for has, s in sorted(present, key=lambda p: -len(p[0])) if has != least)
    _, words = carried_difference(least, carried(usual.intervals[0]))
    raise UsageError(f"merge: shard {odd.index}'s records ({odd.source}) have no {words}, which shard {usual.index}'s "
                     f"({usual.source}) have: an earlier version wrote it, and merged, their figures would contradict "
                     "each other; merge logs of one version")


def _twice(shards: Sequence[ShardRun], cut: Sequence[CutLog]) -> str | None:
    """The first shard index found in two different logs, with when each started and where."""
    copies: dict[int, list[str]] = {}
    for shard in sorted(shards, key=lambda s: s.start_wall):
        seen = copies.setdefault(shard.index, [])
        seen.append(f"{'' if seen else 'started '}{_time(shard.start_wall)} in {shard.source}")
    for log in cut:
        copies.setdefault(log.index, []).append(f"cut off before its summary in {log.source}")
    twice = sorted(index for index, seen in copies.items() if len(seen) > 1)
    if not twice:
        return None
    seen = copies[twice[0]]
    times = "twice" if len(seen) == 2 else f"{len(seen)} times"
    return f"shard {twice[0]} appears {times} ({', '.join(seen[:-1])} and {seen[-1]})"


def _counts_differ(shards: Sequence[ShardRun], cut: Sequence[CutLog]) -> str | None:
    """Two shards that say they are one of a different number of shards."""
    said = [(s.index, s.count, s.source) for s in shards] + [(c.index, c.count, c.source) for c in cut]
    pair = _odd_one_out(said, lambda s: s[1])
    if pair is None:
        return None
    odd, usual = pair
    return f"shard {odd[0]} ({odd[2]}) is one of {odd[1]}, shard {usual[0]} ({usual[2]}) one of {usual[1]}"


def _settings_differ(shards: Sequence[ShardRun]) -> str | None:
    """Two shards that ran with different settings, and the settings they differ in."""
    pair = _odd_one_out(shards, _run_of)
    if pair is None:
        return None
    odd, usual = pair
    mine, theirs = _run_of(odd), _run_of(usual)
    keys = [key for key in {**mine, **theirs} if mine.get(key, _UNSET) != theirs.get(key, _UNSET)][:_SHOWN_SETTINGS]
    return (f"shard {odd.index} ({odd.source}) ran with {_settings(mine, keys)}, "
            f"shard {usual.index} ({usual.source}) with {_settings(theirs, keys)}")


def _run_of(shard: ShardRun) -> dict[str, Any]:
    """What every shard of one run has alike: the run's settings, and the URLs (whose indexes errors name)."""
    return {**run_settings(shard.config), "urls": shard.urls}


# How far apart the pods of one Job may come up: Kubernetes starts them within seconds, or
# a minute or so when an image is pulled or a node is found. Two runs of one CronJob are
# an hour apart; a run started by hand beside a scheduled one, minutes.
POD_SPREAD_NS = 60 * NS_PER_S


def _starts_apart(shards: Sequence[ShardRun]) -> str | None:
    """Shards whose starts are too far apart to be one run's pods.

    Each pod starts at the next interval boundary by its own clock, so pods that came up
    POD_SPREAD_NS apart start at most that plus one interval apart (with 1 s intervals,
    pods 1.5 s apart are two intervals apart and still one run).
    """
    if len(shards) < 2:
        return None
    interval_ns = parse_duration(shards[0].config["interval"])
    first, last = min(shards, key=lambda s: s.start_wall), max(shards, key=lambda s: s.start_wall)
    allowed_ns = max(interval_ns, POD_SPREAD_NS) + interval_ns
    if (last.start_wall - first.start_wall) * NS_PER_S <= allowed_ns + CLOCK_SLACK_NS:
        return None
    return (f"shard {last.index} ({last.source}) started {_time(last.start_wall)}, shard {first.index} "
            f"({first.source}) {_time(first.start_wall)}: more than {format_duration(allowed_ns)} apart")


def _odd_one_out(items: Sequence[_T], key: Callable[[_T], Any]) -> tuple[_T, _T] | None:
    """(one item unlike most, one of most) when the items do not all agree on key; else None.

    Most is the largest group, the first one read on a tie, so that the message names the
    odd one first, as the one to leave out. Keys are compared with ==, so 20 and 20.0 agree.
    """
    groups: list[list[_T]] = []
    for item in items:
        group = next((g for g in groups if key(g[0]) == key(item)), None)
        if group is None:
            groups.append([item])
        else:
            group.append(item)
    if len(groups) < 2:
        return None
    usual = max(groups, key=len)
    return next(g for g in groups if g is not usual)[0], usual[0]


def _settings(config: dict[str, Any], keys: Sequence[str]) -> str:
    """`qps 40 and interval 2s`: the named settings, as the config file would say them."""
    shown = [f"{key} {_value(config[key]) if key in config else '(not set)'}" for key in keys]
    return ", ".join(shown[:-1]) + " and " + shown[-1] if len(shown) > 1 else shown[0]


def _value(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
    return shortened(text, _SHOWN_CHARS)


def _time(wall: float) -> str:
    return rfc3339(wall, fraction=wall != int(wall))


def _jobs(found: PodLogs) -> str:
    """` (jobs soak-29400000 and soak-29400060)` when kubectl's pod names say which Jobs the logs are from."""
    sources = [s.source for s in found.shards] + [c.source for c in found.cut]
    jobs = sorted({m.group(1) for source in sources if (m := _JOB_POD.match(source))})
    if len(jobs) < 2:
        return ""
    return f" (jobs {', '.join(jobs[:-1])} and {jobs[-1]})"
