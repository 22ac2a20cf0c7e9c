"""The NetworkPolicies, judged as Kubernetes judges them, for every variant of the pallet.

No CNI plugin runs here, so the rendered policies are evaluated by the rules of the
NetworkPolicy API (a connection passes when the sender's egress and the receiver's ingress
both allow it; a pod no policy of a direction selects is open in that direction; peers by
namespace and pod labels, ports by number or container-port name) against the connections
the pallet makes and some it must not: the soak reaches its nginx and DNS and nothing else (not a
cluster's own nginx in a namespace `nginx`),
nginx accepts only the soak, the soak accepts only a metrics scrape when that component is
on, and the Linkerd component opens exactly what the mesh needs.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest

from runner.config.settings import merge, settings_from
from tests.support.pallet import VARIANTS, find, render, soak_container

DNS = 53


@dataclass(frozen=True)
class Endpoint:
    """A pod (namespace, its labels, the pod's labels, its named ports), or a host outside the cluster."""

    namespace: str | None
    namespace_labels: dict[str, str] = field(default_factory=dict)
    labels: dict[str, str] = field(default_factory=dict)
    named_ports: dict[str, int] = field(default_factory=dict)


def outside() -> Endpoint:
    return Endpoint(None)


def pod_in(namespace: str, labels: dict[str, str] | None = None, namespace_labels: dict[str, str] | None = None,
           named_ports: dict[str, int] | None = None) -> Endpoint:
    # Kubernetes labels every namespace with its name.
    return Endpoint(namespace, {"kubernetes.io/metadata.name": namespace, **(namespace_labels or {})},
                    labels or {}, named_ports or {})


def selects(selector: dict[str, Any], labels: dict[str, str]) -> bool:
    assert set(selector) <= {"matchLabels"}, f"this evaluator reads matchLabels only: {selector}"
    return selector.get("matchLabels", {}).items() <= labels.items()


def peer_matches(peer: dict[str, Any], policy_namespace: str, other: Endpoint) -> bool:
    assert set(peer) <= {"namespaceSelector", "podSelector"}, f"this evaluator reads no ipBlock: {peer}"
    if other.namespace is None:
        return False  # pod and namespace selectors match pods only
    if "namespaceSelector" in peer:
        in_namespace = selects(peer["namespaceSelector"], other.namespace_labels)
    else:
        in_namespace = other.namespace == policy_namespace
    return in_namespace and selects(peer.get("podSelector", {}), other.labels)


def port_matches(rule_ports: list[dict[str, Any]] | None, port: int, protocol: str, receiver: Endpoint) -> bool:
    if not rule_ports:
        return True
    for item in rule_ports:
        assert "endPort" not in item
        wanted = item.get("port")
        number = receiver.named_ports.get(wanted) if isinstance(wanted, str) else wanted
        if item.get("protocol", "TCP") == protocol and (wanted is None or number == port):
            return True
    return False


def allowed(resources: tuple[dict[str, Any], ...], sender: Endpoint, receiver: Endpoint, port: int,
            protocol: str = "TCP") -> bool:
    policies = [r for r in resources if r["kind"] == "NetworkPolicy"]

    def direction_allows(pod: Endpoint, direction: str, other: Endpoint) -> bool:
        if pod.namespace is None:
            return True  # outside the cluster: no policy of ours applies
        key, peers_key = ("ingress", "from") if direction == "Ingress" else ("egress", "to")
        applying = [p for p in policies if p["metadata"]["namespace"] == pod.namespace
                    and selects(p["spec"]["podSelector"], pod.labels)
                    and direction in p["spec"].get("policyTypes", ["Ingress"])]
        if not applying:
            return True
        for policy in applying:
            for rule in policy["spec"].get(key) or []:
                peers = rule.get(peers_key)
                if (not peers or any(peer_matches(peer, pod.namespace, other) for peer in peers)) and \
                        port_matches(rule.get("ports"), port, protocol, receiver):
                    return True
        return False

    return direction_allows(sender, "Egress", receiver) and direction_allows(receiver, "Ingress", sender)


def pallet_pods(resources: tuple[dict[str, Any], ...]) -> tuple[Endpoint, Endpoint]:
    """The soak's pod and nginx's, with their namespaces' labels, as the rendered pallet makes them."""
    def namespace_labels(name: str) -> dict[str, str]:
        return find(resources, "Namespace", name)["metadata"].get("labels", {})

    deployment = find(resources, "Deployment", "nginx")
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    target = deployment["metadata"]["namespace"]
    nginx = pod_in(target, deployment["spec"]["template"]["metadata"]["labels"], namespace_labels(target),
                   {p["name"]: p["containerPort"] for p in container["ports"]})
    cronjob = find(resources, "CronJob", "soak")
    template = cronjob["spec"]["jobTemplate"]["spec"]["template"]
    soak = pod_in(cronjob["metadata"]["namespace"], template["metadata"]["labels"],
                  namespace_labels(cronjob["metadata"]["namespace"]),
                  {p["name"]: p["containerPort"] for p in soak_container(resources).get("ports", [])})
    return soak, nginx


KUBE_DNS = pod_in("kube-system", {"k8s-app": "kube-dns"})
ELSEWHERE = pod_in("default", {"app": "something"})
# A cluster's own nginx, in the namespace such clusters give it: no pallet object may be there, or reach it.
USERS_NGINX = pod_in("nginx", {"app.kubernetes.io/name": "nginx"}, named_ports={"http": 8080})
PROMETHEUS = pod_in("monitoring", {"app.kubernetes.io/name": "prometheus"})
# The same Prometheus in a namespace of another name, and one that is labelled as a team might label it.
PROMETHEUS_ELSEWHERE = pod_in("observability", {"app.kubernetes.io/name": "prometheus"},
                              {"app.kubernetes.io/part-of": "kube-prometheus-stack"})
CONTROL_PLANE = pod_in("linkerd", {"linkerd.io/control-plane-component": "destination"},
                       {"linkerd.io/is-control-plane": "true"})
VIZ = pod_in("linkerd-viz", {"component": "prometheus"}, {"linkerd.io/extension": "viz"})
LINKERD_PORTS = {"inbound": 4143, "tap": 4190, "admin": 4191, "identity": 8080, "destination": 8086, "policy": 8090}


@pytest.mark.parametrize("variant", VARIANTS)
def test_the_soak_reaches_nginx_and_dns_and_nothing_else(variant: str) -> None:
    resources = render(variant)
    soak, nginx = pallet_pods(resources)
    http = nginx.named_ports["http"]
    assert allowed(resources, soak, nginx, http)
    assert allowed(resources, soak, KUBE_DNS, DNS, "UDP") and allowed(resources, soak, KUBE_DNS, DNS, "TCP")
    assert not allowed(resources, soak, nginx, 9113), "nginx's other ports stay closed"
    assert not allowed(resources, soak, ELSEWHERE, 80) and not allowed(resources, soak, outside(), 443)
    assert not allowed(resources, soak, KUBE_DNS, 443)
    assert not allowed(resources, soak, USERS_NGINX, http), "the pallet's nginx only, not one the cluster has"


@pytest.mark.parametrize("variant", VARIANTS)
def test_nginx_accepts_only_the_soak_and_sends_nothing_but_the_mesh_needs(variant: str) -> None:
    resources = render(variant)
    soak, nginx = pallet_pods(resources)
    http = nginx.named_ports["http"]
    for stranger in (ELSEWHERE, PROMETHEUS, outside()):
        assert not allowed(resources, stranger, nginx, http), stranger
    assert allowed(resources, pod_in("soak", {"app.kubernetes.io/name": "soak"}), nginx, http)
    meshed = "linkerd" in variant.split("+")
    assert allowed(resources, nginx, KUBE_DNS, DNS, "UDP") is meshed
    assert not allowed(resources, nginx, ELSEWHERE, 80) and not allowed(resources, nginx, outside(), 443)


@pytest.mark.parametrize("variant", VARIANTS)
def test_the_soak_accepts_only_a_metrics_scrape_when_the_component_is_on(variant: str) -> None:
    """And only from the monitoring stack's namespace: the metrics port does not answer every pod."""
    resources = render(variant)
    soak, nginx = pallet_pods(resources)
    args = soak_container(resources)["args"]
    metric_addrs = [a.split("=", 1)[1] for a in args if a.startswith("--metricAddr=")]
    for sender in (PROMETHEUS, PROMETHEUS_ELSEWHERE, ELSEWHERE, outside()):  # (nginx may send nothing at all)
        for port in (80, 8080, 9090, 9091):
            expected = bool(metric_addrs) and port == 9090 and sender == PROMETHEUS
            assert allowed(resources, sender, soak, port) is expected, (sender, port)
    if metric_addrs:
        (addr,) = metric_addrs
        port = int(settings_from(merge({"metricAddr": addr})).metrics.addr.rsplit(":", 1)[1])
        assert port == soak.named_ports["metrics"] == 9090, "the policy opens the port the runner serves"


@pytest.mark.parametrize("variant", [v for v in VARIANTS if "linkerd" in v.split("+")])
def test_the_linkerd_component_opens_what_the_mesh_needs_and_no_more(variant: str) -> None:
    resources = render(variant)
    soak, nginx = pallet_pods(resources)
    ports = LINKERD_PORTS
    assert allowed(resources, soak, nginx, ports["inbound"]), "meshed traffic arrives on the proxy's inbound port"
    assert not allowed(resources, ELSEWHERE, nginx, ports["inbound"])
    for pod in (soak, nginx):
        for component in (CONTROL_PLANE, VIZ):
            assert allowed(resources, component, pod, ports["admin"]) and allowed(resources, component, pod, ports["tap"])
        assert not allowed(resources, ELSEWHERE, pod, ports["admin"])
        for service in ("identity", "destination", "policy"):
            assert allowed(resources, pod, CONTROL_PLANE, ports[service]), (pod, service)
            assert not allowed(resources, pod, ELSEWHERE, ports[service])
        assert not allowed(resources, pod, CONTROL_PLANE, 443)


def test_without_the_mesh_no_linkerd_port_is_open() -> None:
    resources = render("base")
    soak, nginx = pallet_pods(resources)
    for port in LINKERD_PORTS.values():
        assert not allowed(resources, soak, nginx, port) or port == nginx.named_ports["http"]
        assert not allowed(resources, CONTROL_PLANE, soak, port) and not allowed(resources, VIZ, nginx, port)
        assert not allowed(resources, soak, CONTROL_PLANE, port) and not allowed(resources, nginx, CONTROL_PLANE, port)


def test_the_evaluator_opens_a_pod_no_policy_selects() -> None:
    """Without the pallet's policies everything passes: the checks above are the policies' doing."""
    resources = tuple(r for r in render("base") if r["kind"] != "NetworkPolicy")
    soak, nginx = pallet_pods(resources)
    assert allowed(resources, ELSEWHERE, nginx, 8080) and allowed(resources, soak, outside(), 443)
    assert allowed(resources, PROMETHEUS, soak, 80)


# The one place that says where the scraping Prometheus runs, as its comment tells a user to edit it.
SCRAPER_NAMESPACE = ("manifests/components/metrics/networkpolicy.yaml", "kubernetes.io/metadata.name: monitoring",
                     "app.kubernetes.io/part-of: kube-prometheus-stack")


def test_the_scraping_namespace_is_set_in_one_place() -> None:
    """One edit of the metrics component's policy moves the scrape to another namespace, in every variant
    with metrics, and leaves every other connection as it was."""
    for variant in [v for v in VARIANTS if "metrics" in v.split("+")]:
        before, after = render(variant), render(variant, (SCRAPER_NAMESPACE,))
        soak, _ = pallet_pods(after)
        assert allowed(after, PROMETHEUS_ELSEWHERE, soak, 9090) and not allowed(after, PROMETHEUS, soak, 9090)
        assert not allowed(after, PROMETHEUS_ELSEWHERE, soak, 8080)
        changed = [(r["kind"], r["metadata"]["name"]) for r in after if r not in before]
        assert changed == [("NetworkPolicy", "soak-metrics")], changed

