"""The one error type a user ever sees, and the exit codes: what each means, and which one wins.

Anything that is the user's to fix (a config value, a URL, a missing file or variable)
raises UsageError with a message that names what is wrong; the CLI prints it as one line
on stderr and exits 2, never with a traceback.

A run's exit code says how it went, so a failed Job is an alert that can be read from its
code alone. Several may apply at once (a run stopped by SIGTERM that broke a threshold and
whose CSV could not be written): then exit_code() takes the first in PRECEDENCE, the one
table of docs/output.md#exit-codes.
"""

from __future__ import annotations

from collections.abc import Iterable

EXIT_OK = 0
EXIT_USAGE = 2
EXIT_THRESHOLDS = 3  # the run finished (or was stopped) and broke at least one of its thresholds
EXIT_PROXY_NOT_READY = 4  # linkerdAwait: the Linkerd proxy was not ready in time; nothing was sent
# A part of the run is missing from its output, which covers the others: a local worker process
# died or failed, or `soak merge` found a shard's output missing, cut off or refused.
EXIT_WORKER_FAILED = 5
EXIT_SHARD_MISSING = EXIT_WORKER_FAILED  # the same meaning, for a shard of a merged run
# stdout, stderr or the CSV could not be written (a full disk, an I/O error), or stdout's reader left
# (`soak ... | head`, which stops the run); see runner.commands.outputs
EXIT_OUTPUT = 6
EXIT_INTERRUPTED = 7  # SIGINT or SIGTERM stopped the run before its planned end; what it ran is reported
EXIT_NO_RESPONSE = 8  # requests were sent and not one response came back (refused, timed out, ...)
EXIT_INCONCLUSIVE = 9  # thresholds broke only where the client's own delay may have changed them: not the service
EXIT_STOPPED_WAITING = 130  # SIGINT or SIGTERM while waiting for the Linkerd proxy; nothing was sent

# Which code wins when several apply. First, what stopped a run before it began (nothing was
# sent); then a worker that failed (the output lacks its share, so any verdict is on part of the
# run, and its missing share alone breaks goal%); then what the service did: answered nothing at
# all (8, which every threshold would also say), broke thresholds (3); then a verdict that cannot
# blame the service (9: its rules broke only where the client's own delay may have changed their
# figures); then output that was lost (6: what a code below promises cannot be read); last, a run
# cut short by a signal (7), which says nothing about the service at all.
PRECEDENCE = (EXIT_USAGE, EXIT_PROXY_NOT_READY, EXIT_STOPPED_WAITING, EXIT_WORKER_FAILED, EXIT_NO_RESPONSE,
              EXIT_THRESHOLDS, EXIT_INCONCLUSIVE, EXIT_OUTPUT, EXIT_INTERRUPTED)


class UsageError(Exception):
    """Bad configuration or command line; str(error) is the whole, single-line message."""


def exit_code(applying: Iterable[int]) -> int:
    """The one exit code of a run to which every code in `applying` applies: the first of them in
    PRECEDENCE, or EXIT_OK when none does (EXIT_OK itself may be among them)."""
    found = set(applying) - {EXIT_OK}
    unknown = found - set(PRECEDENCE)
    if unknown:
        raise ValueError(f"not an exit code: {sorted(unknown)}")
    return next((code for code in PRECEDENCE if code in found), EXIT_OK)


def shortened(text: str, limit: int = 60) -> str:
    """`text` cut to `limit` characters, ending in "...", when longer: a value quoted in a one-line message."""
    return text if len(text) <= limit else text[: limit - 3] + "..."
