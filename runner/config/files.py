"""Reading an input file (config, URL list, body file) whole, within a bound, or refusing it.

A run reads its inputs completely before it sends anything, so that a bad one is refused up
front. That needs files that end, and end soon: a FIFO blocks until some writer comes (a
run that never starts, ignoring the CronJob's deadline), and a device like /dev/zero never
ends (the run reads until memory runs out). So only regular files are read (a symlink to one
is fine: Kubernetes mounts ConfigMap keys that way), each up to a size stated here, and never
more than that size plus one byte is read, whatever the file claims to hold.
"""

from __future__ import annotations

import errno
import os
import stat

from runner.core.errors import UsageError

KIB = 1024
MIB = 1024 * KIB

# configuration.json: a few dozen settings fit in 2 KiB; a Kubernetes ConfigMap holds 1 MiB at most.
CONFIG_LIMIT = 1 * MIB
# The URL list: about 250,000 URLs of 64 characters (a ConfigMap holds 1 MiB; a local list may be larger).
URL_LIST_LIMIT = 16 * MIB
# A request body sent from a file: held in memory once per process, sent with every request.
BODY_LIMIT = 16 * MIB

_KINDS = (
    (stat.S_ISFIFO, "a FIFO (named pipe)"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)


def read_bounded(path: str, limit: int, what: str) -> bytes:
    """The bytes of the regular file `path`, at most `limit` of them; UsageError naming `path` otherwise.

    `what` names the input in the size message ("a configuration file"). The file is opened
    without blocking (a FIFO's open() waits for a writer otherwise) and checked before a
    byte is read.
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        raise UsageError(f"{path}: no such file") from None
    except OSError as e:
        raise UsageError(f"{path}: cannot read: {e.strerror or e}") from None
    try:
        _check_regular(fd, path)
    except BaseException:
        os.close(fd)
        raise
    with os.fdopen(fd, "rb") as f:
        try:
            data = f.read(limit + 1)  # one byte more than allowed tells a file that is too large
        except OSError as e:
            raise UsageError(f"{path}: cannot read: {e.strerror or e}") from None
    if len(data) > limit:
        raise UsageError(f"{path}: larger than {format_size(limit)}, the most {what} may hold")
    return data


def _check_regular(fd: int, path: str) -> None:
    mode = os.fstat(fd).st_mode
    if stat.S_ISDIR(mode):  # as open() says it of a directory on other systems
        raise UsageError(f"{path}: cannot read: {os.strerror(errno.EISDIR)}")
    if not stat.S_ISREG(mode):
        raise UsageError(f"{path}: is {_kind(mode)}, not a regular file; "
                         "inputs are read whole before the run starts, so they must be files that end")


def format_size(size: int) -> str:
    """`1 MiB`, `16 MiB`, `512 KiB`: the limits are round numbers of these units."""
    for unit, name in ((MIB, "MiB"), (KIB, "KiB")):
        if size >= unit and size % unit == 0:
            return f"{size // unit} {name}"
    return f"{size} bytes"


def _kind(mode: int) -> str:
    return next((name for test, name in _KINDS if test(mode)), "a special file")
