"""The native engine keeps an interval's longest SOAK_STALLS (32) stalls' times, in order; every
other stall keeps only its lateness, in the loop-lag histogram (core.h's soak_keep_stall).

Python replays the kept stalls through ClientMeter.tick, so the ones kept must be the longest
(they swallowed the most probe ticks) and come in the order they happened; nothing is lost: each
stall is either kept or recorded. Here the C answers are held to a reference written from that
rule, on every length up to 3 x 32 and on random interval's worth of stalls with ties. Integration
tier only because the C has to be compiled first; no socket is opened.
"""

from __future__ import annotations

import random

import pytest

from tests.support.nativerun import native_engine_module

SOAK_STALLS = 32

Stall = tuple[int, int]  # (due_ns, ran_ns)


@pytest.fixture(scope="module")
def native(tmp_path_factory: pytest.TempPathFactory):  # -> the _engine module
    return native_engine_module(tmp_path_factory.mktemp("native-stalls"))


def reference(stalls: list[Stall]) -> tuple[list[Stall], list[int]]:
    """The rule: keep while there is room; then a longer stall displaces the first of the shortest kept."""
    kept: list[Stall] = []
    instead: list[int] = []
    for due, ran in stalls:
        if len(kept) < SOAK_STALLS:
            kept.append((due, ran))
            continue
        least = min(range(SOAK_STALLS), key=lambda i: kept[i][1] - kept[i][0])  # the first of the shortest
        shortest = kept[least][1] - kept[least][0]
        if shortest >= ran - due:
            instead.append(ran - due)
        else:
            instead.append(shortest)
            del kept[least]
            kept.append((due, ran))
    return kept, instead


def interval(rng: random.Random, count: int) -> list[Stall]:
    """`count` stalls 100 ms apart, each 11-60 ms late (ties likely: whole milliseconds)."""
    return [(n * 100_000_000, n * 100_000_000 + rng.randint(11, 60) * 1_000_000) for n in range(count)]


@pytest.mark.parametrize("count", range(3 * SOAK_STALLS + 1))
def test_every_length_keeps_what_the_rule_keeps(native, count: int) -> None:  # noqa: ANN001
    stalls = interval(random.Random(count), count)
    kept, instead = native.stalls(stalls)
    assert (kept, instead) == reference(stalls)
    assert len(kept) == min(count, SOAK_STALLS) and len(kept) + len(instead) == count  # each kept or recorded
    assert kept == sorted(kept)  # in the order they happened
    lateness = sorted(ran - due for due, ran in stalls)
    assert sorted(ran - due for due, ran in kept) == lateness[len(lateness) - len(kept):]  # the longest


def test_random_intervals_keep_what_the_rule_keeps(native) -> None:  # noqa: ANN001
    rng = random.Random(22)
    for _ in range(500):
        stalls = interval(rng, rng.randint(0, 200))
        assert native.stalls(stalls) == reference(stalls)


def test_ties_give_way_first_come_first(native) -> None:  # noqa: ANN001
    """Of equally short kept stalls, the earliest gives way."""
    stalls = [(n, n + 5) for n in range(SOAK_STALLS)] + [(100, 110)]
    kept, instead = native.stalls(stalls)
    assert kept == [*stalls[1:SOAK_STALLS], (100, 110)] and instead == [5]


def test_an_equal_stall_does_not_displace_a_kept_one(native) -> None:  # noqa: ANN001
    stalls = [(n, n + 5) for n in range(SOAK_STALLS + 1)]
    kept, instead = native.stalls(stalls)
    assert kept == stalls[:SOAK_STALLS] and instead == [5]
