"""A whole JSON object with its bulky arrays left in the text: the same values as json.loads, or None."""

from __future__ import annotations

import json
import random

import pytest

from runner.readback.lazyjson import LazyArray, lazy_object
from runner.readback.partialjson import read_object
from runner.report.compactjson import compact_json

INTERVALS = [{"iter": k, "tally": {"good": k, "latency": {"hdr": "HIST,]}", "min": 1}}, "x": [k, [k]]}
             for k in range(5)]
SUMMARY = {"p50": 1, "intervalStats": [{"iter": 0}], "config": {"qps": 100, "u": "a,{]\"\\"},
           "shard": {"index": 0, "urls": ["http://a/"], "intervals": INTERVALS, "bench": None}, "last": []}
LAZY = (("shard", "intervals"),)


@pytest.mark.parametrize("layout", [compact_json, lambda v: json.dumps(v, indent=2), json.dumps,
                                    lambda v: json.dumps(v, separators=(",", ":")),
                                    lambda v: "\n\t " + json.dumps(v, indent="\t") + " \r\n"],
                         ids=["soak", "indent=2", "one line", "no spaces", "tabs"])
def test_any_layout_reads_as_json_loads_reads_it(layout) -> None:  # noqa: ANN001 - a layout function
    text = layout(SUMMARY)
    found = lazy_object(text, LAZY)
    assert found == json.loads(text)
    assert isinstance(found["shard"]["intervals"], LazyArray)
    assert isinstance(found["intervalStats"], list) and isinstance(found["last"], list)


def test_a_lazy_array_decodes_each_element_when_read() -> None:
    found = lazy_object(json.dumps(SUMMARY), LAZY)
    intervals = found["shard"]["intervals"]
    assert len(intervals) == 5 and intervals[3] == INTERVALS[3] and intervals[-1] == INTERVALS[-1]
    assert intervals[1:3] == INTERVALS[1:3] and list(intervals) == INTERVALS
    assert intervals[2] is not intervals[2], "decoded anew each time: nothing kept"
    assert intervals == INTERVALS and INTERVALS == intervals and intervals != INTERVALS[:4]
    assert intervals == lazy_object(compact_json(SUMMARY), LAZY)["shard"]["intervals"]
    assert found == SUMMARY and SUMMARY == found, "the object compares by value, as a decoded one"
    assert lazy_object('{"shard": {"intervals": []}}', LAZY)["shard"]["intervals"] == []


def test_a_lazy_path_that_is_not_an_array_is_read_as_usual() -> None:
    assert lazy_object('{"shard": {"intervals": 3}}', LAZY) == {"shard": {"intervals": 3}}
    assert lazy_object('{"shard": 7}', LAZY) == {"shard": 7}


@pytest.mark.parametrize("text", ["", "{", "[]", "12", '{"a": 1} x', '{"a": 1}{}', '{"a" 1}', '{"a": 1,}',
                                  '{1: 2}', '{"a": [1, 2,]}', '{"shard": {"intervals": [1, 2,]}}',
                                  '{"shard": {"intervals": [1 2]}}', '{"shard": {"intervals": [1, 2}}',
                                  '\ufeff{"a": 1}', '{"a": 1', "{" * 100_000 + "}" * 100_000],
                         ids=lambda text: repr(text[:16]))
def test_what_is_not_one_json_object_reads_as_none(text: str) -> None:
    try:
        assert not isinstance(json.loads(text), dict)
    except (ValueError, RecursionError):
        pass
    assert lazy_object(text, LAZY) is None


def test_every_cut_of_a_summary_is_refused_and_read_the_careful_way() -> None:
    """A cut summary is no whole object: read_object salvages its members as before, decoding them all."""
    text = compact_json(SUMMARY)
    for cut in range(len(text)):
        assert lazy_object(text[:cut], LAZY) is None, cut
        found = read_object(text[:cut], LAZY)
        assert found is None or not found.complete
        assert found is None or all(SUMMARY[key] == value for key, value in found.members.items())


def test_random_documents_read_as_json_loads_reads_them() -> None:
    rng = random.Random(3)

    def value(depth: int) -> object:
        kind = rng.randrange(8 if depth < 4 else 4)
        return [None, rng.random() * 1e6, rng.randint(-10**20, 10**20), "s\u00e9\\\"{[,"][kind] if kind < 4 else \
            [value(depth + 1) for _ in range(rng.randrange(4))] if kind < 6 else \
            {f"k{i}": value(depth + 1) for i in range(rng.randrange(4))}

    for _ in range(300):
        document = {"shard": {"intervals": [value(1) for _ in range(rng.randrange(4))], "x": value(1)}, "y": value(0)}
        for text in (json.dumps(document), compact_json(document), json.dumps(document, indent=1)):
            assert lazy_object(text, LAZY) == json.loads(text)
