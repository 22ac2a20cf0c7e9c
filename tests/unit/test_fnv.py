"""FNV-1a 64-bit, the hash slow_cooker's hashValue is compared against."""

from __future__ import annotations

import random

import pytest

from runner.load.fnv import OFFSET_BASIS, PRIME, Fnv1a64, fnv1a64

# Published FNV-1a 64 test vectors (Landon Curt Noll's FNV test suite; also Go's hash/fnv tests).
VECTORS = [
    (b"", 0xCBF29CE484222325),
    (b"a", 0xAF63DC4C8601EC8C),
    (b"b", 0xAF63DF4C8601F1A5),
    (b"c", 0xAF63DE4C8601EFF2),
    (b"d", 0xAF63D94C8601E773),
    (b"e", 0xAF63D84C8601E5C0),
    (b"f", 0xAF63DB4C8601EAD9),
    (b"fo", 0x08985907B541D342),
    (b"foo", 0xDCB27518FED9D577),
    (b"foob", 0xDD120E790C2512AF),
    (b"fooba", 0xCAC165AFA2FEF40A),
    (b"foobar", 0x85944171F73967E8),
    (b"ab", 0x089C4407B545986A),
    (b"abc", 0xE71FA2190541574B),
]


@pytest.mark.parametrize(("data", "expected"), VECTORS, ids=[repr(d) for d, _ in VECTORS])
def test_published_vectors(data: bytes, expected: int) -> None:
    assert fnv1a64(data) == expected


def test_constants_are_the_fnv_64_ones() -> None:
    assert OFFSET_BASIS == 14695981039346656037
    assert PRIME == 1099511628211


def test_fresh_hasher_holds_the_offset_basis() -> None:
    assert Fnv1a64().value == OFFSET_BASIS


def test_hash_stays_within_64_bits() -> None:
    rng = random.Random(5)
    for _ in range(200):
        data = rng.randbytes(rng.randrange(0, 300))
        assert 0 <= fnv1a64(data) < 2**64


def test_incremental_equals_one_shot() -> None:
    rng = random.Random(1)
    for _ in range(100):
        data = rng.randbytes(rng.randrange(0, 2000))
        hasher = Fnv1a64()
        position = 0
        while position < len(data):
            step = rng.randrange(1, 64)
            hasher.update(data[position:position + step])
            position += step
        assert hasher.value == fnv1a64(data)


def test_incremental_vectors_byte_by_byte_and_with_empty_chunks() -> None:
    hasher = Fnv1a64()
    for byte in b"foobar":
        hasher.update(b"")
        hasher.update(bytes([byte]))
    assert hasher.value == 0x85944171F73967E8


def test_update_accepts_memoryview_and_bytearray() -> None:
    hasher = Fnv1a64()
    hasher.update(memoryview(b"foo"))
    hasher.update(bytearray(b"bar"))
    assert hasher.value == fnv1a64(b"foobar")


def test_order_matters() -> None:
    assert fnv1a64(b"ab") != fnv1a64(b"ba")


def _reference(data: bytes) -> int:
    """FNV-1a 64 as its definition states it: XOR the byte in, then multiply, modulo 2^64."""
    h = 14695981039346656037
    for byte in data:
        h ^= byte
        h = (h * 1099511628211) % (1 << 64)
    return h


def test_matches_the_definition_on_random_data() -> None:
    rng = random.Random(9)
    for size in [0, 1, 2, 7, 8, 255, 612, 4096]:
        data = rng.randbytes(size)
        assert fnv1a64(data) == _reference(data)
