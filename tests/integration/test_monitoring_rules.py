"""The monitoring component's alerts, checked by promtool: valid, and each one unit-tested.

`promtool check rules` and `promtool test rules` are Debian's (package prometheus). The unit
tests themselves are manifests/components/monitoring/soak-alerts.test.yaml, beside the rules,
where a team that changes a level runs them too; here they run, and every alert must have a
case where it fires and one where it does not.
"""

from __future__ import annotations

import re
import runpy
import subprocess
import sys
from pathlib import Path

import yaml

from runner.core.errors import EXIT_INCONCLUSIVE, EXIT_NO_RESPONSE, EXIT_THRESHOLDS
from tests.conftest import REPO, run_soak
from tests.support.faultserver import FaultServer, refused_port
from tests.support.programs import program
from tests.support.pushgateway import Pushgateway

COMPONENT = REPO / "manifests" / "components" / "monitoring"
RULES = COMPONENT / "soak-alerts.rules.yaml"
# The alerts' unit tests, and the regression alerts' apart (8 days of series, at a coarser step).
UNIT_TESTS = [COMPONENT / "soak-alerts.test.yaml", COMPONENT / "soak-regressions.test.yaml"]


def promtool() -> str:
    return program("promtool", "apt-get install -y prometheus (README's test command does)")


def rules() -> list[dict]:
    return [rule for group in yaml.safe_load(RULES.read_text())["groups"] for rule in group["rules"]]


def alerts() -> list[dict]:
    return [rule for rule in rules() if "alert" in rule]


def records() -> list[dict]:
    """The recording rules: each finished run's figures, which the regression alerts compare."""
    return [rule for rule in rules() if "record" in rule]


def test_promtool_checks_the_rule_file_and_the_prometheusrule(tmp_path: Path) -> None:
    spec = yaml.safe_load((COMPONENT / "prometheusrule.yaml").read_text())["spec"]
    (tmp_path / "from-prometheusrule.yaml").write_text(yaml.safe_dump(spec))
    for path in (RULES, tmp_path / "from-prometheusrule.yaml"):
        done = subprocess.run([promtool(), "check", "rules", str(path)], capture_output=True, text=True)
        assert done.returncode == 0, done.stdout + done.stderr
        assert f"SUCCESS: {len(rules())} rules found" in done.stdout


def test_promtool_unit_tests_pass() -> None:
    done = subprocess.run([promtool(), "test", "rules", *map(str, UNIT_TESTS)], capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    assert (done.stdout + done.stderr).count("SUCCESS") == len(UNIT_TESTS)


def unit_tests() -> list[dict]:
    return [test for path in UNIT_TESTS for test in yaml.safe_load(path.read_text())["tests"]]


def test_every_alert_is_unit_tested_firing_and_not_firing() -> None:
    cases = [case for test in unit_tests() for case in test.get("alert_rule_test", [])]
    for alert in alerts():
        name = alert["alert"]
        mine = [case for case in cases if case["alertname"] == name]
        assert any(case.get("exp_alerts") for case in mine), f"{name}: no unit test where it fires"
        assert any(not case.get("exp_alerts") for case in mine), f"{name}: no unit test where it does not fire"
        for case in mine:
            for expected in case.get("exp_alerts") or []:
                # promtool compares annotations whole: every firing case pins their text
                assert set(expected.get("exp_annotations", {})) == {"summary", "description", "runbook_url"}, name


def test_every_alert_tells_on_call_what_and_where() -> None:
    for alert in alerts():
        name = alert["alert"]
        assert alert["labels"]["severity"] in ("critical", "warning"), name
        summary, description = alert["annotations"]["summary"], alert["annotations"]["description"]
        assert "Check first" in description, name
        if name != "SoakNoFigures":  # about a job that pushed nothing: no URL to name
            # routes by URL: the expression keeps the url label, and the words name it
            assert "url" in re.findall(r"by \(([^)]*)\)", alert["expr"])[-1], name
            assert "$labels.url" in summary and "$labels.url" in description, name
        assert "$labels.job" in summary, name


def test_summaries_never_vary_with_the_value_and_every_alert_has_a_runbook() -> None:
    """The monitoring-mixins guide: a summary stays the same while an alert fires (the value goes in the
    description), and a runbook_url points at the alert's own section of docs/monitoring.md."""
    headings = {re.sub(r"[^a-z0-9 -]", "", line.lstrip("#").strip().lower()).replace(" ", "-")
                for line in (REPO / "docs" / "monitoring.md").read_text().splitlines() if line.startswith("#")}
    for alert in alerts():
        name, annotations = alert["alert"], alert["annotations"]
        assert "$value" not in annotations["summary"] and ".Value" not in annotations["summary"], name
        page, anchor = annotations["runbook_url"].split("#")
        assert page.endswith("/docs/monitoring.md") and anchor == name.lower() and anchor in headings, name


def test_no_rule_names_a_job_the_generator_was_not_given(tmp_path: Path) -> None:
    """The job the runs push as is a setting of the generator (--job), never written into a rule."""
    template = (COMPONENT / "soak-alerts.template.yaml").read_text()
    assert 'job="soak"' not in template and "__JOB__" in template
    generator = runpy.run_path(str(COMPONENT / "generate.py"))
    other = yaml.safe_load(generator["rules"](template, job="nightly"))
    exprs = " ".join(rule["expr"] for group in other["groups"] for rule in group["rules"])
    assert 'job="nightly"' in exprs and 'job="soak"' not in exprs
    assert 'job="soak"' in RULES.read_text()  # the default, as the runner's pushgatewayJob defaults


def test_recording_rules_are_named_level_metric_operations() -> None:
    for record in records():
        level, metric, operations = record["record"].split(":")
        assert level and metric.startswith("soak_") and operations, record["record"]
        # the level lists the labels the rule aggregates by
        kept = {label.strip() for by in re.findall(r"by \(([^)]*)\)", record["expr"]) for label in by.split(",")}
        assert set(level.split("_")) <= kept, record["record"]


def test_the_prometheusrule_is_generated_from_the_rule_file() -> None:
    """One source: prometheusrule.yaml's spec is the rule file, and generate.py has been run."""
    assert yaml.safe_load((COMPONENT / "prometheusrule.yaml").read_text())["spec"] == yaml.safe_load(RULES.read_text())
    done = subprocess.run([sys.executable, str(COMPONENT / "generate.py"), "--check"], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


def test_every_recording_rule_is_unit_tested_recording_and_not() -> None:
    """A finished run's figures are recorded, and a running one's are not: each recorded series has a
    case with samples and one without."""
    cases = [case for test in unit_tests() for case in test.get("promql_expr_test", [])]
    assert records()
    for record in records():
        mine = [case for case in cases if case["expr"] == record["record"]]
        assert any(case["exp_samples"] for case in mine), f"{record['record']}: no case that records"
        assert any(not case["exp_samples"] for case in mine), f"{record['record']}: no case that does not"



def test_the_broken_thresholds_alert_names_the_exit_code_of_each_run_that_raises_it() -> None:
    """Its description said "The run exited with code 3", but a dead target exits 8 and pushes the
    same broken verdict (soak_thresholds_passed 0) that raises the alert: real runs, pushing to a
    real Pushgateway, one whose target answers badly and one whose target is dead."""
    (rule,) = [alert for alert in alerts() if alert["alert"] == "SoakThresholdsBroken"]
    description = " ".join(rule["annotations"]["description"].split())
    pushgateway, fault, dead = Pushgateway(), FaultServer().start(), refused_port()
    try:
        for job, url in (("answers-badly", fault.url("/status/503")), ("dead", f"http://127.0.0.1:{dead.getsockname()[1]}/")):
            run = run_soak("--qps", "20", "--concurrency", "1", "--interval", "300ms", "--iterations", "2",
                           "--thresholds", "errors% <= 1", "--pushgateway", pushgateway.url, "--pushgatewayJob", job,
                           url, timeout=60)
            assert pushgateway.group(job)["soak_thresholds_passed"] == {(): 0.0}, job
            assert run.returncode in (EXIT_THRESHOLDS, EXIT_NO_RESPONSE), run.stderr
            assert f"code {run.returncode}" in description or f"or {run.returncode} if" in description, (job, run.returncode)
        assert run.returncode == EXIT_NO_RESPONSE, "the dead target's run"
        assert f"or {EXIT_INCONCLUSIVE} if the rules broke only where the client's own delay may have changed their figures" in description
    finally:
        pushgateway.stop()
        fault.stop()
        dead.close()
