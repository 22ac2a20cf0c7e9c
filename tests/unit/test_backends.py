"""Which backends answered and what connections did: counted once per result, bounded, shown,
merged, read back, and told in a `# iter` note, in the metrics and in `soak compare`."""

from __future__ import annotations

import json
from collections import Counter

import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from runner.commands.compare import compare_text
from runner.core.redact import Secrets
from runner.load.model import Closed
from runner.load.result import Result
from runner.load.schedule import Grid
from runner.metrics.collector import Gauges, SoakCollector
from runner.metrics.tally import MetricsTally, summed, url_slots
from runner.readback.results import load_run
from runner.report.clientnotes import interval_note
from runner.stats.figures import (
    BACKENDS_SHOWN,
    NO_BACKEND,
    OTHER_BACKENDS,
    Figures,
    backends_reached,
    shown_backends,
)
from runner.stats.record import _check_tally, tally_from_record, tally_record
from runner.stats.recorder import BACKENDS_KEPT, Interval, Recorder, Tally
from tests.support.runlogs import summary_text

START = 5_000_000_000_000
SECOND = 1_000_000_000
MS = 1_000_000
GRID = Grid(START, SECOND)


def answer(backend: str = "", *, connected: bool = False, closed: int = 0, status: int = 200,
           end: int = START + MS) -> Result:
    """A response from `backend` ("" without the header), on a new connection or not."""
    return Result(start_ns=end - MS, connected_ns=end - MS // 2 if connected else 0, headers_ns=end - 1000,
                  end_ns=end, status=status, backend=backend, connections_closed=closed)


def failed(*, connected: bool = False, closed: int = 0) -> Result:
    return Result(start_ns=START, connected_ns=START + 1 if connected else 0, end_ns=START + MS, error="reset",
                  error_text="reset: connection reset by peer", connections_closed=closed)


# --- shown: the first N by count, then "other" --------------------------------------------------


def test_the_backends_shown_are_the_most_answering_then_the_rest_as_other() -> None:
    counts = Counter({f"pod-{i:02}": 100 - i for i in range(30)})  # pod-00 answered most
    shown = shown_backends(counts)
    assert list(shown) == [f"pod-{i:02}" for i in range(BACKENDS_SHOWN)] + [OTHER_BACKENDS]
    assert shown[OTHER_BACKENDS] == sum(100 - i for i in range(BACKENDS_SHOWN, 30))
    assert sum(shown.values()) == sum(counts.values())
    assert shown_backends(Counter({"b": 2, "a": 2, "c": 5})) == {"c": 5, "a": 2, "b": 2}  # ties by name
    assert shown_backends(Counter({"a": 1, OTHER_BACKENDS: 4}), shown=1) == {"a": 1, OTHER_BACKENDS: 4}
    assert shown_backends(Counter({"a": 1, "b": 3, OTHER_BACKENDS: 4}), shown=1) == {"b": 3, OTHER_BACKENDS: 5}
    assert shown_backends(Counter()) == {}


def test_backends_reached_are_the_names_not_other_nor_none() -> None:
    assert backends_reached(Counter({"a": 1, "b": 2, NO_BACKEND: 5, OTHER_BACKENDS: 7})) == 2
    assert backends_reached(Counter({"a": 0})) == 0


# --- the tally: counted per result, bounded, merged -------------------------------------------------


def test_a_tally_counts_connections_opened_and_closed_and_responses_by_backend() -> None:
    tally = Tally()
    tally.add(answer("a", connected=True), MS, 0, backend="a")
    tally.add(answer("a"), MS, 0, backend="a")
    tally.add(answer("b", connected=True, closed=1), MS, 0, backend="b")
    tally.add(answer(""), MS, 0, backend=NO_BACKEND)
    tally.add(failed(connected=True, closed=2), 0, 0)
    tally.add(answer("c"), MS, 0)  # no backendHeader: not counted by backend
    assert (tally.connections_opened, tally.connections_closed) == (3, 3)
    assert tally.backends == Counter({"a": 2, "b": 1, NO_BACKEND: 1})


def test_a_tally_keeps_at_most_backends_kept_names_and_merging_holds_the_bound() -> None:
    tally = Tally()
    for i in range(BACKENDS_KEPT + 50):
        tally.count_backend(f"r-{i}")  # a header whose value is new with every response
    tally.count_backend("r-0", 2)
    assert len(tally.backends) == BACKENDS_KEPT + 1  # the first BACKENDS_KEPT, and "other"
    assert tally.backends[OTHER_BACKENDS] == 50 and tally.backends["r-0"] == 3
    assert sum(tally.backends.values()) == BACKENDS_KEPT + 52
    other = Tally()
    for i in range(50, 300):
        other.count_backend(f"r-{i}")
    other.connections_opened, other.connections_closed = 4, 3
    tally.merge(other)
    assert len(tally.backends) <= BACKENDS_KEPT + 1
    assert sum(tally.backends.values()) == BACKENDS_KEPT + 52 + 250
    assert (tally.connections_opened, tally.connections_closed) == (4, 3)


def test_the_recorder_counts_backends_as_shown_and_only_with_a_backend_header() -> None:
    recorder = Recorder(GRID, Closed(), shown=Secrets(["S3cret"]).shown, backends=True)
    for backend in ("pod-a", "pod-a", "pod S3cret\x1b", ""):
        recorder.record(answer(backend, connected=True, closed=1))
    recorder.record(failed())
    interval = recorder.close()
    assert interval.tally.backends == Counter({"pod-a": 2, "pod <hidden>\\x1b": 1, NO_BACKEND: 1})
    assert (interval.figures.backends_reached, interval.figures.connections_opened,
            interval.figures.connections_closed) == (2, 4, 4)
    assert recorder.total.backends == interval.tally.backends
    plain = Recorder(GRID, Closed())
    plain.record(answer("pod-a"))
    assert not plain.close().tally.backends


def test_backends_and_connections_round_trip_the_shard_record_and_old_records_have_none() -> None:
    tally = Tally(good=3, connections_opened=2, connections_closed=1, backends=Counter({"a": 2, "b": 1}))
    back = tally_from_record(json.loads(json.dumps(tally_record(tally))))
    assert (back.backends, back.connections_opened, back.connections_closed) == (tally.backends, 2, 1)
    old = tally_record(tally)
    del old["backends"], old["connectionsOpened"], old["connectionsClosed"]
    back = tally_from_record(old)
    assert (back.backends, back.connections_opened, back.connections_closed) == (Counter(), 0, 0)
    for bad, text in (({"a": -1}, "a count below 0"), ({"a": "x"}, "not a tally record")):
        record = tally_record(tally) | {"backends": bad}
        with pytest.raises(ValueError, match=text):
            _check_tally(record, "shard.intervals[0].tally", 1)


# --- the # iter note ---------------------------------------------------------------------------


def interval_of(index: int, *backends: str) -> Interval:
    tally = Tally()
    for backend in backends:
        tally.add(answer(backend), MS, 0, backend=backend)
    return Interval(index, START, START + SECOND, tally)


def test_a_note_when_an_interval_reached_fewer_backends_than_the_one_before() -> None:
    ten = interval_of(4, *(f"nginx-{i}" for i in range(10)))
    assert interval_note(interval_of(5, *(f"nginx-{i}" for i in range(10) if i not in (3, 7))), ten.figures) == \
        "# iter 5: 8 backends answered, 10 in iter 4 (nginx-3, nginx-7 not among them)\n"
    assert interval_note(interval_of(5, "nginx-0"), ten.figures) == \
        "# iter 5: 1 backend answered, 10 in iter 4 (nginx-1, nginx-2, nginx-3, ... not among them)\n"
    assert interval_note(interval_of(5, *(f"nginx-{i}" for i in range(10))), ten.figures) == ""  # as many
    assert interval_note(interval_of(5, *(f"nginx-{i}" for i in range(11))), ten.figures) == ""  # more
    assert interval_note(interval_of(5, "nginx-0"), None) == ""  # no backendHeader: nothing said
    swapped = interval_of(5, *(f"nginx-{i}" for i in range(1, 10)), NO_BACKEND)  # nginx-0 gone, none new
    assert interval_note(swapped, ten.figures) == "# iter 5: 9 backends answered, 10 in iter 4 (nginx-0 not among " \
                                                  "them)\n"
    assert interval_note(Interval(5, START, START + SECOND, Tally()), ten.figures) == \
        "# iter 5: 0 backends answered, 10 in iter 4 (nginx-0, nginx-1, nginx-2, ... not among them)\n"


# --- the metrics: a bounded backend label that never moves --------------------------------------


def scraped(tally: MetricsTally) -> dict[str, dict]:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(SoakCollector(tally, Gauges(), url_slots(["http://a.example/"])))
    samples: dict[str, dict] = {}
    for family in text_string_to_metric_families(generate_latest(registry).decode()):
        for sample in family.samples:
            samples.setdefault(sample.name, {})[tuple(sorted(sample.labels.items()))] = sample.value
    return samples


def test_the_metrics_count_connections_and_responses_by_the_first_backends_met() -> None:
    tally = MetricsTally(url_slots(["http://a.example/"]), Closed(), Secrets(["S3cret"]).shown)
    tally.record(answer("pod-0 S3cret"))  # shown as the recorder shows it
    tally.record(answer(""))  # no header
    for i in range(BACKENDS_SHOWN + 5):
        tally.record(answer(f"pod-{i}", connected=True))
    for _ in range(40):  # a backend met late answers most; its series stays "other": none moves
        tally.record(answer(f"pod-{BACKENDS_SHOWN + 1}", closed=1))
    tally.record(failed(connected=True, closed=1))
    samples = scraped(tally)
    by_backend = {dict(labels)["backend"]: n for labels, n in samples["soak_backend_responses_total"].items()}
    assert set(by_backend) == {f"pod-{i}" for i in range(BACKENDS_SHOWN - 2)} | {OTHER_BACKENDS, "pod-0 <hidden>",
                                                                                NO_BACKEND}
    assert by_backend[OTHER_BACKENDS] == 7 + 40  # pod-18 to pod-24, then pod-21's 40 more
    assert sum(by_backend.values()) == BACKENDS_SHOWN + 5 + 40 + 2  # every response, the failure not
    assert samples["soak_connections_opened_total"][()] == BACKENDS_SHOWN + 5 + 1
    assert samples["soak_connections_closed_total"][()] == 41
    copy = tally.snapshot()
    assert copy.backends == tally.backends and copy.connections_opened == tally.connections_opened
    total = summed([copy, copy], url_slots(["http://a.example/"]))
    assert sum(total.backends.values()) == 2 * sum(by_backend.values())
    assert total.connections_closed == 82


def test_no_backend_series_without_a_backend_header() -> None:
    tally = MetricsTally(url_slots(["http://a.example/"]), Closed())
    tally.record(answer("pod-a", connected=True))
    samples = scraped(tally)
    assert "soak_backend_responses_total" not in samples
    assert samples["soak_connections_opened_total"][()] == 1


# --- soak compare ------------------------------------------------------------------------------


def test_compare_shows_backends_reached_and_connections_side_by_side() -> None:
    one = load_run(summary_text("ms", backendsReached=1, connectionsOpened=7080, connectionsClosed=7075), "one.json")
    ten = load_run(summary_text("ms", backendsReached=10, connectionsOpened=7080, connectionsClosed=7078), "ten.json")
    lines = compare_text([one, ten]).splitlines()
    rows = {line.split("  ")[0]: line.split() for line in lines}
    assert rows["backends reached"][-3:] == ["1", "10", "+900.0%"]
    assert rows["connections opened"][-3:] == ["7080", "7080", "0.0%"]
    assert rows["connections closed"][-3:] == ["7075", "7078", "0.0%"]  # +0.04%, shown to a tenth
    assert "backends reached" not in compare_text([load_run(summary_text("ms"), "a"), load_run(summary_text("ms"),
                                                                                               "b")])


def test_figures_of_an_interval_say_the_same() -> None:
    tally = Tally(good=2, backends=Counter({"a": 1, "b": 1}), connections_opened=2, connections_closed=1)
    f = Figures.of(tally, 2, SECOND)
    assert (dict(f.backends), f.backends_reached, f.connections_opened, f.connections_closed) == \
        ({"a": 1, "b": 1}, 2, 2, 1)
