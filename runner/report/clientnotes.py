"""The `#` lines that say when the client, not the server, set the pace, and what came late.

They go on stdout between slow_cooker's lines, starting with `#` like its header, so a
reader of `kubectl logs` sees them where they apply and a parser of interval lines skips
them as it skips the header. An interval gets one only when its sends left late, the
client was saturated, or it reached fewer backends than the interval before (backendHeader);
a quiet run prints none.
"""

from __future__ import annotations

from runner.core.durations import format_duration
from runner.stats.client import OWN_CPU, SATURATED_CPU, SATURATED_LAG_NS, ClientFigures, starved_by
from runner.stats.figures import NO_BACKEND, OTHER_BACKENDS, Figures
from runner.stats.recorder import Interval, Tally
from runner.stats.runinfo import RunSummary

# How each line starts, so a reader of logs (runner.readback) knows them for ours.
INTERVAL_NOTE, DRAIN_NOTE, RUN_NOTE = "# iter ", "# after the last interval: ", "# client saturated in "
BUSY_NOTE = "# clients busy "  # after ab's report: its Time per request says more about the client (abreport.busy_note)
NOTE_PREFIXES = (INTERVAL_NOTE, DRAIN_NOTE, RUN_NOTE, BUSY_NOTE)


def short(ns: float) -> str:
    """A duration to a tenth of a millisecond, as Go prints it: `31.2ms`, `1.5s`, `0s`."""
    return format_duration(round(ns / 100_000) * 100_000)


def interval_note(interval: Interval, before: Figures | None = None) -> str:
    """The line after an interval line whose sends left late, whose client was saturated, or
    (with a backendHeader: `before` is the interval before's figures) that reached fewer
    backends than the interval before; "" if none of these."""
    tally, client = interval.tally, interval.client
    parts = []
    if tally.late:
        parts.append(f"{tally.late} {_sends(tally.late)} left late (up to {short(tally.late_max_ns)}), not skipped")
    if client.saturated:
        parts.append(f"client saturated {_cause(client)}: the client set the pace, not the server")
    if before is not None:
        parts += _fewer_backends(before, interval.figures, interval.index - 1)
    return f"{INTERVAL_NOTE}{interval.index}: {'; '.join(parts)}\n" if parts else ""


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
    """The line that says the client was the limit of this run; "" if it never was."""
    client = summary.client
    if client is None or not client.saturated:
        return ""
    return (f"{RUN_NOTE}{client.saturated_intervals} of {summary.intervals} intervals"
            f" ({_figures(client)}): the figures of those intervals include the client's own delay\n")


def _cause(client: ClientFigures) -> str:
    """Which it was (stats.client.starved_by), with the figures that say so.

    `by its own CPU: cpu 97% of a core (limit 90%), loop lag p99 14.1ms (limit 10ms)`, or
    `by its node, which did not run it on time: loop lag p99 2.4s (limit 10ms) while it used 3% of a core`.
    """
    p99 = short(client.loop_lag.percentiles([99])[99])
    if starved_by(client) == OWN_CPU:
        return f"by its own CPU: {_figures(client)}"
    return (f"by its node, which did not run it on time: loop lag p99 {p99} (limit {short(SATURATED_LAG_NS)})"
            f" while it used {client.cpu_share:.0%} of a core")


def _figures(client: ClientFigures) -> str:
    p99 = client.loop_lag.percentiles([99])[99]
    return (f"cpu {client.cpu_share:.0%} of a core (limit {SATURATED_CPU:.0%}),"
            f" loop lag p99 {short(p99)} (limit {short(SATURATED_LAG_NS)})")


def _counts(tally: Tally) -> str:
    return f"{tally.requests} {'response' if tally.requests == 1 else 'responses'}" \
           f" ({tally.good}/{tally.bad}/{tally.failed} good/bad/failed)"


def _sends(n: int) -> str:
    return "send" if n == 1 else "sends"
