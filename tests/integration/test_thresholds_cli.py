"""Thresholds from the command line and the config file, in real runs against nginx and a faulty server.

What a Job's operator relies on: the verdict lines before the summary, the summary's section,
exit code 3 when a threshold is broken (0 when all hold; 7 when they hold but a signal cut the
run short), a bad rule refused in
one line with exit 2 before anything is sent, and a run that stops itself, exactly as after a
SIGTERM, once its verdict is certain.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import time
from pathlib import Path

import pytest

from runner.core.errors import EXIT_INTERRUPTED, EXIT_NO_RESPONSE, EXIT_OK, EXIT_THRESHOLDS, EXIT_USAGE
from runner.readback.results import load_run
from tests.conftest import Nginx, assert_counts_add_up, parse_interval, run_soak, soak_command
from tests.support.faultserver import FaultServer, refused_port
from tests.support.liverun import LONG_RUN, LiveRun

SHORT = ("--qps", "100", "--concurrency", "4", "--interval", "500ms", "--iterations", "3")


def verdict_lines(stdout: str) -> list[str]:
    """The `# threshold` lines, checked to come together, after the last interval line and before the
    summary (and before ab's report, in a bench)."""
    lines = stdout.splitlines()
    found = [i for i, line in enumerate(lines) if line.startswith("# threshold")]
    assert found, f"no threshold lines:\n{stdout}"
    assert found == list(range(found[0], found[-1] + 1))
    assert all(found[0] > i for i, line in enumerate(lines) if line[:1].isdigit())
    after = lines[found[-1] + 1] if found[-1] + 1 < len(lines) else ""
    assert after in ("", "{") or after.startswith("Server Software:"), after
    return [lines[i] for i in found]


def test_a_healthy_run_passes_and_exits_0(nginx: Nginx) -> None:
    run = run_soak(*SHORT, "--thresholds", "p99 < 1s, goal% >= 90, errors% <= 0, rate >= 90",
                   "--intervalThresholds", "p999 < 2s", "--intervalThresholds", "failed% <= 0", nginx.url)
    assert run.returncode == EXIT_OK, run.stderr
    summary = assert_counts_add_up(run.stdout)  # the verdict lines are comments: the accounting still holds
    lines = verdict_lines(run.stdout)
    assert len(lines) == 7 and lines[-1] == "# thresholds: all 6 ok"
    # the value in the unit that shows it, not the rule's: `2.913ms`, never `0.003s`
    assert re.fullmatch(r"# threshold run p99 < 1s: [1-9]\d{0,2}(\.\d{1,3})?(ms|us) ok", lines[0]), lines[0]
    assert lines[4].startswith("# threshold interval p999 < 2s: worst ")
    section = summary["thresholds"]
    assert section["passed"] is True and section["stoppedEarly"] is None
    assert [(r["rule"], r["scope"], r["ok"]) for r in section["rules"]] == [
        ("p99 < 1s", "run", True), ("goal% >= 90", "run", True), ("errors% <= 0", "run", True),
        ("rate >= 90", "run", True), ("p999 < 2s", "interval", True), ("failed% <= 0", "interval", True),
    ]
    assert section["rules"][4]["judgedIntervals"] == summary["intervals"]
    assert section["rules"][3]["measured"] == pytest.approx(summary["rate"]["achieved"], rel=1e-3)
    assert run.stderr == ""


def test_a_broken_threshold_exits_3_from_the_config_file(nginx: Nginx, tmp_path: Path) -> None:
    config = tmp_path / "configuration.json"
    config.write_text(json.dumps({"qps": 100, "interval": "500ms", "iterations": 2,
                                  "thresholds": ["p50 < 1ns", "errors% <= 0"],
                                  "intervalThresholds": ["max < 1ns"]}))
    run = run_soak("--config", str(config), nginx.url)
    assert run.returncode == EXIT_THRESHOLDS, run.stderr
    lines = verdict_lines(run.stdout)
    assert re.fullmatch(r"# threshold run p50 < 1ns: [1-9]\d{0,2}(\.\d{1,3})?(ms|us) BROKEN", lines[0]), lines[0]
    assert lines[1] == "# threshold run errors% <= 0: 0% ok"
    assert lines[2].endswith("broken in 2 of 2 intervals (0, 1) BROKEN")
    assert lines[3] == "# thresholds: 2 of 3 broken"
    summary = assert_counts_add_up(run.stdout)
    assert summary["thresholds"]["passed"] is False
    assert summary["thresholds"]["rules"][2]["brokenIntervals"] == [0, 1]
    assert summary["stopReason"] == "iterations"  # judged at the end: nothing stopped it


@pytest.mark.parametrize("workers", ["1", "2"])
def test_stops_early_once_an_interval_threshold_breaks(nginx: Nginx, workers: str) -> None:
    """A run of ten minutes stops itself after its first interval: exit 3, everything printed once.
    With workers too, whose run said 'signal SIGTERM' (the parent stopped itself by a signal)."""
    started = time.monotonic()
    run = run_soak("--qps", "50", *LONG_RUN, "--intervalThresholds", "p50 < 1ns", "--abortOnThreshold",
                   "--workers", workers, nginx.url, timeout=30)
    assert time.monotonic() - started < 10
    assert run.returncode == EXIT_THRESHOLDS, run.stderr
    summary = assert_counts_add_up(run.stdout)  # one summary, last, and the lines add up
    assert summary["stopReason"] == "threshold interval p50 < 1ns"
    assert summary["thresholds"]["stoppedEarly"] == "interval p50 < 1ns broken in interval 0"
    intervals = [parse_interval(line) for line in run.stdout.splitlines() if line[:1].isdigit()]
    assert len(intervals) == 2 and intervals[0].interval == "1s"  # the last one cut short, as after a signal
    assert verdict_lines(run.stdout)[-1] == (
        "# thresholds: 1 of 1 broken; stopped early: interval p50 < 1ns broken in interval 0")
    assert run.stdout.count('"stopReason"') == 1


def test_stops_early_once_the_runs_errors_cannot_stay_under_the_limit() -> None:
    """Every send refused: after the first of ten intervals, 1% errors over the run is out of reach. Not
    one response came back, which says more than the broken rule: exit 8 (runner.core.errors)."""
    blocker = refused_port()
    try:
        url = f"http://127.0.0.1:{blocker.getsockname()[1]}/"
        run = run_soak("--qps", "20", "--interval", "1s", "--iterations", "10", "--thresholds", "errors% <= 1",
                       "--abortOnThreshold", url, timeout=30)
    finally:
        blocker.close()
    assert run.returncode == EXIT_NO_RESPONSE, run.stderr
    summary = assert_counts_add_up(run.stdout)
    assert summary["stopReason"] == "threshold run errors% <= 1"
    assert summary["thresholds"]["stoppedEarly"] == "run errors% <= 1 can no longer hold after interval 0"
    assert summary["failed"] == summary["requests"] > 0 and summary["intervals"] == 2
    assert verdict_lines(run.stdout)[0] == "# threshold run errors% <= 1: 100% BROKEN"


def test_does_not_stop_a_run_that_can_still_pass(fault_server: FaultServer) -> None:
    """5% of sends fail; errors% <= 10 can hold to the end, so the run is not stopped early."""
    urls = [fault_server.url("/ok")] * 19 + [fault_server.url("/status/503")]
    run = run_soak("--qps", "100", "--concurrency", "4", "--interval", "500ms", "--iterations", "3",
                   "--thresholds", "errors% <= 10, bad% >= 4", "--abortOnThreshold", *urls)
    assert run.returncode == EXIT_OK, run.stdout + run.stderr
    summary = assert_counts_add_up(run.stdout)
    assert summary["stopReason"] == "iterations" and summary["thresholds"]["stoppedEarly"] is None
    assert summary["bad"] == fault_server.seen("/status/503") > 0


@pytest.mark.parametrize(("rule", "code"), [("errors% <= 0", EXIT_INTERRUPTED), ("p50 < 1ns", EXIT_THRESHOLDS)])
def test_after_sigterm_the_exit_code_is_the_verdicts(nginx: Nginx, rule: str, code: int) -> None:
    """A signal ends a run cleanly, with 7 (it was 0: a run cut short passed); a broken threshold makes
    it 3, which says more: the service broke a rule in what did run."""
    with LiveRun("--qps", "50", *LONG_RUN, "--thresholds", rule, nginx.url) as live:
        live.wait_for_first_interval()
        live.wait(live.send(signal.SIGTERM))
    assert live.process.returncode == code, live.stderr
    summary = assert_counts_add_up(live.stdout)
    assert summary["stopReason"] == "signal SIGTERM"
    assert summary["thresholds"]["passed"] is (code == EXIT_INTERRUPTED)


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (("--thresholds", "p99 < 50"),
         'soak: --thresholds: "p99 < 50" is not allowed; p99 is a latency: give its unit, ns, us, ms or s, '
         'like "p99 < 50ms"'),
        (("--intervalThresholds", "goal% >= 99, latency < 5ms"),
         'soak: --intervalThresholds: "latency < 5ms" is not allowed; unknown metric "latency": the metrics are '
         "p50 p75 p90 p95 p99 p999 max mean (latencies), goal% errors% failed% bad% skipped% (percentages of the "
         "sends), 2xx% 3xx% 4xx% 5xx% or one status like 401% (percentages of the responses), rate (req/s) or "
         "backends (how many answered)"),
        (("--abortOnThreshold", "--thresholds", "goal% = 99"),
         'soak: --thresholds: "goal% = 99" is not allowed; the comparison must be <, <=, >, >= or == (== only for a '
         'percentage at 0 or 100: "5xx% == 0"), like "p99 < 50ms", "goal% >= 99" or "errors% <= 0.1"'),
        (("--thresholds", "4xx <= 1"),
         'soak: --thresholds: "4xx <= 1" is not allowed; 4xx without % could be a count or a percentage; rules '
         'measure percentages of the responses: write "4xx% <= 1"'),
        (("--intervalThresholds", "p99 == 50ms"),
         'soak: --intervalThresholds: "p99 == 50ms" is not allowed; p99 is measured, never exactly one value: use <, '
         '<=, > or >= (== is for a percentage at 0 or 100, like "5xx% == 0")'),
    ],
)
def test_a_bad_rule_is_one_line_and_exit_2_before_anything_is_sent(nginx: Nginx, args: tuple[str, ...],
                                                                    says: str) -> None:
    before = nginx.requests_logged()
    run = run_soak(*SHORT, *args, nginx.url)
    assert run.returncode == EXIT_USAGE
    assert run.stderr.splitlines() == [says] and run.stdout == ""
    time.sleep(0.2)
    assert nginx.requests_logged() == before


def test_a_bad_rule_in_the_config_file_names_the_file_and_the_rule(tmp_path: Path) -> None:
    config = tmp_path / "configuration.json"
    config.write_text(json.dumps({"thresholds": ["p99 < 50ms", "errors <= 0.1ms"]}))
    run = run_soak("validate", "--config", str(config), "http://127.0.0.1:1/")
    assert run.returncode == EXIT_USAGE
    assert run.stderr == (f'soak: {config}: $.thresholds[1]: "errors <= 0.1ms" is not allowed; errors% is a '
                          'percentage: write a number like "errors% <= 0.1" or "errors% <= 0.1%", without "ms"\n')
    config.write_text(json.dumps({"thresholds": "p99 < 50ms"}))
    assert run_soak("validate", "--config", str(config), "http://127.0.0.1:1/").stderr == (
        f'soak: {config}: $.thresholds: "p99 < 50ms" is not allowed; must be a list\n')


def test_validate_lists_the_thresholds() -> None:
    run = run_soak("validate", "--thresholds", "p99 < 50ms", "--intervalThresholds", "goal% >= 99",
                   "--abortOnThreshold", "http://127.0.0.1:1/")
    assert run.returncode == EXIT_OK, run.stderr
    assert "threshold (run): p99 < 50ms\nthreshold (interval): goal% >= 99\n" in run.stdout
    assert "exit code 3 if any threshold is broken; stops as soon as one can no longer be met" in run.stdout


def test_bench_is_judged_too_and_its_report_still_reads_back(nginx: Nginx) -> None:
    run = run_soak("bench", "-n", "2000", "-c", "4", "-k", "--thresholds", "errors% <= 0, p99 < 1ns", nginx.url)
    assert run.returncode == EXIT_THRESHOLDS, run.stderr
    lines = verdict_lines(run.stdout)
    assert lines[0] == "# threshold run errors% <= 0: 0% ok" and lines[1].endswith("BROKEN")
    assert run.summary["thresholds"]["passed"] is False
    found = load_run(run.stdout, "bench.txt")  # what `soak compare` reads
    assert found.figures.requests == 2000
    assert found.notes == ()  # ab's report is expected in a bench log: no note for it
    goal = run_soak("bench", "-n", "10", "--thresholds", "goal% >= 99", nginx.url)
    assert goal.returncode == EXIT_USAGE
    assert goal.stderr == ('soak: thresholds: "goal% >= 99" is not allowed in bench mode, which has no rate to '
                           "reach and so no goal\n")


def test_soak_logs_with_verdict_lines_still_read_back(nginx: Nginx) -> None:
    run = run_soak(*SHORT, "--thresholds", "p99 < 1s", nginx.url)
    found = load_run(run.stdout, "soak.log")  # what `soak compare` and `soak plot` read
    assert found.figures.requests == run.summary["requests"] and found.notes == ()
    cut = load_run(run.stdout.split("{\n", 1)[0], "cut.log")  # cut off before its summary: rebuilt from the lines
    # The lines count what came back by the last interval's end; on a busy machine a response can
    # come after it (the drain: in the summary, not in a line).
    drained = (run.summary.get("drain") or {}).get("requests", 0)
    assert cut.figures.requests == run.summary["requests"] - drained
    assert not any("threshold" in note for note in cut.notes), cut.notes


def test_no_summary_still_prints_the_verdict(nginx: Nginx) -> None:
    run = run_soak(*SHORT, "--noLatencySummary", "--thresholds", "p50 < 1ns", nginx.url)
    assert run.returncode == EXIT_THRESHOLDS
    assert verdict_lines(run.stdout)[-1] == "# thresholds: 1 of 1 broken"
    assert "{" not in run.stdout


# --- status rules (issue 32): a 401 is a good response, and only a status rule sees it -----------

EXPIRES = "/fail-after/10/401"  # a token that expires after the 10th request: 401 to every one after
STATUS_RULES = ("errors% <= 1", "4xx% <= 1", "401% == 0", "5xx% == 0", "4xx%{url=/ok} <= 1",
                f"4xx%{{url={EXPIRES}}} <= 1")


def test_an_expired_token_keeps_errors_but_breaks_the_4xx_rule(fault_server: FaultServer, transport: str) -> None:
    """A run whose token expires after 10 requests: its 401s are good (slow_cooker's 200-499, so the
    interval lines' good/b/f say nothing), errors% <= 1 passes, and the status rules break it: exit 3,
    on each engine. Each figure is counted from what the server sent, of the responses."""
    run = run_soak("--qps", "100", "--concurrency", "4", "--interval", "300ms", "--totalRequests", "100",
                   "--thresholds", ", ".join(STATUS_RULES), "--intervalThresholds", "4xx% <= 1",
                   fault_server.url(EXPIRES), fault_server.url("/ok"))
    assert run.returncode == EXIT_THRESHOLDS, run.stdout + run.stderr
    summary = assert_counts_add_up(run.stdout)
    fault_server.wait_idle()
    sent = fault_server.seen(EXPIRES)
    expired = sent - 10
    assert summary["requests"] == sent + fault_server.seen("/ok") == 100 and expired > 0
    assert summary["statusCodes"] == {"200": 100 - expired, "401": expired}
    assert summary["good"] == 100 and summary["bad"] == summary["failed"] == 0
    assert all((line.bad, line.failed) == (0, 0) for line in map(parse_interval, run.interval_lines))
    per_url = {entry["url"]: entry["statusCodes"] for entry in summary["perUrl"]}
    assert per_url == {fault_server.url(EXPIRES): {"200": 10, "401": expired}, fault_server.url("/ok"): {"200": 100 - sent}}
    lines = verdict_lines(run.stdout)
    share = f"{round(expired * 100 / sent, 3):g}"
    assert lines[:6] == [
        "# threshold run errors% <= 1: 0% ok",
        f"# threshold run 4xx% <= 1: {expired}% BROKEN",  # of the 100 responses
        f"# threshold run 401% == 0: {expired}% BROKEN",
        "# threshold run 5xx% == 0: 0% ok",
        "# threshold run 4xx%{url=/ok} <= 1: 0% ok",
        f"# threshold run 4xx%{{url={EXPIRES}}} <= 1: {share}% BROKEN",  # of that URL's responses alone
    ]
    assert re.fullmatch(r"# threshold interval 4xx% <= 1: worst [\d.]+% \(interval \d+\), broken in \d+ of \d+ "
                        r"intervals \(.*\) BROKEN", lines[6]), lines[6]
    assert lines[7] == "# thresholds: 4 of 7 broken"
    rules = summary["thresholds"]["rules"]
    assert [(r["rule"], r["ok"], r["inconclusive"]) for r in rules] == [
        (text, text in ("errors% <= 1", "5xx% == 0", "4xx%{url=/ok} <= 1"), False) for text in STATUS_RULES] + [
        ("4xx% <= 1", False, False)]
    assert rules[1]["measured"] == rules[2]["measured"] == expired and rules[1]["unit"] == "%"
    assert rules[6]["brokenIntervals"] and rules[6]["measured"] > 1


def test_a_split_run_and_its_merge_judge_the_same_statuses(fault_server: FaultServer, transport: str,
                                                           tmp_path: Path) -> None:
    """Each shard judges its own answers, and `soak merge` the shards' statuses added up: the 401s of
    both pods break 4xx% <= 1 in each and in the merge, which errors% <= 1 lets through."""
    rules = "errors% <= 1, 4xx% <= 1, 5xx% == 0"
    logs = [tmp_path / f"pod-{index}.log" for index in range(2)]
    processes = []
    for index, log in enumerate(logs):
        with log.open("w") as out:
            processes.append(subprocess.Popen(
                soak_command("--shards", "2", "--shard", str(index), "--qps", "40", "--concurrency", "2", "--interval",
                             "500ms", "--totalRequests", "60", "--thresholds", rules, "--intervalThresholds",
                             "4xx% <= 1", fault_server.url(EXPIRES)),
                stdout=out, stderr=subprocess.PIPE, text=True, env={**os.environ, "TZ": "UTC"}))
    try:
        codes = [p.wait(timeout=60) for p in processes]
    finally:
        for p in processes:
            p.kill()  # only if still running
            p.wait()
    assert codes == [EXIT_THRESHOLDS] * 2, [p.stderr.read() for p in processes if p.stderr]
    for p in processes:
        assert p.stderr is not None
        p.stderr.close()
    shards = [assert_counts_add_up(log.read_text()) for log in logs]
    merged = run_soak("merge", *(str(log) for log in logs))
    assert merged.returncode == EXIT_THRESHOLDS, merged.stderr
    summary = assert_counts_add_up(merged.stdout)
    fault_server.wait_idle()
    expired = fault_server.seen(EXPIRES) - 10
    assert summary["requests"] == fault_server.seen(EXPIRES) == 60 == sum(s["requests"] for s in shards)
    assert summary["statusCodes"] == {"200": 10, "401": expired}
    for shard in shards:  # 30 sends each, of which at most 10 came before the expiry
        assert shard["requests"] == 30 and shard["statusCodes"]["401"] >= 20
        assert [(r["rule"], r["ok"]) for r in shard["thresholds"]["rules"]] == [
            ("errors% <= 1", True), ("4xx% <= 1", False), ("5xx% == 0", True), ("4xx% <= 1", False)]
    lines = verdict_lines(merged.stdout)
    assert lines[:3] + lines[4:] == ["# threshold run errors% <= 1: 0% ok",
                                     f"# threshold run 4xx% <= 1: {round(expired * 100 / 60, 3):g}% BROKEN",
                                     "# threshold run 5xx% == 0: 0% ok", "# thresholds: 2 of 4 broken"]
    # The merged intervals' tallies are the shards' added up, statuses and all: 60 sends at 40 req/s take
    # 1.5 s at least, so the intervals after the first second hold none of the first 10 requests, only 401s.
    interval_rule = summary["thresholds"]["rules"][3]
    assert interval_rule["measured"] == 100 and len(interval_rule["brokenIntervals"]) >= 2
    assert lines[3].startswith("# threshold interval 4xx% <= 1: worst 100% (interval ") and lines[3].endswith(" BROKEN")
