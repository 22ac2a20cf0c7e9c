"""A whole JSON object read with its bulkiest arrays left in the text, one element decoded at a time.

A shard's summary holds every interval's whole tally (runner.stats.record): thousands of
records, each a dict of dicts once decoded, several times the text they come from. `soak
merge` needs them one at a time, in order, and `soak plot` or `soak compare` not at all. So
the arrays at the key paths asked for are read as LazyArrays: where each element starts in
the text, and the element decoded only when it is asked for. Everything else is decoded as
json.loads decodes it, and a text json.loads would refuse is refused here too (None), so
that the caller can read it the careful way (runner.readback.partialjson).
"""

from __future__ import annotations

import json
import re
from array import array
from collections.abc import Collection, Iterator, Sequence
from typing import Any, overload

Path = tuple[str, ...]

_SPACE = re.compile(r"[ \t\n\r]*")  # JSON's whitespace, exactly
_DECODER = json.JSONDecoder()


class LazyArray(Sequence[Any]):
    """A JSON array of a text: its length and where each element starts; elements decoded when read.

    Equal to any sequence of equal elements (a list, or another LazyArray), compared one
    element at a time, so that two copies of one log compare as their decoded values would.
    """

    __slots__ = ("_text", "_starts")

    def __init__(self, text: str, starts: array[int]) -> None:
        self._text = text
        self._starts = starts

    def __len__(self) -> int:
        return len(self._starts)

    @overload
    def __getitem__(self, index: int) -> Any: ...

    @overload
    def __getitem__(self, index: slice) -> list[Any]: ...

    def __getitem__(self, index: int | slice) -> Any:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self)))]
        return _DECODER.raw_decode(self._text, self._starts[index])[0]

    def __iter__(self) -> Iterator[Any]:
        for start in self._starts:
            yield _DECODER.raw_decode(self._text, start)[0]

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Sequence) or isinstance(other, str | bytes):
            return NotImplemented
        return len(self) == len(other) and all(a == b for a, b in zip(self, other, strict=True))

    __hash__ = None  # type: ignore[assignment]  # equal to lists, which have none

    def __repr__(self) -> str:
        return f"LazyArray({len(self)} elements)"


def lazy_object(text: str, lazy: Collection[Path]) -> dict[str, Any] | None:
    """The object `text` holds, with the arrays at the `lazy` key paths as LazyArrays.

    None unless `text` is exactly one JSON object, as json.loads would read it (whitespace
    around it allowed); a `lazy` path whose value is not an array is decoded as usual.
    """
    try:
        found, end = _object(text, _skip(text, 0), (), lazy)
    except (ValueError, IndexError, RecursionError):  # json.JSONDecodeError is a ValueError
        return None
    return found if _skip(text, end) == len(text) else None


def _skip(text: str, at: int) -> int:
    """Where the next token starts: past any whitespace at `at`."""
    found = _SPACE.match(text, at)
    assert found is not None  # the pattern matches the empty string
    return found.end()


def _value(text: str, at: int, path: Path, lazy: Collection[Path]) -> tuple[Any, int]:
    """The value at `at` (a LazyArray at a lazy path), and where it ends."""
    if text.startswith("[", at) and path in lazy:
        return _array(text, at)
    if text.startswith("{", at) and any(len(p) > len(path) and p[: len(path)] == path for p in lazy):
        return _object(text, at, path, lazy)
    return _DECODER.raw_decode(text, at)


def _object(text: str, at: int, path: Path, lazy: Collection[Path]) -> tuple[dict[str, Any], int]:
    """The object at `at` and where it ends, each member read by _value; ValueError if it is not one."""
    if not text.startswith("{", at):
        raise ValueError("not an object")
    members: dict[str, Any] = {}
    at = _skip(text, at + 1)
    if text.startswith("}", at):
        return members, at + 1
    while True:
        key, at = _DECODER.raw_decode(text, at)
        if not isinstance(key, str):
            raise ValueError("a key that is not a string")
        at = _skip(text, at)
        if not text.startswith(":", at):
            raise ValueError("no colon after a key")
        members[key], at = _value(text, _skip(text, at + 1), (*path, key), lazy)
        at = _skip(text, at)
        if text.startswith("}", at):
            return members, at + 1
        if not text.startswith(",", at):
            raise ValueError("no comma between members")
        at = _skip(text, at + 1)


def _array(text: str, at: int) -> tuple[LazyArray, int]:
    """The array at `at` as a LazyArray, and where it ends: each element decoded once, to find its end."""
    starts = array("q")
    at = _skip(text, at + 1)
    if text.startswith("]", at):
        return LazyArray(text, starts), at + 1
    while True:
        starts.append(at)
        _, at = _DECODER.raw_decode(text, at)
        at = _skip(text, at)
        if text.startswith("]", at):
            return LazyArray(text, starts), at + 1
        if not text.startswith(",", at):
            raise ValueError("no comma between elements")
        at = _skip(text, at + 1)
