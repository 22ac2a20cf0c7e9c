"""A JSON object read as far as it goes: whole members kept, never a wrong one."""

from __future__ import annotations

import json

import pytest

from runner.readback.partialjson import read_object
from tests.support.runlogs import histogram_of, summary

SUMMARY = summary(unit="us", intervalStats=[{"iter": 0, "good": 5, "errors": {"refused": 1}}],
                  histogram={"unit": "ns", "hdr": histogram_of([1_000, 2_000_000])}, config={"qps": 100, "x": "a,{]"})


def test_a_whole_object_reads_whole() -> None:
    text = json.dumps(SUMMARY, indent=2)
    found = read_object(text)
    assert found is not None
    assert found.complete and found.members == SUMMARY and found.stop == len(text) and found.cut_inside is None


@pytest.mark.parametrize("indent", [2, 1, None], ids=["soak", "pasted", "compact"])
def test_every_cut_keeps_only_whole_members_with_their_true_values(indent: int | None) -> None:
    """Cut anywhere (mid-key, mid-number, mid-string, mid-nested-object): never a wrong value."""
    text = json.dumps(SUMMARY, indent=indent)
    kept_before = 0
    for cut in range(len(text)):
        found = read_object(text[:cut])
        if found is None:
            assert not text[:cut].strip(), cut  # only an empty text has no start at all
            continue
        assert not found.complete
        assert all(SUMMARY[key] == value for key, value in found.members.items()), cut
        assert list(found.members) == list(SUMMARY)[: len(found.members)], cut
        assert len(found.members) >= kept_before, "a longer text never keeps fewer members"
        kept_before = len(found.members)
        if found.cut_inside is not None:
            assert found.cut_inside == list(SUMMARY)[len(found.members)]
    assert kept_before == len(SUMMARY)  # the last member, an object, is whole once its own brace closes


def test_a_cut_inside_a_nested_value_drops_that_member_and_says_which() -> None:
    text = '{\n  "p50": 1,\n  "rate": {\n    "target": 100,\n    "achie'
    found = read_object(text)
    assert found is not None
    assert found.members == {"p50": 1}
    assert found.cut_inside == "rate"
    assert text[found.stop:].startswith('"rate"')


def test_a_mangled_line_keeps_the_members_before_it() -> None:
    text = '{\n  "p50": 1,\n  "p75": 2,\n  oops\n  "p90": 3\n}'
    found = read_object(text)
    assert found is not None
    assert found.members == {"p50": 1, "p75": 2} and not found.complete


def test_what_follows_a_whole_object_is_ignored() -> None:
    found = read_object('{"p50": 1, "p75": 2} and then some')
    assert found is not None
    assert found.members == {"p50": 1, "p75": 2} and not found.complete and found.cut_inside is None


@pytest.mark.parametrize("text", ["", "   ", "hello", "[1, 2]", "12", '"{"', "}", "]{", "{" * 100_000],
                         ids=lambda text: repr(text[:12]))
def test_what_is_not_an_object_reads_as_nothing_or_empty(text: str) -> None:
    found = read_object(text)
    assert found is None or found.members == {}


def test_only_an_opening_brace_is_an_empty_start() -> None:
    found = read_object("{")
    assert found is not None
    assert found.members == {} and not found.complete


def test_strings_with_brackets_commas_and_escapes_do_not_confuse_it() -> None:
    value = {"a": 'x,}]"\\', "b": [1, {"c": "{["}], "d": 4}
    text = json.dumps(value)
    for cut in range(len(text)):
        found = read_object(text[:cut])
        if found is not None:
            assert all(value[k] == v for k, v in found.members.items())
