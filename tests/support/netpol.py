"""Kubernetes NetworkPolicies (networking.k8s.io/v1) evaluated offline: may this connection pass?

No cluster and no network plugin run in the tests, so the rendered policies are judged here by
the rules of the API. No kept library fits: network-config-analyzer (np-guard) pins networkx 3.2,
PyYAML and lxml exactly, where checkov (the manifests' scan) needs networkx < 2.7; the others are
generators and linters. The rules, from the API reference and the Kubernetes docs' "Network
Policies" page (tests/unit/test_netpol.py holds this module to that page's examples):

- A pod that no policy selects for a direction (policyTypes) is open in that direction. Policies
  add up: a selected pod may do what any rule of any policy selecting it allows, and nothing else.
- A connection between two pods passes when the sender's egress and the receiver's ingress both
  allow it; a host outside the cluster has no policy of its own.
- policyTypes unset: Ingress, and Egress too when the policy has egress rules.
- A rule allows what matches one of its peers (from/to) and one of its ports; no peers: every
  peer, no ports: every port.
- A peer with podSelector only: those pods of the policy's own namespace; namespaceSelector only:
  every pod of the namespaces it selects; both in one peer: those pods in those namespaces (AND);
  two peers of a list: either (OR). An empty selector ({}) selects everything.
- ipBlock: the addresses in `cidr` and in none of `except`. Pod IPs are ephemeral, and whether an
  ipBlock matches one is up to the plugin: pods here carry no address, so an ipBlock matches
  only a host outside the cluster.
- A port: `protocol` (TCP when unset), and `port` a number or a receiving container's port name,
  with `endPort` the last of a range; no `port`: every port of that protocol.

Not modelled: traffic to and from a pod's own node (always allowed; the tests name no node), and
a Service's address (a plugin judges the pods a Service's address is translated to: a test asks
about those pods). A field of the API this module does not read is refused, not ignored.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

# Kubernetes sets this label on every namespace, to the namespace's name (1.21 and later).
NAME_LABEL = "kubernetes.io/metadata.name"


@dataclass(frozen=True)
class Endpoint:
    """One end of a connection: a pod (its namespace and that namespace's labels, its own labels,
    its containers' named ports), or a host outside the cluster (no namespace; an address)."""

    namespace: str | None
    namespace_labels: Mapping[str, str] = field(default_factory=dict)
    labels: Mapping[str, str] = field(default_factory=dict)
    named_ports: Mapping[str, int] = field(default_factory=dict)
    address: str | None = None


def pod(namespace: str, labels: Mapping[str, str] | None = None, namespace_labels: Mapping[str, str] | None = None,
        named_ports: Mapping[str, int] | None = None) -> Endpoint:
    """A pod, its namespace labelled with its name as Kubernetes labels every namespace."""
    return Endpoint(namespace, {NAME_LABEL: namespace, **(namespace_labels or {})}, dict(labels or {}),
                    dict(named_ports or {}))


def host(address: str) -> Endpoint:
    """A host outside the cluster, at `address`."""
    ipaddress.ip_address(address)  # a typo in a test is an error, not a host that nothing matches
    return Endpoint(None, address=address)


_OPERATORS = {"In", "NotIn", "Exists", "DoesNotExist"}


def selects(selector: Mapping[str, Any], labels: Mapping[str, str]) -> bool:
    """A label selector (matchLabels and matchExpressions, ANDed) against a set of labels."""
    unknown = set(selector) - {"matchLabels", "matchExpressions"}
    if unknown:
        raise ValueError(f"a label selector has no field {sorted(unknown)}")
    if not selector.get("matchLabels", {}).items() <= labels.items():
        return False
    for expression in selector.get("matchExpressions", []):
        key, operator, values = expression["key"], expression["operator"], expression.get("values", [])
        if operator not in _OPERATORS:
            raise ValueError(f"a label selector has no operator {operator!r}")
        present = key in labels
        if operator == "In" and not (present and labels[key] in values):
            return False
        if operator == "NotIn" and present and labels[key] in values:
            return False
        if (operator == "Exists" and not present) or (operator == "DoesNotExist" and present):
            return False
    return True


def _in_block(block: Mapping[str, Any], other: Endpoint) -> bool:
    unknown = set(block) - {"cidr", "except"}
    if unknown:
        raise ValueError(f"an ipBlock has no field {sorted(unknown)}")
    if other.namespace is not None or other.address is None:
        return False  # a pod: see the module's docstring
    address = ipaddress.ip_address(other.address)
    network = ipaddress.ip_network(block["cidr"])
    if address.version != network.version or address not in network:
        return False
    return not any(address in ipaddress.ip_network(cut) for cut in block.get("except", []))


def peer_matches(peer: Mapping[str, Any], policy_namespace: str, other: Endpoint) -> bool:
    """One element of a rule's from/to against the other end of the connection."""
    unknown = set(peer) - {"namespaceSelector", "podSelector", "ipBlock"}
    if unknown or not peer:
        raise ValueError(f"a peer has no field {sorted(unknown)}" if unknown else "an empty peer selects nothing")
    if "ipBlock" in peer:
        if len(peer) > 1:
            raise ValueError("a peer with an ipBlock may have no selector (the API refuses it)")
        return _in_block(peer["ipBlock"], other)
    if other.namespace is None:
        return False  # pod and namespace selectors select pods only
    if "namespaceSelector" in peer:
        in_namespace = selects(peer["namespaceSelector"], other.namespace_labels)
    else:
        in_namespace = other.namespace == policy_namespace
    return in_namespace and selects(peer.get("podSelector", {}), other.labels)


def port_matches(rule_ports: list[Mapping[str, Any]] | None, port: int, protocol: str, receiver: Endpoint) -> bool:
    """A rule's ports against the connection's port and protocol (a name: the receiver's container port)."""
    if not rule_ports:
        return True
    for item in rule_ports:
        unknown = set(item) - {"protocol", "port", "endPort"}
        if unknown:
            raise ValueError(f"a port has no field {sorted(unknown)}")
        if item.get("protocol", "TCP") != protocol:
            continue
        wanted = item.get("port")
        if wanted is None:
            return True
        if isinstance(wanted, str):
            if "endPort" in item:
                raise ValueError("endPort needs a numeric port (the API refuses a name)")
            if receiver.named_ports.get(wanted) == port:
                return True
        elif wanted <= port <= item.get("endPort", wanted):
            return True
    return False


def policy_types(spec: Mapping[str, Any]) -> list[str]:
    """The directions a policy applies to: as written, else Ingress, and Egress when it has egress rules."""
    if "policyTypes" in spec:
        return list(spec["policyTypes"])
    return ["Ingress", "Egress"] if spec.get("egress") else ["Ingress"]


def _direction_allows(policies: list[Mapping[str, Any]], pod_end: Endpoint, direction: str, other: Endpoint,
                      port: int, protocol: str, receiver: Endpoint) -> bool:
    if pod_end.namespace is None:
        return True  # a host outside the cluster: no policy applies to it
    rules_key, peers_key = ("ingress", "from") if direction == "Ingress" else ("egress", "to")
    applying = [p for p in policies
                if p["metadata"].get("namespace", "default") == pod_end.namespace
                and selects(p["spec"]["podSelector"], pod_end.labels) and direction in policy_types(p["spec"])]
    if not applying:
        return True  # not isolated in this direction
    for policy in applying:
        for rule in policy["spec"].get(rules_key) or []:
            unknown = set(rule) - {peers_key, "ports"}
            if unknown:
                raise ValueError(f"{policy['metadata']['name']}: an {rules_key} rule has no field {sorted(unknown)}")
            peers = rule.get(peers_key)
            if (not peers or any(peer_matches(peer, pod_end.namespace, other) for peer in peers)) and \
                    port_matches(rule.get("ports"), port, protocol, receiver):
                return True
    return False


def allowed(resources: Iterable[Mapping[str, Any]], sender: Endpoint, receiver: Endpoint, port: int,
            protocol: str = "TCP") -> bool:
    """Whether the NetworkPolicies among `resources` let `sender` open a connection to `receiver`'s port."""
    policies = [r for r in resources if r["kind"] == "NetworkPolicy"]
    return (_direction_allows(policies, sender, "Egress", receiver, port, protocol, receiver)
            and _direction_allows(policies, receiver, "Ingress", sender, port, protocol, receiver))
