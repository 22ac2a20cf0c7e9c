"""The verdict as JUnit XML: read back with a JUnit reader, and held to a JUnit schema.

A CI system reads the file, not our lines: so each document here is parsed with junitparser
(as CI plugins read JUnit XML) and validated with xmlschema against junit-10.xsd, the schema
of Jenkins' xUnit plugin for JUnit results (tests/support/junit-10.xsd, MIT, Copyright (c)
2014 Gregory Boissinot: the copy pytest's own sdist ships as testing/example_scripts/junit-10.xsd
and validates its --junitxml output against; unchanged). The cases are built from Outcome
records as the verdict makes them, never from its lines.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path

import pytest
import xmlschema
from junitparser import Error, Failure, JUnitXml, Skipped, TestCase

from runner.config.rules import parse_rule
from runner.core.errors import EXIT_INTERRUPTED, EXIT_NO_RESPONSE, EXIT_WORKER_FAILED
from runner.report.junit import RUN_CASE, RunError, Suite, cases, junit_xml
from runner.report.verdict import Outcome

SCHEMA = Path(__file__).resolve().parents[1] / "support" / "junit-10.xsd"
MS = 1_000_000


@cache
def schema() -> xmlschema.XMLSchema:
    return xmlschema.XMLSchema(SCHEMA)


def parsed(tmp_path: Path, text: str) -> list[TestCase]:
    """The document's test cases as a JUnit reader sees them, once the schema has accepted it."""
    schema().validate(text)
    path = tmp_path / "junit.xml"
    path.write_text(text, encoding="utf-8")
    (suite,) = JUnitXml.fromfile(str(path))
    return list(suite)


def four_rules() -> list[Outcome]:
    """2 kept, 1 broken, 1 inconclusive, as a run's verdict has them."""
    return [
        Outcome(parse_rule("p99 < 50ms"), True, 12.3 * MS),
        Outcome(parse_rule("p99{url=/checkout} < 200ms"), True, 40 * MS),
        Outcome(parse_rule("connect.p99 < 1ms"), False, 3.5 * MS),
        Outcome(parse_rule("goal% >= 50", "interval"), False, 0.0, worst=7, judged=16, broken=(6, 7, 8),
                inconclusive=True),
    ]


def test_two_kept_one_broken_one_inconclusive_are_exactly_four_cases(tmp_path: Path) -> None:
    found = parsed(tmp_path, junit_xml(Suite(cases(four_rules(), []), timestamp="2026-12-01T10:00:00.000Z", seconds=60.0)))
    assert [case.name for case in found] == ["run p99 < 50ms", "run p99{url=/checkout} < 200ms",
                                             "run connect.p99 < 1ms", "interval goal% >= 50"]
    assert [case.classname for case in found] == ["soak.thresholds"] * 4
    assert [case.is_passed for case in found] == [True, True, False, False]
    (failure,) = found[2].result
    assert isinstance(failure, Failure) and failure.message == "broken: measured 3.5ms"
    (skipped,) = found[3].result
    assert isinstance(skipped, Skipped)
    assert skipped.message.startswith("inconclusive: broken only where the client's own delay may have changed its figure (worst 0% "
                                      "(interval 7)")


def test_the_suite_counts_what_its_cases_are(tmp_path: Path) -> None:
    text = junit_xml(Suite(cases(four_rules(), []), timestamp="2026-12-01T10:00:00.000Z", seconds=3599.9996,
                           properties=(("exitCode", "3"),)))
    schema().validate(text)
    path = tmp_path / "junit.xml"
    path.write_text(text)
    (suite,) = JUnitXml.fromfile(str(path))
    assert (suite.tests, suite.failures, suite.errors, suite.skipped) == (4, 1, 0, 1)
    assert suite.time == 3600.0 and suite.timestamp == "2026-12-01T10:00:00.000Z"
    assert {p.name: p.value for p in suite.properties()} == {"exitCode": "3"}


def test_an_inconclusive_run_rule_says_what_it_measured_where_the_client_kept_pace(tmp_path: Path) -> None:
    outcome = Outcome(parse_rule("p99 < 50ms"), False, 80 * MS, inconclusive=True, kept=20 * MS)
    (case,) = parsed(tmp_path, junit_xml(Suite(cases([outcome], []))))
    (skipped,) = case.result
    assert skipped.message == ("inconclusive: broken only where the client's own delay may have changed its figure (measured 80ms; "
                               "20ms where it kept pace): this says nothing of the service")


def test_a_broken_interval_rule_lists_the_intervals_it_broke_in(tmp_path: Path) -> None:
    outcome = Outcome(parse_rule("p99 < 10ms", "interval"), False, 30 * MS, worst=4, judged=20,
                      broken=tuple(range(2, 14)))
    (case,) = parsed(tmp_path, junit_xml(Suite(cases([outcome], []))))
    (failure,) = case.result
    assert failure.message == "broken: worst 30ms (interval 4)"
    assert failure.text == ("interval p99 < 10ms: broken: worst 30ms (interval 4), broken in 12 of 20 intervals "
                            "(2, 3, 4, 5, 6, 7, 8, 9, 10, 11, ...)")


@pytest.mark.parametrize("code", [EXIT_WORKER_FAILED, EXIT_INTERRUPTED, EXIT_NO_RESPONSE])
def test_a_run_that_went_wrong_is_an_error_case_beside_its_rules(tmp_path: Path, code: int) -> None:
    reason = f"what went wrong ({code})"
    found = parsed(tmp_path, junit_xml(Suite(cases(four_rules(), [RunError(code, reason)]))))
    assert [case.name for case in found][-1] == RUN_CASE and len(found) == 5
    (error,) = found[-1].result
    assert isinstance(error, Error) and error.message == reason
    assert f"exit code {code}: {reason}" in error.text


def test_several_errors_are_one_case_that_says_each(tmp_path: Path) -> None:
    errors = [RunError(EXIT_NO_RESPONSE, "no response at all"), RunError(EXIT_INTERRUPTED, "stopped by SIGTERM")]
    (case,) = parsed(tmp_path, junit_xml(Suite(cases([], errors))))
    (error,) = case.result
    assert error.message == "no response at all; stopped by SIGTERM"


def test_a_run_without_rules_is_one_passing_case(tmp_path: Path) -> None:
    (case,) = parsed(tmp_path, junit_xml(Suite(cases([], []))))
    assert case.name == RUN_CASE and case.is_passed and not case.is_skipped


def test_what_xml_cannot_hold_is_replaced_and_the_rest_escaped(tmp_path: Path) -> None:
    """A URL scope holds whatever the user wrote: markup is escaped, control characters (which no
    XML 1.0 document may hold, escaped or not) are replaced, and the file still reads."""
    rule = parse_rule("""p99{url='/a"><script>x</script>&amp;'} < 200ms""")
    outcome = Outcome(rule, False, 300 * MS)
    text = junit_xml(Suite(cases([outcome], [RunError(EXIT_INTERRUPTED, "bad\x00\x1b[31m\ud800 bytes")])))
    assert "<script>" not in text
    found = parsed(tmp_path, text)
    assert found[0].name == """run p99{url='/a"><script>x</script>&amp;'} < 200ms"""
    (error,) = found[1].result
    assert error.message == "bad\ufffd\ufffd[31m\ufffd bytes"


def test_a_url_scope_s_password_is_hidden_as_on_stdout(tmp_path: Path) -> None:
    rule = parse_rule("p99{url=http://user:hunter2@127.0.0.1/} < 200ms")
    text = junit_xml(Suite(cases([Outcome(rule, True, MS)], [])))
    assert "hunter2" not in text
    (case,) = parsed(tmp_path, text)
    assert "user:" in case.name
