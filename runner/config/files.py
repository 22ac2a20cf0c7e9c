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

Output files (the latency CSV, the JUnit file) are opened here too, before the run starts, so
that a path that cannot be written stops it before any load is sent (open_output), and `soak
validate` refuses the same paths without leaving a trace (check_output).
"""

from __future__ import annotations

import errno
import fcntl
import os
import stat
from typing import BinaryIO, TextIO

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


def open_output(path: str, name: str) -> TextIO:
    """Open (create, empty) the output file `path` now, so a bad path stops the run before any load
    is sent; a UsageError names the setting (`name`), the path and the error otherwise.

    Opened without blocking, so a FIFO that no one reads is refused (ENXIO) instead of holding
    the start for ever; writes then block as usual.
    """
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NONBLOCK | os.O_CLOEXEC, 0o666)
    except OSError as e:
        raise _unusable(name, path, e) from None
    fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) & ~os.O_NONBLOCK)
    return os.fdopen(fd, "w", encoding="utf-8")


def check_output(path: str, name: str) -> None:
    """Refuse, as open_output would, a path that output cannot be written to, leaving no trace: an
    existing file is opened without being emptied, and a new one is made and removed at once.

    `soak validate` says "valid" only for what a run accepts; a run checks the same way first.
    Only the kernel knows whether a file can be made: /proc/x.csv is in a directory that exists,
    is not read-only and allows root to write, and still cannot hold a new file.
    """
    try:
        fd = os.open(path, os.O_WRONLY | os.O_NONBLOCK | os.O_CLOEXEC)  # no O_CREAT, no O_TRUNC
    except FileNotFoundError:
        _try_creating(path, name)
    except OSError as e:
        raise _unusable(name, path, e) from None
    else:
        os.close(fd)


def _try_creating(path: str, name: str) -> None:
    """The file does not exist: make it (only if it still does not) and remove it again, as the test."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NONBLOCK | os.O_CLOEXEC, 0o600)
    except FileExistsError:  # a dangling symlink (open_output would make its target), or made meanwhile
        _check_directory_for(path, name)
        return
    except OSError as e:
        raise _unusable(name, path, e) from None
    os.close(fd)
    try:
        os.unlink(path)
    except OSError:
        pass  # an empty file left where the run will write its output anyway


def _check_directory_for(path: str, name: str) -> None:
    """Whether the directory of a path that exists only as a dangling link would let open_output create it."""
    directory = os.path.dirname(path) or "."
    try:
        mode = os.stat(directory).st_mode
        if not stat.S_ISDIR(mode):
            raise OSError(errno.ENOTDIR, os.strerror(errno.ENOTDIR))
        if os.statvfs(directory).f_flag & os.ST_RDONLY:
            raise OSError(errno.EROFS, os.strerror(errno.EROFS))
        if not os.access(directory, os.W_OK | os.X_OK):
            raise OSError(errno.EACCES, os.strerror(errno.EACCES))
    except OSError as e:
        # open() says ENOENT for a missing directory too, naming the file's path
        raise _unusable(name, path, e) from None


def _unusable(name: str, path: str, error: OSError) -> UsageError:
    return UsageError(f"{name}: {path}: {error.strerror or error}")


def format_size(size: int) -> str:
    """`1 MiB`, `16 MiB`, `512 KiB`: the limits are round numbers of these units."""
    for unit, name in ((MIB, "MiB"), (KIB, "KiB")):
        if size >= unit and size % unit == 0:
            return f"{size // unit} {name}"
    return f"{size} bytes"


def _kind(mode: int) -> str:
    return next((name for test, name in _KINDS if test(mode)), "a special file")
