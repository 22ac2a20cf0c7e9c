"""Hashing sampled bodies: inflated only when gzipped, in bounded steps, failing clearly when not gzip.

The transports' end of this (which response is inflated, how a lying one fails) runs
against real servers in test_fault_matrix.py; here are the edges a server is not needed for.
"""

from __future__ import annotations

import gzip
import tracemalloc

import pytest

from runner.load import bodyhash
from runner.load.bodyhash import INFLATE_STEP, MAX_INFLATED_BYTES, BodyError, BodyHash, is_gzip
from runner.load.fnv import fnv1a64

PLAIN = b"the body as the application sees it\n" * 50


def hash_in_pieces(body: bytes, gzip_: bool, piece: int = 7) -> int:
    hasher = BodyHash(gzip_)
    for i in range(0, len(body), piece):
        hasher.update(body[i: i + piece])
    return hasher.value()


def test_a_gzipped_body_is_hashed_inflated_in_any_pieces() -> None:
    assert hash_in_pieces(gzip.compress(PLAIN), True) == fnv1a64(PLAIN)
    assert hash_in_pieces(PLAIN, False) == fnv1a64(PLAIN)


def test_no_body_at_all_is_an_empty_body() -> None:
    assert BodyHash(True).value() == fnv1a64(b"")


@pytest.mark.parametrize(("body", "why"), [
    (PLAIN, "incorrect header check"),
    (gzip.compress(PLAIN)[:-20], "it ends before its gzip stream does"),
], ids=["not gzip", "cut short"])
def test_a_body_that_claims_gzip_but_is_not_fails_saying_so(body: bytes, why: str) -> None:
    with pytest.raises(BodyError) as caught:
        hash_in_pieces(body, True, piece=len(body))
    assert str(caught.value) == f"protocol: Content-Encoding gzip, but the body is not gzip ({why})"


def test_inflating_holds_a_bounded_amount_at_once() -> None:
    """1 MiB of zeros gzips to about 1 KiB: one piece of the wire must not become 1 MiB in memory."""
    size = 1 << 20
    bomb = gzip.compress(bytes(size))
    hasher = BodyHash(True)
    tracemalloc.start()
    try:
        hasher.update(bomb)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert hasher.value() == fnv1a64(bytes(size))
    assert peak < 4 * INFLATE_STEP, peak


def steps_to_hash(body: bytes, piece: int) -> tuple[int, int]:
    """Feed `body` in pieces, taking steps as a transport does: (the hash, the most one step inflated)."""
    hasher = BodyHash(True)
    most = 0
    for i in range(0, len(body), piece):
        hasher.update(body[i: i + piece])
        while hasher.pending:
            before = hasher._inflated
            hasher.step()
            most = max(most, hasher._inflated - before)
    assert not hasher.pending
    return hasher.value(), most


@pytest.mark.parametrize("size", [0, 1, 999, INFLATE_STEP - 1, INFLATE_STEP, INFLATE_STEP + 1, 3 * INFLATE_STEP + 7])
@pytest.mark.parametrize("piece", [1, 100, 65536, 1 << 30])
def test_steps_hash_the_whole_body_each_a_bounded_part(size: int, piece: int) -> None:
    """Taken a step at a time, in any pieces, the hash is the body's, and no step inflates more
    than INFLATE_STEP: a transport that yields between steps never blocks its loop for long."""
    body = bytes(range(256)) * (size // 256) + b"x" * (size % 256)
    wire = gzip.compress(body)
    if piece == 1 and size > 1000:
        piece = 997  # byte by byte is the same arithmetic, only slower
    value, most = steps_to_hash(wire, piece)
    assert value == fnv1a64(body)
    assert most <= INFLATE_STEP


def test_update_alone_inflates_nothing() -> None:
    """A gzip piece is kept for step(): update() costs nothing whatever the piece inflates to."""
    hasher = BodyHash(True)
    hasher.update(gzip.compress(bytes(8 << 20)))
    assert hasher.pending and hasher._inflated == 0


@pytest.mark.parametrize("bound", [1 << 20, 3 * INFLATE_STEP + 5])
def test_a_body_that_inflates_past_the_bound_fails_saying_so(monkeypatch: pytest.MonkeyPatch, bound: int) -> None:
    """Exactly the bound is a body; one byte more is a bomb, failed as it passes the bound (the
    bound made small here: the real one, 16 MiB, takes a second to hash)."""
    monkeypatch.setattr(bodyhash, "MAX_INFLATED_BYTES", bound)
    assert steps_to_hash(gzip.compress(bytes(bound)), 1 << 20)[0] == fnv1a64(bytes(bound))
    with pytest.raises(BodyError) as caught:
        steps_to_hash(gzip.compress(bytes(bound + 1)), 1 << 20)
    assert str(caught.value) == f"protocol: gzip body inflates to more than {bound >> 20} MiB"
    assert MAX_INFLATED_BYTES == 16 << 20


def test_a_plain_body_is_hashed_as_it_comes_with_no_steps() -> None:
    hasher = BodyHash(False)
    hasher.update(PLAIN)
    assert not hasher.pending and hasher.value() == fnv1a64(PLAIN)


@pytest.mark.parametrize(("value", "expected"), [("gzip", True), (" GZip ", True), ("x-gzip", True),
                                                 ("br", False), ("", False), ("gzip, br", False)])
def test_which_content_encodings_are_gzip(value: str, expected: bool) -> None:
    assert is_gzip(value) is expected
