"""Reading configuration.json: a bounded regular file, JSON without surprises, valid by the schema.

json.loads accepts what a configuration must not have (a key given twice, of which it keeps
one silently) and fails with a traceback on what a bounded file can still hold (100,000
nested brackets, a 5,000-digit number). A linear scan of the text finds those first and names
their line and column, as every other error in a configuration does.
"""

from __future__ import annotations

import json
import re
from typing import Any

from runner.config.files import CONFIG_LIMIT, read_bounded
from runner.config.schema import json_path_in, validate
from runner.core.errors import UsageError
from runner.core.lazymethods import dataclass


def read_config_file(path: str) -> dict[str, Any]:
    """The validated settings in a configuration.json, without the `$schema` hint."""
    if not path.strip():  # `--config "$UNSET"` must not quietly run the defaults (100 req/s for an hour)
        raise UsageError("--config: the file name is empty")
    raw = read_bounded(path, CONFIG_LIMIT, "a configuration file")
    try:
        text = raw.decode("utf-8-sig")  # tolerate a BOM from Windows editors
    except UnicodeDecodeError as e:
        raise UsageError(f"{path}: cannot read: {e}") from None
    shape = _JsonShape.of(text)
    shape.check_bounds(path)  # before parsing: json.loads would fail on these with a traceback
    try:
        data = json.loads(text)
    except json.JSONDecodeError as e:
        raise UsageError(f"{path}: line {e.lineno}, column {e.colno}: {e.msg}") from None
    shape.check_keys(path)  # now that the text is JSON, the scan's keys are its keys
    validate(data, json_path_in(path))
    data.pop("$schema", None)
    return data


# How deep a configuration file may nest: it needs 3 levels (headers.NAME.fromEnv). json.loads
# recurses once per level, so 100,000 `[` were a RecursionError traceback.
MAX_DEPTH = 32


# The most digits a whole number may have: every setting's bound has 20 at most (hashValue).
# Python refuses to convert more than 4,300 (a ValueError traceback, from json.loads too).
MAX_DIGITS = 100


# What the scan looks at: strings (keys when a colon follows), brackets, and numbers.
_JSON_TOKEN = re.compile(r'("[^"\\]*(?:\\.[^"\\]*)*")(\s*:)?|([\[{])|([\]}])|(-?[0-9][0-9.eE+-]*)')


@dataclass
class _JsonShape:
    """What a linear scan of a JSON text finds that json.loads cannot be asked to report.

    Each problem is kept with its offset in the text, to be told as a line and column.
    """

    text: str
    too_deep: int | None = None
    long_number: tuple[int, str] | None = None
    duplicate: tuple[int, int, str] | None = None  # (offset, offset of the first, key)

    @classmethod
    def of(cls, text: str) -> _JsonShape:
        shape = cls(text)
        keys: list[dict[str, int] | None] = []  # per open bracket: an object's keys and offsets; None for a list
        for m in _JSON_TOKEN.finditer(text):
            string, colon, opening, closing, number = m.groups()
            if opening:
                keys.append({} if opening == "{" else None)
                if len(keys) > MAX_DEPTH:
                    shape.too_deep = m.start()
                    return shape  # and stop: the rest could be 100,000 more levels
            elif closing:
                if keys:
                    keys.pop()
            elif number:
                digits = number.lstrip("-")
                if digits.isdigit() and len(digits) > MAX_DIGITS and shape.long_number is None:
                    shape.long_number = (m.start(), digits)
            elif colon and keys and keys[-1] is not None and shape.duplicate is None:
                shape.duplicate = _repeated(keys[-1], string, m.start())
        return shape

    def check_bounds(self, path: str) -> None:
        """Refuse nesting and numbers beyond the bounds, naming where the first one is."""
        if self.too_deep is not None:
            raise UsageError(f"{path}: {self._where(self.too_deep)}: nested more than {MAX_DEPTH} levels deep "
                             "(a configuration needs 3)")
        if self.long_number is not None:
            offset, digits = self.long_number
            raise UsageError(f"{path}: {self._where(offset)}: a number of {len(digits)} digits is not allowed; "
                             f"numbers have at most {MAX_DIGITS}")

    def check_keys(self, path: str) -> None:
        """Refuse a key given twice in one object: JSON parsers keep one of the two, silently."""
        if self.duplicate is not None:
            offset, first, key = self.duplicate
            raise UsageError(f"{path}: {self._where(offset)}: key {json.dumps(key, ensure_ascii=False)} given twice "
                             f"(first at {self._where(first)}); only one of the two values would be used")

    def _where(self, offset: int) -> str:
        """As json.loads tells a place: lines and columns counted from 1."""
        line = self.text.count("\n", 0, offset) + 1
        column = offset - self.text.rfind("\n", 0, offset)
        return f"line {line}, column {column}"


def _repeated(keys: dict[str, int], string: str, offset: int) -> tuple[int, int, str] | None:
    """(offset, first offset, key) if the key `string` (as written, quoted) is already in `keys`; else None."""
    try:
        key = json.loads(string)  # "q\u0070s" is "qps"
    except ValueError:
        return None  # a bad escape: json.loads reports it, with its place
    if key in keys:
        return offset, keys[key], key
    keys[key] = offset
    return None
