"""C compiled once per test run, however many test modules and xdist workers ask for it.

Three modules load the native engine built from the tree's sources, two the parser, and under
xdist each worker would compile them again (two seconds of a core each). The first to ask
compiles into the run's directory (tests/support/reaper.py), under a key made of the command
and every C source and header of runner/load/native; the others wait on its lock and load the
same file. The directory goes with the run, so nothing is reused from another run's compiler.
"""

from __future__ import annotations

import fcntl
import hashlib
import subprocess
from collections.abc import Sequence
from pathlib import Path

from tests.support.reaper import run_directory

NATIVE = Path(__file__).resolve().parents[2] / "runner" / "load" / "native"
OUTPUT = "{output}"  # where the command names its output file


def compiled(command: Sequence[str], name: str) -> tuple[Path, subprocess.CompletedProcess[str] | None]:
    """The file `command` writes to OUTPUT, named `name`; with the compiler's run when this call compiled
    it (None when it was there), for a caller that reports a failure. Not cached when it failed."""
    key = hashlib.sha256("\0".join(command).encode())
    for source in sorted(NATIVE.glob("*.[ch]")):
        key.update(source.name.encode() + b"\0" + source.read_bytes())
    directory = run_directory() / "builds" / key.hexdigest()[:20]
    directory.mkdir(parents=True, exist_ok=True)
    target = directory / name
    with open(directory / "lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when closed
        if target.exists():
            return target, None
        partial = directory / f"partial-{name}"
        done = subprocess.run([part.replace(OUTPUT, str(partial)) for part in command], capture_output=True, text=True,
                              timeout=300)
        if done.returncode == 0 and partial.exists():
            partial.replace(target)
        return target, done
