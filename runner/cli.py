"""The command line: choose the command, parse its arguments, and turn failures into exit codes.

    soak [run] [--config FILE] [--urls FILE] [--<setting> VALUE ...] [URL | @FILE ...]
    soak demo [--<setting> VALUE ...]
    soak validate [--config FILE] [--urls FILE] [--<setting> VALUE ...] [URL | @FILE ...]
    soak bench [-n N] [-c C] [-t SECONDS] [-k] [-H 'Name: value'] [-p FILE] [-T TYPE] [-s SECONDS]
               [-m METHOD] [--config FILE] [--<setting> VALUE ...] URL
    soak merge [FILE ... | STORE?run=NAME] [--junit FILE]
    soak history STORE [--since AGE] [--job JOB]
    soak compare [--latencyUnit UNIT] [--assumeUnit UNIT] FILE|STORE FILE|STORE [...]
    soak plot FILE|STORE -o OUT.png|OUT.svg [--width PIXELS] [--height PIXELS] [--assumeUnit UNIT]
    soak report RUN [RUN ...] -o OUT.html [--junit FILE] [--title TEXT] [--assumeUnit UNIT]

Each command is a module of runner.commands with DESCRIPTION, arguments() and main() (and
USAGE, where its flags are too many to list one by one); it is imported only when it runs or its
help is asked for (a soak need not load the reports), and its main() loads what its run needs,
so that no `--help` loads an engine. Nothing here measures, formats or builds a part of a run.
"""

from __future__ import annotations

import argparse
import gc
import importlib
import os
import sys
from collections.abc import Sequence
from types import ModuleType
from typing import Any, TextIO

from runner import __version__
from runner.commands.outputs import OUTPUTS
from runner.core import redact
from runner.core.errors import EXIT_STOPPED_WAITING, EXIT_USAGE, UsageError

PROG = "soak"
COMMANDS = ("run", "demo", "validate", "bench", "merge", "compare", "plot", "report", "history")


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of `soak` and `python -m runner`; returns the exit code."""
    gc.disable()  # see _started: start-up only adds objects that live as long as the process
    OUTPUTS.install()  # first: fds 0-2 open, and every write failure handled by one policy
    argv = list(sys.argv[1:] if argv is None else argv)
    OUTPUTS.hide(redact.argv_secrets(argv))  # a usage error quotes the words it could not use
    name = argv.pop(0) if argv and argv[0] in COMMANDS else "run"
    _line_buffered(sys.stdout)
    try:
        command = _command(name)
        arguments = _parser(name, command).parse_args(argv)
        _started()
        code = command.main(arguments)
    except UsageError as e:  # one line, printable: it may quote what it refused (a log's text, a file's)
        print(f"{PROG}: {redact.printable(str(e))}", file=sys.stderr)
        code = EXIT_USAGE
    except KeyboardInterrupt:  # SIGINT (or SIGTERM, waiting for the Linkerd proxy) before the run took its own
        code = EXIT_STOPPED_WAITING
    sys.stdout.flush()  # what is still buffered is written now, so a failure counts in the exit code
    _ending()
    return OUTPUTS.exit_code(code)


def _started() -> None:
    """The command and its modules are loaded: collect cycles from here on, among what the run
    allocates only. The cyclic collector found nothing to free among the modules, classes and
    functions an import makes (they live as long as the process), yet its passes over them cost
    a short run 6% of its CPU (`soak bench -n 1`: 9 ms of 136 ms), and a long one a pass over
    them at each full collection."""
    gc.freeze()
    gc.enable()


def _ending() -> None:
    """Python's exit collects everything once more before it frees it, 16 ms for `soak bench
    -n 1` (12% of its CPU): what is left dies with the process, so no collection passes over
    it. Freezing stops only the cyclic collector; reference counting frees as it always does."""
    gc.freeze()


def _command(name: str) -> ModuleType:
    return importlib.import_module(f"runner.commands.{name}")


class _Parser(argparse.ArgumentParser):
    """argparse, but a usage error is one line and exit code 2, like every other error."""

    def error(self, message: str) -> Any:
        raise UsageError(f"{message}{self._suggestion(message)} (see {self.prog} --help)")

    def format_help(self) -> str:
        import textwrap  # here and difflib below: only help and mistakes need them, not a run's start

        if self.prog == PROG:  # `soak --help` lists the other commands (imported only for that)
            self.epilog = _other_commands()
        self.description = textwrap.fill(self.description or "", 79)
        return super().format_help()

    def _suggestion(self, message: str) -> str:
        """For a mistyped flag, the flag it most likely meant."""
        import difflib

        if not message.startswith("unrecognized arguments:"):
            return ""
        flags = [f for action in self._actions for f in action.option_strings if f.startswith("--")]
        for word in message.split(":", 1)[1].split():
            close = difflib.get_close_matches(word.split("=")[0], flags, n=1, cutoff=0.7)
            if close:
                return f" (did you mean {close[0]}?)"
        return ""


def _parser(name: str, command: ModuleType) -> argparse.ArgumentParser:
    prog = PROG if name == "run" else f"{PROG} {name}"
    # No abbreviations: `--conf` must not quietly mean --config in a manifest or a script.
    # A command with every setting as a flag says so in its usage (USAGE), not flag by flag in 30 lines.
    parser = _Parser(prog=prog, usage=getattr(command, "USAGE", None), description=command.DESCRIPTION,
                     allow_abbrev=False, formatter_class=_formatter)
    parser.add_argument("--version", action="version", version=f"{PROG} {__version__}")
    command.arguments(parser)
    return parser


def _formatter(prog: str) -> argparse.HelpFormatter:
    """argparse's RawDescriptionHelpFormatter, given the width argparse would ask shutil for. argparse
    makes a formatter for every flag added (to check its metavar), and shutil, imported for its
    get_terminal_size, brings bz2 and lzma: 1.6 ms of a one-request bench's start (issue 34)."""
    return argparse.RawDescriptionHelpFormatter(prog, width=_columns() - 2)  # argparse's own margin


def _columns() -> int:
    """shutil.get_terminal_size().columns: $COLUMNS when a positive number, else stdout's terminal's, else 80."""
    try:
        columns = int(os.environ["COLUMNS"])
    except (KeyError, ValueError):
        columns = 0
    stdout = sys.__stdout__
    if columns <= 0 and stdout is not None:
        try:
            columns = os.get_terminal_size(stdout.fileno()).columns
        except (ValueError, OSError):  # closed, detached, or not a terminal
            columns = 0
    return columns or 80


def _other_commands() -> str:
    """`soak --help`'s list of the other commands, each with the first sentence of what it does."""
    lines = ["other commands (each has --help):"]
    for name in COMMANDS[1:]:
        description: str = _command(name).DESCRIPTION
        lines.append(f"  {PROG} {name:<9} {description.split(': ')[0].split('. ')[0].rstrip('.')}")
    return "\n".join(lines)


def _line_buffered(stream: TextIO) -> None:
    """Each line reaches `kubectl logs -f` as it is printed, not when a buffer fills."""
    reconfigure = getattr(stream, "reconfigure", None)
    if reconfigure is not None:
        reconfigure(line_buffering=True)
