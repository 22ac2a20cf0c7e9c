"""A run split over three shards, one of whose URLs is dead: the alerts name that URL alone.

Three real soaks (`--shards 3 --shard i`, as the pods of a scaled-out Job run) of three URLs push
to a real Pushgateway, each in its group (pod_index i); a real Prometheus scrapes it and loads the
alert rules. Send n goes to URL n mod 3 and shard s sends s, s + 3, ...: each shard sends to one
URL only, and shard 1's is a closed port. Each shard exports series for the URLs it sends to and
no others, so every per-URL alert of a shard is about that shard's URL, and the broken verdict
(shard 1's; its exit code is 8, as no response came back) is raised for the dead URL alone: the healthy ones, which answered every
request, are not blamed (before, shard 1's zero-valued series for them made it so).
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from runner.core.errors import EXIT_NO_RESPONSE
from runner.load.shards import Shard
from tests.conftest import Nginx, assert_counts_add_up, run_soak
from tests.integration.test_monitoring import RULES, alert_rules, labels, relaxed
from tests.support.faultserver import refused_port
from tests.support.prometheus import Prometheus
from tests.support.pushgateway import Pushgateway

pytestmark = pytest.mark.nginx

JOB = "soak-shards"
SHARDS = 3


@pytest.fixture(scope="module")
def sharded(nginx: Nginx, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Prometheus, list[str], float]]:
    pushgateway = Pushgateway()
    blocker = refused_port()
    prometheus = None
    try:
        prometheus = Prometheus(tmp_path_factory.mktemp("prometheus"), [f"127.0.0.1:{pushgateway.port}"], [RULES])
        urls = [nginx.url, f"http://127.0.0.1:{blocker.getsockname()[1]}/", f"{nginx.url}echo"]
        assert [list(Shard(s, SHARDS).urls(len(urls))) for s in range(SHARDS)] == [[0], [1], [2]]
        for shard in range(SHARDS):
            run = run_soak("--shards", str(SHARDS), "--shard", str(shard), "--qps", "30", "--concurrency", "3",
                           "--interval", "1s", "--iterations", "3", "--thresholds", "errors% <= 1",
                           "--pushgateway", pushgateway.url, "--pushgatewayJob", JOB, *urls, timeout=90)
            # shard 1's URL is a closed port: its thresholds broke, and not one response came back (8)
            assert run.returncode == (EXIT_NO_RESPONSE if shard == 1 else 0), run.stdout + run.stderr
            assert "pushgateway" not in run.stderr
            assert_counts_add_up(run.stdout)
        for shard in range(SHARDS):
            prometheus.wait_for(lambda shard=shard: prometheus.query(
                f'soak_run_finished{{job="{JOB}",pod_index="{shard}"}} == 1', prometheus.now()), 30,
                f"shard {shard}'s final figures scraped")
        yield prometheus, urls, prometheus.now()
    finally:
        if prometheus is not None:
            prometheus.stop()
        pushgateway.stop()
        blocker.close()


def test_each_shard_has_series_for_its_own_url_only(sharded: tuple[Prometheus, list[str], float]) -> None:
    prometheus, urls, at = sharded
    # the soak's own series: recording rules (soak_run:...:finished) aggregate over pods by design
    got = prometheus.query(f'group by (pod_index, url) ({{__name__=~"soak_[a-z_]+", job="{JOB}", url!=""}})', at)
    assert set(got) == {labels(pod_index=str(s), url=urls[s]) for s in range(SHARDS)}


def test_the_broken_verdict_alerts_for_the_dead_url_alone(sharded: tuple[Prometheus, list[str], float]) -> None:
    prometheus, urls, at = sharded
    rules = {rule["alert"]: rule for rule in alert_rules()}
    dead = urls[1]
    assert prometheus.query(rules["SoakThresholdsBroken"]["expr"], at) == {
        labels(job=JOB, pod_index="1", url=dead): 0.0}
    errors = prometheus.query(rules["SoakErrorsHigh"]["expr"], at)
    assert set(errors) == {labels(job=JOB, url=dead)}
    # every alert raised per pod names that pod's own URL, whatever its value
    for name in ("SoakGoalLow", "SoakThresholdsBroken", "SoakNoRunFinished"):
        values = prometheus.query(relaxed(rules[name]["expr"]), at)
        pairs = {(dict(key)["pod_index"], dict(key)["url"]) for key in values}
        assert pairs <= {(str(s), urls[s]) for s in range(SHARDS)}, (name, pairs)
    assert {(dict(k)["pod_index"], dict(k)["url"]) for k in prometheus.query(relaxed(rules["SoakGoalLow"]["expr"]), at)} \
        == {(str(s), urls[s]) for s in range(SHARDS)}

    def raised() -> set[tuple[str, str]]:
        return {(a["labels"]["alertname"], a["labels"].get("url", "")) for a in prometheus.alerts()
                if a["labels"].get("job") == JOB and a["labels"]["alertname"] == "SoakThresholdsBroken"}

    prometheus.wait_for(lambda: raised() == {("SoakThresholdsBroken", dead)}, 30, "SoakThresholdsBroken raised")
    assert raised() == {("SoakThresholdsBroken", dead)}
