"""The NetworkPolicies that keep a user's pods apart from everyone else's (pure, but for reading settings).

In every user namespace (kept in step with the datacenter by `ensure_user_namespace`):

- `paddlecloud-default-deny`: every pod, no ingress and no egress but what another policy allows.
- `paddlecloud-dns`: egress on port 53 (UDP and TCP) to cluster DNS: the `k8s-app=kube-dns` pods of
  kube-system, and the cluster's own ranges (a node-local DNS cache such as 169.254.20.10, or a DNS
  server on the node as in the test cluster). Never port 53 outside them: no DNS to the outside
  when the datacenter gives jobs no egress.
- `paddlecloud-egress`: when the datacenter allows egress (`job_egress`), the whole world
  (0.0.0.0/0, ::/0) *except* the cluster's ranges (`cluster_cidrs()`), so no pod, Service, node or
  host address is reachable through it; with `job_egress` off, the same policy with no rule (allows nothing).

Per job: `<uid>-peers` lets the job's pods (label `paddlecloud.org/job=<uid>`) reach each other on any
port, in and out, and nothing else; it is owned by the job's Service, so it goes with the job.
Per image build: `<uid>-registry` lets the builder pod reach its registry's address and port (Kaniko
pulls the base and pushes there); a private address only where the datacenter trusts it
(`registry_cidrs()`), so a user cannot aim a builder at a service inside the cluster by naming it
as their registry.
"""

from __future__ import annotations

import ipaddress
import os
import socket
from collections.abc import Sequence
from typing import Any

from jobs.engines import netranges
from jobs.engines.base import EngineError
from jobs.engines.kubernetes import names

DEFAULT_DENY = "paddlecloud-default-deny"
DNS = "paddlecloud-dns"
EGRESS = "paddlecloud-egress"
NAMESPACE_POLICIES = (DEFAULT_DENY, DNS, EGRESS)
API_VERSION = "networking.k8s.io/v1"

# Everything that is not the public internet (jobs.engines.netranges). A cluster whose pods, Services or
# nodes have public addresses adds them with PADDLECLOUD_K8S_CLUSTER_CIDRS.
DEFAULT_CLUSTER_CIDRS = (*netranges.PRIVATE_V4, *netranges.UNROUTED_V4, *netranges.NOT_GLOBAL_V6)
CLUSTER_CIDRS_ENV = "PADDLECLOUD_K8S_CLUSTER_CIDRS"
REGISTRY_CIDRS_ENV = "PADDLECLOUD_K8S_REGISTRY_CIDRS"
DNS_PORT = 53

Network = ipaddress.IPv4Network | ipaddress.IPv6Network


def parse_cidrs(text: str, variable: str) -> tuple[str, ...]:
    """Comma-separated CIDRs, normalized; a bad one names the variable it came from."""
    result = []
    for item in (part.strip() for part in text.split(",")):
        if not item:
            continue
        try:
            result.append(str(ipaddress.ip_network(item, strict=False)))
        except ValueError:
            raise EngineError(f"{variable}: {item!r} is not a CIDR such as 10.0.0.0/8") from None
    return tuple(result)


def cluster_cidrs() -> tuple[str, ...]:
    """The ranges no job reaches through its egress rule: $PADDLECLOUD_K8S_CLUSTER_CIDRS, else the defaults."""
    configured = os.environ.get(CLUSTER_CIDRS_ENV, "")
    return parse_cidrs(configured, CLUSTER_CIDRS_ENV) if configured.strip() else DEFAULT_CLUSTER_CIDRS


def registry_cidrs() -> tuple[str, ...]:
    """Private ranges where the datacenter's own registries live (builders may push there); none by default."""
    return parse_cidrs(os.environ.get(REGISTRY_CIDRS_ENV, ""), REGISTRY_CIDRS_ENV)


def _meta(name: str, ns: str, labels: dict[str, str]) -> dict[str, Any]:
    return {"name": name, "namespace": ns, "labels": labels}


def _policy(meta: dict[str, Any], selector: dict[str, Any], **rules: list[dict[str, Any]]) -> dict[str, Any]:
    spec: dict[str, Any] = {"podSelector": selector, "policyTypes": ["Ingress", "Egress"]}
    for direction in ("ingress", "egress"):
        if direction in rules:
            spec[direction] = rules[direction]
        else:
            spec["policyTypes"].remove(direction.capitalize())
    return {"apiVersion": API_VERSION, "kind": "NetworkPolicy", "metadata": meta, "spec": spec}


def _world_except(cidrs: Sequence[str]) -> list[dict[str, Any]]:
    """ipBlocks for all of IPv4 and IPv6 but `cidrs` (each `except` must lie inside its block's family)."""
    v4 = [c for c in cidrs if ipaddress.ip_network(c).version == 4]
    v6 = [c for c in cidrs if ipaddress.ip_network(c).version == 6]
    return [{"ipBlock": {"cidr": "0.0.0.0/0", "except": v4}}, {"ipBlock": {"cidr": "::/0", "except": v6}}]


def namespace_policies(ns: str, labels: dict[str, str], egress: bool, cidrs: Sequence[str]) -> list[dict[str, Any]]:
    """The user namespace's three policies (see the module docstring); `labels`: the user's labels."""
    dns_peers: list[dict[str, Any]] = [
        {
            "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "kube-system"}},
            "podSelector": {"matchLabels": {"k8s-app": "kube-dns"}},
        }
    ]
    dns_peers += [{"ipBlock": {"cidr": cidr}} for cidr in cidrs]
    dns_ports = [{"protocol": protocol, "port": DNS_PORT} for protocol in ("UDP", "TCP")]
    world = [{"to": _world_except(cidrs)}] if egress else []
    return [
        _policy(_meta(DEFAULT_DENY, ns, labels), {}, ingress=[], egress=[]),
        _policy(_meta(DNS, ns, labels), {}, egress=[{"to": dns_peers, "ports": dns_ports}]),
        _policy(_meta(EGRESS, ns, labels), {}, egress=world),
    ]


def job_policy(ns: str, uid: str, labels: dict[str, str], owner: dict[str, Any]) -> dict[str, Any]:
    """`<uid>-peers`: the job's pods reach each other on every port (and nothing else); owned by `owner`."""
    peers = [{"podSelector": {"matchLabels": {names.JOB_LABEL: uid}}}]
    meta = {**_meta(f"{uid}-peers", ns, labels), "ownerReferences": [owner]}
    selector = {"matchLabels": {names.JOB_LABEL: uid}}
    return _policy(meta, selector, ingress=[{"from": peers}], egress=[{"to": peers}])


def registry_address(server: str) -> tuple[str, int]:
    """(host, port) of a registry server as users write it: host[:port][/path], optionally with a scheme."""
    rest = server.strip()
    default_port = 80 if rest.startswith("http://") else 443
    rest = rest.split("://", 1)[-1].split("/", 1)[0]
    if rest.startswith("["):  # [v6]:port
        host, _, tail = rest[1:].partition("]")
        return host, int(tail[1:]) if tail.startswith(":") else default_port
    host, colon, port = rest.rpartition(":")
    if colon and host and ":" not in host and port.isdigit():
        return host, int(port)
    return rest, default_port


def _addresses(host: str) -> list[str]:
    try:
        return [str(ipaddress.ip_address(host))]
    except ValueError:
        pass
    try:  # a name: what it resolves to now (NetworkPolicies name addresses, not names)
        infos = socket.getaddrinfo(host, None, type=socket.SOCK_STREAM)
    except OSError:
        return []
    return sorted({str(info[4][0]) for info in infos})


def _inside(address: str, cidrs: Sequence[str]) -> bool:
    ip = ipaddress.ip_address(address)
    return any(ip in ipaddress.ip_network(c) for c in cidrs if ipaddress.ip_network(c).version == ip.version)


def registry_peers(server: str, cidrs: Sequence[str], trusted: Sequence[str]) -> tuple[list[str], int]:
    """The registry's addresses a builder may reach (public ones, and private ones inside `trusted`), and its port."""
    host, port = registry_address(server)
    allowed = [a for a in _addresses(host) if not _inside(a, cidrs) or _inside(a, trusted)]
    return allowed, port


def build_policy(
    ns: str, uid: str, labels: dict[str, str], owner: dict[str, Any], addresses: Sequence[str], port: int
) -> dict[str, Any]:
    """`<uid>-registry`: the builder pod (label `paddlecloud.org/build=<uid>`) reaches `addresses` on `port`."""
    blocks = [{"ipBlock": {"cidr": str(ipaddress.ip_network(a))}} for a in addresses]
    meta = {**_meta(f"{uid}-registry", ns, labels), "ownerReferences": [owner]}
    selector = {"matchLabels": {names.BUILD_LABEL: uid}}
    return _policy(meta, selector, egress=[{"to": blocks, "ports": [{"protocol": "TCP", "port": port}]}])
