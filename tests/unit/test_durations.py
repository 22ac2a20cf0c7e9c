"""Go-style durations: parsed as Go's time.ParseDuration, printed as Go's Duration.String()."""

from __future__ import annotations

import random

import pytest

from runner.core.durations import (
    DURATION_HINT,
    NS_PER_HOUR,
    NS_PER_MIN,
    NS_PER_MS,
    NS_PER_S,
    NS_PER_US,
    DurationError,
    DurationRangeError,
    format_duration,
    parse_duration,
)


@pytest.mark.parametrize(
    ("text", "ns"),
    [
        ("500ms", 500 * NS_PER_MS),
        ("10s", 10 * NS_PER_S),
        ("1m", NS_PER_MIN),
        ("1m30s", 90 * NS_PER_S),
        ("1.5s", 1_500_000_000),
        ("1h0m0s", NS_PER_HOUR),
        ("1h", 3_600_000_000_000),
        (".5s", 500_000_000),
        ("1.s", NS_PER_S),
        ("1us", 1_000),
        ("1µs", 1_000),  # U+00B5 micro sign, as Go prints it
        ("1μs", 1_000),  # U+03BC Greek small mu, which Go accepts too
        ("1ns", 1),
        ("999ns", 999),
        ("0", 0),
        ("0s", 0),
        ("0.000s", 0),
        ("2m0.5s", 120_500_000_000),
        ("1.5ms", 1_500_000),
        ("1h1m1s1ms1us1ns", NS_PER_HOUR + NS_PER_MIN + NS_PER_S + NS_PER_MS + NS_PER_US + 1),
        ("1s1s", 2 * NS_PER_S),  # Go adds repeated units
        ("90s", 90 * NS_PER_S),
        ("1.25h", 4_500_000_000_000),
        ("0.1ns", 0),  # below a nanosecond truncates, as in Go
        ("1.0000000001s", NS_PER_S),
        ("1.999999999999s", 1_999_999_999),
        ("100000h", 100_000 * NS_PER_HOUR),
    ],
)
def test_parse_duration_accepts_go_forms(text: str, ns: int) -> None:
    assert parse_duration(text) == ns


def test_parse_duration_returns_exact_integers() -> None:
    value = parse_duration("0.1s")
    assert type(value) is int
    assert value == 100_000_000
    # Adding tenths in floating point drifts; integer nanoseconds must not.
    assert sum(parse_duration("0.1s") for _ in range(10)) == NS_PER_S


@pytest.mark.parametrize(
    "text",
    ["1 min", "10", "-1s", "s", "", "1m x", "1x", "1.5", "ms", "1sec", "1 s", "1m-1s", ".s", "1..5s", "1e3s",
     "00", "1S", "1M", "one second", "1_000ms", "+", " ", "1s,2s",
     # digits of other scripts, which Python's \d matches and Go's ParseDuration refuses
     "\uff11s", "\u0661\u0660s", "1\u0661s", "\u00b2s", "1.\u0665s"],
)
def test_parse_duration_rejects(text: str) -> None:
    with pytest.raises(DurationError) as caught:
        parse_duration(text)
    message = str(caught.value)
    assert repr(text) in message
    assert DURATION_HINT in message


@pytest.mark.parametrize("value", [None, 10, 1.5, ["1s"], {"s": 1}])
def test_parse_duration_rejects_non_strings(value: object) -> None:
    with pytest.raises(DurationError, match="is not a duration like"):
        parse_duration(value)  # type: ignore[arg-type]


def test_duration_error_is_a_value_error() -> None:
    assert issubclass(DurationError, ValueError)


@pytest.mark.parametrize(
    ("ns", "text"),
    [
        (5 * NS_PER_S, "5s"),
        (NS_PER_MIN, "1m0s"),
        (1_500_000_000, "1.5s"),
        (500 * NS_PER_MS, "500ms"),
        (NS_PER_HOUR, "1h0m0s"),
        (1_500_000, "1.5ms"),
        (1_000, "1µs"),
        (999, "999ns"),
        (0, "0s"),
        (120_500_000_000, "2m0.5s"),
        (1, "1ns"),
        (1_001, "1.001µs"),
        (1_100, "1.1µs"),
        (999_999, "999.999µs"),
        (NS_PER_MS, "1ms"),
        (999_999_999, "999.999999ms"),
        (NS_PER_S, "1s"),
        (NS_PER_S + 1, "1.000000001s"),
        (10 * NS_PER_S, "10s"),
        (59 * NS_PER_S, "59s"),
        (90 * NS_PER_S, "1m30s"),
        (NS_PER_HOUR + 1, "1h0m0.000000001s"),
        (25 * NS_PER_HOUR + 61 * NS_PER_S, "25h1m1s"),
        (-1_500_000_000, "-1.5s"),
        (-1, "-1ns"),
    ],
)
def test_format_duration_matches_go(ns: int, text: str) -> None:
    assert format_duration(ns) == text


def test_format_uses_the_micro_sign_go_prints() -> None:
    assert format_duration(2_000) == "2\u00b5s"


def _interesting_values() -> list[int]:
    values = {0, 1, 999, 1_000, 1_001, 999_999, 1_000_000, 1_000_001, NS_PER_S - 1, NS_PER_S, NS_PER_S + 1,
              NS_PER_MIN - 1, NS_PER_MIN, NS_PER_MIN + 1, NS_PER_HOUR - 1, NS_PER_HOUR, NS_PER_HOUR + 1}
    for exponent in range(0, 16):
        for mantissa in (1, 2, 5, 15, 123, 999):
            values.add(mantissa * 10**exponent)
    rng = random.Random(20240601)
    values.update(rng.randrange(0, 48 * NS_PER_HOUR) for _ in range(2000))
    values.update(rng.randrange(0, NS_PER_S) for _ in range(500))
    return sorted(values)


def test_round_trip_format_then_parse_is_exact() -> None:
    for ns in _interesting_values():
        text = format_duration(ns)
        assert parse_duration(text) == ns, (ns, text)


@pytest.mark.parametrize(
    "text",
    ["5s", "1m0s", "1.5s", "500ms", "1h0m0s", "1.5ms", "1µs", "999ns", "0s", "2m0.5s", "1h30m0s", "10m0.001s"],
)
def test_round_trip_canonical_text_is_unchanged(text: str) -> None:
    assert format_duration(parse_duration(text)) == text


@pytest.mark.parametrize(
    ("text", "canonical"),
    [("60s", "1m0s"), ("90s", "1m30s"), ("3600s", "1h0m0s"), ("1000ms", "1s"), ("0.5m", "30s"), ("1500us", "1.5ms"),
     ("1m", "1m0s"), ("1h", "1h0m0s"), ("0", "0s"), (".5s", "500ms")],
)
def test_non_canonical_text_prints_as_go_would(text: str, canonical: str) -> None:
    assert format_duration(parse_duration(text)) == canonical


@pytest.mark.parametrize("text", ["2562047h47m16.854775808s", "9999999999999999999h", "1" * 5000 + "ns",
                                  "2562047h1000m"])
def test_longer_than_go_holds_is_a_range_error(text: str) -> None:
    """Go refuses a duration past its int64 of nanoseconds; 5000 digits was a ValueError (int's digit limit)."""
    with pytest.raises(DurationRangeError):
        parse_duration(text)


def test_the_longest_go_duration_and_a_long_fraction_parse() -> None:
    assert parse_duration("2562047h47m16.854775807s") == 2**63 - 1
    assert parse_duration("0." + "9" * 5000 + "s") == NS_PER_S - 1  # digits past ns are dropped, as Go drops them
