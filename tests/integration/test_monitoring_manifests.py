"""The monitoring component, rendered by `kubectl kustomize` with the pallet and validated offline.

Turned on as docs/monitoring.md says: by uncommenting its line in the root kustomization.yaml
(in a copy of the pallet's files). Its ConfigMap is checked against the Kubernetes schemas, as
every resource of the pallet is; the Kubernetes schemas do not know the Prometheus operator's
CRDs, so the PrometheusRule and the PodMonitor are checked against models generated from those
CRDs' schemas (cloudcoil-models-prometheus-operator): types, required fields, patterns (every
duration), enums, and no field the CRD does not have.
"""

from __future__ import annotations

import json
from typing import Any

import kubernetes_validate
import pytest
import yaml
from cloudcoil.models.prometheus_operator.v1 import PodMonitor, PrometheusRule

from tests.conftest import REPO
from tests.support import pallet

KUBERNETES_VERSIONS = [f"1.{minor}.0" for minor in range(29, 38)]
CRD_MODELS = {"PrometheusRule": PrometheusRule, "PodMonitor": PodMonitor}
MONITORING = REPO / "manifests" / "components" / "monitoring"


def render(*names: str) -> tuple[dict[str, Any], ...]:
    """The pallet as `kubectl kustomize` renders it with these components' lines uncommented."""
    return pallet.render("+".join(names) or "base")


def only(resources: tuple[dict[str, Any], ...], kind: str) -> dict[str, Any]:
    (found,) = [r for r in resources if r["kind"] == kind]
    return found


def added(*names: str) -> list[dict[str, Any]]:
    """What the monitoring component adds to the pallet rendered with `names`."""
    before = {(r["kind"], r["metadata"]["name"]) for r in render(*names)}
    return [r for r in render(*names, "monitoring") if (r["kind"], r["metadata"]["name"]) not in before]


def test_the_component_adds_a_rule_a_podmonitor_and_a_dashboard_and_changes_nothing_else() -> None:
    for names in [(), ("metrics",), ("linkerd", "scale-out", "metrics")]:
        new = added(*names)
        assert sorted((r["kind"], r["metadata"]["namespace"], r["metadata"]["name"]) for r in new) == [
            ("ConfigMap", "soak", "soak-dashboard"), ("PodMonitor", "soak", "soak"), ("PrometheusRule", "soak", "soak")]
        assert [r for r in render(*names, "monitoring") if r not in new] == list(render(*names))


@pytest.mark.parametrize("version", KUBERNETES_VERSIONS)
def test_its_core_resources_validate_strictly(version: str) -> None:
    for resource in added():
        if resource["kind"] in CRD_MODELS:
            continue
        try:
            kubernetes_validate.validate(resource, version, strict=True)
        except kubernetes_validate.ValidationError as e:
            pytest.fail(f"{resource['kind']} {resource['metadata']['name']} on {version}: {e.message}")


def crd_validated(resource: dict[str, Any]) -> dict[str, Any]:
    """The resource validated against its CRD's model; what the model keeps of it (no unknown fields)."""
    model = CRD_MODELS[resource["kind"]]
    assert resource["apiVersion"] == "monitoring.coreos.com/v1"
    return model.model_validate(resource).model_dump(by_alias=True, exclude_unset=True, mode="json")


def test_its_prometheus_operator_resources_validate_against_the_crd_schemas() -> None:
    for resource in added():
        if resource["kind"] in CRD_MODELS:
            assert crd_validated(resource) == resource, f"{resource['kind']}: a field its CRD does not have"


def test_the_crd_check_fails_on_what_the_api_server_would_refuse() -> None:
    """The check above can fail: a wrong duration, a wrong scheme, an unknown field."""
    rule = only(added(), "PrometheusRule")
    bad_for = json.loads(json.dumps(rule))
    bad_for["spec"]["groups"][0]["rules"][0]["for"] = "5 minutes"
    with pytest.raises(ValueError, match="for"):
        crd_validated(bad_for)
    unknown = json.loads(json.dumps(rule))
    unknown["spec"]["groups"][0]["rules"][0]["severity"] = "critical"  # belongs under labels
    assert crd_validated(unknown) != unknown
    monitor = json.loads(json.dumps(only(added(), "PodMonitor")))
    monitor["spec"]["podMetricsEndpoints"][0]["scheme"] = "ftp"
    with pytest.raises(ValueError, match="scheme"):
        crd_validated(monitor)


def test_the_podmonitor_scrapes_the_port_the_metrics_component_serves() -> None:
    for names in [("metrics",), ("scale-out", "metrics")]:
        resources = render(*names, "monitoring")
        monitor = only(resources, "PodMonitor")
        cronjob = only(resources, "CronJob")
        template = cronjob["spec"]["jobTemplate"]["spec"]["template"]
        assert monitor["metadata"]["namespace"] == cronjob["metadata"]["namespace"]
        assert monitor["spec"]["selector"]["matchLabels"].items() <= template["metadata"]["labels"].items()
        (endpoint,) = monitor["spec"]["podMetricsEndpoints"]
        (container,) = template["spec"]["containers"]
        assert endpoint["port"] in [p["name"] for p in container.get("ports", [])]
        assert endpoint["path"] == template["metadata"]["annotations"]["prometheus.io/path"]


def test_the_dashboard_configmap_is_the_dashboard_for_grafanas_sidecar() -> None:
    configmap = only(added(), "ConfigMap")
    assert configmap["metadata"]["labels"]["grafana_dashboard"] == "1"
    (text,) = configmap["data"].values()
    assert json.loads(text) == json.loads((MONITORING / "dashboard.json").read_text())
    assert len(text.encode()) < 256 * 1024  # kubectl apply keeps a copy in an annotation, at most 256 KiB


def test_the_prometheusrule_holds_the_rule_file() -> None:
    rule = only(added(), "PrometheusRule")
    assert rule["spec"] == yaml.safe_load((MONITORING / "soak-alerts.rules.yaml").read_text())


def test_the_dashboard_is_well_formed_for_grafana() -> None:
    """What Grafana needs and no test against Prometheus sees: ids, layout, data source, variables."""
    board = json.loads((MONITORING / "dashboard.json").read_text())
    assert board["uid"] and board["title"] and board["schemaVersion"] >= 36
    variables = {v["name"]: v for v in board["templating"]["list"]}
    assert set(variables) == {"datasource", "job", "url"}
    assert variables["datasource"]["type"] == "datasource" and variables["datasource"]["query"] == "prometheus"
    assert variables["url"]["multi"] and variables["url"]["includeAll"] and variables["url"]["allValue"] == ".*"
    panels = board["panels"]
    assert len({p["id"] for p in panels}) == len(panels)
    cells = set()
    for p in panels:
        box = p["gridPos"]
        assert 0 <= box["x"] and box["x"] + box["w"] <= 24, p["title"]
        mine = {(x, y) for x in range(box["x"], box["x"] + box["w"]) for y in range(box["y"], box["y"] + box["h"])}
        assert not mine & cells, f"{p['title']} overlaps another panel"
        cells |= mine
        if p["type"] == "row":
            continue
        assert p["datasource"] == {"type": "prometheus", "uid": "${datasource}"}, p["title"]
        assert p["description"] and p["targets"], p["title"]
        refs = [t["refId"] for t in p["targets"]]
        assert len(set(refs)) == len(refs), p["title"]
        for target in p["targets"]:
            assert target["datasource"] == p["datasource"]
            assert 'job=~"$job"' in target["expr"], (p["title"], target["expr"])  # every query follows the job chosen
    assert len({p["title"] for p in panels}) == len(panels)  # the integration test knows queries by title


def test_where_the_docs_and_the_metrics_component_point_for_a_podmonitor_there_is_one() -> None:
    """docs/metrics.md said the PodMonitor was not in the component, which ships one; the metrics
    component's comment sent readers to README.md, which has none. Each now names the file, and the
    file is the PodMonitor the monitoring component renders."""
    path = "manifests/components/monitoring/podmonitor.yaml"
    comment = (REPO / "manifests" / "components" / "metrics" / "kustomization.yaml").read_text()
    docs = (REPO / "docs" / "metrics.md").read_text()
    assert path in comment and path in " ".join(docs.split())
    assert "README has a PodMonitor" not in comment and "It is not in the component" not in docs
    shipped = yaml.safe_load((REPO / path).read_text())
    assert shipped["kind"] == "PodMonitor"
    rendered = only(render("metrics", "monitoring"), "PodMonitor")
    assert rendered["spec"] == shipped["spec"] and rendered["metadata"]["name"] == shipped["metadata"]["name"]


def crd_defaults(value: Any, schema: dict[str, Any], definitions: dict[str, Any]) -> Any:
    """`value` with every default its CRD schema declares filled in where the field is missing, as the
    API server fills them in (structural schema defaulting), read from the schema models."""
    schema = _resolved(schema, definitions)
    if isinstance(value, dict) and "properties" in schema:
        filled = {key: crd_defaults(item, schema["properties"].get(key, {}), definitions) for key, item in value.items()}
        for key, field_schema in schema["properties"].items():
            default = _resolved(field_schema, definitions).get("default", field_schema.get("default"))
            if key not in filled and default is not None:  # pydantic writes None for "optional": no default
                filled[key] = default
        return filled
    if isinstance(value, list) and "items" in schema:
        return [crd_defaults(item, schema["items"], definitions) for item in value]
    return value


def _resolved(schema: dict[str, Any], definitions: dict[str, Any]) -> dict[str, Any]:
    """A schema with its $ref followed; of an anyOf (Optional[X] is [X, null]; int-or-string), the
    alternative that is an object or a list, the only kind that holds fields with defaults."""
    if "$ref" in schema:
        return _resolved(definitions[schema["$ref"].rsplit("/", 1)[1]], definitions)
    if "anyOf" in schema:
        shaped = [r for r in (_resolved(s, definitions) for s in schema["anyOf"]) if "properties" in r or "items" in r]
        assert len(shaped) <= 1, schema
        return shaped[0] if shaped else {}
    return schema


def defaulted(resource: dict[str, Any]) -> dict[str, Any]:
    schema = CRD_MODELS[resource["kind"]].model_json_schema(by_alias=True)
    return crd_defaults(resource, schema, schema.get("$defs", {}))


def test_every_default_the_crd_schemas_add_is_written_out() -> None:
    """The PodMonitor said "configured" on every `kubectl apply -k .`: the API server filled in its
    relabelings' `action: replace`, and a list whose items differ is a changed list to a JSON merge
    patch (what kubectl applies to a custom resource). With every default written, the live object is
    the applied one and each apply says "unchanged"."""
    for names in [(), ("metrics",), ("linkerd", "scale-out", "metrics")]:
        for resource in added(*names):
            if resource["kind"] in CRD_MODELS:
                assert defaulted(resource) == resource, f"{resource['kind']}: a default the API server would add"


def test_the_defaults_are_read_from_the_schema() -> None:
    """The check above can fail: a relabeling without its action gets the CRD's default."""
    monitor = json.loads(json.dumps(only(added(), "PodMonitor")))
    relabeling = monitor["spec"]["podMetricsEndpoints"][0]["relabelings"][0]
    relabeling.pop("action", None)
    assert defaulted(monitor)["spec"]["podMetricsEndpoints"][0]["relabelings"][0] == {**relabeling, "action": "replace"}
