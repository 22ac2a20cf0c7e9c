"""Go-style durations (`500ms`, `10s`, `1m30s`), parsed and printed exactly as Go does.

slow_cooker's users write intervals the way Go's `time.ParseDuration` reads them and read
them back the way Go's `Duration.String()` prints them (`1m0s`, not `60s`). Durations are
kept as integer nanoseconds, as in Go, so parsing and printing round-trip without float error.
"""

from __future__ import annotations

import re

from runner.core.units import NS_PER_HOUR, NS_PER_MIN, NS_PER_MS, NS_PER_S, NS_PER_US, TIME_UNITS

_TERM = re.compile(r"([0-9]+\.?[0-9]*|\.[0-9]+)(ns|us|µs|μs|ms|s|m|h)")  # ASCII digits, as Go reads them

DURATION_HINT = "a duration like 500ms, 10s, 1m or 1m30s"

# Go's largest Duration (an int64 of nanoseconds): 2562047h47m16.854775807s.
MAX_NS = 2**63 - 1
# Fraction digits kept per term, as Go keeps those that fit its int64 (it ignores the rest).
_FRACTION_DIGITS = 18


class DurationError(ValueError):
    """A string that is not a Go duration; the message says what was expected."""


class DurationRangeError(DurationError):
    """A duration written correctly but longer than Go's Duration holds (MAX_NS).

    Told apart from a misspelt one so that a setting can say what range it allows.
    """


def parse_duration(text: str) -> int:
    """Return the duration `text` in nanoseconds, or raise DurationError.

    Accepts what Go's ParseDuration accepts for non-negative values: a sequence of
    decimal numbers with units, and the bare "0". Each unit's fraction is kept exactly (to
    18 digits). Longer than MAX_NS, as in Go, is an error: DurationRangeError.
    """
    if not isinstance(text, str):
        raise DurationError(f"{text!r} is not {DURATION_HINT}")
    s = text.strip()
    if s == "0":
        return 0
    pos, total = 0, 0
    while pos < len(s):
        m = _TERM.match(s, pos)
        if m is None:
            raise DurationError(f"{text!r} is not {DURATION_HINT}")
        total += _term_ns(m.group(1), TIME_UNITS[m.group(2)])
        pos = m.end()
        if total > MAX_NS:
            raise DurationRangeError(f"{text!r} is longer than {format_duration(MAX_NS)}")
    if pos == 0:
        raise DurationError(f"{text!r} is not {DURATION_HINT}")
    return total


def _term_ns(number: str, unit_ns: int) -> int:
    """Convert one `<number><unit>` term to nanoseconds, truncating below 1 ns as Go does."""
    whole, _, frac = number.partition(".")
    whole = whole.lstrip("0")
    if len(whole) > len(str(MAX_NS)):  # certainly too long; and int() refuses over 4,300 digits
        return MAX_NS + 1
    ns = int(whole or "0") * unit_ns
    frac = frac[:_FRACTION_DIGITS]
    if frac:
        ns += int(frac) * unit_ns // 10 ** len(frac)
    return ns


def format_duration(ns: int) -> str:
    """Print nanoseconds as Go's Duration.String() does: `1m0s`, `1.5s`, `500ms`, `0s`."""
    if ns < 0:
        return "-" + format_duration(-ns)
    if ns == 0:
        return "0s"
    if ns < NS_PER_US:
        return f"{ns}ns"
    if ns < NS_PER_MS:
        return _decimal(ns, NS_PER_US) + "µs"
    if ns < NS_PER_S:
        return _decimal(ns, NS_PER_MS) + "ms"
    hours, rest = divmod(ns, NS_PER_HOUR)
    minutes, rest = divmod(rest, NS_PER_MIN)
    seconds = _decimal(rest, NS_PER_S) + "s"
    if hours:
        return f"{hours}h{minutes}m{seconds}"
    if minutes:
        return f"{minutes}m{seconds}"
    return seconds


def _decimal(value: int, unit: int) -> str:
    """`value / unit` with the fraction's trailing zeros dropped (Go's fmtFrac)."""
    whole, frac = divmod(value, unit)
    if not frac:
        return str(whole)
    digits = len(str(unit)) - 1
    return f"{whole}.{frac:0{digits}d}".rstrip("0")
