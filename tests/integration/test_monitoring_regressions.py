"""The regression alerts on a real Prometheus: real runs now, against a past of runs a day and a week old.

Three real soaks (the CLI, 3 intervals of 1 s, half their sends to a closed port and half to the
fault server's /slow/20, so their p99 is 20 ms or more and their goal% about half) push to a real
Pushgateway. Their past is written into the storage of the real Prometheus that then starts,
scrapes the Pushgateway and loads the rule file: what the rules would have recorded of each
job's earlier runs (a finished run's p99 and goal%, for the few minutes after it ended), the run
an hour before, the day of hourly runs before it and the same two hours a week before, and each
run's start time. That past is made from what the runs now measured, as Prometheus computes it
from the pushed histogram, so every case holds however fast the machine is:

    soak-regressed  the run an hour ago as slow as now, the day and the week before 3x faster and
                    answering every send: both alerts fire, against both baselines
    soak-noisy      only this run slow and half-answered, every run before fast and whole: one noisy
                    run, which fires neither
    soak-flat       every run as now: neither fires

The recording rules are checked on the real runs (the p99 and goal% they record are the runs'),
the alert expressions' values against the past written, and the alerts Prometheus raises.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.conftest import assert_counts_add_up, run_soak
from tests.integration.test_monitoring import (
    EDGES,
    RULES,
    alert_rules,
    close,
    histogram_quantile,
    labels,
    relaxed,
)
from tests.support.faultserver import FaultServer, refused_port
from tests.support.prometheus import Past, Prometheus, backfill
from tests.support.pushgateway import Pushgateway

P99 = "job_url:soak_request_duration_seconds:p99_finished"
GOAL = "job_url:soak_goal_percent:finished"
HOUR, DAY, WEEK = 3600, 86400, 7 * 86400
JOBS = ("soak-regressed", "soak-noisy", "soak-flat")


@dataclass(frozen=True)
class Now:
    """What one job's run measured now, as Prometheus computes it from its pushes."""

    job: str
    p99: float  # of the slow URL, from the pushed histogram (histogram_quantile)
    goal: float  # percent, over both URLs
    summary: dict


@dataclass
class Regressions:
    prometheus: Prometheus
    slow: str
    refused: str
    runs: dict[str, Now]
    at: float


def measured(pushgateway: Pushgateway, job: str, slow: str, summary: dict) -> Now:
    group = pushgateway.group(job)
    buckets = {float(dict(key)["le"]): count for key, count in group["soak_request_duration_seconds_bucket"].items()
               if dict(key)["url"] == slow}  # as the Pushgateway writes `le` (1, not 1.0)
    cumulative = [buckets[float(edge)] for edge in EDGES]
    total = group["soak_request_duration_seconds_count"][(("url", slow),)]
    responses = sum(group["soak_request_duration_seconds_count"].values())
    due = group["soak_target_requests_per_second"][()] * (group["soak_interval_end_time_seconds"][()]
                                                          - group["soak_start_time_seconds"][()])
    return Now(job, histogram_quantile(0.99, cumulative, total), 100 * min(responses / due, 1.0), summary)


def window(end: float) -> list[float]:
    """When the rules recorded a run that ended at `end`: every 30 s for the 2 minutes after."""
    return [end + 30 * k for k in range(5)]


def past(run: Now, slow: str, refused: str, now: float) -> list[Past]:
    """The job's runs before this one, as the rules recorded them: p99 and goal% by (past) run."""
    before = {"soak-regressed": (run.p99, run.p99 / 3, run.goal, 100.0),  # an hour ago, older: p99, goal%
              "soak-noisy": (run.p99 / 3, run.p99 / 3, 100.0, 100.0),
              "soak-flat": (run.p99, run.p99, run.goal, run.goal)}[run.job]
    hour_p99, old_p99, hour_goal, old_goal = before
    ends = {now - HOUR - 180: (hour_p99, hour_goal)}  # the run an hour before this one
    ends |= {now - k * HOUR - 180: (old_p99, old_goal) for k in range(2, 26)}  # the day before them
    ends |= {now - WEEK - k * HOUR - 180: (old_p99, old_goal) for k in (0, 1)}  # the same two hours, a week ago
    series: list[Past] = [
        (P99, {"job": run.job, "url": slow}, [(t, p99) for end, (p99, _) in ends.items() for t in window(end)]),
        (GOAL, {"job": run.job, "url": slow}, [(t, goal) for end, (_, goal) in ends.items() for t in window(end)]),
        (GOAL, {"job": run.job, "url": refused}, [(t, goal) for end, (_, goal) in ends.items() for t in window(end)]),
        # each run's start, an hour apart: changes() counts the runs of the day before
        ("soak_start_time_seconds", {"job": run.job, "pod_index": "0"},
         [(t, end - 3540) for end in ends for t in window(end)]),
    ]
    return series


@pytest.fixture(scope="module")
def regressions(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Regressions]:
    pushgateway = Pushgateway()
    fault = FaultServer().start()
    blocker = refused_port()
    prometheus = None
    try:
        slow, refused = fault.url("/slow/20"), f"http://127.0.0.1:{blocker.getsockname()[1]}/"
        runs = {}
        for job in JOBS:
            run = run_soak("--qps", "20", "--concurrency", "2", "--interval", "1s", "--iterations", "3",
                           "--pushgateway", pushgateway.url, "--pushgatewayJob", job, slow, refused, timeout=90)
            assert run.returncode == 0, run.stdout + run.stderr
            assert "pushgateway" not in run.stderr
            runs[job] = measured(pushgateway, job, slow, assert_counts_add_up(run.stdout))
        storage = tmp_path_factory.mktemp("prometheus")
        now = time.time()
        backfill(storage, [series for run in runs.values() for series in past(run, slow, refused, now)])
        prometheus = Prometheus(storage, [f"127.0.0.1:{pushgateway.port}"], [RULES])
        for job in JOBS:  # the rules have recorded each finished run
            for record in (P99, GOAL):
                prometheus.wait_for(lambda job=job, record=record: prometheus.query(
                    f'{record}{{job="{job}"}}', prometheus.now()), 30, f"{job}'s {record}")
        yield Regressions(prometheus, slow, refused, runs, prometheus.now())
    finally:
        if prometheus is not None:
            prometheus.stop()
        fault.stop()
        pushgateway.stop()
        blocker.close()


def test_the_rules_record_each_finished_run(regressions: Regressions) -> None:
    prometheus, at = regressions.prometheus, regressions.at
    for job, run in regressions.runs.items():
        p99 = prometheus.query(f'{P99}{{job="{job}"}}', at)
        assert set(p99) == {labels(__name__=P99, job=job, url=regressions.slow)}  # the refused URL has no p99
        close(p99[labels(__name__=P99, job=job, url=regressions.slow)], run.p99, 1e-9, f"{job} p99")
        assert run.p99 >= 0.02  # every response took 20 ms or more
        goal = prometheus.query(f'{GOAL}{{job="{job}"}}', at)
        assert set(goal) == {labels(__name__=GOAL, job=job, url=url) for url in (regressions.slow, regressions.refused)}
        for value in goal.values():
            close(value, run.goal, 1e-9, f"{job} goal%")
            close(value, run.summary["goalPercent"], 1, f"{job} goal% against the summary's")
        assert run.goal < 90  # half the sends went to a closed port


def test_two_worse_runs_fire_against_the_day_and_the_week_one_noisy_run_does_not(regressions: Regressions) -> None:
    prometheus, at = regressions.prometheus, regressions.at
    rules = {rule["alert"]: rule for rule in alert_rules()}
    baselines = ("the day before", "a week before")
    slow, refused, runs = regressions.slow, regressions.refused, regressions.runs

    ratios = prometheus.query(relaxed(rules["SoakP99Regressed"]["expr"]), at)  # every job's, unfiltered
    assert set(ratios) == {labels(job=job, url=slow, baseline=b) for job in JOBS for b in baselines}
    for key, ratio in ratios.items():
        want = 3.0 if dict(key)["job"] == "soak-regressed" else 1.0
        close(ratio, want, 1e-6, f"p99 ratio {key}")
    fired = prometheus.query(rules["SoakP99Regressed"]["expr"], at)
    assert set(fired) == {labels(job="soak-regressed", url=slow, baseline=b) for b in baselines}

    drops = prometheus.query(relaxed(rules["SoakGoalRegressed"]["expr"]), at)
    assert set(drops) == {labels(job=job, url=url, baseline=b) for job in JOBS for url in (slow, refused)
                          for b in baselines}
    for key, drop in drops.items():
        job = dict(key)["job"]
        want = 100 - runs[job].goal if job == "soak-regressed" else 0.0  # noisy: its better run was whole
        close(drop, want, 1e-6, f"goal% drop {key}")
    fired_goal = prometheus.query(rules["SoakGoalRegressed"]["expr"], at)
    assert set(fired_goal) == {labels(job="soak-regressed", url=url, baseline=b) for url in (slow, refused)
                               for b in baselines}

    def raised() -> set[tuple[tuple[str, str], ...]]:
        return {tuple(sorted(a["labels"].items())) for a in prometheus.alerts()
                if a["labels"]["alertname"] in ("SoakP99Regressed", "SoakGoalRegressed")}

    expected = {tuple(sorted({**dict(key), "alertname": name, "severity": "warning"}.items()))
                for name, keys in (("SoakP99Regressed", fired), ("SoakGoalRegressed", fired_goal)) for key in keys}
    prometheus.wait_for(lambda: raised() == expected, 30, f"the regression alerts: {expected}")
    for alert in prometheus.alerts():
        if alert["labels"]["alertname"] == "SoakP99Regressed":
            assert alert["state"] == "firing"
            assert alert["annotations"]["summary"] == (f"Soak p99 regressed against {alert['labels']['baseline']}: "
                                                       f"{slow} (job soak-regressed)")
            assert "3.0 times" in " ".join(alert["annotations"]["description"].split())  # the value: there
            assert "<no value>" not in alert["annotations"]["description"]


def test_the_past_was_written_where_the_rules_look(regressions: Regressions, tmp_path: Path) -> None:
    """The backfilled runs are there: the day before holds 24 runs' starts, the week before its two hours."""
    prometheus, at = regressions.prometheus, regressions.at
    for job in JOBS:
        changes = prometheus.query(f'max(changes(soak_start_time_seconds{{job="{job}"}}[1d] offset 90m))', at)
        assert changes == {(): 23.0}, job
        week = prometheus.query(f'count_over_time({P99}{{job="{job}"}}[90m] offset 1w)', at)
        assert list(week.values()) == [10.0], job  # two runs, five samples each
