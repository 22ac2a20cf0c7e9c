"""FNV-1a 64-bit, the body hash slow_cooker's hashValue is compared against.

Pure Python, so it costs about 0.1 us per byte: checking is sampled (hashSampleRate) for
that reason, as in slow_cooker. Bodies arrive in chunks, so the hash is kept incrementally.
"""

from __future__ import annotations

OFFSET_BASIS = 0xCBF29CE484222325
PRIME = 0x100000001B3
_MASK = 0xFFFFFFFFFFFFFFFF


class Fnv1a64:
    """An incremental FNV-1a 64 hash: update() with each chunk, then read .value."""

    __slots__ = ("value",)

    def __init__(self) -> None:
        self.value = OFFSET_BASIS

    def update(self, data: bytes) -> None:
        h = self.value
        for byte in data:
            h = ((h ^ byte) * PRIME) & _MASK
        self.value = h


def fnv1a64(data: bytes) -> int:
    """The FNV-1a 64 hash of `data` in one call."""
    hasher = Fnv1a64()
    hasher.update(data)
    return hasher.value
