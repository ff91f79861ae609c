"""The NetworkPolicies of user namespaces, jobs and image builds: what they say (pure functions) and that
the real API server accepts them, keeps them in step with the datacenter and deletes a job's with it.
That they are enforced is tests/k8s/test_network_isolation_pods.py (real pods, kube-router)."""

from __future__ import annotations

import ipaddress
from typing import Any

import pytest
from django.contrib.auth.models import User
from kubernetes import client as k8s

from datacenters.models import Datacenter
from jobs.engines.base import EngineError
from jobs.engines.kubernetes import client as kube
from jobs.engines.kubernetes import names, objects
from jobs.engines.kubernetes import policies as p
from tests.k8s.engine_helpers import kill, nothing_left, submit
from tests.wait import wait_for

LABELS = {"paddlecloud.org/user": "alice"}
OWNER = {"apiVersion": "v1", "kind": "Service", "name": "fit-abcde", "uid": "u-1"}


def by_name(items: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {i["metadata"]["name"]: i for i in items}


def test_the_namespace_denies_everything_but_dns_and_the_outside_without_the_clusters_ranges() -> None:
    cidrs = ("10.0.0.0/8", "192.0.2.0/24", "fc00::/7")
    found = by_name(p.namespace_policies("ns", LABELS, True, cidrs))
    deny = found[p.DEFAULT_DENY]["spec"]
    assert deny == {"podSelector": {}, "policyTypes": ["Ingress", "Egress"], "ingress": [], "egress": []}
    [dns] = found[p.DNS]["spec"]["egress"]
    assert found[p.DNS]["spec"]["policyTypes"] == ["Egress"]
    assert dns["ports"] == [{"protocol": "UDP", "port": 53}, {"protocol": "TCP", "port": 53}]
    assert dns["to"][0]["namespaceSelector"] == {"matchLabels": {"kubernetes.io/metadata.name": "kube-system"}}
    assert [peer["ipBlock"]["cidr"] for peer in dns["to"][1:]] == list(cidrs)  # port 53 inside the cluster only
    [world] = found[p.EGRESS]["spec"]["egress"]
    assert world == {
        "to": [
            {"ipBlock": {"cidr": "0.0.0.0/0", "except": ["10.0.0.0/8", "192.0.2.0/24"]}},
            {"ipBlock": {"cidr": "::/0", "except": ["fc00::/7"]}},
        ]
    }
    assert all(policy["metadata"]["labels"] == LABELS for policy in found.values())


def test_without_egress_the_egress_policy_allows_nothing() -> None:
    found = by_name(p.namespace_policies("ns", LABELS, False, p.DEFAULT_CLUSTER_CIDRS))
    assert found[p.EGRESS]["spec"] == {"podSelector": {}, "policyTypes": ["Egress"], "egress": []}


def test_the_default_ranges_cover_private_loopback_link_local_and_mapped_addresses() -> None:
    networks = [ipaddress.ip_network(c) for c in p.DEFAULT_CLUSTER_CIDRS]
    for address in (
        "10.244.0.5",
        "10.96.0.1",
        "172.17.0.1",
        "192.168.1.1",
        "169.254.169.254",
        "127.0.0.1",
        "100.64.0.1",
        "192.0.2.2",
        "::1",
        "64:ff9b::a00:1",
        "fd00::1",
        "fe80::1",
    ):
        ip = ipaddress.ip_address(address)
        assert any(ip in n for n in networks if n.version == ip.version), address
    for public in ("8.8.8.8", "151.101.0.223", "2606:4700::1111"):
        ip = ipaddress.ip_address(public)
        assert not any(ip in n for n in networks if n.version == ip.version), public


def test_the_clusters_ranges_come_from_the_environment_and_a_bad_one_is_named(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(p.CLUSTER_CIDRS_ENV, " 10.0.0.0/8, 203.0.113.7 ,fd00::/8")
    assert p.cluster_cidrs() == ("10.0.0.0/8", "203.0.113.7/32", "fd00::/8")
    monkeypatch.setenv(p.CLUSTER_CIDRS_ENV, "10.0.0.0/8,ten")
    with pytest.raises(EngineError, match="PADDLECLOUD_K8S_CLUSTER_CIDRS: 'ten' is not a CIDR"):
        p.cluster_cidrs()
    monkeypatch.delenv(p.CLUSTER_CIDRS_ENV)
    assert p.cluster_cidrs() == p.DEFAULT_CLUSTER_CIDRS
    assert p.registry_cidrs() == ()


def test_a_jobs_pods_reach_only_each_other() -> None:
    policy = p.job_policy("ns", "fit-abcde", {**LABELS, names.JOB_LABEL: "fit-abcde"}, OWNER)
    peers = [{"podSelector": {"matchLabels": {names.JOB_LABEL: "fit-abcde"}}}]
    assert policy["metadata"]["name"] == "fit-abcde-peers"
    assert policy["metadata"]["ownerReferences"] == [OWNER]
    assert policy["spec"] == {
        "podSelector": {"matchLabels": {names.JOB_LABEL: "fit-abcde"}},
        "policyTypes": ["Ingress", "Egress"],
        "ingress": [{"from": peers}],
        "egress": [{"to": peers}],
    }


@pytest.mark.parametrize(
    ("server", "expected"),
    [
        ("registry.example.com", ("registry.example.com", 443)),
        ("registry.example.com:5000/team", ("registry.example.com", 5000)),
        ("http://10.244.0.1:5000", ("10.244.0.1", 5000)),
        ("http://reg", ("reg", 80)),
        ("https://[fd00::1]:8443/x", ("fd00::1", 8443)),
    ],
)
def test_a_registry_server_gives_its_host_and_port(server: str, expected: tuple[str, int]) -> None:
    assert p.registry_address(server) == expected


def test_a_builder_reaches_a_public_registry_and_a_private_one_only_where_trusted() -> None:
    cidrs = p.DEFAULT_CLUSTER_CIDRS
    assert p.registry_peers("151.101.0.223:443", cidrs, ()) == (["151.101.0.223"], 443)
    # A user naming a service inside the cluster as their registry gets no way to it.
    assert p.registry_peers("10.96.0.10:5432", cidrs, ()) == ([], 5432)
    assert p.registry_peers("10.244.0.1:5000", cidrs, ("10.244.0.1/32",)) == (["10.244.0.1"], 5000)
    assert p.registry_peers("localhost:5000", cidrs, ()) == ([], 5000)  # resolves to loopback
    assert p.registry_peers("no-such-host.invalid", cidrs, ()) == ([], 443)
    policy = p.build_policy("ns", "build-x1", LABELS, OWNER, ["10.244.0.1"], 5000)
    assert policy["spec"] == {
        "podSelector": {"matchLabels": {names.BUILD_LABEL: "build-x1"}},
        "policyTypes": ["Egress"],
        "egress": [{"to": [{"ipBlock": {"cidr": "10.244.0.1/32"}}], "ports": [{"protocol": "TCP", "port": 5000}]}],
    }


# ----- against the real API server -----


def policies_in(dc: Datacenter, ns: str) -> dict[str, dict[str, Any]]:
    return by_name(kube.for_datacenter(dc).list("NetworkPolicy", ns))


@pytest.mark.django_db
def test_a_submit_gives_the_namespace_its_policies_and_the_job_its_own_which_goes_with_it(
    k8s_dc: Datacenter, alice: User, k8s_api: k8s.ApiClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    job = submit(k8s_dc, alice, {"jobname": "fit", "parallelism": 2, "pservers": 1})
    ns = job.engine_data["namespace"]
    found = policies_in(k8s_dc, ns)
    assert set(found) == {p.DEFAULT_DENY, p.DNS, p.EGRESS, f"{job.uid}-peers"}
    # As the engine built them (the API server accepted them as they are).
    expected = by_name(p.namespace_policies(ns, found[p.DNS]["metadata"]["labels"], True, p.DEFAULT_CLUSTER_CIDRS))
    for name in (p.DEFAULT_DENY, p.DNS, p.EGRESS):
        stored = {key: value for key, value in expected[name]["spec"].items() if value != []}  # [] is dropped
        assert found[name]["spec"] == stored, name
    peers = found[f"{job.uid}-peers"]
    assert peers["spec"]["podSelector"] == {"matchLabels": {names.JOB_LABEL: job.uid}}
    assert [(o["kind"], o["name"]) for o in peers["metadata"]["ownerReferences"]] == [("Service", job.uid)]

    # The datacenter takes egress away: the next start brings the namespace's policy in step.
    k8s_dc.job_egress = False
    k8s_dc.save()
    second = submit(k8s_dc, alice, {"jobname": "again"})
    found = policies_in(k8s_dc, ns)
    assert found[p.EGRESS]["spec"] == {"podSelector": {}, "policyTypes": ["Egress"]}  # no rule: nothing allowed
    assert f"{second.uid}-peers" in found

    # A namespace from before the policies (no default deny; a job with no `-peers` of its own): the first
    # start that checks the namespace again gives that job its own, before the deny.
    kube.for_datacenter(k8s_dc).delete("NetworkPolicy", ns, f"{second.uid}-peers")
    kube.for_datacenter(k8s_dc).delete("NetworkPolicy", ns, p.DEFAULT_DENY)
    monkeypatch.setattr(objects, "NAMESPACE_RECHECK_SECONDS", 0)
    third = submit(k8s_dc, alice, {"jobname": "third"})
    restored = policies_in(k8s_dc, ns)[f"{second.uid}-peers"]
    assert restored["spec"]["podSelector"] == {"matchLabels": {names.JOB_LABEL: second.uid}}
    assert [o["name"] for o in restored["metadata"]["ownerReferences"]] == [second.uid]

    kill(job)
    wait_for(lambda: nothing_left(k8s_api, job.uid), "the killed job's objects (its policy too) to be gone")
    assert set(policies_in(k8s_dc, ns)) == {
        p.DEFAULT_DENY,
        p.DNS,
        p.EGRESS,
        f"{second.uid}-peers",
        f"{third.uid}-peers",
    }
