"""Recorded inputs of the Kubernetes status rules, one JSON file per case (recorded by record.py here)."""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path
from typing import Any

from jobs.engines.kubernetes import names
from jobs.engines.kubernetes import pods as k8s_pods
from jobs.engines.kubernetes import status as k8s_status

HERE = Path(__file__).resolve().parent
Obj = dict[str, Any]

# What the status rules read of each object; everything else is dropped when a case is recorded.
_LABELS = (names.JOB_LABEL, names.ROLE_LABEL, names.TRAINER_INDEX, names.PSERVER_INDEX)
_POD_ANNOTATIONS = (names.TRAINER_INDEX, names.FAILURE_COUNT)
_CONTAINER_FIELDS = ("restartCount", "state", "lastState")
_POD_STATUS_FIELDS = ("phase", "reason", "message", "startTime")
_CONDITION_FIELDS = ("type", "status", "reason", "message")


def _pick(obj: Obj | None, keys: tuple[str, ...]) -> Obj:
    return {k: obj[k] for k in keys if obj and obj.get(k) is not None}


def _meta(obj: Obj, annotations: tuple[str, ...] = ()) -> Obj:
    meta = obj.get("metadata") or {}
    kept = _pick(meta, ("name", "namespace", "uid", "creationTimestamp", "deletionTimestamp"))
    kept["labels"] = _pick(meta.get("labels"), _LABELS)
    picked = _pick(meta.get("annotations"), annotations)
    if picked:
        kept["annotations"] = picked
    return kept


def _conditions(status: Obj) -> list[Obj]:
    return [_pick(c, _CONDITION_FIELDS) for c in status.get("conditions") or []]


def trim_pod(pod: Obj) -> Obj:
    status = pod.get("status") or {}
    kept: Obj = _pick(status, _POD_STATUS_FIELDS)
    scheduled = [c for c in _conditions(status) if c.get("type") == "PodScheduled"]
    if scheduled:
        kept["conditions"] = scheduled
    containers = status.get("containerStatuses") or []
    if containers:
        kept["containerStatuses"] = [_pick(containers[0], _CONTAINER_FIELDS)]
    spec = _pick(pod.get("spec"), ("nodeName",))
    memory = k8s_pods.memory_limit(pod)
    if memory:  # an OOM kill's message names it
        spec["containers"] = [{"resources": {"limits": {"memory": memory}}}]
    return {"metadata": _meta(pod, _POD_ANNOTATIONS), "spec": spec, "status": kept}


def trim_job(job: Obj) -> Obj:
    status = job.get("status") or {}
    kept: Obj = _pick(status, ("completedIndexes", "failedIndexes"))
    if status.get("conditions"):
        kept["conditions"] = _conditions(status)
    return {"metadata": _meta(job), "status": kept}


def trim_set(sts: Obj) -> Obj:
    return {"metadata": _meta(sts)}


def trim_event(event: Obj) -> Obj:
    return {
        "reason": event.get("reason"),
        "message": event.get("message"),
        "involvedObject": _pick(event.get("involvedObject"), ("kind", "namespace", "name")),
    }


def to_case(facts: k8s_status.Facts, objs: k8s_pods.JobObjects) -> Obj:
    """A JSON-ready case: the row's facts and the trimmed objects the engine listed of the job."""
    return {
        "facts": asdict(facts),
        "trainer_job": trim_job(objs.trainer_job) if objs.trainer_job else None,
        "pserver_set": trim_set(objs.pserver_set) if objs.pserver_set else None,
        "pods": [trim_pod(p) for p in objs.pods],
        "create_failures": [trim_event(e) for e in objs.create_failures],
    }


def from_case(case: Obj) -> tuple[k8s_status.Facts, k8s_pods.JobObjects]:
    facts = dict(case["facts"])
    facts["pserver_pods"] = {int(k): v for k, v in (facts.get("pserver_pods") or {}).items()}
    objs = k8s_pods.JobObjects(
        trainer_job=case["trainer_job"],
        pserver_set=case["pserver_set"],
        pods=list(case["pods"]),
        create_failures=list(case["create_failures"]),
    )
    return k8s_status.Facts(**facts), objs


def case_path(name: str) -> Path:
    return HERE / f"{name}.json"


def load(name: str) -> tuple[k8s_status.Facts, k8s_pods.JobObjects]:
    return from_case(json.loads(case_path(name).read_text()))


def retrim(name: str) -> None:
    """Trim a recorded case again (after the trimming rules changed)."""
    save(name, to_case(*load(name)))


def save(name: str, case: Obj) -> None:
    case_path(name).write_text(json.dumps(case, indent=1, sort_keys=True) + "\n")
