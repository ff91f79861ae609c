"""Waits, before any of the job's own code runs, until the pod's NetworkPolicies are in force (Kubernetes).

A NetworkPolicy enforcer (kube-router, Calico, Cilium, ...) programs a new pod's rules a little after the pod
starts; under load, seconds after. Until then the pod reaches what its namespace's default-deny egress should
block: the node, other namespaces, the portal. So the launcher probes one address the policies must block in
every `job_egress` mode: the pod's own node (status.hostIP, inside the cluster's ranges that no policy of ours
opens but for DNS on port 53) on the kubelet's port, which every node listens on. While a TCP connect there
succeeds the rules are not in force yet; refused, timed out or unreachable means they are.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Callable

INTERVAL = 0.25  # seconds between probes: the wait ends soon after the rules land
CONNECT_TIMEOUT = 0.5  # seconds one probe may take: a dropped SYN is the policy in force


class IsolationError(Exception):
    """The node stayed reachable for the whole bound: the job must not run unisolated."""


def reachable(host: str, port: int, timeout: float = CONNECT_TIMEOUT) -> bool:
    """Whether a TCP connection to host:port opens within `timeout`."""
    try:
        socket.create_connection((host, port), timeout=timeout).close()
    except OSError:  # refused, timed out, no route: the policy rejects or drops it
        return False
    return True


def wait_until_isolated(
    host: str, port: int, bound: float, interval: float = INTERVAL, sleep: Callable[[float], None] = time.sleep
) -> float | None:
    """Seconds waited until host:port is out of reach (None: it was from the first probe); past `bound`,
    IsolationError."""
    t0 = time.monotonic()
    if not reachable(host, port):
        return None
    while time.monotonic() - t0 < bound:
        sleep(interval)
        if not reachable(host, port):
            return time.monotonic() - t0
    target = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    raise IsolationError(f"network isolation not in force after {bound:g} s: {target} still reachable")
