"""Hashing sampled bodies: inflated only when gzipped, in bounded steps, failing clearly when not gzip.

The transports' end of this (which response is inflated, how a lying one fails) runs
against real servers in test_fault_matrix.py; here are the edges a server is not needed for.
"""

from __future__ import annotations

import gzip
import tracemalloc

import pytest

from runner.load.bodyhash import INFLATE_STEP, BodyError, BodyHash, is_gzip
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


@pytest.mark.parametrize(("value", "expected"), [("gzip", True), (" GZip ", True), ("x-gzip", True),
                                                 ("br", False), ("", False), ("gzip, br", False)])
def test_which_content_encodings_are_gzip(value: str, expected: bool) -> None:
    assert is_gzip(value) is expected
