"""The memory limit this process runs under: its cgroup's, as the kernel enforces it; and how
its heap is kept from growing in steps (steady_heap).

In a pod, the container's `resources.limits.memory` is its cgroup's memory.max (cgroup v2) or
memory.limit_in_bytes (v1); past it the kernel kills a process of the container (OOMKilled).
`soak validate` holds the run's local workers against it (runner.report.plan.memory_line).

The limit that applies is the smallest of the process's cgroup and its ancestors, as far as
they can be seen: in a container with its own cgroup namespace (v2) the container's cgroup is
the root of what it sees; without one (v1 Docker), /proc/self/cgroup names a path of the host's
that the container's mount does not have, and the mount's root is its own cgroup. Nothing here
raises: a limit that cannot be read is no limit known (None), and validate says nothing of it.
"""

from __future__ import annotations

import ctypes
import os
from collections.abc import Callable, Mapping
from pathlib import Path

CGROUP_ROOT = "/sys/fs/cgroup"
# Tests point the reader at a cgroup file tree of their own making; nothing else sets it.
CGROUP_ROOT_ENV = "SOAK_CGROUP_ROOT"
MEMBERSHIP = "/proc/self/cgroup"
_UNLIMITED = 1 << 62  # v1 writes "no limit" as the largest page count times the page size (9223372036854771712)
M_MMAP_THRESHOLD = -3  # glibc's malloc.h
MMAP_THRESHOLD = 128 * 1024  # glibc's default, pinned


def steady_heap() -> bool:
    """Keep glibc's mmap threshold at its default, 128 KiB, so that every large block (a
    histogram's counts are 264 KiB) comes from mmap and goes back to the kernel when freed;
    True where the threshold was set (glibc), False elsewhere.

    Left to itself glibc raises the threshold to the size of each mmapped block freed. Once the
    first interval's histograms were freed, the next ones came from the heap instead, and the
    heap kept their pages: a run's RSS rose by 3.6 MiB over its first intervals, then stayed
    (bench/README.md). Setting the threshold turns that adjustment off (mallopt(3)); the cost is
    an mmap and a munmap for each large block, a few an interval.
    """
    mallopt = getattr(ctypes.CDLL(None), "mallopt", None)
    return bool(mallopt is not None and mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD) == 1)


def memory_limit(environ: Mapping[str, str] = os.environ) -> int | None:
    """This process's memory limit in bytes, or None when it has none (or none can be read)."""
    root = Path(environ.get(CGROUP_ROOT_ENV) or CGROUP_ROOT)
    try:
        membership = Path(MEMBERSHIP).read_text()
    except OSError:
        membership = ""
    return limit_in(root, membership)


def limit_in(root: Path, membership: str) -> int | None:
    """The limit of the cgroup `membership` (the text of /proc/self/cgroup) names, under `root`."""
    if (root / "cgroup.controllers").exists():  # the unified hierarchy (v2) is mounted at root
        return _smallest(root, _path(membership, lambda controllers: controllers == ""), "memory.max")
    if (root / "memory").is_dir():  # v1 (or hybrid, whose v2 part has no memory controller)
        return _smallest(root / "memory", _path(membership, lambda controllers: "memory" in controllers.split(",")),
                         "memory.limit_in_bytes")
    return None


def _path(membership: str, wanted: Callable[[str], bool]) -> str:
    """The cgroup path of the hierarchy whose controller list `wanted` accepts ("/" if none)."""
    for line in membership.splitlines():
        parts = line.split(":", 2)
        if len(parts) == 3 and wanted(parts[1]):
            return parts[2]
    return "/"


def _smallest(mount: Path, path: str, name: str) -> int | None:
    """The smallest limit of the cgroup at `path` and its ancestors, from the deepest one the mount has."""
    here = mount / path.strip("/")
    while here != mount and not here.is_dir():  # a host path the container's mount does not have
        here = here.parent
    limits = []
    while True:
        limit = _read_limit(here / name)
        if limit is not None:
            limits.append(limit)
        if here == mount:
            break
        here = here.parent
    return min(limits, default=None)


def _read_limit(file: Path) -> int | None:
    try:
        text = file.read_text().strip()
    except OSError:
        return None
    if not text.isdigit():  # "max" (v2): no limit here
        return None
    value = int(text)
    return value if value < _UNLIMITED else None
