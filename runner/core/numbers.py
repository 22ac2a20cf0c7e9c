"""Numbers as a person writes them in a flag or a variable: ASCII digits, nothing else.

Python's int() and float() also read `1_000`, `١٠` (Arabic-Indic digits), `１` (a fullwidth
digit) and surrounding spaces, and its regular expressions' `\\d` matches every script's digits:
`--qps 1_000` and `--interval '１s'` were accepted, where JSON, Go and every other tool refuse
them. Each place that reads a number from text reads it here, so all of them take the same.
"""

from __future__ import annotations

import math
import re

# A whole number: an optional sign and ASCII digits.
_INTEGER = re.compile(r"[+-]?[0-9]+", re.ASCII)
# A decimal number as JSON writes one (and `.5`, `5.`): digits, a fraction, an exponent.
_DECIMAL = re.compile(r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?", re.ASCII)


def whole_number(text: str) -> int | None:
    """The whole number `text` writes in ASCII digits, or None (`1_000`, `١٠`, ` 5`, `5.0` are none)."""
    if not _INTEGER.fullmatch(text):
        return None
    try:
        return int(text)
    except ValueError:  # more digits than Python converts (4,300): no setting's number
        return None


def decimal_number(text: str) -> int | float | None:
    """The number `text` writes in ASCII (an int when it has no fraction or exponent), or None.

    `inf` and `nan` are no numbers here, nor `1e999` (infinity once read): no setting takes them,
    and NaN passes every bound.
    """
    if _INTEGER.fullmatch(text):
        return whole_number(text)
    if not _DECIMAL.fullmatch(text):
        return None
    number = float(text)
    return number if math.isfinite(number) else None
