"""Stages, warm-up and the capacity search as settings: the file's and the flags' forms, what is
refused (one line naming the fields), and what validate says of them."""

from __future__ import annotations

import argparse
from typing import Any

import pytest

from runner.config.flags import add_source_arguments, settings_of
from runner.config.settings import Settings, merge, settings_from
from runner.core.errors import UsageError
from runner.core.units import NS_PER_S
from runner.load.model import ramp_of, schedule_of, warmup_rate
from runner.load.shards import ALONE
from runner.report.plan import describe

URL = "http://127.0.0.1:8080/"


def from_flags(*argv: str, below: dict[str, Any] | None = None) -> Settings:
    parser = argparse.ArgumentParser()
    add_source_arguments(parser)
    return settings_of(parser.parse_args([*argv, URL]), *([below] if below else []))


def refusal(layer: dict[str, Any]) -> str:
    with pytest.raises(UsageError) as caught:
        settings_from(merge(layer))
    return str(caught.value)


def test_the_flag_and_the_file_make_the_same_stages() -> None:
    flags = from_flags("--stages", "2m:100, 55m:100,2m:0")
    file = settings_from(merge({"stages": [{"duration": "2m", "qps": 100}, {"duration": "55m", "qps": 100},
                                           {"duration": "2m", "qps": 0}]}))
    assert flags.pace.stages == file.pace.stages == ((120 * NS_PER_S, 100), (3300 * NS_PER_S, 100), (120 * NS_PER_S, 0))
    # The run lasts the stages' sum: the default 60 iterations no longer apply.
    assert flags.pace.run_ns == 59 * 60 * NS_PER_S and flags.pace.iterations == 0
    assert flags.pace.qps == 100  # their peak
    ramp = ramp_of(flags.pace)
    assert ramp is not None and ramp.total == 6000 + 330_000 + 6000


def test_stages_from_flags_keep_the_files_other_settings() -> None:
    settings = from_flags("--stages", "1s:7.5", below={"qps": 3, "iterations": 2, "interval": "500ms"})
    assert settings.pace.stages == ((NS_PER_S, 7.5),)
    assert settings.pace.run_ns == NS_PER_S


@pytest.mark.parametrize(("argv", "message"), [
    (["--stages", "2m"], '--stages: "2m" is not allowed; each stage must be DURATION:QPS, like 2m:100,55m:100,2m:0'),
    (["--stages", ":100"], '--stages: ":100" is not allowed; each stage must be DURATION:QPS, like 2m:100,55m:100,2m:0'),
    (["--stages", ","], "--stages: no stage given; each stage must be DURATION:QPS, like 2m:100,55m:100,2m:0"),
    (["--stages", "2m:fast"], '--stages: "fast" is not allowed; must be a number'),
    (["--stages", "2m:-1"], "--stages: -1 is not allowed; must be at least 0"),
    (["--stages", "0s:10"], '--stages: "0s" is not allowed; must be a duration like 500ms, 10s, 1m or 1m30s, greater than 0'),
    (["--stages", "2m:0,1m:0"], "stages: every stage's qps is 0; at least one must be above 0, or nothing is sent"),
])
def test_bad_stages_on_the_command_line_are_one_line(argv: list[str], message: str) -> None:
    with pytest.raises(UsageError) as caught:
        from_flags(*argv)
    assert str(caught.value) == message


def test_a_bench_refuses_stages_and_a_warmup() -> None:
    assert refusal({"mode": "bench", "stages": [{"duration": "1s", "qps": 5}]}) == (
        "stages: not allowed with mode bench (a bench sends as fast as it can: no rate to ramp)")
    assert refusal({"mode": "bench", "warmup": "5s"}) == (
        "warmup: 5s is not allowed with mode bench (a bench has no rate to warm up)")


def test_iterations_or_a_duration_beside_stages_must_agree() -> None:
    stages = [{"duration": "30s", "qps": 10}, {"duration": "30s", "qps": 10}]
    assert settings_from(merge({"stages": stages, "iterations": 6, "interval": "10s"})).pace.run_ns == 60 * NS_PER_S
    assert settings_from(merge({"stages": stages, "duration": "1m"})).pace.run_ns == 60 * NS_PER_S
    assert refusal({"stages": stages, "iterations": 5, "interval": "10s"}) == (
        "stages and iterations: the stages last 1m0s in all, iterations 5 of interval 10s make 50s; give one of "
        "them, or make them agree")
    assert refusal({"stages": stages, "duration": "2m"}) == (
        "stages and duration: the stages last 1m0s in all, duration says 2m; give one of them, or make them agree")
    # A later layer naming iterations is held against the stages of the layer below, not quietly preferred.
    with pytest.raises(UsageError, match="^stages and iterations: "):
        from_flags("--iterations", "3", below={"stages": stages})


def test_a_warmup_at_the_first_stages_rate() -> None:
    settings = from_flags("--warmup", "30s", "--stages", "1m:40,1m:80")
    assert settings.pace.warmup_ns == 30 * NS_PER_S and warmup_rate(settings.pace) == 40
    assert warmup_rate(from_flags("--qps", "7").pace) == 7
    assert from_flags().pace.warmup_ns == 0
    assert refusal({"warmup": "5s", "stages": [{"duration": "1s", "qps": 0}, {"duration": "1s", "qps": 5}]}) == (
        "warmup: 5s is not allowed when the first stage's qps is 0: the warm-up sends at the first stage's target")
    assert settings_from(merge({"warmup": "5s", "workers": 2})).pace.warmup_ns == 5 * NS_PER_S  # each worker its share


def test_the_capacity_search_needs_interval_rules() -> None:
    assert refusal({"stopAtBrokenRule": True}) == (
        "stopAtBrokenRule: true needs intervalThresholds, the rules whose first break stops the run")
    assert settings_from(merge({"stopAtBrokenRule": True, "intervalThresholds": ["p99 < 1s"]})).thresholds.stop_at_broken


def test_validate_prints_the_plan_of_the_stages() -> None:
    settings = from_flags("--stages", "2s:10,1s:10,1s:0", "--interval", "1s", "--warmup", "2s")
    lines = describe(settings, [URL], {})
    assert lines[:6] == [
        "would send up to 10 GET req/s in 3 stages (closed model: 5 clients at up to 2 req/s each, one request in "
        "flight per client), each ramping linearly from the one before (the first from 0):",
        "  stage 1: 0 -> 10 req/s over 2s (10 requests)",
        "  stage 2: 10 req/s for 1s (10 requests)",
        "  stage 3: 10 -> 0 req/s over 1s (5 requests)",
        f"  to {URL}",
        "for 4s (the stages' sum), one line every 1s, 25 requests in all",
    ]
    assert lines[6] == ('first warms up for 2s at 10 req/s: its lines marked "# warmup", its results reported apart '
                        "(the summary's warmup), never judged")
    assert schedule_of(settings.pace, ALONE, 0).planned_sends() == 25
