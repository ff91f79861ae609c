"""Listed Kubernetes objects (plain dicts), read: grouped by job and by worker, a pod's phase and container state.

Pure functions, no cluster calls: status.py judges a job from them, the engine finds a worker's pods.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from jobs.engines.kubernetes import names

LIVE_PHASES = {"Pending", "Running"}
Obj = dict[str, Any]


@dataclass
class JobObjects:
    """What one datacenter-wide listing holds of one job."""

    trainer_job: Obj | None = None
    pserver_set: Obj | None = None
    pods: list[Obj] = field(default_factory=list)
    create_failures: list[Obj] = field(default_factory=list)  # FailedCreate events of its Job/StatefulSet
    _workers: dict[tuple[str, int], list[Obj]] | None = field(default=None, repr=False, compare=False)

    def workers(self) -> dict[tuple[str, int], list[Obj]]:
        """by_worker(self.pods), worked out once: a cycle asks for it up to four times per job."""
        if self._workers is None:
            self._workers = by_worker(self.pods)
        return self._workers


def labels(obj: Obj) -> dict[str, str]:
    return (obj.get("metadata") or {}).get("labels") or {}


def group(pods: Iterable[Obj], jobs: Iterable[Obj], sets: Iterable[Obj]) -> dict[str, JobObjects]:
    """Objects by the job uid in their `paddlecloud.org/job` label."""
    result: dict[str, JobObjects] = defaultdict(JobObjects)
    for pod in pods:
        uid = labels(pod).get(names.JOB_LABEL)
        if uid:
            result[uid].pods.append(pod)
    for job in jobs:
        uid = labels(job).get(names.JOB_LABEL)
        if not uid:
            continue
        # A JobSet's child Jobs stand for the trainer Job and the pserver set (their pods are read alike).
        name = job["metadata"]["name"]
        if name in (names.trainer_job_name(uid), names.jobset_child(uid, names.JOBSET_TRAINERS)):
            result[uid].trainer_job = job
        elif name == names.jobset_child(uid, names.JOBSET_PSERVERS):
            result[uid].pserver_set = job
    for sts in sets:
        uid = labels(sts).get(names.JOB_LABEL)
        if uid and sts["metadata"]["name"] == names.pserver_set_name(uid):
            result[uid].pserver_set = sts
    return dict(result)


def attach_events(objects: dict[str, JobObjects], namespaces: dict[str, str], events: Iterable[Obj]) -> None:
    """Give each job the FailedCreate events of its Job and StatefulSet (namespaces: uid -> namespace)."""
    owners: dict[tuple[str, str], str] = {}
    for uid, ns in namespaces.items():
        for name in (names.trainer_job_name(uid), names.pserver_set_name(uid)):
            owners[(ns, name)] = uid
        for replicated in (names.JOBSET_TRAINERS, names.JOBSET_PSERVERS):
            owners[(ns, names.jobset_child(uid, replicated))] = uid
    for event in events:
        involved = event.get("involvedObject") or {}
        owner = owners.get((involved.get("namespace", ""), involved.get("name", "")))
        if owner is not None:
            objects.setdefault(owner, JobObjects()).create_failures.append(event)


def index_set(text: str | None) -> set[int]:
    """'0,2-4' (the Job status format of completedIndexes / failedIndexes) -> {0, 2, 3, 4}."""
    result: set[int] = set()
    for part in (text or "").split(","):
        part = part.strip()
        if not part:
            continue
        low, _, high = part.partition("-")
        result.update(range(int(low), int(high or low) + 1))
    return result


def conditions(obj: Obj | None) -> dict[str, Obj]:
    found = ((obj or {}).get("status") or {}).get("conditions") or []
    return {c["type"]: c for c in found if c.get("status") == "True"}


def pod_index(pod: Obj, role: str) -> int | None:
    meta = pod.get("metadata") or {}
    raw = (meta.get("labels") or {}).get(names.PSERVER_INDEX if role == "pserver" else names.TRAINER_INDEX)
    if raw is None:  # a trainer, or a JobSet's pserver: both pods of an Indexed Job
        raw = (meta.get("annotations") or {}).get(names.TRAINER_INDEX)
    if raw is None and role == "pserver":
        tail = meta.get("name", "").rsplit("-", 1)[-1]
        raw = tail if tail.isdigit() else None
    try:
        return int(raw) if raw is not None else None
    except ValueError:
        return None


def failure_count(pod: Obj) -> int:
    raw = ((pod.get("metadata") or {}).get("annotations") or {}).get(names.FAILURE_COUNT, "0")
    return int(raw) if str(raw).isdigit() else 0


def _sort_key(pod: Obj) -> tuple[str, int, str]:
    meta = pod.get("metadata") or {}
    return (meta.get("creationTimestamp") or "", failure_count(pod), meta.get("name", ""))


def by_worker(pods: Iterable[Obj]) -> dict[tuple[str, int], list[Obj]]:
    """(role, index) -> that worker's pods, oldest attempt first."""
    result: dict[tuple[str, int], list[Obj]] = defaultdict(list)
    for pod in pods:
        role = labels(pod).get(names.ROLE_LABEL, "")
        if role not in ("trainer", "pserver"):
            continue
        index = pod_index(pod, role)
        if index is not None:
            result[(role, index)].append(pod)
    for attempts in result.values():
        attempts.sort(key=_sort_key)
    return dict(result)


def phase(pod: Obj) -> str:
    return str((pod.get("status") or {}).get("phase") or "Pending")


def container_status(pod: Obj) -> Obj:
    statuses = (pod.get("status") or {}).get("containerStatuses") or []
    return statuses[0] if statuses else {}


def terminated(pod: Obj) -> Obj | None:
    state = container_status(pod).get("state") or {}
    return state.get("terminated")


def memory_limit(pod: Obj | None) -> str:
    """The memory limit of the pod's (first, the launcher's) container as its manifest says it ("4Gi"), or ""."""
    containers = ((pod or {}).get("spec") or {}).get("containers") or [{}]
    limits = (containers[0].get("resources") or {}).get("limits") or {}
    return str(limits.get("memory") or "")


def describe(term: Obj | None, fallback: str = "ended without an exit status", memory: str = "") -> str:
    """How a container ended; an OOM kill names the container's `memory` limit where it is known, so the
    message says what to raise (-memory / -psmemory) as the local engine's does."""
    if not term:
        return fallback
    code, reason = term.get("exitCode"), term.get("reason") or ""
    if reason == "OOMKilled":
        over = f"went over its memory limit ({memory}) and " if memory else ""
        return f"{over}was OOMKilled (exit code {code})"
    detail = f" ({reason})" if reason and reason not in ("Error", "Completed") else ""
    return f"exited with code {code}{detail}"
