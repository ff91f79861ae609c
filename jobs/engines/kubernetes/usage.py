"""Live CPU and memory use of a job's pods, read from each node's kubelet summary API (`/stats/summary`).

Where it reads: straight from the kubelet, `https://<pod's status.hostIP>:<datacenter.kubelet_port>/stats/summary`,
with the datacenter's own credentials (the kubeconfig's token or client certificate, or the in-cluster service
account) and TLS checked against the datacenter's CA. The kubelet authorizes that request as `get nodes/stats`
(deploy/base/rbac.yaml grants exactly that), which is what metrics-server does. The other route, the API server's
proxy (`/api/v1/nodes/<node>/proxy/stats/summary`), needs `get nodes/proxy`, and that right also opens the
kubelet's exec and attach endpoints to whoever holds it: a known escalation path, so the portal does not ask for it.
The node's address is the pod's own `status.hostIP` (the node's InternalIP), so no `nodes` read is needed either.
What the direct route asks of a cluster: kubelet serving certificates the datacenter's CA signs (kubelet
`serverTLSBootstrap: true` with the CSRs approved, as metrics-server needs without `--kubelet-insecure-tls`), and
webhook authentication and authorization on the kubelet (the default of kubeadm and the managed clusters). Where
either is missing the kubelet is logged as unreachable and its workers have no usage: nothing fails.

What it reads: `/stats/summary?only_cpu_and_memory=true`, the view metrics-server reads: per pod the pod
cgroup's `cpu.usageNanoCores` (cores, a rate the kubelet computes over its last samples) and
`memory.workingSetBytes` (what the OOM killer weighs, as `kubectl top` shows), each summed over the containers
where the pod-level figure is missing. Not the full summary: it is many times larger (filesystem, network and
volume stats of every pod), costs the kubelet a filesystem walk, and fails whole where one filesystem cannot be
measured (the test node's kubelet answers it 500: "cannot find filesystem info for device"). GPU figures are
None: the summary's `containers[].accelerators` is gone (kubelets since 1.20 no longer fill it, the
DisableAcceleratorUsageMetrics gate; 1.36 never sets it), so GPU use per worker needs NVIDIA's DCGM exporter.

Bounded: one summary read per kubelet per CACHE_SECONDS per process, shared by every job on that node (a failed
read is remembered as long, so a dead kubelet costs one connect timeout per period, not one per job); connect
and read timeouts of READ_TIMEOUT; a body over MAX_SUMMARY_BYTES is dropped; at most MAX_NODES kubelets
remembered. Nothing here raises into the reconciler: a kubelet out of reach gives {} and one log line per
LOG_EVERY_SECONDS.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Collection, Iterable
from datetime import UTC, datetime
from typing import Any, TypedDict

import urllib3
from paddlecloud.contract.states import worker_name

from jobs.engines.kubernetes.client import Kube
from jobs.engines.kubernetes.pods import by_worker
from jobs.engines.usage_samples import WorkerUsage

log = logging.getLogger(__name__)

READ_TIMEOUT = (2, 3)  # (connect, read) seconds: a reconcile cycle must not wait on one slow node
CACHE_SECONDS = 10.0  # the portal samples each job every 10 s (jobs/follow/worker_usage.py): one read serves them all
MAX_SUMMARY_BYTES = 4 * 1024 * 1024  # a pod is ~3 KB of it (test node, kubelet 1.36): 110 pods well under 1 MiB
MAX_NODES = 5000  # kubelets remembered per process; past it the oldest read is forgotten
LOG_EVERY_SECONDS = 300.0


class PodUsage(TypedDict):
    cpu_cores: float
    memory_bytes: int
    gpu_util: float | None  # percent; always None here (what the kubelet no longer reports: above)
    gpu_memory_bytes: int | None


NodeUsage = dict[tuple[str, str], PodUsage]  # (namespace, pod name) -> its use

_lock = threading.Lock()
# Keyed by (the cluster's API server, the kubelet's URL): two clusters may well use the same private node IPs.
_read_at: dict[tuple[str, str], tuple[float, NodeUsage]] = {}  # -> (monotonic time of the read, what it said)
_logged_at: dict[tuple[str, str], float] = {}  # -> monotonic time of its last failure line


class KubeletUnreachable(Exception):
    """The kubelet did not answer a usable summary; the message says why (never a credential)."""


# ----- parsing (pure) -----


def _count(value: Any) -> int | None:
    """A non-negative integer field of the summary, or None (absent, negative, not a number, a bool)."""
    if isinstance(value, bool) or not isinstance(value, int | float) or value < 0 or value != value:
        return None
    return int(value)


def _stat(block: Any, key: str) -> int | None:
    return _count(block.get(key)) if isinstance(block, dict) else None


def _dicts(value: Any) -> list[dict[str, Any]]:
    return [item for item in value if isinstance(item, dict)] if isinstance(value, list) else []


def _summed(containers: list[dict[str, Any]], section: str, key: str) -> int | None:
    values = [v for v in (_stat(c.get(section), key) for c in containers) if v is not None]
    return sum(values) if values else None


def pod_usage(pod: dict[str, Any]) -> PodUsage | None:
    """One `pods[]` entry of a summary as PodUsage; None when it carries neither CPU nor memory (a pod starting)."""
    containers = _dicts(pod.get("containers"))
    nanocores = _stat(pod.get("cpu"), "usageNanoCores")
    if nanocores is None:
        nanocores = _summed(containers, "cpu", "usageNanoCores")
    memory = _stat(pod.get("memory"), "workingSetBytes")
    if memory is None:
        memory = _summed(containers, "memory", "workingSetBytes")
    if nanocores is None and memory is None:
        return None
    cores = (nanocores or 0) / 1e9
    return {"cpu_cores": cores, "memory_bytes": memory or 0, "gpu_util": None, "gpu_memory_bytes": None}


def parse_summary(summary: Any) -> NodeUsage:
    """Every pod of a kubelet summary with usage, by (namespace, name); anything malformed is skipped."""
    pods = summary.get("pods") if isinstance(summary, dict) else None
    found: NodeUsage = {}
    for pod in _dicts(pods):
        ref = pod.get("podRef")
        ref = ref if isinstance(ref, dict) else {}
        namespace, name = ref.get("namespace"), ref.get("name")
        usage = pod_usage(pod)
        if isinstance(namespace, str) and isinstance(name, str) and usage is not None:
            found[(namespace, name)] = usage
    return found


# ----- reading -----


def _authorization(kube: Kube) -> dict[str, str]:
    # The kubeconfig's bearer token (refreshed by the client where it expires); a client certificate, the other
    # way a kubeconfig authenticates, is already in the connection pool's TLS settings.
    bearer = kube.api.configuration.auth_settings().get("BearerToken") or {}
    return {"Authorization": bearer["value"]} if bearer.get("value") else {}


def _fetch(kube: Kube, url: str) -> bytes:
    """The summary's body, read through the datacenter's connection pool (its CA, client cert, proxy)."""
    kube.count("GET", "kubelet/stats/summary")
    headers = {"Accept": "application/json", **_authorization(kube)}
    try:
        response = kube.api.rest_client.pool_manager.request(
            "GET",
            url,
            headers=headers,
            timeout=urllib3.Timeout(connect=READ_TIMEOUT[0], read=READ_TIMEOUT[1]),
            retries=False,
            preload_content=False,
        )
    except (urllib3.exceptions.HTTPError, OSError) as exc:
        raise KubeletUnreachable(str(getattr(exc, "reason", None) or exc)[:300]) from None
    try:
        if response.status != 200:
            said = bytes(response.read(200)).decode("utf-8", errors="replace").strip()
            raise KubeletUnreachable(f"answered {response.status} {said!r} (it authorizes this as get nodes/stats)")
        body = response.read(MAX_SUMMARY_BYTES + 1)
    except (urllib3.exceptions.HTTPError, OSError) as exc:
        raise KubeletUnreachable(str(exc)[:300]) from None
    finally:
        response.release_conn()
    if len(body) > MAX_SUMMARY_BYTES:
        raise KubeletUnreachable(f"its summary is over {MAX_SUMMARY_BYTES} bytes")
    return bytes(body)


def _read_node(kube: Kube, url: str) -> NodeUsage:
    try:
        return parse_summary(json.loads(_fetch(kube, url)))
    except ValueError:
        raise KubeletUnreachable("its summary is not JSON") from None


def _log_failure(key: tuple[str, str], why: str, now: float) -> None:
    with _lock:
        if now - _logged_at.get(key, -LOG_EVERY_SECONDS) < LOG_EVERY_SECONDS:
            return
        _logged_at[key] = now
        if len(_logged_at) > MAX_NODES:
            del _logged_at[min(_logged_at, key=_logged_at.__getitem__)]
    log.warning("no worker usage from the kubelet at %s: %s", key[1], why)


def node_usage(kube: Kube, node_ip: str, port: int) -> NodeUsage:
    """Every pod's use on the node at `node_ip` (its kubelet on `port`): read at most once per CACHE_SECONDS."""
    host = f"[{node_ip}]" if ":" in node_ip else node_ip  # an IPv6 InternalIP
    url = f"https://{host}:{port}/stats/summary?only_cpu_and_memory=true"
    key = (str(kube.api.configuration.host), url)
    now = time.monotonic()
    with _lock:
        cached = _read_at.get(key)
    if cached is not None and now - cached[0] < CACHE_SECONDS:
        return cached[1]
    try:
        found = _read_node(kube, url)
    except KubeletUnreachable as exc:
        _log_failure(key, str(exc), now)
        found = {}
    with _lock:
        _read_at[key] = (now, found)
        if len(_read_at) > MAX_NODES:
            del _read_at[min(_read_at, key=lambda key: _read_at[key][0])]
    return found


def read_pod_usage(
    kube: Kube, node_ip: str, port: int, namespace: str, pod_names: Collection[str]
) -> dict[str, PodUsage]:
    """The use of each of `pod_names` (in `namespace`, on the node at `node_ip`) the kubelet reports, by pod name.

    Pods the summary lacks (just started, gone, or the kubelet out of reach) are simply absent."""
    found = node_usage(kube, node_ip, port)
    return {name: found[(namespace, name)] for name in pod_names if (namespace, name) in found}


def read_pods_usage(kube: Kube, port: int, pods: Iterable[dict[str, Any]]) -> dict[str, PodUsage]:
    """The use of each running pod of `pods` (the API's Pod objects, e.g. one job's), by pod name: one summary
    read per node they run on, not one per pod."""
    by_node: dict[str, dict[str, list[str]]] = {}  # node IP -> namespace -> pod names
    for pod in pods:
        meta, status = pod.get("metadata") or {}, pod.get("status") or {}
        node_ip, name, namespace = status.get("hostIP"), meta.get("name"), meta.get("namespace")
        if status.get("phase") == "Running" and node_ip and name and namespace:
            by_node.setdefault(str(node_ip), {}).setdefault(str(namespace), []).append(str(name))
    usage: dict[str, PodUsage] = {}
    for node_ip, namespaces in by_node.items():
        for namespace, names in namespaces.items():
            usage.update(read_pod_usage(kube, node_ip, port, namespace, names))
    return usage


def workers_usage(kube: Kube, port: int, pods: Iterable[dict[str, Any]]) -> dict[str, WorkerUsage]:
    """One job's use by worker name (`trainer-0`), from the newest pod of each of its workers."""
    newest = {worker_name(role, index): attempts[-1] for (role, index), attempts in by_worker(pods).items()}
    read = read_pods_usage(kube, port, newest.values())
    now = datetime.now(UTC)
    result = {}
    for worker, pod in newest.items():
        used = read.get(str((pod.get("metadata") or {}).get("name")))
        if used is not None:
            result[worker] = WorkerUsage(
                cpu_cores=used["cpu_cores"], memory_bytes=used["memory_bytes"], sampled_at=now,
                gpu_util=used["gpu_util"], gpu_memory_bytes=used["gpu_memory_bytes"],
            )  # fmt: skip
    return result


def forget() -> None:
    """Drop every remembered read and log time (tests; a datacenter whose credentials changed)."""
    with _lock:
        _read_at.clear()
        _logged_at.clear()
