"""validate's memory check: the estimate, what it says, and the cgroup limit read from a file tree."""

from __future__ import annotations

from pathlib import Path

from runner.report.plan import memory_line, memory_needed_mib, workers_that_fit
from runner.run.memory import limit_in

MI = 2**20


def test_the_estimate_grows_by_a_process_a_worker() -> None:
    assert memory_needed_mib(2) - memory_needed_mib(1) > memory_needed_mib(3) - memory_needed_mib(2) > 0
    assert all(memory_needed_mib(n + 1) - memory_needed_mib(n) == memory_needed_mib(3) - memory_needed_mib(2)
               for n in range(2, 50))


def test_workers_that_fit_is_the_most_whose_estimate_fits() -> None:
    for limit_mib in range(1, 1200, 7):
        fit = workers_that_fit(limit_mib * MI)
        fitting = [n for n in range(1, 100) if memory_needed_mib(n) <= limit_mib]
        assert fit == (max(fitting) if fitting else 0), limit_mib


def test_the_pods_limit_holds_the_workers_it_says() -> None:
    """The CronJob's 256Mi: validate says which workers settings fit, and how many would."""
    assert memory_line(1, 256 * MI) == (f"memory: the run needs about {memory_needed_mib(1)} MiB, within the "
                                        "256 MiB this runs under (its cgroup's limit)")
    fit = workers_that_fit(256 * MI)
    assert "within" in (memory_line(fit, 256 * MI) or "")
    too_many = memory_line(fit + 1, 256 * MI)
    assert too_many == (f"memory: {fit + 1} workers and their parent need about {memory_needed_mib(fit + 1)} MiB, "
                        "MORE than the 256 MiB this runs under (its cgroup's limit): the kernel would kill the run "
                        f"(OOMKilled); at most {fit} workers fit, or raise the limit")
    assert memory_line(4, None) is None  # no limit known: nothing to say
    assert memory_line(2, memory_needed_mib(1) * MI).endswith("run it in one process (workers: 1), or raise the limit")
    assert memory_line(1, MI).endswith("OOMKilled); raise the limit")


def tree(root: Path, files: dict[str, str]) -> Path:
    for path, text in files.items():
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text(text)
    return root


def test_cgroup_v2_the_smallest_limit_of_the_cgroup_and_its_ancestors(tmp_path: Path) -> None:
    root = tree(tmp_path, {"cgroup.controllers": "cpu memory pids\n", "memory.max": "max\n",
                           "kubepods/memory.max": f"{4096 * MI}\n", "kubepods/pod1/memory.max": f"{300 * MI}\n",
                           "kubepods/pod1/soak/memory.max": f"{256 * MI}\n"})
    assert limit_in(root, "0::/kubepods/pod1/soak\n") == 256 * MI
    assert limit_in(root, "0::/kubepods/pod1\n") == 300 * MI
    (root / "kubepods/pod1/memory.max").write_text(f"{200 * MI}\n")  # a pod's limit below its container's
    assert limit_in(root, "0::/kubepods/pod1/soak\n") == 200 * MI
    assert limit_in(root, "0::/\n") is None  # "max": no limit
    # a container with its own cgroup namespace sees "/" and its own cgroup at the root
    assert limit_in(tree(tmp_path / "ns", {"cgroup.controllers": "memory\n", "memory.max": f"{256 * MI}\n"}),
                    "0::/\n") == 256 * MI


def test_a_path_the_mount_does_not_have_is_read_from_the_mounts_root(tmp_path: Path) -> None:
    """Without a cgroup namespace, /proc/self/cgroup names the host's path; the container's mount is its own."""
    root = tree(tmp_path, {"cgroup.controllers": "memory\n", "memory.max": f"{128 * MI}\n"})
    assert limit_in(root, "0::/system.slice/docker-abc.scope\n") == 128 * MI


def test_cgroup_v1_and_the_hybrid_layout(tmp_path: Path) -> None:
    root = tree(tmp_path, {"memory/memory.limit_in_bytes": "9223372036854771712\n",
                           "memory/docker/abc/memory.limit_in_bytes": f"{256 * MI}\n",
                           "unified/cgroup.controllers": "\n"})  # hybrid: v2 mounted beside, without memory
    membership = "12:pids:/docker/abc\n4:memory:/docker/abc\n3:cpu,cpuacct:/docker/abc\n0::/docker/abc\n"
    assert limit_in(root, membership) == 256 * MI
    assert limit_in(root, "4:memory:/\n") is None  # the host's root: the largest page count, no limit
    assert limit_in(root, "4:memory:/docker/gone\n") is None  # from the mount's root: no limit either
    assert limit_in(root, "2:cpu,memory:/docker/abc\n") == 256 * MI  # controllers listed together


def test_nothing_readable_is_no_limit(tmp_path: Path) -> None:
    assert limit_in(tmp_path / "none", "0::/\n") is None
    assert limit_in(tree(tmp_path, {"cgroup.controllers": "memory\n", "memory.max": "garbage\n"}), "") is None
