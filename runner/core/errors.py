"""The one error type a user ever sees: bad input, told in one line, exit code 2.

Anything that is the user's to fix (a config value, a URL, a missing file or variable)
raises UsageError with a message that names what is wrong; the CLI prints it as one line
on stderr and exits 2, never with a traceback.
"""

from __future__ import annotations

EXIT_OK = 0
EXIT_USAGE = 2
EXIT_THRESHOLDS = 3  # the run finished (or was stopped) and broke at least one of its thresholds
EXIT_PROXY_NOT_READY = 4  # linkerdAwait: the Linkerd proxy was not ready in time; nothing was sent
# A part of the run is missing from its output, which covers the others: a local worker process
# died or failed, or `soak merge` found a shard's output missing, cut off or refused.
EXIT_WORKER_FAILED = 5
EXIT_SHARD_MISSING = EXIT_WORKER_FAILED  # the same meaning, for a shard of a merged run
EXIT_OUTPUT = 6  # stdout, stderr or the CSV could not be written (a full disk, an I/O error); see outputs.py


class UsageError(Exception):
    """Bad configuration or command line; str(error) is the whole, single-line message."""


def shortened(text: str, limit: int = 60) -> str:
    """`text` cut to `limit` characters, ending in "...", when longer: a value quoted in a one-line message."""
    return text if len(text) <= limit else text[: limit - 3] + "..."
