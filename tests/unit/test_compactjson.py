"""The summary's layout (runner.report.compactjson): always the same value back, laid out by its rules.

Values come from hand-picked edge cases and from a seeded generator of nested objects and arrays
(empty ones, unicode, long strings, numbers of every kind, non-string keys), at several depths.
"""

from __future__ import annotations

import json
import random
from typing import Any

from runner.readback.partialjson import read_object
from runner.report.compactjson import INDENT, WIDTH, compact_json

EDGE_CASES: list[Any] = [
    {}, [], (), "", 0, -1, 1.5, 1e300, -0.0, True, False, None, "é", "\u2028", "\x00\n\t\"\\",
    {"a": {}}, {"a": []}, {"a": [{}]}, {"a": [[]]}, {"": ""}, {"a": {"b": {"c": {"d": []}}}},
    {"ключ": "значение", "🙂": ["😀" * 200]}, {"x": "y" * 500}, {"x": ["y" * 500, "z"]},
    {1: "one", 2.5: "x", False: "f", None: "n"}, {"nested": {3: [1, 2, 3]}},
    [{"a": 1}] * 5, [[1, 2], [3, [4, [5]]]], ["a" * 300], {"t": (1, (2, 3))},
    {"k" * 200: 1}, {"list": list(range(200))}, {"obj": {f"k{i}": i for i in range(100)}},
]


def random_value(rng: random.Random, depth: int) -> Any:
    """A value of any JSON kind; containers only above depth 0, sometimes empty, sometimes long."""
    kinds = ["int", "float", "str", "bool", "null"] + (["dict", "list"] * 2 if depth > 0 else [])
    kind = rng.choice(kinds)
    if kind == "int":
        return rng.choice([0, 1, -7, 2**63, rng.randrange(-10**6, 10**6)])
    if kind == "float":
        return rng.choice([0.5, -2.25, 1e-9, 123456.789, rng.uniform(-1e6, 1e6)])
    if kind == "str":
        alphabet = "abc xyz\"\\\n\té中🙂"
        return "".join(rng.choice(alphabet) for _ in range(rng.choice([0, 1, 5, 40, 150])))
    if kind == "bool":
        return rng.random() < 0.5
    if kind == "null":
        return None
    size = rng.choice([0, 1, 2, 5, 12, 60])
    if kind == "list":
        return [random_value(rng, depth - 1) for _ in range(size)]
    return {random_key(rng): random_value(rng, depth - 1) for _ in range(size)}


def random_key(rng: random.Random) -> Any:
    return rng.choice(["", "p99", "intervalStats", "ключ", "a" * 30, "with \"quote\"", 7, 2.5, True, None])


RANDOM_VALUES = [random_value(random.Random(seed), depth) for seed in range(100) for depth in (1, 2, 4)]


VALUES = EDGE_CASES + RANDOM_VALUES  # each test loops over them, every failure naming its value
OBJECTS = [v for v in VALUES if isinstance(v, dict) and v]


def test_reads_back_as_json_dumps_does() -> None:
    """The same value as json.dumps gives back: tuples as lists, non-string keys as json makes them."""
    for value in VALUES:
        assert json.loads(compact_json(value)) == json.loads(json.dumps(value)), value


def test_a_top_level_object_has_one_member_a_line() -> None:
    for value in OBJECTS:
        lines = compact_json(value).splitlines()
        assert lines[0] == "{" and lines[-1] == "}", value
        starts = [line for line in lines[1:-1] if line.startswith(INDENT + '"')]
        assert len(starts) == len(value), ("each top-level member starts one line, at the first indentation", value)
        assert [json.loads("{" + line.rstrip(",").split(": ", 1)[0] + ": 0}") for line in starts] == \
            [json.loads(json.dumps({key: 0})) for key in value], value


def test_every_line_inside_is_indented_and_only_the_last_closes() -> None:
    """What the log readers rely on to find where a summary ends (runner.readback.logscan)."""
    for value in OBJECTS:
        lines = compact_json(value).splitlines()
        assert all(line[:1] == " " for line in lines[1:-1]), value
        assert "}" not in lines[:-1] and "{" not in lines[1:], value


def holds_one_item(line: str) -> bool:
    """Whether a line holds a single array element or a single member (or opens one), nothing more."""
    body = line.strip().removesuffix(",")
    body += {"[": "]", "{": "}"}.get(body[-1:], "")  # an opening line: its member, emptied
    try:
        json.loads(body)
        return True
    except ValueError:
        pairs = json.loads("{" + body + "}", object_pairs_hook=lambda found: found)
        return len(pairs) == 1


def test_a_line_is_long_only_when_one_value_is() -> None:
    """A line past WIDTH holds one member or one array element, which is too long by itself."""
    for value in VALUES:
        long_lines = [line for line in compact_json(value).splitlines() if len(line) > WIDTH]
        assert all(holds_one_item(line) for line in long_lines), long_lines


def test_the_long_line_check_can_fail() -> None:
    assert not holds_one_item('    "a": 1, "b": 2,') and holds_one_item('    "a": {')


def test_scalars_and_empty_containers_are_json_dumps_own() -> None:
    for value in (0, 1.5, "x", None, True, [], {}, "é🙂"):
        assert compact_json(value) == json.dumps(value)


def test_short_values_stay_on_their_keys_line() -> None:
    text = compact_json({"rate": {"target": 100, "achieved": 99.9}, "errors": {}, "thresholds": ["a", "b"]})
    assert text == '{\n  "rate": {"target": 100, "achieved": 99.9},\n  "errors": {},\n  "thresholds": ["a", "b"]\n}'


def test_records_of_a_long_array_are_one_line_each_however_long() -> None:
    rows = [{"iter": i, "p99": 1.5, "errors": {"refused": i}, "pad": "x" * 150} for i in range(60)]
    lines = compact_json({"intervalStats": rows}).splitlines()
    assert lines[1] == '  "intervalStats": [' and lines[-2] == "  ]"
    assert lines[2:-2] == [f"    {json.dumps(row)}," for row in rows[:-1]] + [f"    {json.dumps(rows[-1])}"]


def test_a_long_array_of_scalars_is_one_per_line_never_split_inside() -> None:
    lines = compact_json({"list": list(range(100))}).splitlines()
    assert lines[2:-2] == [f"    {i}," for i in range(99)] + ["    99"]


def test_a_long_object_is_filled_into_lines_within_width() -> None:
    config = {f"setting{i}": i for i in range(60)}
    lines = compact_json({"config": config}).splitlines()
    inside = lines[2:-2]
    assert all(len(line) <= WIDTH for line in inside)
    assert len(inside) < len(config) / 4, "several settings a line, not one each"
    assert json.loads("{" + "".join(inside) + "}") == config


def test_a_member_that_spans_lines_stands_alone() -> None:
    verdict = {"passed": True, "stoppedEarly": None, "rules": [{"rule": "p99 < 1s", "pad": "x" * 60}] * 2}
    assert compact_json({"thresholds": verdict}).splitlines()[2:] == [
        '    "passed": true, "stoppedEarly": null,',
        '    "rules": [',
        f'      {json.dumps(verdict["rules"][0])},',
        f'      {json.dumps(verdict["rules"][1])}',
        "    ]",
        "  }",
        "}",
    ]


def test_a_summary_cut_anywhere_keeps_the_members_before_the_cut() -> None:
    """Cut-off logs are read back member by member (runner.readback.partialjson), as with indent=2."""
    summary = {"p50": 1, "rate": {"target": 100, "achieved": 99.5}, "intervalStats": [{"iter": i} for i in range(5)],
               "config": {f"s{i}": "v" * 10 for i in range(20)}, "thresholds": {"passed": False}}
    text = compact_json(summary)
    for cut in range(1, len(text)):
        found = read_object(text[:cut])
        if found is not None:
            assert list(found.members) == list(summary)[:len(found.members)]
            assert all(found.members[key] == summary[key] for key in found.members)
