"""Kueue's objects for a user (plain dicts, pure functions), and Kueue's own words on why a JobSet waits.

Per user of an `admission: kueue` datacenter: a ClusterQueue named as their namespace (`<prefix><user>`)
whose nominal quota is the user's compute quota, on the one ResourceFlavor `paddlecloud-default`, and
the LocalQueue `paddlecloud` in their namespace pointing at it (jobset.QUEUE_LABEL names it).
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from paddlecloud.contract.units import exact_quantity_bytes

from datacenters.quota import Amounts
from jobs.engines.base import Observation, WorkerStatus
from jobs.engines.kubernetes import jobset, names
from jobs.engines.kubernetes.manifests import GPU_RESOURCE, user_labels
from jobs.engines.kubernetes.status import VANISHED_AFTER, Facts
from jobs.models import JobState, Reason, Role, WorkerState

API_VERSION = "kueue.x-k8s.io/v1beta2"
FLAVOR = "paddlecloud-default"  # no node labels: every node of the cluster
Obj = dict[str, Any]


def resource_flavor() -> Obj:
    return {
        "apiVersion": API_VERSION,
        "kind": "ResourceFlavor",
        "metadata": {"name": FLAVOR, "labels": {names.MANAGED_BY: names.MANAGER}},
    }


def _cores(value: Decimal) -> str:
    return f"{value.normalize():f}"


def cluster_queue(ns: str, datacenter: str, username: str, limits: Amounts) -> Obj:
    """The user's ClusterQueue (named as their namespace, and taking workloads from it only)."""
    quota = [
        {"name": "cpu", "nominalQuota": _cores(limits.cpu)},
        {"name": "memory", "nominalQuota": exact_quantity_bytes(limits.memory)},
        {"name": GPU_RESOURCE, "nominalQuota": str(limits.gpu)},
    ]
    return {
        "apiVersion": API_VERSION,
        "kind": "ClusterQueue",
        "metadata": {"name": ns, "labels": user_labels(datacenter, username)},
        "spec": {
            "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": ns}},
            "resourceGroups": [
                {"coveredResources": ["cpu", "memory", GPU_RESOURCE], "flavors": [{"name": FLAVOR, "resources": quota}]}
            ],
        },
    }


def local_queue(ns: str, datacenter: str, username: str) -> Obj:
    return {
        "apiVersion": API_VERSION,
        "kind": "LocalQueue",
        "metadata": {"name": jobset.LOCAL_QUEUE, "namespace": ns, "labels": user_labels(datacenter, username)},
        "spec": {"clusterQueue": ns},
    }


def workloads_by_jobset(workloads: list[Obj]) -> dict[tuple[str, str], Obj]:
    """(namespace, JobSet name) -> the Workload Kueue made for it (it owns it)."""
    result = {}
    for workload in workloads:
        meta = workload.get("metadata") or {}
        for ref in meta.get("ownerReferences") or []:
            if ref.get("kind") == "JobSet":
                result[(meta.get("namespace", ""), ref.get("name", ""))] = workload
    return result


def waiting_message(workload: Obj | None) -> str:
    """Why Kueue has not admitted a workload yet, in its own words (QuotaReserved=False), or a plain line."""
    for cond in ((workload or {}).get("status") or {}).get("conditions") or []:
        if cond.get("type") == "QuotaReserved" and cond.get("status") == "False" and cond.get("message"):
            return f"queued by Kueue: {cond['message']}"
    return "queued by Kueue: waiting for admission"


def _waiting_workers(f: Facts, message: str) -> list[WorkerStatus]:
    roles = [(Role.PSERVER, i) for i in range(f.pservers)] + [(Role.TRAINER, i) for i in range(f.trainers)]
    return [WorkerStatus(role=r, index=i, state=WorkerState.PENDING, message=message) for r, i in roles]


def held(f: Facts, found: Obj | None, workload: Obj | None) -> Observation | None:
    """A JobSet-layout job Kueue has not admitted (its JobSet suspended): pending, in Kueue's words; one whose
    JobSet is gone: failed after VANISHED_AFTER. None once admitted: status.observe reads its child Jobs."""
    current = JobState.RUNNING if f.running else JobState.PENDING
    if found is None:
        if f.age > VANISHED_AFTER:
            gone = f"the JobSet {f.uid} of the job disappeared (deleted outside PaddleCloud?)"
            return Observation(JobState.FAILED, Reason.LAUNCH_FAILED, gone, None, _waiting_workers(f, gone))
        return Observation(current, message="waiting for its JobSet", workers=_waiting_workers(f, "waiting"))
    if not jobset.suspended(found):
        return None
    message = waiting_message(workload)
    # "insufficient quota" (never fits) or "insufficient unused quota" (fits once the user's jobs end): the user's
    # own ClusterQueue's quota either way.
    reason = Reason.QUOTA_EXHAUSTED if "insufficient" in message and "quota" in message else Reason.NONE
    return Observation(current, reason, message, None, _waiting_workers(f, "waiting for Kueue to admit the job"))
