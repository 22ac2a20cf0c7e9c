"""A run's heap does not grow in steps (issue 22's "RSS flat"): glibc's mmap threshold is pinned.

glibc raises its mmap threshold to the size of each mmapped block freed, so after the first
interval's histogram counts (264 KiB each) were freed, later ones came from the heap, which kept
their pages: RSS rose 3.6 MiB over a run's first intervals. Each case asks glibc itself where 264 KiB blocks come from after one was freed: an mmapped chunk
has the IS_MMAPPED bit (2) in the size word before it. The control, without the pin, sees the heap: the check sees the difference.
"""

from __future__ import annotations

import platform
import subprocess
import sys

import pytest

from runner.load.native.engine import module
from tests.conftest import REPO, Nginx

pytestmark = pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="glibc's malloc only")

PROBE = """
import ctypes, sys
libc = ctypes.CDLL(None)
libc.malloc.restype = ctypes.c_void_p
libc.malloc.argtypes = [ctypes.c_size_t]
libc.free.argtypes = [ctypes.c_void_p]
SIZE = 264 * 1024  # one native histogram's counts
how = sys.argv[1]
if how == "pinned":
    from runner.run.memory import steady_heap
    assert steady_heap()
elif how == "run":
    from runner.cli import main
    assert main(sys.argv[2:]) == 0
libc.free(libc.malloc(SIZE))  # one large block freed: unpinned, glibc's threshold rises past SIZE
# A hole the heap already has may hold a block whatever the threshold: 64 blocks (16.5 MiB) use up
# any, and where the last ones come from is the threshold's doing.
blocks = [libc.malloc(SIZE) for _ in range(64)]
mmapped = [ctypes.c_size_t.from_address(b - ctypes.sizeof(ctypes.c_size_t)).value & 2 for b in blocks]
print("mmapped" if all(mmapped[-8:]) else "heap")
"""


def where(*args: str) -> str:
    done = subprocess.run([sys.executable, "-c", PROBE, *args], capture_output=True, text=True, timeout=120,
                          cwd=REPO)
    assert done.returncode == 0, done.stderr
    return done.stdout.split()[-1]


def test_unpinned_glibc_takes_a_large_block_from_the_heap_after_one_was_freed() -> None:
    assert where("unpinned") == "heap"


def test_steady_heap_keeps_large_blocks_in_mmap() -> None:
    assert where("pinned") == "mmapped"


@pytest.mark.parametrize("engine", ["native", "python"])
def test_a_run_pins_the_threshold(engine: str, nginx: Nginx) -> None:
    if engine == "native" and module() is None:
        pytest.skip("the native engine is not built here")
    found = where("run", "bench", "-n", "2", "-c", "1", "--engine", engine, nginx.url)
    assert found == "mmapped"
