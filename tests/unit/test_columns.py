"""The interval line's columns as data (runner.core.columns): the line, its header and the
patterns log readers parse it with are all made from the one table, so a new percentile is one
row there. The golden outputs (tests/unit/test_slowcooker.py) hold the layout to slow_cooker's."""

from __future__ import annotations

import dataclasses
import inspect
import random
import sys
import types

import pytest

from runner.core import columns
from runner.core.columns import COLUMNS, LATENCY_COLUMNS, LINE, LINE_PERCENTILES, LOG_LINE, Line, matched
from runner.readback.logscan import _ROW_NAMES, IntervalRow, scan

TIMESTAMP = "2026-11-30T01:10:32Z"


def a_line(rng: random.Random, count: int = len(LATENCY_COLUMNS)) -> Line:
    def number() -> int:
        return rng.randrange(10 ** rng.randrange(1, 10))

    return Line(TIMESTAMP, number(), number(), rng.randrange(10), rng.randrange(100), number(), rng.randrange(101),
                rng.choice(["1s", "500ms", "1.504s", "1m0s"]), tuple(number() for _ in range(count)), number(),
                rng.choice(["", "+", "--", "+++"]))


@pytest.mark.parametrize("unit", ["ms", "us", "ns"])
def test_every_line_reads_back_as_printed_and_as_a_log_keeps_it(unit: str) -> None:
    rng = random.Random(7)
    for _ in range(2000):
        line = a_line(rng)
        text = columns.interval_line(line, unit)
        found = LINE.match(text.rstrip("\n"))
        assert found is not None, text
        assert Line.of(matched(found)) == line
        collapsed = " ".join(text.split())  # a log pasted with its runs of spaces collapsed, its last one lost
        logged = LOG_LINE.match(collapsed)
        assert logged is not None, collapsed
        assert Line.of(matched(logged)) == line


def test_a_log_reader_takes_a_line_cut_before_its_change_marker() -> None:
    text = columns.interval_line(a_line(random.Random(1)))
    cut = text[:text.rindex(" ")]
    found = LOG_LINE.match(cut)
    assert found is not None and matched(found)["change"] is None
    assert LINE.match(cut) is None


def test_a_line_needs_a_figure_for_each_latency_column() -> None:
    with pytest.raises(ValueError, match="for the columns min, p50, p95, p99, p999, max"):
        columns.interval_line(a_line(random.Random(1), count=len(LATENCY_COLUMNS) - 1))


def test_the_line_shows_min_its_percentiles_and_max() -> None:
    assert LATENCY_COLUMNS == ("min", *LINE_PERCENTILES, "max") == ("min", "p50", "p95", "p99", "p999", "max")
    line = a_line(random.Random(2))
    assert [line.latency(key) for key in LATENCY_COLUMNS] == list(line.latencies)
    assert line.requests == line.good + line.bad + line.failed


def test_log_readers_keep_every_column() -> None:
    """A row read back from a log has a field for each column (but the change marker, which only
    the line has); what a log reader reads is the line the reporter printed."""
    names = {field.name for field in dataclasses.fields(IntervalRow)}
    assert {_ROW_NAMES.get(c.key, c.key) for c in COLUMNS if c.key != "change"} <= names
    line = a_line(random.Random(3))
    row = scan(columns.interval_line(line)).intervals[0]
    assert (row.iter, row.t, row.interval) == (line.iteration, line.target, line.interval)
    assert [getattr(row, key) for key in LATENCY_COLUMNS] == list(line.latencies)


def test_a_new_percentile_is_one_row(monkeypatch: pytest.MonkeyPatch) -> None:
    """runner/core/columns.py with a p90 column added, and nothing else: its header names p90 where
    its lines print it, and both of its patterns read the lines back with it."""
    source = inspect.getsource(columns)
    p95 = '    Column("p95", "p95", width=3, latency=True),\n'
    assert source.count(p95) == 1
    changed = types.ModuleType("columns_with_p90")
    monkeypatch.setitem(sys.modules, changed.__name__, changed)  # its dataclasses look their module up
    exec(compile(source.replace(p95, '    Column("p90", "p90", width=3, latency=True),\n' + p95),  # noqa: S102
                 "columns_with_p90", "exec"), changed.__dict__)
    assert changed.LINE_PERCENTILES == ("p50", "p90", "p95", "p99", "p999")
    header = changed.header_line(TIMESTAMP, "2s")
    assert " [p50 p90 p95 p99  p999]" in header
    line = changed.Line(TIMESTAMP, 3, 195, 0, 0, 200, 97, "2s", (1, 2, 33, 4, 5, 6, 7), 0, "+")
    text = changed.interval_line(line)
    assert text == "2026-11-30T01:10:32Z    3    195/0/0 200  97% 2s   1 [  2  33   4   5    6 ]    7      0 +\n"
    found = changed.LINE.match(text.rstrip("\n"))
    assert found is not None
    label_end = {key: header.index(f" {key}") + 1 + len(key) for key in ("p90", "p95")}
    assert label_end["p90"] - found.end("p90") == label_end["p95"] - found.end("p95"), "p90 heads its column as p95 does"
    for pattern in (changed.LINE, changed.LOG_LINE):
        found = pattern.match(text.rstrip("\n"))
        assert found is not None and changed.matched(found)["p90"] == 33
        assert changed.Line.of(changed.matched(found)) == line
