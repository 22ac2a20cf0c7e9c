"""Hourly runs start on time, day after day, with the shipped files.

What it rests on (docs/deploy.md, "Runs that start on time"): the CronJob fires on the hour
in an explicit time zone; runs never overlap (Forbid), and a run that cannot start within a
minute of its time is skipped rather than started late; the image is not pulled again for
each run; and the shipped run, with its start and its end, fits in the hour, so it never
holds up the next one (with scale-out too, whose pods wait for the next interval boundary).
Last, the runner itself sends its first request at once: nothing in the pod's command waits.
"""

from __future__ import annotations

import datetime
import os
import subprocess
import time
from pathlib import Path

import pytest

from runner.config.jsonfile import read_config_file
from runner.config.settings import Settings, merge, settings_from
from tests.conftest import REPO, Nginx, assert_counts_add_up
from tests.support.pallet import VARIANTS, find, pod_command, render, soak_container

HOUR_S = 3600
# What a run takes beyond its intervals: the pod's start with a cached image, the runner's
# start (about half a second here) and the wait for the last requests (at most `timeout`).
START_AND_END_S = 30


def shipped_settings() -> Settings:
    return settings_from(merge(read_config_file(str(REPO / "configuration.json"))))


@pytest.mark.parametrize("variant", VARIANTS)
def test_the_cronjob_fires_on_the_hour_and_never_late(variant: str) -> None:
    cronjob = find(render(variant), "CronJob", "soak")["spec"]
    assert cronjob["schedule"] == "0 * * * *"
    assert cronjob["timeZone"] == "Etc/UTC", "explicit: not whatever the controller-manager's zone is"
    assert cronjob["concurrencyPolicy"] == "Forbid"
    assert not cronjob.get("suspend", False)
    # Late by at most a minute, or skipped; and not under 10 s, which the controller may miss.
    assert 10 <= cronjob["startingDeadlineSeconds"] <= 60
    pod = cronjob["jobTemplate"]["spec"]["template"]["spec"]
    for container in pod.get("initContainers", []) + pod["containers"]:
        assert container.get("imagePullPolicy") == "IfNotPresent", "no registry round trip before each run"


def test_the_shipped_run_fits_in_the_hour() -> None:
    settings = shipped_settings()
    assert settings.pace.run_ns is not None
    run_s = settings.pace.run_ns / 1e9
    timeout_s = settings.client.timeout_ns / 1e9
    assert timeout_s < START_AND_END_S
    assert run_s + START_AND_END_S <= HOUR_S, "the run would hold up the next hour's"
    # Scale-out: the pods start sending at the next interval boundary, up to an interval after
    # they start; the next run may then wait for this one's last seconds, within the deadline.
    deadline = find(render("scale-out"), "CronJob", "soak")["spec"]["startingDeadlineSeconds"]
    interval_s = settings.pace.interval_ns / 1e9
    assert interval_s + run_s + START_AND_END_S <= HOUR_S + deadline


def test_no_wait_before_the_first_send_in_the_shipped_pod() -> None:
    """Without the Linkerd component nothing waits for a proxy, and a lone pod aligns to nothing."""
    assert not any(a.startswith("--linkerdAwait") for a in soak_container(render("base"))["args"])
    assert "linkerdAwait" not in read_config_file(str(REPO / "configuration.json"))
    assert shipped_settings().split.shards == 1 and not shipped_settings().linkerd.wait


def test_the_pod_sends_its_first_request_at_once(nginx: Nginx, tmp_path: Path) -> None:
    """The pod's command, started now, starts its run within seconds (about half a second here)."""
    command, env = pod_command(render("base"), tmp_path / "pod", nginx.url)
    launched = time.time()
    done = subprocess.run([*command, "--interval", "1s", "--iterations", "1"], capture_output=True, text=True,
                          timeout=60, env={**os.environ, "TZ": "UTC", **env}, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    summary = assert_counts_add_up(done.stdout)
    start = datetime.datetime.fromisoformat(summary["start"].replace("Z", "+00:00")).timestamp()
    assert 0 <= start - launched < 15, f"the run started {start - launched:.1f}s after the pod's command"


def controller_start(slot: float, previous_end: float, policy: str, deadline: float | None) -> float | None:
    """When the CronJob controller (pkg/controller/cronjob, v2) starts the run scheduled at `slot`,
    the previous run's Job finishing at `previous_end`; None: that slot has no run.

    At the slot, with Forbid and a Job still active, it starts nothing (event JobAlreadyActive)
    and looks again when a Job of its changes (the previous one finishing). It starts a slot only
    if the slot is among the unmet times no older than now - startingDeadlineSeconds
    (mostRecentScheduleTime), so at previous_end the slot is started if within the deadline, and
    past it is never considered again: no run, and no MissSchedule event either.
    """
    if previous_end <= slot or policy != "Forbid":
        return slot
    if deadline is None or previous_end - slot <= deadline:
        return previous_end
    return None


def test_what_the_docs_say_of_a_held_hour_is_what_the_controller_does_with_the_fields() -> None:
    """docs/deploy.md's claim about a run whose hour comes while the previous one runs, derived from
    the rendered CronJob's fields by the controller's rule: started late, by at most the deadline,
    or that hour has no run (and no event of its own)."""
    for variant in VARIANTS:
        spec = find(render(variant), "CronJob", "soak")["spec"]
        policy, deadline = spec["concurrencyPolicy"], spec["startingDeadlineSeconds"]
        hour = 3600.0
        assert controller_start(hour, hour - 30, policy, deadline) == hour  # the previous ended in time
        assert controller_start(hour, hour + 25, policy, deadline) == hour + 25  # as seen: 25 s late
        assert controller_start(hour, hour + 50, policy, deadline) == hour + 50  # and 50 s late
        assert controller_start(hour, hour + deadline, policy, deadline) == hour + deadline
        assert controller_start(hour, hour + deadline + 1, policy, deadline) is None  # the hour is dropped
        # never two at once, and never later than the deadline
        for overrun in range(0, 3 * deadline):
            start = controller_start(hour, hour + overrun, policy, deadline)
            assert start is None or hour + overrun <= start <= hour + deadline or overrun == 0
    docs = (REPO / "docs" / "deploy.md").read_text()
    section = " ".join(docs.split("\n## Hourly runs that start on time\n", 1)[1].split("\n## ", 1)[0].split())
    assert f"`startingDeadlineSeconds` ({deadline} s) ago, it **starts that hour's run then, late**" in section
    assert "`JobAlreadyActive`" in section and "no run, and no event of its own" in section
    assert f"So a run starts on time, or up to {deadline} s late, or not at all" in section
    for wrong in ("skipped**, not started late", "events show a skip"):  # what the docs said before
        assert wrong not in section

