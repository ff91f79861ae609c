"""Kueue's objects for a user and their team (plain dicts, pure functions), and Kueue's words on why a JobSet waits.

Per user of an `admission: kueue` datacenter: a ClusterQueue named as their namespace (`<prefix><user>`) on the
ResourceFlavors `paddlecloud-default` (cpu, memory) and `paddlecloud-gpu` (GPUs), and the LocalQueue
`paddlecloud` in their namespace pointing at it (jobset.QUEUE_LABEL names it).

Teams (the portal's rule, jobs/scheduling/policy.py): a team's quota is its guarantee, its members borrow past it
only with `may_borrow`, and a member's own quota caps them always. So per team (datacenters.TeamQuota) a Cohort
`paddlecloud-<datacenter>-<team>` under the datacenter's cohort `paddlecloud-<datacenter>`, whose nominal quota
is the team's (borrowingLimit 0 unless it may borrow) with the team's fair-sharing weight; a member's ClusterQueue
is in it with nominal 0 and borrowingLimit = their own quota (all they hold comes from the team's pool, never more
than their quota). A user in several teams is placed as their jobs are counted: the first of their teams by
name (datacenters.models.team_of). A user in no team keeps a nominal quota of their own in the datacenter's
cohort and borrows nothing (the portal's scheduler gives them no team pool to borrow past either). Since no user
ever holds more than their own quota, the namespace ResourceQuota and the submit check stay the user's quota.

Priorities: a WorkloadPriorityClass `paddlecloud-<class>` per portal PriorityClass (its value), named on each
JobSet (jobset.PRIORITY_LABEL); a user's higher job preempts their own lower one (withinClusterQueue), and a
team's job within its team's quota takes back what another team borrowed (reclaimWithinCohort: Any).

Victims: Kueue stops the lowest effective priority first (its priority plus the `kueue.x-k8s.io/priority-boost`
annotation of its Workload, Kueue's PriorityBoost feature), then the most recently admitted. The portal writes
each admitted job's boost (jobs.scheduling.preemption_cost: the work a stop would lose, or a shield) on its
Workload, so Kueue stops the job that loses the least (boost_writes).
"""
from __future__ import annotations

from collections.abc import Mapping
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
FLAVOR = "paddlecloud-default"  # cpu and memory, on every node of the cluster (no node labels)
# GPUs, in a resource group of their own: GPU quota is counted apart from cpu and memory (no quota counted twice),
# and an operator may give this flavor `spec.nodeLabels` (e.g. `nvidia.com/gpu.present: "true"`, or a GPU model)
# so GPU pods land on those nodes: the portal makes it when missing and never rewrites it.
GPU_FLAVOR = "paddlecloud-gpu"
BOOST = "kueue.x-k8s.io/priority-boost"  # on a Workload: added to its priority wherever Kueue compares them
MAX_BOOST_WRITES = 50  # Workloads patched per call; the rest at the next (a cycle stays bounded)
PREFIX = "paddlecloud-"  # of the cohorts and WorkloadPriorityClasses the portal makes
Obj = dict[str, Any]
NOTHING = Amounts()


def resource_flavor(name: str = FLAVOR) -> Obj:
    return {
        "apiVersion": API_VERSION,
        "kind": "ResourceFlavor",
        "metadata": {"name": name, "labels": {names.MANAGED_BY: names.MANAGER}},
    }


def _cores(value: Decimal) -> str:
    return f"{value.normalize():f}"


def priority_class_name(portal_class: str) -> str:
    return f"{PREFIX}{portal_class}"


def workload_priority_class(portal_class: str, value: int) -> Obj:
    """The WorkloadPriorityClass mirroring one of the portal's PriorityClass rows: Kueue orders and preempts by it."""
    return {
        "apiVersion": API_VERSION,
        "kind": "WorkloadPriorityClass",
        "metadata": {"name": priority_class_name(portal_class), "labels": {names.MANAGED_BY: names.MANAGER}},
        "value": value,
        "description": f"the portal's priority class {portal_class!r}",
    }


def cohort_name(datacenter: str) -> str:
    return f"{PREFIX}{datacenter}"


def _preemption() -> Obj:
    return {
        "withinClusterQueue": "LowerPriority",  # a user's high job stops their own low one
        "reclaimWithinCohort": "Any",  # a queue takes back its nominal quota from whoever borrowed it
        "borrowWithinCohort": {"policy": "LowerPriority"},
    }


def team_cohort_name(datacenter: str, team: str) -> str:
    """`paddlecloud-<datacenter>-<team>`: a group name may hold any character, so names.dns_safe makes it a label."""
    return f"{cohort_name(datacenter)}-{names.dns_safe(team)}"


def _quota(limits: Amounts, borrowing: Amounts | None) -> list[Obj]:
    """Nominal `limits` per resource; borrowing up to `borrowing` (None: as much as the parent lends)."""
    nominal = {"cpu": _cores(limits.cpu), "memory": exact_quantity_bytes(limits.memory), GPU_RESOURCE: str(limits.gpu)}
    result: list[Obj] = [{"name": name, "nominalQuota": value} for name, value in nominal.items()]
    if borrowing is not None:
        most = {
            "cpu": _cores(borrowing.cpu),
            "memory": exact_quantity_bytes(borrowing.memory),
            GPU_RESOURCE: str(borrowing.gpu),
        }
        for entry in result:
            entry["borrowingLimit"] = most[entry["name"]]
    return result


def _resource_groups(quota: list[Obj]) -> list[Obj]:
    """cpu and memory on FLAVOR, GPUs on GPU_FLAVOR: a pod set that asks no GPU (pservers) gets no GPU flavor, so
    none of its nodes' labels."""
    compute = [entry for entry in quota if entry["name"] != GPU_RESOURCE]
    gpus = [entry for entry in quota if entry["name"] == GPU_RESOURCE]
    return [
        {"coveredResources": ["cpu", "memory"], "flavors": [{"name": FLAVOR, "resources": compute}]},
        {"coveredResources": [GPU_RESOURCE], "flavors": [{"name": GPU_FLAVOR, "resources": gpus}]},
    ]


def team_cohort(datacenter: str, team: str, guaranteed: Amounts, may_borrow: bool, weight: Decimal) -> Obj:
    """The team's Cohort: its quota is the pool its members' queues draw on (and lend while idle); past it the team
    borrows from the datacenter's cohort only if it may."""
    return {
        "apiVersion": API_VERSION,
        "kind": "Cohort",
        "metadata": {
            "name": team_cohort_name(datacenter, team),
            "labels": {names.MANAGED_BY: names.MANAGER, names.DATACENTER_LABEL: datacenter},  # found to prune
        },
        "spec": {
            "parentName": cohort_name(datacenter),
            "fairSharing": {"weight": _cores(weight)},
            "resourceGroups": _resource_groups(_quota(guaranteed, None if may_borrow else NOTHING)),
        },
    }


def cluster_queue(
    ns: str, datacenter: str, username: str, limits: Amounts, weight: Decimal = Decimal(1), team: str | None = None
) -> Obj:
    """The user's ClusterQueue (named as their namespace, and taking workloads from it only): in their team's
    cohort drawing up to their quota from the team's pool, or (no team) in the datacenter's with their own quota."""
    if team is None:
        cohort, quota = cohort_name(datacenter), _quota(limits, NOTHING)
    else:
        cohort, quota = team_cohort_name(datacenter, team), _quota(NOTHING, limits)
    return {
        "apiVersion": API_VERSION,
        "kind": "ClusterQueue",
        "metadata": {"name": ns, "labels": user_labels(datacenter, username)},
        "spec": {
            "cohortName": cohort,
            "preemption": _preemption(),
            "fairSharing": {"weight": _cores(weight)},
            "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": ns}},
            "resourceGroups": _resource_groups(quota),
        },
    }


def local_queue(ns: str, datacenter: str, username: str) -> Obj:
    return {
        "apiVersion": API_VERSION,
        "kind": "LocalQueue",
        "metadata": {"name": jobset.LOCAL_QUEUE, "namespace": ns, "labels": user_labels(datacenter, username)},
        "spec": {"clusterQueue": ns},
    }


def workloads_by_jobset(workloads: list[Obj]) -> dict[str, Obj]:
    """The uid of a JobSet -> the Workload Kueue made for it (it owns it). By uid, not name: a requeued job's
    new JobSet has its predecessor's name, whose Workload may linger a moment."""
    result = {}
    for workload in workloads:
        for ref in (workload.get("metadata") or {}).get("ownerReferences") or []:
            if ref.get("kind") == "JobSet":
                result[ref.get("uid", "")] = workload
    return result


def _admitted(workload: Obj) -> bool:
    if (workload.get("metadata") or {}).get("deletionTimestamp") or eviction(workload) is not None:
        return False
    conditions = (workload.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Admitted" and c.get("status") == "True" for c in conditions)


def _boost_of(workload: Obj) -> int | None:
    """The boost written on it (no annotation: 0); None where it holds something else (written again)."""
    value = ((workload.get("metadata") or {}).get("annotations") or {}).get(BOOST, "0")
    try:
        return int(value)
    except ValueError:
        return None


def boost_writes(costs: Mapping[str, int], jobsets: list[Obj], workloads: list[Obj]) -> list[tuple[str, str, str]]:
    """(namespace, name, boost) of each Workload to patch: those Kueue admitted, of the jobs in `costs` (job uid ->
    boost), whose boost differs. Only admitted ones: a waiting Workload's boost would reorder Kueue's queue."""
    by_jobset = workloads_by_jobset(workloads)
    writes = []
    for obj in jobsets:
        meta = obj.get("metadata") or {}
        wanted = costs.get((meta.get("labels") or {}).get(names.JOB_LABEL, ""))
        workload = by_jobset.get(meta.get("uid", ""))
        if wanted is None or workload is None or not _admitted(workload) or _boost_of(workload) == wanted:
            continue
        its = workload.get("metadata") or {}
        writes.append((str(its.get("namespace", "")), str(its.get("name", "")), str(wanted)))
    return writes


def eviction(workload: Obj | None) -> str | None:
    """Why Kueue evicted an admitted workload (Evicted=True: preempted, or another of Kueue's reasons), else None."""
    for cond in ((workload or {}).get("status") or {}).get("conditions") or []:
        if cond.get("type") == "Evicted" and cond.get("status") == "True":
            return str(cond.get("message") or cond.get("reason") or "evicted")
    return None


def evictions(workload: Obj | None) -> int:
    """How many times Kueue evicted the workload, all reasons (status.schedulingStats.evictions[].count)."""
    stats = (((workload or {}).get("status") or {}).get("schedulingStats") or {}).get("evictions") or []
    return sum(count for entry in stats if isinstance(count := (entry or {}).get("count"), int) and count > 0)


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
    JobSet is gone: failed after VANISHED_AFTER; one Kueue evicted (even if admitted again since): preempted.
    None once admitted: status.observe reads its child Jobs."""
    current = JobState.RUNNING if f.running else JobState.PENDING
    if found is None:
        if f.age > VANISHED_AFTER:
            gone = f"the JobSet {f.uid} of the job disappeared (deleted outside PaddleCloud?)"
            return Observation(JobState.FAILED, Reason.LAUNCH_FAILED, gone, None, _waiting_workers(f, gone))
        return Observation(current, message="waiting for its JobSet", workers=_waiting_workers(f, "waiting"))
    if not jobset.suspended(found):
        # Evicted and admitted again before the portal looked: its pods were stopped all the same. Each attempt
        # is a new JobSet with a new Workload (its count starts at 0), so any eviction on it is one not yet seen.
        if not evictions(workload):
            return None
        evicted: str | None = "evicted and admitted again"
    else:
        evicted = eviction(workload)
    if evicted is not None:
        # Stopped by Kueue after it ran: the reconciler requeues it as the portal's own preemption does.
        message = f"preempted by Kueue ({evicted}); its workers got SIGTERM and their grace to save a checkpoint"
        return Observation(JobState.QUEUED, Reason.PREEMPTED, message, None, [])
    message = waiting_message(workload)
    # "insufficient quota" (never fits) or "insufficient unused quota" (fits once jobs end): the user's or their
    # team's quota either way.
    reason = Reason.QUOTA_EXHAUSTED if "insufficient" in message and "quota" in message else Reason.NONE
    return Observation(current, reason, message, None, _waiting_workers(f, "waiting for Kueue to admit the job"))
