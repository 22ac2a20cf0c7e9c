"""The NetworkPolicy evaluator of the manifests' tests (tests/support/netpol.py), held to the Kubernetes
docs: every example of the "Network Policies" page (kubernetes.io/docs/concepts/services-networking/
network-policies/), with what the page says each one allows and denies, and the API reference's
rules the examples leave implicit (policyTypes unset, named ports, matchExpressions).
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.support.netpol import allowed, host, pod, policy_types, selects


def policy(name: str, spec: dict[str, Any], namespace: str = "default") -> dict[str, Any]:
    return {"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
            "metadata": {"name": name, "namespace": namespace}, "spec": spec}


DB = pod("default", {"role": "db"}, named_ports={"redis": 6379})
FRONTEND = pod("default", {"role": "frontend"})
BACKEND = pod("default", {"role": "backend"})
IN_MYPROJECT = pod("other", {"app": "anything"}, {"project": "myproject"})
ELSEWHERE = pod("other", {"role": "frontend"})

# The page's first example: role=db pods, isolated both ways.
TEST_NETWORK_POLICY = policy("test-network-policy", {
    "podSelector": {"matchLabels": {"role": "db"}},
    "policyTypes": ["Ingress", "Egress"],
    "ingress": [{"from": [{"ipBlock": {"cidr": "172.17.0.0/16", "except": ["172.17.1.0/24"]}},
                          {"namespaceSelector": {"matchLabels": {"project": "myproject"}}},
                          {"podSelector": {"matchLabels": {"role": "frontend"}}}],
                 "ports": [{"protocol": "TCP", "port": 6379}]}],
    "egress": [{"to": [{"ipBlock": {"cidr": "10.0.0.0/24"}}], "ports": [{"protocol": "TCP", "port": 5978}]}],
})


def test_the_pages_example_allows_exactly_what_the_page_lists() -> None:
    policies = [TEST_NETWORK_POLICY]
    # ingress to role=db on TCP 6379: from default's role=frontend, any pod of a project=myproject
    # namespace, and 172.17.0.0/16 but 172.17.1.0/24
    for sender in (FRONTEND, IN_MYPROJECT, host("172.17.0.1"), host("172.17.2.0"), host("172.17.255.255")):
        assert allowed(policies, sender, DB, 6379), sender
        assert not allowed(policies, sender, DB, 6380), sender
        assert not allowed(policies, sender, DB, 6379, "UDP"), sender
    for sender in (BACKEND, ELSEWHERE, host("172.17.1.0"), host("172.17.1.255"), host("172.18.0.1")):
        assert not allowed(policies, sender, DB, 6379), sender
    # egress from role=db: to 10.0.0.0/24 on TCP 5978, nothing else (DNS neither)
    assert allowed(policies, DB, host("10.0.0.7"), 5978)
    assert not allowed(policies, DB, host("10.0.1.7"), 5978) and not allowed(policies, DB, host("10.0.0.7"), 5979)
    assert not allowed(policies, DB, FRONTEND, 80) and not allowed(policies, DB, host("10.0.0.10"), 53, "UDP")
    # the other pods of the namespace are not selected, so not isolated
    assert allowed(policies, BACKEND, FRONTEND, 80) and allowed(policies, ELSEWHERE, BACKEND, 1)


def test_a_port_by_name_is_the_receiving_containers() -> None:
    by_name = policy("by-name", {"podSelector": {"matchLabels": {"role": "db"}}, "policyTypes": ["Ingress"],
                                 "ingress": [{"ports": [{"port": "redis"}]}]})
    assert allowed([by_name], BACKEND, DB, 6379) and not allowed([by_name], BACKEND, DB, 6380)
    assert not allowed([by_name], BACKEND, pod("default", {"role": "db"}), 6379), "a pod without that port name"


AND = policy("and", {"podSelector": {"matchLabels": {"role": "db"}}, "ingress": [{"from": [
    {"namespaceSelector": {"matchLabels": {"user": "alice"}}, "podSelector": {"matchLabels": {"role": "client"}}}]}]})
OR = policy("or", {"podSelector": {"matchLabels": {"role": "db"}}, "ingress": [{"from": [
    {"namespaceSelector": {"matchLabels": {"user": "alice"}}}, {"podSelector": {"matchLabels": {"role": "client"}}}]}]})
ALICES_CLIENT = pod("alices", {"role": "client"}, {"user": "alice"})
ALICES_OTHER = pod("alices", {"role": "other"}, {"user": "alice"})
LOCAL_CLIENT = pod("default", {"role": "client"})
BOBS_CLIENT = pod("bobs", {"role": "client"}, {"user": "bob"})


def test_namespace_and_pod_selector_in_one_element_select_those_pods_in_those_namespaces() -> None:
    assert allowed([AND], ALICES_CLIENT, DB, 80)
    for sender in (ALICES_OTHER, LOCAL_CLIENT, BOBS_CLIENT):
        assert not allowed([AND], sender, DB, 80), sender


def test_two_elements_select_either() -> None:
    for sender in (ALICES_CLIENT, ALICES_OTHER, LOCAL_CLIENT):
        assert allowed([OR], sender, DB, 80), sender
    assert not allowed([OR], BOBS_CLIENT, DB, 80), "a client of another namespace: neither element"


DENY_INGRESS = policy("default-deny-ingress", {"podSelector": {}, "policyTypes": ["Ingress"]})
ALLOW_INGRESS = policy("allow-all-ingress", {"podSelector": {}, "ingress": [{}], "policyTypes": ["Ingress"]})
DENY_EGRESS = policy("default-deny-egress", {"podSelector": {}, "policyTypes": ["Egress"]})
ALLOW_EGRESS = policy("allow-all-egress", {"podSelector": {}, "egress": [{}], "policyTypes": ["Egress"]})
DENY_ALL = policy("default-deny-all", {"podSelector": {}, "policyTypes": ["Ingress", "Egress"]})
OUTSIDE = host("203.0.113.10")


def test_default_deny_ingress_isolates_every_pod_of_its_namespace_for_ingress_only() -> None:
    for sender in (FRONTEND, ELSEWHERE, OUTSIDE):
        assert not allowed([DENY_INGRESS], sender, DB, 6379), sender
    assert allowed([DENY_INGRESS], DB, OUTSIDE, 443), "egress is left as it was"
    assert allowed([DENY_INGRESS], FRONTEND, ELSEWHERE, 80), "another namespace's pods are not selected"


def test_allow_all_ingress_opens_what_any_other_policy_closed() -> None:
    for sender in (FRONTEND, ELSEWHERE, OUTSIDE):
        assert allowed([DENY_INGRESS, ALLOW_INGRESS, TEST_NETWORK_POLICY], sender, DB, 1), sender


def test_default_deny_egress_isolates_for_egress_only_and_allow_all_reopens_it() -> None:
    assert not allowed([DENY_EGRESS], FRONTEND, OUTSIDE, 443) and not allowed([DENY_EGRESS], FRONTEND, BACKEND, 80)
    assert not allowed([DENY_EGRESS], FRONTEND, OUTSIDE, 53, "UDP")
    assert allowed([DENY_EGRESS], ELSEWHERE, FRONTEND, 80), "ingress is left as it was"
    assert allowed([DENY_EGRESS, ALLOW_EGRESS], FRONTEND, OUTSIDE, 443)
    assert allowed([DENY_EGRESS, ALLOW_EGRESS], FRONTEND, ELSEWHERE, 80)


def test_default_deny_all_closes_both_ways_and_both_ends_must_allow() -> None:
    assert not allowed([DENY_ALL], FRONTEND, ELSEWHERE, 80) and not allowed([DENY_ALL], ELSEWHERE, FRONTEND, 80)
    # the receiver's namespace allows all ingress, but the sender's egress is denied: not allowed
    assert not allowed([DENY_ALL, policy("in", ALLOW_INGRESS["spec"], "other")], FRONTEND, ELSEWHERE, 80)
    # and the other way round
    assert not allowed([DENY_ALL, ALLOW_EGRESS], FRONTEND, BACKEND, 80)
    assert allowed([DENY_ALL, ALLOW_EGRESS, ALLOW_INGRESS], FRONTEND, BACKEND, 80)


def test_allow_all_egress_and_deny_all_ingress() -> None:
    both = policy("allow-all-egress-deny-all-ingress", {"podSelector": {}, "egress": [{}],
                                                        "policyTypes": ["Egress", "Ingress"]})
    assert allowed([both], FRONTEND, OUTSIDE, 443) and allowed([both], FRONTEND, ELSEWHERE, 80)
    assert not allowed([both], ELSEWHERE, FRONTEND, 80) and not allowed([both], BACKEND, FRONTEND, 80)


MULTI_PORT = policy("multi-port-egress", {
    "podSelector": {"matchLabels": {"role": "db"}}, "policyTypes": ["Egress"],
    "egress": [{"to": [{"ipBlock": {"cidr": "10.0.0.0/24"}}],
                "ports": [{"protocol": "TCP", "port": 32000, "endPort": 32768}]}]})


@pytest.mark.parametrize(("port", "expected"), [(31999, False), (32000, True), (32500, True), (32768, True),
                                                (32769, False)])
def test_end_port_makes_a_range_with_both_ends_in_it(port: int, expected: bool) -> None:
    assert allowed([MULTI_PORT], DB, host("10.0.0.1"), port) is expected
    assert not allowed([MULTI_PORT], DB, host("10.0.1.1"), port)


def test_policy_types_unset_are_ingress_and_egress_only_with_egress_rules() -> None:
    only_egress_rules = {"podSelector": {}, "egress": [{"to": [{"ipBlock": {"cidr": "10.0.0.0/24"}}]}]}
    assert policy_types(only_egress_rules) == ["Ingress", "Egress"]
    assert policy_types({"podSelector": {}}) == ["Ingress"]
    assert policy_types({"podSelector": {}, "egress": []}) == ["Ingress"]
    assert policy_types({"podSelector": {}, "policyTypes": ["Egress"]}) == ["Egress"]
    # no ingress rule: every ingress denied; egress to the block only
    rules = [policy("p", only_egress_rules)]
    assert not allowed(rules, FRONTEND, DB, 80)
    assert allowed(rules, DB, host("10.0.0.1"), 1) and not allowed(rules, DB, OUTSIDE, 443)
    # without egress rules, egress stays open
    ingress_only = [policy("p", {"podSelector": {}, "ingress": [{"from": [{"podSelector": {}}]}]})]
    assert allowed(ingress_only, DB, OUTSIDE, 443) and allowed(ingress_only, FRONTEND, DB, 80)
    assert not allowed(ingress_only, ELSEWHERE, DB, 80), "podSelector alone: the policy's own namespace"


def test_an_empty_namespace_selector_selects_every_pod_of_every_namespace_and_no_host() -> None:
    any_pod = [policy("p", {"podSelector": {"matchLabels": {"role": "db"}}, "policyTypes": ["Egress"],
                            "egress": [{"to": [{"namespaceSelector": {}}]}]})]
    for receiver in (FRONTEND, ELSEWHERE, IN_MYPROJECT, ALICES_CLIENT):
        assert allowed(any_pod, DB, receiver, 8080), receiver
    assert not allowed(any_pod, DB, OUTSIDE, 443) and not allowed(any_pod, DB, host("10.0.0.1"), 80)


@pytest.mark.parametrize(("selector", "labels", "expected"), [
    ({}, {}, True),
    ({"matchLabels": {"a": "1"}}, {"a": "1", "b": "2"}, True),
    ({"matchLabels": {"a": "1"}}, {"a": "2"}, False),
    ({"matchExpressions": [{"key": "ns", "operator": "In", "values": ["x", "y"]}]}, {"ns": "y"}, True),
    ({"matchExpressions": [{"key": "ns", "operator": "In", "values": ["x", "y"]}]}, {"ns": "z"}, False),
    ({"matchExpressions": [{"key": "ns", "operator": "In", "values": ["x"]}]}, {}, False),
    ({"matchExpressions": [{"key": "ns", "operator": "NotIn", "values": ["x"]}]}, {"ns": "y"}, True),
    ({"matchExpressions": [{"key": "ns", "operator": "NotIn", "values": ["x"]}]}, {"ns": "x"}, False),
    ({"matchExpressions": [{"key": "ns", "operator": "NotIn", "values": ["x"]}]}, {}, True),
    ({"matchExpressions": [{"key": "ns", "operator": "Exists"}]}, {"ns": ""}, True),
    ({"matchExpressions": [{"key": "ns", "operator": "Exists"}]}, {}, False),
    ({"matchExpressions": [{"key": "ns", "operator": "DoesNotExist"}]}, {}, True),
    ({"matchExpressions": [{"key": "ns", "operator": "DoesNotExist"}]}, {"ns": "x"}, False),
    ({"matchLabels": {"a": "1"}, "matchExpressions": [{"key": "b", "operator": "Exists"}]}, {"a": "1"}, False),
])
def test_label_selectors(selector: dict[str, Any], labels: dict[str, str], expected: bool) -> None:
    assert selects(selector, labels) is expected


@pytest.mark.parametrize("bad", [
    {"podSelector": {}, "ingress": [{"from": [{"ipBlock": {"cidr": "10.0.0.0/8"}, "podSelector": {}}]}]},
    {"podSelector": {}, "ingress": [{"from": [{"serviceSelector": {}}]}]},
    {"podSelector": {}, "ingress": [{"ports": [{"port": "http", "endPort": 9000}]}]},
    {"podSelector": {}, "ingress": [{"froms": []}]},
    {"podSelector": {"matchLabel": {"a": "b"}}},
])
def test_what_it_does_not_read_is_refused_not_ignored(bad: dict[str, Any]) -> None:
    with pytest.raises(ValueError):
        allowed([policy("bad", bad)], FRONTEND, pod("default", {"a": "b"}, named_ports={"http": 80}), 80)
