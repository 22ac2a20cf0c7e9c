"""How many connections a run may hold against the process's open-file limit (runner/run/build.py)."""

from __future__ import annotations

import resource

import pytest

from runner.config.settings import Settings, merge, settings_from
from runner.load.shards import Shard
from runner.run.build import OWN_FILES, connections_needed, open_files_refusal


@pytest.mark.parametrize("limit", [256, 1024, 4096, 65536])
def test_refused_exactly_past_the_limit_less_the_own_files(limit: int) -> None:
    for needed in range(max(1, limit - OWN_FILES - 3), limit + 3):
        refusal = open_files_refusal("concurrency", needed, needed, limit)
        assert (refusal is None) == (needed + OWN_FILES <= limit), (limit, needed)
    assert open_files_refusal("concurrency", 10**6, 10**6, resource.RLIM_INFINITY) is None


def test_the_refusal_names_the_setting_the_limit_and_what_this_process_needs() -> None:
    assert open_files_refusal("maxInFlight", 1_000_000, 1_000_000, 4096) == (
        "maxInFlight: 1000000 is more than this process can keep open: its open-file limit (ulimit -n) is 4096, "
        "of which 64 are kept for its own files; raise the limit or lower maxInFlight")
    assert open_files_refusal("concurrency", 3000, 6000, 4096) == (
        "concurrency: 3000 (6000 connections in this process) is more than this process can keep open: its "
        "open-file limit (ulimit -n) is 4096, of which 64 are kept for its own files; raise the limit or lower "
        "concurrency")


def _settings(**pace: object) -> Settings:
    return settings_from(merge({"qps": 100, **pace}))


@pytest.mark.parametrize(("pace", "origins", "expected"), [
    ({"concurrency": 10}, 1, ("concurrency", 10, 10)),
    ({"concurrency": 10}, 3, ("concurrency", 10, 30)),  # a connection to each server, per client
    ({"concurrency": 10, "loadModel": "open", "maxInFlight": 500}, 2, ("maxInFlight", 500, 1000)),
    ({"concurrency": 800, "loadModel": "open", "maxInFlight": 500}, 1, ("concurrency", 800, 800)),
    ({"concurrency": 10, "maxInFlight": 500}, 1, ("concurrency", 10, 10)),  # closed: maxInFlight does not apply
])
def test_connections_needed(pace: dict[str, object], origins: int, expected: tuple[str, int, int]) -> None:
    assert connections_needed(_settings(**pace), Shard(0, 1), origins) == expected


def test_a_worker_needs_its_share() -> None:
    settings = _settings(concurrency=101)
    assert connections_needed(settings, Shard(0, 1, 0, 2), 1) == ("concurrency", 101, 51)
    assert connections_needed(settings, Shard(0, 1, 1, 2), 1) == ("concurrency", 101, 50)
