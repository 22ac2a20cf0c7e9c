"""Opening an input file, checked, and reading it within a bound: one edge every input goes through.

A run reads its inputs (configuration, URL list, body file, TLS files) completely before it
sends anything, so that a bad one is refused up front. That needs files that end, and end
soon: a FIFO blocks until some writer comes (a run that never starts, ignoring the CronJob's
deadline), and a device like /dev/zero never ends (the run reads until memory runs out). So
only regular files are read (a symlink to one is fine: Kubernetes mounts ConfigMap and Secret
keys that way), each up to a size stated here, and never more than that size plus one byte
is read, whatever the file claims to hold.

The logs that `soak merge`, `compare` and `plot` read back are read to their end, as streams:
they may also be stdin (`-`, or /dev/stdin) or a pipe that a shell made (`<(kubectl logs ...)`),
whose writer exists already; a named FIFO (whose open waits for a writer) and a device are
refused alike.
"""

from __future__ import annotations

import errno
import os
import stat
from typing import BinaryIO

from runner.core.errors import UsageError

KIB = 1024
MIB = 1024 * KIB

# configuration.json: a few dozen settings fit in 2 KiB; a Kubernetes ConfigMap holds 1 MiB at most.
CONFIG_LIMIT = 1 * MIB
# The URL list: about 250,000 URLs of 64 characters (a ConfigMap holds 1 MiB; a local list may be larger).
URL_LIST_LIMIT = 16 * MIB
# A request body sent from a file: held in memory once per process, sent with every request.
BODY_LIMIT = 16 * MIB
# A TLS file (caBundle, clientCert, clientKey): certifi's whole bundle is 0.3 MiB; a Secret holds 1 MiB.
TLS_FILE_LIMIT = 4 * MIB

STDIN = "-"  # a log read from stdin, as merge, compare and plot take it

_KINDS = (
    (stat.S_ISFIFO, "a FIFO (named pipe)"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)
_WHOLE = "inputs are read whole before the run starts, so they must be files that end"
_STREAM = "logs are read to their end, so they must be files that end (or - for stdin)"


def read_bounded(path: str, limit: int, what: str) -> bytes:
    """The bytes of the regular file `path`, at most `limit` of them; UsageError naming `path` otherwise.

    `what` names the input in the size message ("a configuration file"). The file is opened
    without blocking (a FIFO's open() waits for a writer otherwise) and checked before a
    byte is read.
    """
    with _open_checked(path, stream=False) as f:
        data = _read(f, path, limit + 1)  # one byte more than allowed tells a file that is too large
    if len(data) > limit:
        raise UsageError(f"{path}: larger than {format_size(limit)}, the most {what} may hold")
    return data


def open_log(path: str) -> BinaryIO:
    """A log to read back, to its end: a regular file, stdin (`-` or /dev/stdin) or a shell's pipe.

    A UsageError naming `path` for anything else, before a byte is read; reading it is the
    caller's (read_log reads it whole).
    """
    if path == STDIN:
        return open(0, "rb", closefd=False)  # noqa: SIM115  (fd 0 is always open: outputs.py sees to it)
    return _open_checked(path, stream=True)


def read_log(path: str) -> bytes:
    """The whole of a log opened by open_log; a read error is a UsageError naming `path`."""
    with open_log(path) as f:
        return _read(f, path)


def _open_checked(path: str, stream: bool) -> BinaryIO:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        raise UsageError(f"{path}: no such file") from None
    except OSError as e:
        raise UsageError(f"{path}: cannot read: {e.strerror or e}") from None
    try:
        _check_kind(fd, path, stream)
        os.set_blocking(fd, True)  # a pipe's reads wait for its writer, as a file's never need to
    except BaseException:
        os.close(fd)
        raise
    return os.fdopen(fd, "rb")


def _read(f: BinaryIO, path: str, size: int = -1) -> bytes:
    try:
        return f.read(size)
    except OSError as e:
        raise UsageError(f"{path}: cannot read: {e.strerror or e}") from None


def _check_kind(fd: int, path: str, stream: bool) -> None:
    """Refuse what is not a regular file; for a stream, stdin and a shell's pipe are fine too."""
    mode = os.fstat(fd).st_mode
    if stat.S_ISDIR(mode):  # as open() says it of a directory on other systems
        raise UsageError(f"{path}: cannot read: {os.strerror(errno.EISDIR)}")
    if stat.S_ISREG(mode) or (stream and (_is_stdin(fd) or _is_anonymous_pipe(fd, mode))):
        return
    raise UsageError(f"{path}: is {_kind(mode)}, not a regular file; {_STREAM if stream else _WHOLE}")


def _is_stdin(fd: int) -> bool:
    """Whether `fd` is the file stdin is (/dev/stdin, /dev/fd/0): what the user gave the program to read."""
    try:
        ours, stdin = os.fstat(fd), os.fstat(0)
    except OSError:
        return False
    return (ours.st_dev, ours.st_ino) == (stdin.st_dev, stdin.st_ino)


def _is_anonymous_pipe(fd: int, mode: int) -> bool:
    """A pipe with no name (a shell's `<(...)`, /dev/fd/N): its writer was there before we opened it,
    so it ends when that writer does; a named FIFO (mkfifo) may wait for ever for one."""
    if not stat.S_ISFIFO(mode):
        return False
    try:
        return os.readlink(f"/proc/self/fd/{fd}").startswith("pipe:")
    except OSError:  # no /proc: a FIFO it is
        return False


def format_size(size: int) -> str:
    """`1 MiB`, `16 MiB`, `512 KiB`: the limits are round numbers of these units."""
    for unit, name in ((MIB, "MiB"), (KIB, "KiB")):
        if size >= unit and size % unit == 0:
            return f"{size // unit} {name}"
    return f"{size} bytes"


def _kind(mode: int) -> str:
    return next((name for test, name in _KINDS if test(mode)), "a special file")
