"""The `#` lines that say what the client's own delay may have changed, and what came late.

They go on stdout between slow_cooker's lines, starting with `#` like its header, so a
reader of `kubectl logs` sees them where they apply and a parser of interval lines skips
them as it skips the header. An interval gets one only when it changes how its line reads:
sends were skipped, the client's delay may have cut its goal%, cost it timeouts or be in its
latencies (stats.client.Pace.saturated), or (backendHeader) it reached fewer backends than the
interval before. Sends a few milliseconds late that changed nothing get none: a healthy run on
a busy node prints none. Where the client's delay is a guess, the words say so ("may").
"""

from __future__ import annotations

from runner.core.durations import format_duration
from runner.stats.client import OWN_CPU, SATURATED_LAG_NS, Pace, starved_by
from runner.stats.figures import NO_BACKEND, OTHER_BACKENDS, Figures
from runner.stats.recorder import Interval, Tally
from runner.stats.runinfo import RunSummary

# How each line starts, so a reader of logs (runner.readback) knows them for ours.
INTERVAL_NOTE, DRAIN_NOTE, RUN_NOTE = "# iter ", "# after the last interval: ", "# the client's own delay may have "
BUSY_NOTE = "# clients busy "  # after ab's report: its Time per request says more about the client (abreport.busy_note)
BACKEND_NOTE = "# backendHeader "  # once a run: no response carried it (backend_note)
OLD_RUN_NOTE = "# client saturated in "  # an earlier version's run note, still read back as ours
NOTE_PREFIXES = (INTERVAL_NOTE, DRAIN_NOTE, RUN_NOTE, BUSY_NOTE, BACKEND_NOTE, OLD_RUN_NOTE)


def short(ns: float) -> str:
    """A duration to a tenth of a millisecond, as Go prints it: `31.2ms`, `1.5s`, `0s`."""
    return format_duration(round(ns / 100_000) * 100_000)


def interval_note(interval: Interval, before: Figures | None = None) -> str:
    """The line after an interval line that had sends skipped, in which the client's delay may have
    changed a figure (interval.pace), or (with a backendHeader: `before` is the interval before's
    figures) that reached fewer backends than the interval before; "" if none of these."""
    pace, figures = interval.pace, interval.figures
    parts = []
    if figures.skipped and not pace.skipped:
        parts.append(f"{figures.skipped} {_sends(figures.skipped)} skipped while requests were still in flight")
    if pace.saturated:
        parts.append(changed_by_client(pace, figures.goal_percent))
    if before is not None:
        parts += _fewer_backends(before, figures, interval.index - 1)
    return f"{INTERVAL_NOTE}{interval.index}: {'; '.join(parts)}\n" if parts else ""


def changed_by_client(pace: Pace, goal_percent: float | None = None) -> str:
    """What the client's delay may have changed, and why it ran late: `7 sends skipped, goal% 98%
    (9 sends short), p99 up to 31ms higher: the client's own delay may have caused them, running up
    to 118.5ms behind (its node did not run it on time: it used 1% of a core)`."""
    what = []
    if pace.skipped:
        what.append(f"{pace.skipped} {_sends(pace.skipped)} skipped")
    if pace.short:
        missing = f"{pace.short} {_sends(pace.short)} short"
        what.append(missing + " of the goal" if goal_percent is None else f"goal% {int(goal_percent)}% ({missing})")
    if pace.timeouts:
        what.append(f"{pace.timeouts} {'timeout' if pace.timeouts == 1 else 'timeouts'}")
    key, raised = pace.moved
    if raised >= SATURATED_LAG_NS:
        what.append(f"{key} up to {short(raised)} higher")
    them = "it" if len(what) == 1 else "them"
    return f"{', '.join(what)}: the client's own delay may have caused {them}, {_behind(pace)}"


def _behind(pace: Pace) -> str:
    """How far behind the client ran, and why (stats.client.starved_by)."""
    behind = f"running up to {short(max(pace.behind_ns, pace.lag_ns))} behind"
    if starved_by(pace.cpu_share) == OWN_CPU:
        return f"{behind} on its own CPU ({pace.cpu_share:.0%} of a core)"
    return f"{behind} (its node did not run it on time: it used {pace.cpu_share:.0%} of a core)"


GONE_SHOWN = 3  # backends named in a note as gone; any more are "..."


def _fewer_backends(before: Figures, now: Figures, index: int) -> list[str]:
    """`7 backends answered, 10 in iter 4 (nginx-3, nginx-7 not among them)`, when fewer did."""
    if now.backends_reached >= before.backends_reached:
        return []
    gone = [name for name in before.backends if name not in now.backends and name not in (OTHER_BACKENDS, NO_BACKEND)]
    named = ", ".join(gone[:GONE_SHOWN]) + (", ..." if len(gone) > GONE_SHOWN else "")
    which = f" ({named} not among them)" if gone else ""
    n = now.backends_reached
    return [f"{n} {'backend' if n == 1 else 'backends'} answered, {before.backends_reached} in iter {index}{which}"]


def drain_note(summary: RunSummary) -> str:
    """The line about responses that came back after the last interval ended; "" if none did."""
    drain = summary.drain
    if drain is None or not drain.requests or summary.last_interval_end_ns is None:
        return ""
    later = summary.end_ns - summary.last_interval_end_ns
    return (f"{DRAIN_NOTE}{_counts(drain)} came back up to {short(later)} later;"
            " in the summary's totals, not in the line above\n")


def run_note(summary: RunSummary) -> str:
    """The line that names the intervals in which the client's delay may have changed a figure,
    with what it changed in them, added up; "" if there were none."""
    client = summary.client
    if client is None or not client.saturated:
        return ""
    shown = ", ".join(map(str, client.named)) + (", ..." if client.saturated_intervals > len(client.named) else "")
    which = f"{RUN_NOTE}changed {client.saturated_intervals} of {summary.intervals} intervals ({shown})"
    if client.pace is None:  # not known (merged from shards of an earlier version)
        return which + "\n"
    return f"{which}: {changed_by_client(client.pace)}\n"


def backend_note(summary: RunSummary) -> str:
    """The line, once a run, that says no response carried the backendHeader, so no backend was
    counted; "" without a backendHeader, without responses, or when some carried it."""
    header = summary.info.settings.report.backend_header
    f = summary.figures
    if not header or not f.responses or dict(f.backends) != {NO_BACKEND: f.responses}:
        return ""
    return (f"{BACKEND_NOTE}{header}: none of the {f.responses} {'response' if f.responses == 1 else 'responses'}"
            " carried it, so no backend was counted\n")


def _counts(tally: Tally) -> str:
    return f"{tally.requests} {'response' if tally.requests == 1 else 'responses'}" \
           f" ({tally.good}/{tally.bad}/{tally.failed} good/bad/failed)"


def _sends(n: int) -> str:
    return "send" if n == 1 else "sends"
