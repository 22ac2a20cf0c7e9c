"""`soak validate`'s description of a run: what it would do, in words, never a secret."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from runner.config.settings import merge, settings_from
from runner.load.shards import Shard
from runner.report.plan import cluster_guess, describe

URL = "http://nginx.soak-target.svc.cluster.local"


def plan(layer: dict[str, Any] | None = None, urls: list[str] | None = None,
         environ: dict[str, str] | None = None) -> list[str]:
    return describe(settings_from(merge(layer or {})), urls or [URL], environ or {})


def test_the_default_soak_in_words() -> None:
    assert plan() == [
        "would send 100 GET req/s (closed model: 5 clients at 20 req/s each, one request in flight per client)",
        f"  to {URL}",
        "for 60 intervals of 1m0s (1h0m0s), 360000 requests in all",
        "timeout 10s, keep-alive (one connection per client), compression off, latency in ms",
        "body: none",
        "output: interval lines on stdout, a JSON summary on stdout, failures on stderr",
    ]


def test_open_model() -> None:
    lines = plan({"loadModel": "open", "qps": 10, "concurrency": 3, "maxInFlight": 250})
    assert lines[0] == "would send 10 GET req/s (open model: 3 clients at 3.333 req/s each, at most 250 in flight)"


def test_fractional_rates() -> None:
    assert plan({"qps": 2.5})[0] == (
        "would send 2.5 GET req/s (closed model: 5 clients at 0.5 req/s each, one request in flight per client)")
    first = plan({"qps": 0.3, "concurrency": 1})[0]
    assert first.startswith("would send 0.3 GET req/s (closed model: 1 ")
    assert "at 0.3 req/s each" in first


def test_method_is_named() -> None:
    assert plan({"method": "POST"})[0].startswith("would send 100 POST req/s")


# --- when the run stops ------------------------------------------------------------------------


def test_iterations() -> None:
    lines = plan({"iterations": 5, "interval": "10s", "qps": 20})
    assert lines[2] == "for 5 intervals of 10s (50s), 1000 requests in all"


def test_duration() -> None:
    lines = plan({"duration": "1h30m", "interval": "1m"})
    assert lines[2] == "for 1h30m0s, one line every 1m0s, 540000 requests in all"


def test_duration_from_a_higher_layer_replaces_iterations() -> None:
    settings = settings_from(merge({"iterations": 5}, {"duration": "2m"}))
    assert describe(settings, [URL], {})[2] == "for 2m0s, one line every 1m0s, 12000 requests in all"


def test_until_stopped() -> None:
    assert plan({"iterations": 0, "interval": "10s"})[2] == "until stopped, one line every 10s"


def test_total_requests() -> None:
    assert plan({"totalRequests": 500})[2] == (
        "for 60 intervals of 1m0s (1h0m0s), 360000 requests in all; stops after 500 requests")
    assert plan({"iterations": 0, "totalRequests": 7})[2] == (
        "until stopped, one line every 1m0s; stops after 7 requests")


def test_requests_in_all_rounds_a_fractional_total() -> None:
    assert plan({"qps": 0.3, "duration": "10s", "interval": "5s"})[2] == "for 10s, one line every 5s, 3 requests in all"


# --- URLs ----------------------------------------------------------------------------------------


def test_one_url_has_no_spread_line() -> None:
    assert not any("each URL" in line for line in plan())


@pytest.mark.parametrize(("count", "ordinal"), [(2, "2nd"), (3, "3rd"), (4, "4th"), (11, "11th"), (12, "12th"),
                                                (13, "13th"), (21, "21st"), (22, "22nd"), (23, "23rd"), (101, "101st"),
                                                (111, "111th")])
def test_several_urls_are_listed_with_the_spread(count: int, ordinal: str) -> None:
    urls = [f"http://u{i}.example/" for i in range(count)]
    lines = plan(urls=urls)
    assert lines[1:1 + count] == [f"  to {url}" for url in urls]
    assert lines[1 + count] == f"  each URL gets every {ordinal} request"


# --- options -------------------------------------------------------------------------------------


def test_connection_compression_timeout_and_unit() -> None:
    line = plan({"noReuse": True, "compress": True, "timeout": "1.5s", "latencyUnit": "us"})[3]
    assert line == "timeout 1.5s, a new connection per request, compression on, latency in us"


@pytest.mark.parametrize(("layer", "expected", "connections"), [
    ({"maxRequestsPerConnection": 50}, "a connection ends after its 50th request", 7200),  # 360000 requests
    ({"maxRequestsPerConnection": 1}, "a connection ends after its first request", 360000),
    ({"maxConnectionAge": "1m"}, "a connection ends after its first request sent at 1m0s old", None),
    ({"maxRequestsPerConnection": 2, "maxConnectionAge": "30s"},
     "a connection ends after its 2nd request or its first request sent at 30s old, whichever comes first", 180000),
    ({"maxRequestsPerConnection": 50, "iterations": 0}, "a connection ends after its 50th request", None),  # no end
])
def test_a_connections_lifetime_in_words(layer: dict[str, Any], expected: str, connections: int | None) -> None:
    lines = plan(layer)
    assert lines[3] == "timeout 10s, keep-alive (one connection per client at a time), compression off, latency in ms"
    many = f"; at least {connections} connections over the run" if connections else ""
    assert lines[4] == (f"{expected}: that request says Connection: close and the next send dials anew (behind a load "
                        "balancer or a Service: a new pick of backend; a host name is looked up again, its addresses "
                        f"dialled in turn){many}")


_BACKENDS_LINE = ('counts responses by the backend named in their X-Soak-Backend header (the first 20 by count by name, '
                  'the rest as "other"; without the header: "(none)"); a # iter line says when an interval reached '
                  "fewer backends than the one before")


def test_the_backend_header_in_words_and_what_keep_alive_alone_reaches() -> None:
    assert not any("backend named" in line for line in plan({}))
    lines = plan({"backendHeader": "X-Soak-Backend", "concurrency": 7})
    assert lines[4:6] == [_BACKENDS_LINE, "with keep-alive and no maxRequestsPerConnection or maxConnectionAge, each "
                          "client keeps the backend its first connection reached: behind a Service, at most 7 backends "
                          "answer"]
    lines = plan({"backendHeader": "X-Soak-Backend", "maxRequestsPerConnection": 50})
    assert lines[5] == _BACKENDS_LINE and "at most" not in lines[6]
    assert plan({"backendHeader": "X-Soak-Backend", "noReuse": True})[4:6] == [_BACKENDS_LINE, "body: none"]


def test_a_lifetime_beside_no_reuse_is_said_to_do_nothing() -> None:
    lines = plan({"noReuse": True, "maxRequestsPerConnection": 5, "maxConnectionAge": "1s"})
    assert lines[3] == "timeout 10s, a new connection per request, compression off, latency in ms"
    assert lines[4] == ("maxRequestsPerConnection and maxConnectionAge: no effect, as noReuse opens a new connection "
                        "for every request")


def test_body_forms() -> None:
    assert "body: 8 bytes" in plan({"body": '{"a": 1}'})
    assert "body: 2 bytes" in plan({"body": "é"})  # bytes, not characters
    assert "body: the contents of /data/body.json" in plan({"body": {"file": "/data/body.json"}})
    assert "body: none" in plan({"body": ""})


def test_hash_check() -> None:
    assert "checks the FNV-1a hash of 25% of bodies against 123" in plan({"hashSampleRate": 0.25, "hashValue": 123})
    assert "checks the FNV-1a hash of 100% of bodies against 0" in plan({"hashSampleRate": 1})
    assert not any("FNV" in line for line in plan({"hashValue": 5}))  # no sampling, no check


def test_a_small_hash_sample_rate_is_not_shown_as_zero() -> None:
    assert "checks the FNV-1a hash of 0.1% of bodies against 7" in plan({"hashSampleRate": 0.001, "hashValue": 7})
    assert "checks the FNV-1a hash of 0.5% of bodies against 7" in plan({"hashSampleRate": 0.005, "hashValue": 7})
    assert "checks the FNV-1a hash of 7% of bodies against 7" in plan({"hashSampleRate": 0.07, "hashValue": 7})
    assert "checks the FNV-1a hash of 0.00001% of bodies against 7" in plan({"hashSampleRate": 1e-7, "hashValue": 7})


def test_outputs() -> None:
    assert plan({"noLatencySummary": True, "reportLatenciesCSV": "/tmp/l.csv"})[-1] == (
        "output: interval lines on stdout, failures on stderr, latency CSV to /tmp/l.csv")
    assert plan({"terminationMessagePath": "/tmp/verdict.txt"})[-1].endswith(", the verdict to /tmp/verdict.txt")
    for quiet in ("", "/dev/termination-log"):  # none, or a pod's own (written only in a pod)
        assert "verdict" not in plan({"terminationMessagePath": quiet})[-1]


def test_the_thresholds_are_listed_as_written_status_rules_too() -> None:
    """Each rule as the verdict lines will name it: a status rule, its `==` and its scope as written."""
    lines = plan({"thresholds": ["errors% <= 1", "4xx% <= 1", "401%{url=/api} == 0"],
                  "intervalThresholds": ["5xx% == 0"], "abortOnThreshold": True}, ["http://h/api"])
    assert lines[-5:] == ["threshold (run): errors% <= 1", "threshold (run): 4xx% <= 1",
                          "threshold (run): 401%{url=/api} == 0", "threshold (interval): 5xx% == 0",
                          "exit code 3 if any threshold is broken; stops as soon as one can no longer be met"]


# --- headers -------------------------------------------------------------------------------------


def test_literal_headers_are_shown_and_credentials_hidden() -> None:
    lines = plan({"headers": {"X-Trace": "on", "Authorization": "Bearer s3cr3t", "Cookie": "session=s3cr3t"}})
    assert "header X-Trace: on" in lines
    assert "header Authorization: <hidden>" in lines
    assert "header Cookie: <hidden>" in lines
    assert not any("s3cr3t" in line for line in lines)


def test_header_from_env_that_is_set_here() -> None:
    lines = plan({"headers": {"Authorization": {"fromEnv": "SOAK_TOKEN"}}}, environ={"SOAK_TOKEN": "Bearer s3cr3t"})
    assert "header Authorization: <from environment variable SOAK_TOKEN, set here>" in lines
    assert not any("s3cr3t" in line for line in lines)


@pytest.mark.parametrize("environ", [{}, {"SOAK_TOKEN": ""}, {"OTHER": "s3cr3t"}])
def test_header_from_env_that_is_not_set_here(environ: dict[str, str]) -> None:
    lines = plan({"headers": {"Authorization": {"fromEnv": "SOAK_TOKEN"}}}, environ=environ)
    assert "header Authorization: <from environment variable SOAK_TOKEN, NOT set here>" in lines
    assert not any("s3cr3t" in line for line in lines)


def test_host_header() -> None:
    lines = plan({"host": "api.example:8080", "headers": {"X": "1"}})
    assert lines.index("header X: 1") < lines.index("header Host: api.example:8080")


def test_describe_prints_no_environment_value_anywhere() -> None:
    environ = {"A": "s3cr3t-a", "B": "s3cr3t-b"}
    lines = plan({"headers": {"X-A": {"fromEnv": "A"}, "X-B": {"fromEnv": "B"}, "X-C": {"fromEnv": "C"}}},
                 environ=environ)
    assert not any("s3cr3t" in line for line in lines)
    assert sum("set here>" in line for line in lines) == 3
    assert sum("NOT set here>" in line for line in lines) == 1


# --- a split run: what this process does, and what the whole run does ---------------------------


def split_plan(layer: dict[str, Any], shard: Shard, urls: list[str] | None = None,
               environ: dict[str, str] | None = None) -> list[str]:
    return describe(settings_from(merge(layer)), urls or [URL], environ or {}, shard)


def test_a_shard_says_its_share_its_urls_and_its_wait_for_the_boundary() -> None:
    urls = ["http://a/", "http://b/", "http://c/"]
    lines = split_plan({"shards": 3}, Shard(2, 3), urls, {"JOB_COMPLETION_INDEX": "2"})
    assert lines[0].startswith("the whole run would send 100 GET req/s (closed model: 5 clients")
    assert lines[5:11] == [
        "for 60 intervals of 1m0s (1h0m0s), 360000 requests in all",
        "split over 3 shards (pods) that together send the whole run; soak merge adds up their logs",
        "this process: shard 2 of 3 (JOB_COMPLETION_INDEX=2), sends 33.333 of the 100 GET req/s with 1 of the 5 "
        "clients, 120000 of the 360000 requests",
        "  to 1 of the 3 URLs only:",
        "    http://c/",
        "waits for the next interval boundary (a multiple of 1m0s on the wall clock) to start, as every shard does: "
        "up to 1m0s after it is started",
    ]


@pytest.mark.parametrize(("shards", "urls", "said"), [
    (3, 1, []), (3, 2, ["  to every URL"]), (2, 4, ["  to 2 of the 4 URLs only:", "    http://u1/", "    http://u3/"]),
    (2, 14, ["  to 7 of the 14 URLs only:", *(f"    http://u{i}/" for i in (1, 3, 5, 7, 9)), "    ... and 2 more"]),
])
def test_a_shards_urls_are_those_its_sends_go_to(shards: int, urls: int, said: list[str]) -> None:
    """Send n goes to URL n mod len(urls) and shard 1 of N has sends 1, 1 + N, ...: all URLs unless N and
    the URL count share a factor."""
    lines = split_plan({"shards": shards, "concurrency": 6}, Shard(1, shards), [f"http://u{i}/" for i in range(urls)])
    start = next(i for i, line in enumerate(lines) if line.startswith("this process:")) + 1
    end = next(i for i, line in enumerate(lines) if line.startswith("waits for"))
    assert lines[start:end] == said


def test_a_shard_named_by_flag_and_its_share_of_a_count() -> None:
    lines = split_plan({"shards": 2, "shard": 1, "qps": 90, "concurrency": 7, "totalRequests": 1001,
                        "iterations": 0}, Shard(1, 2))
    assert ("this process: shard 1 of 2 (--shard 1), sends 45 of the 90 GET req/s with 3 of the 7 clients; stops "
            "after 500 of the 1001 requests") in lines


def test_workers_say_their_share_and_start_at_once_without_shards() -> None:
    lines = split_plan({"workers": 3}, Shard(0, 1, 0, 3))
    assert "the run is split over 3 local worker processes of 33.333 req/s each, with 2, 2 and 1 clients" in lines
    assert not any(line.startswith(("waits for", "this process:", "split over")) for line in lines)
    both = split_plan({"shards": 2, "workers": 2, "qps": 90, "concurrency": 7}, Shard(1, 2, 0, 2),
                      environ={"JOB_COMPLETION_INDEX": "1"})
    assert "this shard's part is split over 2 local worker processes of 22.5 req/s each, with 2 and 1 clients" in both
    assert any(line.startswith("waits for the next interval boundary") for line in both)


def test_an_unsplit_run_says_nothing_of_shards() -> None:
    assert split_plan({}, Shard()) == plan()


# Hosts the pallet's NetworkPolicy lets the soak reach: a Service's name in each form a cluster
# resolves, with or without a cluster domain, a pod's DNS name, and the pod itself.
IN_THE_CLUSTER = ["nginx", "nginx.soak-target.svc", "nginx.soak-target.svc.cluster.local",
                  "nginx.soak-target.svc.cluster.local.", "nginx.soak-target.svc.k8s.example.net",
                  "10-1-2-3.soak-target.pod.cluster.local",
                  "web-0.web.soak-target.svc.cluster.local", "localhost", "127.0.0.1", "::1"]


@pytest.mark.parametrize("host", IN_THE_CLUSTER)
def test_a_service_of_the_cluster_is_no_network_policy_matter(host: str) -> None:
    assert cluster_guess(host) is None
    url = f"http://[{host}]:8080/" if ":" in host else f"http://{host}:8080/"
    assert not [line for line in plan(urls=[url]) if "network policy" in line]


@pytest.mark.parametrize(("host", "said"), [
    ("api.example.com", "looks outside the cluster (a Service is <service>, <service>.<namespace> or "
                        "<service>.<namespace>.svc.cluster.local)"),
    ("shop.example", "may be outside the cluster (unless it is a Service written <service>.<namespace>)"),
    ("svc.example.com", "looks outside the cluster (a Service is <service>, <service>.<namespace> or "
                        "<service>.<namespace>.svc.cluster.local)"),
    ("8.8.8.8", "is a public address, most likely outside the cluster"),
    ("2a00:1450:4001::1", "is a public address, most likely outside the cluster"),
    ("10.96.0.10", "may be outside the cluster (a private address: a pod's or a Service's passes, a node's or "
                   "another host's not)"),
])
def test_a_host_that_may_be_outside_the_cluster_is_said_so_hedged_where_it_is_a_guess(host: str, said: str) -> None:
    assert cluster_guess(host) == said


def test_validate_gives_each_host_outside_the_cluster_its_egress_rule() -> None:
    lines = plan({"pushgateway": "http://pushgateway.example.org:9091"},
                 urls=[URL, "https://api.example.com/a", "https://api.example.com/b", "http://8.8.8.8:8080/",
                       "http://[2a00:1450:4001::1]/"])
    start = next(i for i, line in enumerate(lines) if line.startswith("network policy:"))
    assert lines[start:] == [
        "network policy: the pallet's NetworkPolicy (manifests/soak/networkpolicy.yaml) lets the soak reach DNS "
        "and the cluster's pods only; where a network plugin enforces it, requests to a host outside the cluster fail unless "
        "you add its rule under the policy's egress:",
        f"  api.example.com {cluster_guess('api.example.com')}:",
        "    - to: [{ipBlock: {cidr: <address>/32}}]  # one for each address api.example.com has; 0.0.0.0/0: any",
        "      ports: [{port: 443, protocol: TCP}]",
        f"  8.8.8.8 {cluster_guess('8.8.8.8')}:",
        "    - to: [{ipBlock: {cidr: 8.8.8.8/32}}]",
        "      ports: [{port: 8080, protocol: TCP}]",
        f"  2a00:1450:4001::1 {cluster_guess('2a00:1450:4001::1')}:",
        "    - to: [{ipBlock: {cidr: 2a00:1450:4001::1/128}}]",
        "      ports: [{port: 80, protocol: TCP}]",
        f"  pushgateway.example.org {cluster_guess('pushgateway.example.org')}:",
        "    - to: [{ipBlock: {cidr: <address>/32}}]  # one for each address pushgateway.example.org has; 0.0.0.0/0: any",
        "      ports: [{port: 9091, protocol: TCP}]",
    ]
    rule = yaml.safe_load("\n".join(line[4:] for line in lines[start + 5:start + 7]))
    assert rule == [{"to": [{"ipBlock": {"cidr": "8.8.8.8/32"}}], "ports": [{"port": 8080, "protocol": "TCP"}]}]


def test_hosts_beyond_five_are_counted() -> None:
    lines = plan(urls=[f"http://h{i}.example.com/" for i in range(7)])
    assert lines[-1] == "  ... and 2 more hosts that may be outside the cluster"
    assert sum(line.startswith("    - to:") for line in lines) == 5


def test_where_the_records_go() -> None:
    local = plan({"resultsStore": "file:///data/soak", "resultsRun": "tuesday"})
    assert ("keeps the run's record in the directory /data/soak, under runs/soak/tuesday/ (run tuesday, job soak), "
            "with an entry in its index for `soak history`; a store that is down or slow costs the run at most 10s, "
            "never its exit code") in local
    assert not any(line.startswith("keeps the run's record") for line in plan())


def test_an_s3_store_outside_the_cluster_is_named_with_its_rule() -> None:
    layer = {"resultsStore": "s3://soak-records/eu", "shards": 3, "resultsRun": "soak-1", "pushgatewayJob": "checkout"}
    at_aws = describe(settings_from(merge(layer)), ["http://nginx.soak-target.svc.cluster.local/"],
                      {"AWS_REGION": "eu-west-1"})
    assert at_aws[-2].startswith("keeps the run's record in the S3 bucket soak-records at AWS (eu-west-1), outside the "
                                 "cluster: the pallet's NetworkPolicy blocks it until you add its rule")
    assert "under eu/runs/checkout/soak-1/ (run soak-1, job checkout)" in at_aws[-2]
    assert at_aws[-1].startswith("each shard keeps its own record there; the one that finds all 3 merges them")
    at_minio = describe(settings_from(merge(layer)), ["http://nginx.soak-target.svc.cluster.local/"],
                        {"AWS_ENDPOINT_URL": "http://minio.example.com:9000"})
    assert "at http://minio.example.com:9000 (AWS_ENDPOINT_URL)" in at_minio[-6]
    assert "  minio.example.com looks outside the cluster" in "\n".join(at_minio)
    assert "      ports: [{port: 9000, protocol: TCP}]" in at_minio


def test_a_split_run_with_a_store_needs_a_name() -> None:
    from runner.core.errors import UsageError

    with pytest.raises(UsageError, match="^resultsRun: a run split over 3 shards needs a name"):
        settings_from(merge({"resultsStore": "file:///d", "shards": 3}))
