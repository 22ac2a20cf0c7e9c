"""stdout, stderr and output files as the program writes them: each failure handled once, here.

A soak must outlive its outputs: measuring goes on when the log cannot be written, because
metrics may still be pushed and the exit code still tells the verdict. So every write to
stdout and stderr goes through a Stream that catches the OSError, and this policy decides:

- stdout's reader left (EPIPE, as with `soak ... | head`): the run stops as on a signal
  (`stopReason`: STDOUT_GONE), one line on stderr says so, and the exit code is EXIT_OUTPUT
  (6) unless one of greater precedence applies (3 if thresholds broke): what stdout had still
  to show (the summary) is lost, so the run is not a pass, nor reported as interrupted (7);
- stderr cannot be written: its lines are dropped (there is nowhere left to report that);
- stdout or an output file cannot be written (a full disk, an I/O error): one line on stderr
  names the output and the error, the run goes on, and the exit code is EXIT_OUTPUT (6)
  unless a code of greater precedence applies (3, for one: see runner.core.errors).

A stream that failed once is written no more; its descriptor is pointed at /dev/null, so what
is still buffered goes nowhere at exit instead of raising again.

A write is written whole, or fails as above: Python's text layer drops the rest of a long text
when a signal interrupts its write to a pipe that is slow to read (the kernel's write returns
what it took so far), and that was a JSON summary cut at the pipe's size, with exit code 0
and nothing said, when Kubernetes sent SIGTERM while it was being written.
"""

from __future__ import annotations

import errno
import os
import select
import sys
from collections.abc import Callable
from typing import Any, TextIO

from runner.core import redact
from runner.core.errors import EXIT_OK, EXIT_OUTPUT, exit_code
from runner.report.base import Reporter

READER_LEFT = "closed by its reader"
STDOUT_GONE = f"stdout {READER_LEFT}"  # the run's stopReason
# A text this long may not fit the binary buffer (8 KiB) under the text layer, which then hands
# it to the kernel in one write and drops whatever a partial write did not take: written here.
_LONG_TEXT = 1024


class Outputs:
    """The program's stdout and stderr streams and what happened to them."""

    def __init__(self) -> None:
        self.failed = False  # some output could not be written: exit code 6
        self.stdout_gone = False  # the reader of stdout left
        self._stop: Callable[[str], None] | None = None
        self.stdout: Stream | None = None
        self.stderr: Stream | None = None
        self._secrets = redact.Secrets()

    def install(self) -> None:
        """Open fds 0-2 that are closed, and route sys.stdout and sys.stderr through Streams.

        Called first thing: a closed fd 1 or 2 (`soak >&-`) would otherwise be given to the
        first socket, so that stdout's lines went into a connection and uvloop aborted when it
        closed a handle on fd 0-2 (`uv__close: Assertion fd > STDERR_FILENO failed`, exit 134).
        """
        if isinstance(sys.stdout, Stream):
            return  # installed already (main called again in one process)
        for fd in (0, 1, 2):
            _open_if_closed(fd)
        self.stdout = Stream("stdout", _usable(sys.stdout, 1), self)
        self.stderr = Stream("stderr", _usable(sys.stderr, 2), self)
        sys.stdout, sys.stderr = self.stdout, self.stderr

    def hide(self, values: list[str]) -> None:
        """Values that stderr never shows (the command line's secrets: redact.argv_secrets)."""
        self._secrets = redact.Secrets(values)

    def shown(self, name: str, text: str) -> str:
        """`text` as it may be written to `name`: every line written, whoever writes it (the reporters,
        argparse's usage errors and help, Python's warnings and tracebacks), goes through here.

        URLs are shown with their secrets hidden on both streams (redact.in_text); the command line's
        secret values (`hide`) are hidden by value on stderr only, where a usage error quotes the words
        it could not use: stdout's figures and timestamps could hold a short password's digits.
        """
        text = redact.in_text(text)
        return self._secrets.hidden(text) if name == "stderr" else text

    def failure(self, name: str, error: OSError) -> None:
        """What a write to `name` ("stdout", "stderr", or an output file) failing with `error` means."""
        if error.errno == errno.EPIPE and name == "stderr":
            return  # its reader left: there is nowhere left to say anything
        self.failed = True
        gone = name == "stdout" and error.errno == errno.EPIPE
        if name != "stderr" and self.stderr is not None:
            said = READER_LEFT if gone else error.strerror or str(error)
            self.stderr.write(f"soak: {name}: {said}\n")
        if gone:  # the reader left: nothing more is read, so the run has no reason to go on
            self.stdout_gone = True
            if self._stop is not None:
                self._stop(STDOUT_GONE)

    def exit_code(self, code: int) -> int:
        """The exit code, given the command's: with an output lost, EXIT_OUTPUT unless the command's
        own code takes precedence (runner.core.errors.PRECEDENCE)."""
        return exit_code([code, EXIT_OUTPUT if self.failed else EXIT_OK])

    def watch(self) -> Reporter:
        """A reporter that only takes the run's stop, so a reader leaving stdout can stop the run."""
        return _StopTaker(self)

    def bind_stop(self, stop: Callable[[str], None]) -> None:
        self._stop = stop
        if self.stdout_gone:  # it left before the run could be told (its first lines)
            stop(STDOUT_GONE)


class Stream:
    """A text stream whose write failures go to the Outputs policy once, then are written no more."""

    def __init__(self, name: str, stream: TextIO, outputs: Outputs) -> None:
        self.name = name
        self._stream = stream
        self._outputs = outputs
        self.broken = False

    def write(self, text: str) -> int:
        text = self._outputs.shown(self.name, text)  # whoever writes: secrets hidden (redact.py)
        if not self.broken:
            try:
                if len(text) >= _LONG_TEXT and hasattr(self._stream, "buffer"):
                    self._write_whole(text)
                else:
                    self._stream.write(text)
            except OSError as e:
                self._fail(e)
        return len(text)

    def _write_whole(self, text: str) -> None:
        """Write a long text to the binary buffer until every byte is taken, then flush as the text
        layer would: a write cut short by a signal (SIGTERM while a slow pipe is full) goes on with
        the rest, and a descriptor someone made non-blocking is waited on instead of failing."""
        stream = self._stream
        stream.flush()  # what the text layer holds goes first, in order
        buffer = stream.buffer
        data = memoryview(text.encode(stream.encoding, stream.errors or "strict"))
        while data:
            try:
                taken = buffer.write(data)
            except BlockingIOError as e:
                taken = e.characters_written
                select.select([], [stream.fileno()], [])
            data = data[taken or 0:]
        if getattr(stream, "line_buffering", False) and "\n" in text:
            buffer.flush()

    def writelines(self, lines: Any) -> None:
        for line in lines:
            self.write(line)

    def flush(self) -> None:
        if not self.broken:
            try:
                self._stream.flush()
            except OSError as e:
                self._fail(e)

    def __getattr__(self, name: str) -> Any:  # fileno, isatty, encoding, reconfigure...
        return getattr(self._stream, name)

    def _fail(self, error: OSError) -> None:
        self.broken = True
        _to_dev_null(self._stream)
        self._outputs.failure(self.name, error)


class _StopTaker(Reporter):
    def __init__(self, outputs: Outputs) -> None:
        self._outputs = outputs

    def bind_stop(self, stop: Callable[[str], None]) -> None:
        self._outputs.bind_stop(stop)


def _open_if_closed(fd: int) -> None:
    try:
        os.fstat(fd)
    except OSError:
        null = os.open(os.devnull, os.O_RDWR)  # the lowest free descriptor: `fd`, as 0..fd-1 are open
        if null != fd:
            os.dup2(null, fd)
            os.close(null)


def _usable(stream: TextIO | None, fd: int) -> TextIO:
    """sys.stdout or sys.stderr, or, when Python found the fd closed at its start (None), one on `fd` now."""
    if stream is not None:
        return stream
    return open(fd, "w", encoding="utf-8", errors="backslashreplace", closefd=False)  # noqa: SIM115


def _to_dev_null(stream: TextIO) -> None:
    """Point the stream's descriptor at /dev/null: Python flushes it at exit, and would report that failing too."""
    try:
        fd = stream.fileno()
        null = os.open(os.devnull, os.O_WRONLY)
    except (OSError, ValueError):
        return
    try:
        os.dup2(null, fd)
    finally:
        os.close(null)

OUTPUTS = Outputs()  # stdout, stderr and their failures, for the whole process
