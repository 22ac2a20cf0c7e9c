"""The NetworkPolicies, judged as Kubernetes judges them, for every variant of the pallet.

No CNI plugin runs here, so the rendered policies are evaluated by the rules of the
NetworkPolicy API (tests/support/netpol.py, held to the Kubernetes docs' examples in
tests/unit/test_netpol.py) against the connections the pallet makes and some it must not: the
soak reaches DNS and, over TCP, any pod of the cluster (its nginx, a user's Service in another
namespace, the Pushgateway) and no host outside it unless `soak validate`'s rule is added; nginx
accepts only the soak; the soak accepts only a metrics scrape when that component is on; and the
Linkerd component opens exactly what the mesh needs.
"""

from __future__ import annotations

import re
import textwrap
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
import yaml

from runner.config.settings import merge, settings_from
from tests.conftest import REPO, run_soak
from tests.support.netpol import Endpoint, allowed, host, pod
from tests.support.pallet import VARIANTS, Edit, find, render, soak_container

DNS = 53
# Every variant, the monitoring component's too: each component of manifests/components is on in one.
POLICY_VARIANTS = [*VARIANTS, "monitoring", "metrics+monitoring", "linkerd+scale-out+metrics+monitoring"]


def outside() -> Endpoint:
    return host("203.0.113.10")


def pallet_pods(resources: tuple[dict[str, Any], ...]) -> tuple[Endpoint, Endpoint]:
    """The soak's pod and nginx's, with their namespaces' labels, as the rendered pallet makes them."""
    def namespace_labels(name: str) -> dict[str, str]:
        return find(resources, "Namespace", name)["metadata"].get("labels", {})

    deployment = find(resources, "Deployment", "nginx")
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    target = deployment["metadata"]["namespace"]
    nginx = pod(target, deployment["spec"]["template"]["metadata"]["labels"], namespace_labels(target),
                   {p["name"]: p["containerPort"] for p in container["ports"]})
    cronjob = find(resources, "CronJob", "soak")
    template = cronjob["spec"]["jobTemplate"]["spec"]["template"]
    soak = pod(cronjob["metadata"]["namespace"], template["metadata"]["labels"],
                  namespace_labels(cronjob["metadata"]["namespace"]),
                  {p["name"]: p["containerPort"] for p in soak_container(resources).get("ports", [])})
    return soak, nginx


KUBE_DNS = pod("kube-system", {"k8s-app": "kube-dns"})
ELSEWHERE = pod("default", {"app": "something"})
# A user's own service: its pods, in a namespace of their own, behind a Service whose port forwards
# to the pods' port "https" (a plugin judges the pods a Service's address is translated to).
USERS_SERVICE = pod("shop", {"app.kubernetes.io/name": "checkout"}, named_ports={"https": 8443})
# A cluster's own nginx, in the namespace such clusters give it.
USERS_NGINX = pod("nginx", {"app.kubernetes.io/name": "nginx"}, named_ports={"http": 8080})
PROMETHEUS = pod("monitoring", {"app.kubernetes.io/name": "prometheus"})
# The same Prometheus in a namespace of another name, and one that is labelled as a team might label it.
PROMETHEUS_ELSEWHERE = pod("observability", {"app.kubernetes.io/name": "prometheus"},
                           {"app.kubernetes.io/part-of": "kube-prometheus-stack"})
CONTROL_PLANE = pod("linkerd", {"linkerd.io/control-plane-component": "destination"},
                    {"linkerd.io/is-control-plane": "true"})
VIZ = pod("linkerd-viz", {"component": "prometheus"}, {"linkerd.io/extension": "viz"})
LINKERD_PORTS = {"inbound": 4143, "tap": 4190, "admin": 4191, "identity": 8080, "destination": 8086, "policy": 8090}


def pushgateway() -> tuple[Endpoint, str]:
    """The Pushgateway docs/monitoring.md tells users to install (its Helm chart's pod), at the URL it
    tells them to put in configuration.json."""
    (url,) = set(re.findall(r'"pushgateway": "([^"]+)"', (REPO / "docs" / "monitoring.md").read_text()))
    parts = urlsplit(url)
    assert parts.port is not None and parts.hostname is not None
    service, namespace = parts.hostname.split(".")[:2]
    return pod(namespace, {"app.kubernetes.io/name": service}, named_ports={"http": parts.port}), url


@pytest.mark.parametrize("variant", POLICY_VARIANTS)
def test_the_soak_reaches_any_pod_of_the_cluster_and_dns_and_no_host_outside_it(variant: str) -> None:
    """README's step 2 says to put your own URLs in urlsconfigmap.yaml: on a plugin that enforced
    the policies, only the pallet's nginx answered, and a run against your own Service exited 8."""
    resources = render(variant)
    soak, nginx = pallet_pods(resources)
    gateway, _ = pushgateway()
    assert allowed(resources, soak, nginx, nginx.named_ports["http"])
    for target, port in ((USERS_SERVICE, 8443), (USERS_NGINX, 8080), (ELSEWHERE, 80), (gateway, 9091)):
        assert allowed(resources, soak, target, port), (target, port)
    assert allowed(resources, soak, KUBE_DNS, DNS, "UDP") and allowed(resources, soak, KUBE_DNS, DNS, "TCP")
    assert allowed(resources, soak, outside(), DNS, "UDP"), "a node-local DNS cache listens on a link-local address"
    for port in (80, 443, 8443):
        assert not allowed(resources, soak, outside(), port), f"a host outside the cluster, port {port}"
    assert not allowed(resources, soak, USERS_SERVICE, 8443, "UDP") and not allowed(resources, soak, KUBE_DNS, 123, "UDP")
    assert not allowed(resources, soak, nginx, 9113), "nginx's own policy keeps its other ports closed"


@pytest.mark.parametrize("variant", [v for v in POLICY_VARIANTS if "monitoring" in v.split("+")])
def test_with_the_monitoring_component_the_pushes_reach_the_pushgateway(variant: str) -> None:
    """SoakNoFigures fired two hours after every install on an enforcing plugin: the pushes were blocked."""
    resources = render(variant)
    soak, _ = pallet_pods(resources)
    gateway, url = pushgateway()
    assert allowed(resources, soak, gateway, gateway.named_ports["http"])
    said = run_soak("validate", "--pushgateway", url, "http://nginx.soak-target.svc.cluster.local")
    assert said.returncode == 0 and "network policy" not in said.stdout, said.stdout


@pytest.mark.parametrize("variant", POLICY_VARIANTS)
def test_nginx_accepts_only_the_soak_and_sends_nothing_but_the_mesh_needs(variant: str) -> None:
    resources = render(variant)
    soak, nginx = pallet_pods(resources)
    http = nginx.named_ports["http"]
    for stranger in (ELSEWHERE, PROMETHEUS, outside()):
        assert not allowed(resources, stranger, nginx, http), stranger
    assert allowed(resources, pod("soak", {"app.kubernetes.io/name": "soak"}), nginx, http)
    meshed = "linkerd" in variant.split("+")
    assert allowed(resources, nginx, KUBE_DNS, DNS, "UDP") is meshed
    assert not allowed(resources, nginx, ELSEWHERE, 80) and not allowed(resources, nginx, outside(), 443)


@pytest.mark.parametrize("variant", POLICY_VARIANTS)
def test_the_soak_accepts_only_a_metrics_scrape_when_the_component_is_on(variant: str) -> None:
    """And only from the monitoring stack's namespace: the metrics port does not answer every pod. The
    soak's egress to any pod opened nothing inward: not even to the pods it sends to, nor another soak pod."""
    resources = render(variant)
    soak, nginx = pallet_pods(resources)
    args = soak_container(resources)["args"]
    metric_addrs = [a.split("=", 1)[1] for a in args if a.startswith("--metricAddr=")]
    senders = (PROMETHEUS, PROMETHEUS_ELSEWHERE, ELSEWHERE, USERS_SERVICE, USERS_NGINX, KUBE_DNS, pushgateway()[0],
               soak, outside())  # (nginx may send nothing at all)
    for sender in senders:
        for port in (53, 80, 8080, 9090, 9091):
            expected = bool(metric_addrs) and port == 9090 and sender.namespace == "monitoring"  # any pod there
            assert allowed(resources, sender, soak, port) is expected, (sender, port)
    if metric_addrs:
        (addr,) = metric_addrs
        port = int(settings_from(merge({"metricAddr": addr})).metrics.addr.rsplit(":", 1)[1])
        assert port == soak.named_ports["metrics"] == 9090, "the policy opens the port the runner serves"


@pytest.mark.parametrize("variant", [v for v in POLICY_VARIANTS if "linkerd" in v.split("+")])
def test_the_linkerd_component_opens_what_the_mesh_needs_and_no_more(variant: str) -> None:
    """Its own policies alone (the soak's egress to any pod would hide what they open)."""
    resources = render(variant)
    component = tuple(r for r in resources if r["kind"] != "NetworkPolicy" or r["metadata"]["name"].endswith("-linkerd"))
    soak, nginx = pallet_pods(resources)
    ports = LINKERD_PORTS
    assert allowed(resources, soak, nginx, ports["inbound"]), "meshed traffic arrives on the proxy's inbound port"
    assert allowed(resources, soak, USERS_SERVICE, ports["inbound"]), "and so at a meshed service of the user's"
    assert not allowed(resources, ELSEWHERE, nginx, ports["inbound"])
    for meshed in (soak, nginx):
        for component_pod in (CONTROL_PLANE, VIZ):
            assert allowed(resources, component_pod, meshed, ports["admin"])
            assert allowed(resources, component_pod, meshed, ports["tap"])
        assert not allowed(resources, ELSEWHERE, meshed, ports["admin"])
        for service in ("identity", "destination", "policy"):
            assert allowed(resources, meshed, CONTROL_PLANE, ports[service]), (meshed, service)
            assert allowed(component, meshed, CONTROL_PLANE, ports[service]), (meshed, service)
            assert not allowed(component, meshed, ELSEWHERE, ports[service])
        assert not allowed(component, meshed, CONTROL_PLANE, 443)
    assert not allowed(resources, nginx, CONTROL_PLANE, 443) and not allowed(resources, nginx, ELSEWHERE, 8080)


def test_without_the_mesh_no_linkerd_port_is_open() -> None:
    resources = render("base")
    soak, nginx = pallet_pods(resources)
    for port in LINKERD_PORTS.values():
        assert not allowed(resources, soak, nginx, port) or port == nginx.named_ports["http"]
        assert not allowed(resources, CONTROL_PLANE, soak, port) and not allowed(resources, VIZ, nginx, port)
        assert not allowed(resources, nginx, CONTROL_PLANE, port)


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


# Where the rule `soak validate` gives goes: after the soak policy's last egress rule, as a user pastes it.
LAST_EGRESS_RULE = "      ports:\n        - protocol: TCP\n"


def validate_rule(tmp_path: Path, url: str) -> list[str]:
    """The egress rule `soak validate` gives for `url` put in urlsconfigmap.yaml: the lines under its host."""
    configmap = tmp_path / "urlsconfigmap.yaml"
    shipped = (REPO / "urlsconfigmap.yaml").read_text()
    configmap.write_text(shipped.replace("    http://nginx.soak-target.svc.cluster.local\n", f"    {url}\n"))
    said = run_soak("validate", "--config", str(REPO / "configuration.json"), "--urls", str(configmap))
    assert said.returncode == 0, said.stderr
    lines = said.stdout.splitlines()
    (at,) = [i for i, line in enumerate(lines) if line.startswith(f"  {urlsplit(url).hostname} ")]
    return lines[at + 1:at + 3]


@pytest.mark.parametrize("variant", ["base", "linkerd+scale-out+metrics+monitoring"])
def test_the_rule_validate_gives_for_a_host_outside_the_cluster_lets_the_soak_reach_it(tmp_path: Path,
                                                                                     variant: str) -> None:
    """Pasted under the policy's egress as printed (an address), or with the name's address put in."""
    for url, address, edit in (("https://203.0.113.20:8443/", "203.0.113.20", None),
                               ("https://api.example.com/", "192.0.2.7", ("<address>", "192.0.2.7"))):
        rule = validate_rule(tmp_path, url)
        text = "\n".join(rule) + "\n"
        if edit is not None:
            text = text.replace(*edit)
        port = yaml.safe_load(textwrap.dedent(text))[0]["ports"][0]["port"]
        assert port == (urlsplit(url).port or 443)
        pasted: Edit = ("manifests/soak/networkpolicy.yaml", LAST_EGRESS_RULE, LAST_EGRESS_RULE + text)
        before, after = render(variant), render(variant, (pasted,))
        soak, nginx = pallet_pods(after)
        assert not allowed(before, soak, host(address), port), "validate's warning was right: blocked as shipped"
        assert allowed(after, soak, host(address), port)
        assert not allowed(after, soak, host(address), port + 1) and not allowed(after, soak, outside(), port)
        assert allowed(after, soak, nginx, nginx.named_ports["http"]) and allowed(after, soak, USERS_SERVICE, 8443)



def test_the_example_in_deploy_md_is_what_validate_prints() -> None:
    text = (REPO / "docs" / "deploy.md").read_text()
    (block,) = re.findall(r"^```\n(network policy:.*?)^```$", text, re.S | re.M)
    said = run_soak("validate", "https://api.example.com/")
    assert said.returncode == 0, said.stderr
    assert said.stdout.endswith(block), said.stdout
