"""JSON laid out for people reading a log: one top-level key a line, one record a line.

`json.dumps(indent=2)` gives every number of every interval a line of its own: a 60-interval
run's summary was some 1,300 lines, and `kubectl logs | tail` showed the middle of the config.
Here the layout follows what a reader scans for, while the text stays one JSON document that
any parser reads back to the same value:

- the top-level object has one member a line, always;
- below it, a value that fits on its line (within WIDTH, its indentation and key included) is
  written there whole, in json.dumps' one-line form (`{"target": 100, "achieved": 99.9}`);
- a longer array is opened with one element a line, each element whole however long: a list
  of records (`intervalStats`, the threshold rules, a shard's intervals) reads as a table, one
  row each, and an array of scalars never becomes a column of numbers;
- a longer object is opened with its members filled into lines of at most WIDTH, as words
  into a paragraph (the run's `config`: a few lines, not forty); a member too long for a line
  of its own (a long string, or a container opened by these same rules) stands alone.

Every line inside the document is indented and the closing brace stands alone, as with
indent=2, so the log readers (runner.readback) find a summary's end the same way.
"""

from __future__ import annotations

import json
from typing import Any

WIDTH = 120  # the longest line a value is kept whole on, when it need not be (ruff's line length)
INDENT = "  "


def compact_json(value: Any) -> str:
    """`value` as JSON text: a top-level object one member a line, below it as the module says.

    Anything else at the top (an array, a scalar) follows the same rules as a nested value.
    Keys are written as json.dumps writes them (a number, true, false or null key as a string),
    and the text has no trailing newline, as json.dumps' has none.
    """
    if isinstance(value, dict) and value:
        inner = INDENT
        members = [f"{inner}{name}{_value(item, inner, name)}" for name, item in _named(value)]
        return "{\n" + ",\n".join(members) + "\n}"
    return _value(value, "", "")


def _value(value: Any, indent: str, prefix: str) -> str:
    """The text of a value standing after `indent` and `prefix` (its key and ": ", or "")."""
    whole = json.dumps(value)
    if not isinstance(value, dict | list | tuple) or not value or _fits(indent + prefix + whole):
        return whole
    inner = indent + INDENT
    if isinstance(value, dict):
        lines = _filled([name + _value(item, inner, name) for name, item in _named(value)], inner)
        return "{\n" + ",\n".join(lines) + "\n" + indent + "}"
    rows = [inner + json.dumps(item) for item in value]
    return "[\n" + ",\n".join(rows) + "\n" + indent + "]"


def _named(value: dict[Any, Any]) -> list[tuple[str, Any]]:
    """Each member as (its name as JSON with ": ", its value)."""
    return [(json.dumps(key if isinstance(key, str) else _key_text(key)) + ": ", item) for key, item in value.items()]


def _key_text(key: Any) -> str:
    """The string json.dumps makes of a key that is not one (1 -> "1", True -> "true")."""
    return str(next(iter(json.loads(json.dumps({key: None})))))


def _fits(line: str) -> bool:
    """Whether a line, with the comma that may follow it, is within WIDTH."""
    return len(line) + 1 <= WIDTH


def _filled(members: list[str], indent: str) -> list[str]:
    """Members joined with ", " into lines within WIDTH; one that spans lines, or is too long, alone."""
    lines: list[str] = []
    current = ""
    for member in members:
        if current and "\n" not in member and _fits(indent + current + ", " + member):
            current += ", " + member
            continue
        if current:
            lines.append(indent + current)
        current = member
        if "\n" in member or not _fits(indent + member):
            lines.append(indent + member)
            current = ""
    if current:
        lines.append(indent + current)
    return lines
