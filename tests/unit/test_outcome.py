"""The exit code: which one wins when several apply, and which apply to a finished run."""

from __future__ import annotations

import itertools

import pytest

from runner.config.settings import merge, settings_from
from runner.core import errors as e
from runner.core.errors import PRECEDENCE, exit_code
from runner.report.outcome import ExitCode, applying, interrupted_line, no_response_line
from runner.stats.recorder import Tally
from runner.stats.runinfo import RunInfo, RunSummary

START = 5_000_000_000_000
SECOND = 1_000_000_000


def test_precedence_holds_every_code_once_and_no_success() -> None:
    assert len(set(PRECEDENCE)) == len(PRECEDENCE) and e.EXIT_OK not in PRECEDENCE
    assert PRECEDENCE == (e.EXIT_USAGE, e.EXIT_PROXY_NOT_READY, e.EXIT_STOPPED_WAITING, e.EXIT_WORKER_FAILED,
                          e.EXIT_NO_RESPONSE, e.EXIT_THRESHOLDS, e.EXIT_INCONCLUSIVE, e.EXIT_OUTPUT,
                          e.EXIT_INTERRUPTED)


@pytest.mark.parametrize("size", range(len(PRECEDENCE) + 1))
def test_the_first_code_in_precedence_wins_for_every_combination(size: int) -> None:
    for combination in itertools.combinations(PRECEDENCE, size):
        expected = min(combination, key=PRECEDENCE.index) if combination else e.EXIT_OK
        for order in (combination, combination[::-1]):  # the order they are found in does not matter
            assert exit_code(order) == expected
            assert exit_code([*order, e.EXIT_OK, *order]) == expected  # nor success, nor repeats


@pytest.mark.parametrize(("codes", "expected"), [
    ((e.EXIT_THRESHOLDS, e.EXIT_OUTPUT), e.EXIT_THRESHOLDS),  # as before: broken thresholds win over lost output
    ((e.EXIT_WORKER_FAILED, e.EXIT_THRESHOLDS), e.EXIT_WORKER_FAILED),  # as before: the output lacks a share
    ((e.EXIT_INTERRUPTED, e.EXIT_THRESHOLDS), e.EXIT_THRESHOLDS),  # a signalled run that broke a rule: 3, as before
    ((e.EXIT_INTERRUPTED, e.EXIT_NO_RESPONSE, e.EXIT_THRESHOLDS), e.EXIT_NO_RESPONSE),
    ((e.EXIT_INTERRUPTED, e.EXIT_OUTPUT), e.EXIT_OUTPUT),  # the summary a 7 promises could not be written
    ((e.EXIT_INCONCLUSIVE, e.EXIT_INTERRUPTED, e.EXIT_OUTPUT), e.EXIT_INCONCLUSIVE),
    ((e.EXIT_INCONCLUSIVE, e.EXIT_NO_RESPONSE), e.EXIT_NO_RESPONSE),
    ((e.EXIT_USAGE, e.EXIT_OUTPUT), e.EXIT_USAGE),  # a usage error on a full stderr is still a usage error
    ((), e.EXIT_OK), ((e.EXIT_OK,), e.EXIT_OK),
])
def test_the_documented_cases(codes: tuple[int, ...], expected: int) -> None:
    assert exit_code(codes) == expected


def test_an_unknown_code_is_a_bug_not_a_silent_success() -> None:
    with pytest.raises(ValueError, match=r"not an exit code: \[1\]"):
        exit_code([1])


def summary(*, requests: int = 10, responses: int = 10, stop: str = "iterations", failed_workers: bool = False,
            config: dict | None = None) -> RunSummary:
    merged = merge({"qps": 10, "interval": "1s", "iterations": 60, **(config or {})})
    settings = settings_from({key: value for key, value in merged.items() if value is not None})
    info = RunInfo(settings, ["http://127.0.0.1/"], None, START, 1e9)
    tally = Tally(good=responses, failed=requests - responses)
    tally.errors.update({"refused": requests - responses - 1, "timeout": 1} if requests > responses else {})
    return RunSummary(info, 3, START + 12_345 * 1_000_000, START + 12_345 * 1_000_000, tally, None, None, None,
                      stop, 0.1, 0, failed_workers={1: "exited with code -9"} if failed_workers else None)


STOPS = {"iterations": None, "duration": None, "totalRequests": None, "stdout closed by its reader": None,
         "threshold interval p99 < 1ms": None, "signal SIGTERM": "SIGTERM", "signal SIGINT": "SIGINT",
         "iterations, signal SIGTERM": "SIGTERM", "duration, threshold run p99 < 1ms": None}


@pytest.mark.parametrize(("stop", "signal"), STOPS.items())
def test_only_a_signal_before_the_planned_end_is_an_interruption(stop: str, signal: str | None) -> None:
    assert summary(stop=stop).stop_signal == signal


@pytest.mark.parametrize(("requests", "responses", "unanswered"), [(0, 0, False), (1, 0, True), (10, 0, True),
                                                                   (10, 1, False), (10, 10, False)])
def test_unanswered_means_sent_and_not_one_response(requests: int, responses: int, unanswered: bool) -> None:
    assert summary(requests=requests, responses=responses).unanswered is unanswered


@pytest.mark.parametrize("verdict", [e.EXIT_OK, e.EXIT_THRESHOLDS, e.EXIT_INCONCLUSIVE])
def test_every_code_that_applies_is_found(verdict: int) -> None:
    for workers, (requests, responses), stop in itertools.product(
            (False, True), ((0, 0), (10, 0), (10, 3)), STOPS):
        run = summary(requests=requests, responses=responses, stop=stop, failed_workers=workers)
        found = dict(applying(run, verdict, "the verdict's line"))
        expected = {e.EXIT_WORKER_FAILED} if workers else set()
        expected |= {e.EXIT_NO_RESPONSE} if requests and not responses else set()
        expected |= {verdict} - {e.EXIT_OK}
        expected |= {e.EXIT_INTERRUPTED} if STOPS[stop] else set()
        assert set(found) == expected, (workers, requests, responses, stop)
        assert found.get(e.EXIT_WORKER_FAILED, "") == ""  # the worker's own line said it
        if verdict in found:
            assert found[verdict] == "the verdict's line"


def test_the_lines() -> None:
    assert no_response_line(summary(responses=0)) == "no response at all: 10 requests sent, none answered " \
                                                     "(refused 9, timeout 1)"
    assert no_response_line(summary(requests=1, responses=0)) == "no response at all: 1 request sent, none answered " \
                                                                 "(timeout 1)"
    assert interrupted_line(summary(stop="signal SIGTERM")) == (
        "stopped by SIGTERM before its planned end, after 12.345s of 1m0s: the results cover only that")
    counted = summary(stop="signal SIGINT", config={"totalRequests": 1000, "iterations": None})
    assert interrupted_line(counted) == ("stopped by SIGINT before its planned end, after 10 of 1000 requests: "
                                         "the results cover only that")


def test_the_reporter_says_why_once_and_names_the_code_that_won() -> None:
    said: list[str] = []
    reporter = ExitCode(said.append)
    reporter.finish(summary(responses=0, stop="signal SIGTERM"))
    assert reporter.code == e.EXIT_NO_RESPONSE
    assert said == ["stopped by SIGTERM before its planned end, after 12.345s of 1m0s: the results cover only that",
                    "no response at all: 10 requests sent, none answered (refused 9, timeout 1) (exit code 8)"]
    said.clear()
    quiet = ExitCode(said.append)
    quiet.finish(summary())
    assert quiet.code == e.EXIT_OK and said == []


def test_the_termination_message_gets_the_codes_own_line_first() -> None:
    """What the reporter said, for the termination message: the winner's line first (without its
    `(exit code N)`: the message's head says the code), then the others; "" when another line,
    the verdict's, says the winner."""
    reporter = ExitCode(lambda line: None)
    reporter.finish(summary(responses=0, stop="signal SIGTERM"))
    assert reporter.said == ["no response at all: 10 requests sent, none answered (refused 9, timeout 1)",
                             "stopped by SIGTERM before its planned end, after 12.345s of 1m0s: the results cover only that"]
    quiet = ExitCode(lambda line: None)
    quiet.finish(summary())
    assert quiet.said == [""]


def test_a_code_known_beforehand_takes_its_place_in_the_precedence() -> None:
    """`soak merge` with a shard missing (5, said by its own line) and another stopped by a signal:
    5 wins, and the signal's line does not claim to be the exit code."""
    said: list[str] = []
    reporter = ExitCode(said.append, also=[e.EXIT_SHARD_MISSING])
    reporter.finish(summary(stop="iterations, signal SIGTERM"))
    assert reporter.code == e.EXIT_SHARD_MISSING
    assert said == ["stopped by SIGTERM before its planned end, after 12.345s of 1m0s: the results cover only that"]
    alone = ExitCode(said.append, also=[e.EXIT_SHARD_MISSING])
    alone.finish(summary())
    assert alone.code == e.EXIT_SHARD_MISSING


def test_lost_output_takes_its_place_in_the_precedence_and_the_signals_line_names_no_code() -> None:
    """A run stopped by SIGTERM whose CSV could not be written exits 6 (its own line said why): its
    last line said `... (exit code 7)`."""
    said: list[str] = []
    reporter = ExitCode(said.append, output_lost=lambda: True)
    reporter.finish(summary(stop="signal SIGTERM"))
    assert reporter.code == e.EXIT_OUTPUT
    assert said == ["stopped by SIGTERM before its planned end, after 12.345s of 1m0s: the results cover only that"]
    assert reporter.said == ["", said[0]]
    said.clear()
    broken = ExitCode(said.append, output_lost=lambda: True)
    broken.finish(summary(responses=0, stop="signal SIGTERM"))  # a code above 6 still wins, and says so
    assert broken.code == e.EXIT_NO_RESPONSE and said[-1].endswith(" (exit code 8)")
