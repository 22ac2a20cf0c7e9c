"""The run's verdict where Kubernetes shows why a container ended: its termination message.

When a container ends, the kubelet reads the file at its terminationMessagePath
(/dev/termination-log unless the pod says otherwise) and shows it as the container's
`state.terminated.message`: in `kubectl describe pod`, `kubectl get pod -o yaml`, and so in
whatever watches pods. A failed Job says only BackoffLimitExceeded; with this message its pod
says which rule broke, without anyone reading the log.

The message is made from the final outcome alone (the exit code and the lines the run's end
said of it), in termination_message(), so whatever codes a run can end with, the message says
the code and those lines. It is a few short lines, bounded well under the kubelet's 4096 bytes
(and its 12 KiB for all of a pod's containers, a Linkerd proxy's among them), written through
the same redaction as every line on stdout (runner.commands.outputs).

Outside a pod, nothing is written unless asked: the default path is Kubernetes' own, written
only when it exists (the kubelet makes it for each container); any other path (the
terminationMessagePath setting) is created, so the message can be read anywhere.
"""

from __future__ import annotations

import errno
import os
from typing import TYPE_CHECKING

from runner.commands.outputs import OUTPUTS
from runner.core.errors import EXIT_OK
from runner.report.outcome import verdict_lines

if TYPE_CHECKING:
    from collections.abc import Sequence

    from runner.config.settings import Settings
    from runner.report.verdict import Verdict

KUBERNETES_PATH = "/dev/termination-log"  # the kubelet's default terminationMessagePath
MESSAGE_BYTES = 1024  # well under the kubelet's 4096 bytes a container


def termination_message(code: int, lines: Sequence[str], limit: int = MESSAGE_BYTES) -> str:
    """The message for a run that ended with exit code `code`, of which its end said `lines`.

    `passed: 2 of 2 thresholds kept`, or `exit code 3: 1 of 2 thresholds broken` then one line
    per broken rule. Whole lines are kept while they fit in `limit` bytes (UTF-8), then one
    line says how many more the log has; a first line too long alone is cut.
    """
    head = "passed" if code == EXIT_OK else f"exit code {code}"
    first, *rest = [line for line in lines if line] or ["no thresholds set" if code == EXIT_OK else ""]
    kept = [f"{head}: {first}" if first else head]
    size = len(kept[0].encode())
    for i, line in enumerate(rest):
        # This line, its newline and the last one; and room for saying the rest should the next not fit.
        after = len(_more(len(rest) - i - 1).encode()) + 1 if i < len(rest) - 1 else 0
        if size + len(line.encode()) + 2 + after > limit:
            kept.append(_more(len(rest) - i))
            break
        kept.append(line)
        size += len(line.encode()) + 1
    return _cut("\n".join(kept), limit) + "\n"


def _more(lines: int) -> str:
    return f"... and {lines} more line{'s' if lines > 1 else ''} in the log"


def _cut(text: str, limit: int) -> str:
    """`text` in at most `limit` - 1 bytes of UTF-8 (room for the last newline), cut at a character."""
    data = text.encode()
    return text if len(data) < limit else data[: limit - 1].decode(errors="ignore")


def write_termination_message(path: str, code: int, lines: Sequence[str]) -> None:
    """The message, written to `path` (see the module's docstring for when); a file that cannot be
    written is an output that failed, as a CSV's is (one line on stderr, exit code 6)."""
    if not path or (path == KUBERNETES_PATH and not os.path.exists(path)):
        return
    text = termination_message(code, [OUTPUTS.shown("stdout", line) for line in lines])
    try:
        _write(path, text.encode())
    except OSError as error:
        if error.errno == errno.ENXIO:  # what a FIFO opened without waiting says when no one reads it
            error = OSError(error.errno, "a FIFO that nothing reads")
        OUTPUTS.failure(f"terminationMessagePath: {path}", error)


def _write(path: str, data: bytes) -> None:
    """`data` as the whole of the file at `path`, never waiting: a FIFO nothing reads would hold the
    run for ever at its end (an open for writing waits for a reader), and one whose reader is slow
    fails (EAGAIN) rather than wait; a regular file or a device is written as open() writes it."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NONBLOCK, 0o666)
    try:
        written = os.write(fd, data)
        if written < len(data):
            raise OSError(errno.EAGAIN, f"its reader took {written} of {len(data)} bytes")
    finally:
        os.close(fd)


def ended(settings: Settings, code: int, verdict: Verdict | None, said: Sequence[str] = ()) -> int:
    """The run's exit code, `code` as the outputs leave it, once the termination message says it.

    `said` is what the run's end said of its codes (runner.report.outcome.ExitCode.said): the
    line of `code` first ("" when the verdict's lines say it), then the others; so a run stopped
    by a signal, or that no response came back to, says so first, and the verdict follows."""
    code = OUTPUTS.exit_code(code)
    own, *others = [*said] or [""]
    write_termination_message(settings.report.termination_message_path, code,
                              [own, *verdict_lines(verdict), *others])
    return code
