"""The HTML report's page from runs read back: what it says, that it escapes every text of a log,
and that no damage to a summary raises. (tests/integration/test_report_cli.py opens it in Chromium.)"""

from __future__ import annotations

import copy
import json
from html.parser import HTMLParser
from typing import Any

import pytest

from runner.readback.reportview import distribution, judgement, junit_suite, run_view
from runner.readback.results import load_run
from runner.report.htmlreport import page, run_ticks
from runner.report.svgchart import linear_ticks, log_ticks
from tests.support.runlogs import histogram_of

HOSTILE = '<script>alert(1)</script>"\'><img src=x onerror=alert(2)>&amp;'
LINES = "".join(f"2026-12-01T10:00:{i:02d}Z {i:4d}    100/0/0 100 100% 1s   0 [  1   2   3    4 ]    5      0\n"
                for i in range(1, 4))


def summary(**changes: Any) -> dict[str, Any]:
    data: dict[str, Any] = {
        "p50": 1.0, "p99": 3.0, "latencyUnit": "ms", "requests": 300, "good": 300, "bad": 0, "failed": 0,
        "goalPercent": 100, "start": "2026-12-01T10:00:00.000Z", "stopReason": "iterations", "intervals": 3,
        "statusCodes": {"200": 300}, "errors": {},
        "histogram": {"unit": "ns", "hdr": histogram_of([1_000_000 + i * 1000 for i in range(300)])},
        "thresholds": {"passed": True, "inconclusive": False, "stoppedEarly": None, "rules": [
            {"rule": "p99 < 50ms", "scope": "run", "measured": 3.0, "unit": "ms", "ok": True, "inconclusive": False}]},
    }
    data.update(changes)
    return data


def log_of(data: dict[str, Any] | None) -> str:
    return LINES + ("" if data is None else json.dumps(data, indent=2) + "\n")


class Tags(HTMLParser):
    def __init__(self, html: str) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.feed(html)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))


def assert_inert(html: str) -> None:
    tags = Tags(html).tags
    assert {tag for tag, _ in tags} <= {"html", "head", "meta", "title", "style", "body", "main", "footer", "code",
                                        "section", "p", "span", "h1", "h2", "h3", "dl", "div", "dt", "dd", "figure",
                                        "svg", "text", "g", "line", "polyline", "circle", "rect", "table",
                                        "thead", "tbody", "tr", "th", "td", "ul", "li", "details", "summary"}
    assert not [(tag, a) for tag, attributes in tags for a in attributes
                if a.startswith("on") or a in ("src", "href", "xlink:href", "action", "srcset")]


def view_html(text: str, source: str = "run.log") -> str:
    return page([run_view(load_run(text, source))], source)


def test_the_verdict_comes_first_with_each_rule_and_its_value() -> None:
    html = view_html(log_of(summary()))
    assert_inert(html)
    assert html.index("Passed") < html.index("The run") < html.index("Intervals") < html.index("Latency by percentile")
    assert "<td>p99 &lt; 50ms</td><td>measured 3ms</td>" in html


def test_every_text_from_a_log_is_escaped() -> None:
    data = summary(start=HOSTILE, stopReason=HOSTILE, statusCodes={HOSTILE: 1}, errors={HOSTILE: 2},
                   backends={HOSTILE: 3}, backendsReached=1, perUrl=[{"url": HOSTILE, "requests": 1}],
                   phases={HOSTILE: {"count": 1, "min": 0.5}}, failedWorkers={"1": HOSTILE},
                   shards={"count": 2, "missing": [1], "incomplete": []},
                   thresholds={"passed": False, "stoppedEarly": HOSTILE,
                               "rules": [{"rule": HOSTILE, "scope": "run", "ok": False}]})
    html = view_html(log_of(data), source=HOSTILE)
    assert_inert(html)
    assert "<script>" not in html and "<img" not in html
    assert html.count("&lt;script&gt;alert(1)&lt;/script&gt;&quot;&#x27;&gt;&lt;img src=x onerror=alert(2)&gt;"
                      "&amp;amp;") >= 10


@pytest.mark.parametrize("key", ["start", "stopReason", "statusCodes", "errors", "backends", "perUrl", "phases",
                                 "failedWorkers", "shards", "thresholds", "histogram", "requests", "client",
                                 "intervals", "intervalStats", "goalPercent", "latencyUnit"])
@pytest.mark.parametrize("value", [None, 1, -1, 1e308, "x", True, [], [None, 1, "x", {}], {}, {"a": None},
                                   {"rules": [1, None, {"rule": 1}, {"rule": "p99 < 1ms", "scope": "day"}]},
                                   {"count": "x", "missing": ["1", None], "hdr": "not base64!"}])
def test_a_damaged_summary_never_raises(key: str, value: Any) -> None:
    data = summary()
    data[key] = copy.deepcopy(value)
    assert_inert(view_html(log_of(data)))


def test_unreadable_threshold_records_are_said_and_make_no_pass() -> None:
    data = summary(thresholds={"passed": True, "rules": [{"rule": "p99 <", "scope": "run", "ok": True}, "x"]})
    j = judgement(data)
    assert j.word == "error" and j.code == 3
    assert j.unreadable[0].startswith("thresholds.rules[0]: p99 <: must be a metric")
    assert j.unreadable[1] == "thresholds.rules[1]: not a rule's record"


@pytest.mark.parametrize(("changes", "code", "word"), [
    ({}, 0, "passed"),
    ({"good": 0, "bad": 0, "failed": 300}, 8, "error"),
    ({"stopReason": "iterations, signal SIGTERM"}, 7, "error"),
    ({"failedWorkers": {"1": "exited with code -9"}}, 5, "error"),
    ({"shards": {"count": 3, "missing": [2], "incomplete": []}}, 5, "error"),
    ({"thresholds": {"rules": [{"rule": "p99 < 1ms", "scope": "run", "ok": False, "inconclusive": False,
                                "measured": 3, "unit": "ms"}]}}, 3, "broken"),
    ({"thresholds": {"rules": [{"rule": "goal% >= 99", "scope": "interval", "ok": False, "inconclusive": True,
                                "measured": 50, "unit": "%", "brokenIntervals": [1]}]}}, 9, "inconclusive"),
])
def test_the_exit_code_is_the_run_s_from_its_summary(changes: dict[str, Any], code: int, word: str) -> None:
    j = judgement(summary(**changes))
    assert (j.code, j.word) == (code, word)


def test_a_log_without_a_summary_has_no_verdict_and_says_so() -> None:
    html = view_html(log_of(None))
    assert "No verdict in the file" in html and "No readable HDR histogram" in html
    assert judgement(None).code is None


def test_a_log_without_a_summary_is_a_junit_error_not_a_pass() -> None:
    run = load_run(log_of(None), "cut.log")
    (case,) = junit_suite(run, run_view(run)).cases
    assert (case.name, case.kind) == ("run", "error") and "no verdict to read" in case.message


def test_the_junit_suite_of_a_read_back_run_is_its_verdict() -> None:
    rules = [{"rule": "p99 < 1ms", "scope": "run", "ok": False, "inconclusive": False, "measured": 3, "unit": "ms"},
             {"rule": "goal% >= 99", "scope": "interval", "ok": False, "inconclusive": True, "measured": 50,
              "unit": "%", "worstInterval": 1, "judgedIntervals": 3, "brokenIntervals": [1]}]
    run = load_run(log_of(summary(thresholds={"rules": rules}, stopReason="signal SIGTERM")), "a.log")
    suite = junit_suite(run, run_view(run))
    assert [(c.name, c.kind, c.message) for c in suite.cases] == [
        ("run p99 < 1ms", "failure", "broken: measured 3ms"),
        ("interval goal% >= 99", "skipped", "inconclusive: broken only where the client's own delay may have changed its figure (worst "
                                           "50% (interval 1)): this says nothing of the service"),
        ("run", "error", "stopped by SIGTERM before its planned end: the results cover only that")]
    assert dict(suite.properties)["exitCode"] == "3" and suite.name == "a.log"


def test_the_distribution_is_the_histogram_s_exact_percentiles() -> None:
    points = distribution(summary())
    assert points[0] == (0.0, pytest.approx(1_000_000, rel=0.001))
    assert points[10][0] == pytest.approx(90.0)  # NINES_STEPS points a nine: 90% is the tenth
    assert points[-1][1] == pytest.approx(1_299_000, rel=0.001)  # the max, last
    assert [q for q, _ in points] == sorted(q for q, _ in points)


def test_a_range_shows_the_trend_and_each_run() -> None:
    runs = [run_view(load_run(log_of(summary(start=f"2026-12-0{day}T10:00:00.000Z", p99=float(day))),
                              f"day-{day}.log")) for day in range(1, 8)]
    html = page(runs, "a week")
    assert_inert(html)
    assert "7 runs: 7 passed" in html and html.count("<details") == 7
    assert run_ticks(runs) == [f"12-0{day}" for day in range(1, 8)]


def test_ticks_cover_the_values_with_round_steps() -> None:
    assert linear_ticks(0, 100) == [0, 20, 40, 60, 80, 100]
    assert linear_ticks(0, 7) == [0, 2, 4, 6, 8]
    assert log_ticks(1.5e5, 9e7) == [1e5, 1e6, 1e7, 1e8]
    assert log_ticks(150, 900) == [100, 200, 500, 1000]
