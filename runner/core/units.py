"""Time and its units, defined once: nanoseconds per unit, the units latencies are reported
in, and how a moment is written.

Every time inside the runner is integer nanoseconds; units matter only where a person writes
a time (a duration, a threshold) or reads one (interval lines, the summary, RFC 3339 stamps).
"""

from __future__ import annotations

from datetime import UTC, datetime

NS_PER_US = 1_000
NS_PER_MS = 1_000_000
NS_PER_S = 1_000_000_000
NS_PER_MIN = 60 * NS_PER_S
NS_PER_HOUR = 60 * NS_PER_MIN

# Go's duration units (time.ParseDuration), in nanoseconds: what a person may write a time in.
TIME_UNITS = {
    "ns": 1,
    "us": NS_PER_US,
    "µs": NS_PER_US,  # U+00B5 micro sign, as Go prints it
    "μs": NS_PER_US,  # U+03BC Greek mu, which Go also accepts
    "ms": NS_PER_MS,
    "s": NS_PER_S,
    "m": NS_PER_MIN,
    "h": NS_PER_HOUR,
}

# The units a run reports latencies in (latencyUnit), as slow_cooker does.
LATENCY_UNITS = ("ms", "us", "ns")
UNIT_NS = {unit: TIME_UNITS[unit] for unit in LATENCY_UNITS}


def in_unit(ns: int | float, unit: str) -> int:
    """A latency in the run's unit, truncated toward zero as slow_cooker prints it."""
    return int(ns // UNIT_NS[unit])


def time_text(ns: float) -> str:
    """A time in the largest unit it holds at least one of (s, ms, us, ns), to three decimals.

    What a measured latency is shown as: `2.913ms` keeps the precision that `0.003s` (the
    same time in the unit a rule happened to be written in) throws away.
    """
    unit = next((u for u in ("s", "ms", "us") if round(abs(ns) / TIME_UNITS[u], 3) >= 1), "ns")
    return f"{ns / TIME_UNITS[unit]:.3f}".rstrip("0").rstrip(".") + unit


def rfc3339(unix: float, *, fraction: bool = False) -> str:
    """A Unix time as RFC 3339 in local time, `Z` when the offset is zero (as Go prints it)."""
    moment = datetime.fromtimestamp(unix, UTC).astimezone()
    text = moment.isoformat(timespec="milliseconds" if fraction else "seconds")
    return text.replace("+00:00", "Z")
