"""runner/core/numbers.py: numbers from text in ASCII digits only, as JSON and Go write them."""

from __future__ import annotations

import pytest

from runner.core.numbers import decimal_number, whole_number

# What int() or float() read but no configuration file (JSON) could hold.
NOT_ASCII_NUMBERS = ["1_000", "\u0661\u0660", "\uff11", "\u00b2", " 5", "5 ", "5\n", "\u0665.5", "1\u066b5", "0x10",
                     "inf", "-inf", "nan", "1e999", "", "+", "-", ".", "e5", "1e", "1.2.3"]


@pytest.mark.parametrize(("text", "number"), [("10", 10), ("0", 0), ("-5", -5), ("+3", 3), ("007", 7),
                                              ("1" * 30, int("1" * 30))])
def test_whole_numbers_in_ascii_digits(text: str, number: int) -> None:
    assert whole_number(text) == number and type(whole_number(text)) is int


@pytest.mark.parametrize("text", [*NOT_ASCII_NUMBERS, "1.5", "1e3", "1" * 5000])
def test_what_is_no_whole_number(text: str) -> None:
    assert whole_number(text) is None


@pytest.mark.parametrize(("text", "number"), [("10", 10), ("0.5", 0.5), (".5", 0.5), ("5.", 5.0), ("1e3", 1000.0),
                                              ("1.5E-3", 0.0015), ("-2.5", -2.5)])
def test_decimal_numbers_as_json_writes_them(text: str, number: float) -> None:
    assert decimal_number(text) == number
    assert type(decimal_number(text)) is (int if text.lstrip("+-").isdigit() else float)


@pytest.mark.parametrize("text", NOT_ASCII_NUMBERS)
def test_what_is_no_decimal_number(text: str) -> None:
    assert decimal_number(text) is None
