"""remoteWrite and otlp as settings: the file's and the flags' forms, what is refused (one line
naming the field), what is hidden when printed, and what validate says of them."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import pytest

from runner.config.flags import add_source_arguments, settings_of
from runner.config.jsonfile import read_config_file
from runner.config.settings import Settings, merge, settings_from
from runner.core.errors import UsageError
from runner.load.shards import ALONE
from runner.metrics.receivers import otlp_url
from runner.report.plan import describe

URL = "http://127.0.0.1:8080/"


def from_flags(*argv: str) -> Settings:
    parser = argparse.ArgumentParser()
    add_source_arguments(parser)
    return settings_of(parser.parse_args([*argv, URL]))


def test_the_flags_and_the_file_say_the_same() -> None:
    flags = from_flags("--remoteWrite", "http://prom:9090/api/v1/write", "--remoteWriteHeader", "X-Scope-OrgID: a",
                       "--remoteWriteHeader", "X-Other: b", "--remoteWriteBearerTokenFile", "/t",
                       "--otlp", "http://collector:4318", "--otlpHeader", "api-key: k")
    file = settings_from(merge({"remoteWrite": "http://prom:9090/api/v1/write",
                                "remoteWriteHeaders": {"X-Scope-OrgID": "a", "X-Other": "b"},
                                "remoteWriteBearerTokenFile": "/t", "otlp": "http://collector:4318",
                                "otlpHeaders": {"api-key": "k"}}))
    assert flags.metrics == file.metrics
    assert file.metrics.remote_write_headers == (("X-Scope-OrgID", "a"), ("X-Other", "b"))
    assert file.metrics.wanted and file.metrics.written
    plain = settings_from(merge({}))
    assert not plain.metrics.wanted and not plain.metrics.written


def test_headers_add_up_over_layers_and_a_bad_flag_names_itself() -> None:
    merged = merge({"remoteWriteHeaders": {"X-Scope-OrgID": "a"}}, {"remoteWriteHeaders": {"X-Other": "b"}})
    assert merged["remoteWriteHeaders"] == {"X-Scope-OrgID": "a", "X-Other": "b"}
    with pytest.raises(UsageError, match=r'^--remoteWriteHeader: "X-Scope-OrgID" is not allowed; must be "Name: '
                                         r'value"$'):
        from_flags("--remoteWrite", "http://prom/", "--remoteWriteHeader", "X-Scope-OrgID")
    with pytest.raises(UsageError, match=r"^--otlpHeader: "):
        from_flags("--otlpHeader", "bad name: x")


@pytest.mark.parametrize(("layer", "start"), [
    ({"remoteWrite": "ftp://prom/"}, '$.remoteWrite: "ftp://prom/" is not allowed'),
    ({"remoteWrite": "http://user:pw@prom/"}, "$.remoteWrite: "),
    ({"otlp": "collector:4318"}, '$.otlp: "collector:4318" is not allowed'),
    ({"remoteWriteHeaders": {"X-Scope-OrgID": 1}}, "$.remoteWriteHeaders['X-Scope-OrgID']: 1 is not allowed"),
    ({"otlpHeaders": {"X": "a\nb"}}, "$.otlpHeaders.X: "),
    ({"remoteWriteBearerTokenFile": 5}, "$.remoteWriteBearerTokenFile: 5 is not allowed"),
])
def test_a_bad_value_is_one_line_naming_the_setting(layer: dict[str, Any], start: str, tmp_path: Path) -> None:
    path = tmp_path / "configuration.json"
    path.write_text(json.dumps(layer))
    with pytest.raises(UsageError) as caught:
        read_config_file(str(path))
    assert str(caught.value).startswith(f"{path}: {start}") and "\n" not in str(caught.value), str(caught.value)


def test_secrets_are_not_printed() -> None:
    settings = settings_from(merge({"remoteWrite": "http://prom/api/v1/write?token=s3cret",
                                    "remoteWriteHeaders": {"Authorization": "Bearer s3cret", "X-Scope-OrgID": "a"},
                                    "otlpHeaders": {"api-key": "s3cret"}}))
    shown = str(settings.effective)
    assert "s3cret" not in shown and "X-Scope-OrgID" in shown


def test_validate_says_where_the_metrics_are_written() -> None:
    settings = settings_from(merge({"remoteWrite": "http://prom.monitoring:9090/api/v1/write",
                                    "otlp": "http://otel.monitoring:4318", "pushgatewayJob": "nightly"}))
    lines = "\n".join(describe(settings, [URL], {}, ALONE))
    assert ("writes metrics to the remote write receiver http://prom.monitoring:9090/api/v1/write after every "
            "interval and at the end, the latency also as native histograms (job nightly)") in lines
    assert "sends metrics over OTLP/HTTP to http://otel.monitoring:4318 after every interval" in lines


@pytest.mark.parametrize(("given", "used"), [
    ("http://c:4318", "http://c:4318/v1/metrics"), ("http://c:4318/", "http://c:4318/v1/metrics"),
    ("https://c/otlp/v1/metrics", "https://c/otlp/v1/metrics"), ("http://c:4318/custom", "http://c:4318/custom"),
])
def test_an_otlp_url_without_a_path_gets_the_collectors(given: str, used: str) -> None:
    assert otlp_url(given) == used


def test_validate_names_a_receiver_outside_the_cluster_with_its_egress_rule() -> None:
    """The pallet's NetworkPolicy lets the soak reach the cluster's pods only: a receiver outside it is
    named, as a URL or the Pushgateway is."""
    settings = settings_from(merge({"remoteWrite": "https://mimir.example.com/api/v1/push",
                                    "otlp": "http://otel-collector.monitoring:4318"}))
    lines = describe(settings, ["http://nginx.soak-target.svc.cluster.local/"], {}, ALONE)
    policy = "\n".join(lines[next(i for i, line in enumerate(lines) if line.startswith("network policy:")):])
    assert "  mimir.example.com looks outside the cluster" in policy and "ports: [{port: 443, protocol: TCP}]" in policy
    assert "  otel-collector.monitoring may be outside the cluster" in policy  # as any <name>.<namespace>
    assert "nginx.soak-target" not in policy
