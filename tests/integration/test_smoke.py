"""The smoke tier: one short run of each command through the real CLI, on each engine where it sends.

`python -m pytest -m smoke` runs these alone (`-m "unit or smoke"` with the unit tier), about a
minute of wall time: a change to the CLI's wiring, an engine or a transport gets its first
answer there, and the integration tier says the rest. Each run sends to loopback nginx for a
second, bounded in count and time, and asserts only what holds at any load: the exit code, the
engine the run said it took, counts that add up, and nginx's own count of what it was sent.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from tests.conftest import REPO, Nginx, Run, assert_counts_add_up, engine_line, run_soak
from tests.support.shardlogs import shard_logs

pytestmark = pytest.mark.smoke

SHORT = ("--qps", "40", "--concurrency", "2", "--interval", "500ms", "--iterations", "2")


def logged_since(nginx: Nginx, before: int, expected: int) -> int:
    """nginx's count of the requests since `before`, once it has logged `expected` (or 5 s passed)."""
    deadline = time.monotonic() + 5
    while nginx.requests_logged() - before < expected and time.monotonic() < deadline:
        time.sleep(0.05)
    return nginx.requests_logged() - before


def assert_a_whole_run(run: Run, nginx: Nginx, before: int) -> None:
    assert run.returncode == 0, run.stdout + run.stderr
    assert run.engine_said == engine_line()  # exactly the engine and transport under test
    summary = assert_counts_add_up(run.stdout)
    assert summary["requests"] == summary["good"] > 0 and summary["stopReason"] == "iterations"
    assert logged_since(nginx, before, summary["requests"]) == summary["requests"]


@pytest.mark.usefixtures("transport")
def test_run(nginx: Nginx) -> None:
    before = nginx.requests_logged()
    assert_a_whole_run(run_soak(*SHORT, nginx.url), nginx, before)


@pytest.mark.usefixtures("transport")
def test_demo() -> None:
    """Against its own target, on a free loopback port."""
    run = run_soak("demo", *SHORT)
    assert run.returncode == 0, run.stdout + run.stderr
    assert run.engine_said == engine_line()
    summary = assert_counts_add_up(run.stdout)
    assert summary["requests"] == summary["good"] > 0


@pytest.mark.usefixtures("transport")
def test_bench(nginx: Nginx) -> None:
    before = nginx.requests_logged()
    run = run_soak("bench", "-n", "100", "-c", "2", nginx.url)
    assert run.returncode == 0, run.stdout + run.stderr
    assert run.engine_said == engine_line()
    assert run.summary["bench"]["complete"] == 100 and run.summary["bench"]["failed"] == 0
    assert logged_since(nginx, before, 100) == 100


def test_validate() -> None:
    """The pallet's own files, checked without sending."""
    run = run_soak("validate", "--config", str(REPO / "configuration.json"), "--urls", str(REPO / "urlsconfigmap.yaml"))
    assert run.returncode == 0 and run.stderr == "", run.stdout + run.stderr
    assert run.stdout


@pytest.fixture
def shards(nginx: Nginx, tmp_path: Path) -> list[Path]:
    """The logs of a run split over two processes, as two pods print them."""
    return shard_logs(nginx.url, tmp_path, shards=2, intervals=2, interval="500ms", qps=40, timeout=60)


def test_merge(shards: list[Path]) -> None:
    run = run_soak("merge", *map(str, shards))
    assert run.returncode == 0, run.stdout + run.stderr
    merged = assert_counts_add_up(run.stdout)
    assert merged["requests"] == sum(assert_counts_add_up(shard.read_text())["requests"] for shard in shards) > 0


def test_compare(shards: list[Path]) -> None:
    run = run_soak("compare", *map(str, shards))
    assert run.returncode == 0 and run.stderr == "", run.stdout + run.stderr
    assert all(shard.name in run.stdout for shard in shards), run.stdout


def test_plot(shards: list[Path], tmp_path: Path) -> None:
    run = run_soak("plot", "-o", str(tmp_path / "run.png"), str(shards[0]))
    assert run.returncode == 0, run.stdout + run.stderr
    assert (tmp_path / "run.png").read_bytes().startswith(b"\x89PNG\r\n\x1a\n")
