"""A JSON object read as far as it goes: what is left of a summary a log cut off or mangled.

A soak's `kubectl logs` often ends mid-summary (the pod was killed, the log was copied
with `--tail`, a terminal buffer overflowed), and the summary's first keys (percentiles,
counts, rate) are the ones a report needs most. Rather than drop the whole object, this
keeps every top-level member that is complete and says where it stopped.
"""

from __future__ import annotations

import json
from collections.abc import Collection
from typing import Any

from runner.core.lazymethods import dataclass
from runner.readback.lazyjson import Path, lazy_object

_CLOSER = {"{": "}", "[": "]"}


@dataclass(frozen=True)
class PartialObject:
    """The members of a JSON object that could be read, and whether that was all of it."""

    members: dict[str, Any]
    complete: bool  # the text was one whole, valid object
    stop: int  # where reading stopped: len(text) when complete, else the offset of the first member lost
    cut_inside: str | None  # the top-level key whose value was cut off (dropped), if any


@dataclass(frozen=True)
class _Open:
    """A bracket still open, and the one it is inside: the open brackets at a place, innermost first.

    Shared between places, so recording every place costs the same however deep the nesting.
    """

    bracket: str
    outer: _Open | None

    def closers(self) -> str:
        """What closes them all, innermost first."""
        closers, node = [], self  # type: list[str], _Open | None
        while node is not None:
            closers.append(_CLOSER[node.bracket])
            node = node.outer
        return "".join(closers)


@dataclass(frozen=True)
class _Cut:
    """A place the text can be cut and still be closed into valid JSON."""

    offset: int  # keep text[:offset]
    open_brackets: _Open | None  # the brackets still open there


def read_object(text: str, lazy: Collection[Path] = ()) -> PartialObject | None:
    """The object `text` holds, whole or as much of it as can be read; None if not even its start.

    Never raises: anything that is not JSON reads as None or as the members before it. In a
    whole object, the arrays at the `lazy` key paths are LazyArrays (runner.readback.lazyjson),
    decoded one element at a time when read; in one cut off or damaged, every member is decoded.
    """
    if lazy and (members := lazy_object(text, lazy)) is not None:
        return PartialObject(members, True, len(text), None)
    try:
        whole = json.loads(text)
    except ValueError:
        whole = None
    except RecursionError:
        return None
    if isinstance(whole, dict):
        return PartialObject(whole, True, len(text), None)
    if whole is not None or not text.lstrip().startswith("{"):
        return None
    return _salvage(text)


def _salvage(text: str) -> PartialObject | None:
    """The longest prefix of `text` that closes into an object, minus a last member cut in two."""
    cuts = _cuts(text)
    best = _longest_valid(text, cuts)
    if best is None:
        return None
    cut, members = best
    cut_inside = None
    if cut.open_brackets is not None and cut.open_brackets.outer is not None and members:
        # The cut fell inside a top-level member's value: it was closed early, so it is not whole.
        cut_inside = next(reversed(members))
        del members[cut_inside]
    return PartialObject(members, False, _member_start(text, cut, cut_inside), cut_inside)


def _longest_valid(text: str, cuts: list[_Cut]) -> tuple[_Cut, dict[str, Any]] | None:
    """Binary search for the last cut that closes into an object.

    Cuts before a mangled stretch all close; cuts after it do not: the first failure bounds it.
    """
    found = None
    low, high = 0, len(cuts) - 1
    while low <= high:
        middle = (low + high) // 2
        members = _closed(text, cuts[middle])
        if members is None:
            high = middle - 1
        else:
            found, low = (cuts[middle], members), middle + 1
    return found


def _closed(text: str, cut: _Cut) -> dict[str, Any] | None:
    """text[:cut] with its open brackets closed, parsed; None if that is not a JSON object."""
    closers = cut.open_brackets.closers() if cut.open_brackets is not None else ""
    try:
        value = json.loads(text[: cut.offset] + closers)
    except (ValueError, RecursionError):
        return None
    return value if isinstance(value, dict) else None


def _cuts(text: str) -> list[_Cut]:
    """Every place a value has just ended or a container just opened, with the brackets open there.

    Just before a comma outside a string, a value has ended; so it has just after a closing
    bracket. Just after an opening bracket the container is empty. Cutting there and closing
    the open brackets gives valid JSON, whatever came after. Scanning stops where the outer
    object closes.
    """
    cuts: list[_Cut] = []
    stack: _Open | None = None
    in_string = escaped = False
    for i, c in enumerate(text):
        if in_string:
            if escaped:
                escaped = False
            elif c == "\\":
                escaped = True
            elif c == '"':
                in_string = False
        elif c == '"':
            in_string = True
        elif c in "{[":
            stack = _Open(c, stack)
            cuts.append(_Cut(i + 1, stack))
        elif c in "}]":
            if stack is None or _CLOSER[stack.bracket] != c:
                break  # unbalanced: nothing after this can be trusted
            stack = stack.outer
            cuts.append(_Cut(i + 1, stack))
            if stack is None:
                break  # the object is whole; whatever follows is not part of it
        elif c == "," and stack is not None:
            cuts.append(_Cut(i, stack))
    return cuts


def _member_start(text: str, cut: _Cut, cut_inside: str | None) -> int:
    """Where the first member that was lost begins: the dropped one's key, or the cut itself."""
    if cut_inside is None:
        return cut.offset
    key = json.dumps(cut_inside)
    found = text.rfind(key, 0, cut.offset)
    return found if found >= 0 else cut.offset
