"""A worker's log from its pods: every attempt in order while they run, and the archive on the PFS after.

The launcher tees each pod's log to the worker's folder on the PFS; where the pods' logs are longer
(the launcher died early), `archive` keeps them there before the pods go (the engine's finish).
"""

from __future__ import annotations

from typing import Any

from paddlecloud.contract.states import worker_name

from jobs.engines.base import TransientEngineError
from jobs.engines.kubernetes import client as kube
from jobs.engines.kubernetes import pods as k8s_pods
from jobs.files.logfiles import write_archive
from jobs.models import Job
from storage.errors import StorageUnavailable


def pod_log(k8s: kube.Kube, ns: str, pod: dict[str, Any], container: str, previous: bool = False) -> str:
    try:
        return k8s.log(ns, pod["metadata"]["name"], container, previous=previous)
    except kube.KubeError:
        return ""  # not started yet, no log kept, or gone: nothing to add


def worker_text(k8s: kube.Kube, ns: str, role: str, pods: list[dict[str, Any]]) -> str:
    """One worker's log: every attempt in order (and a pserver's previous container before its current one)."""
    parts = []
    for pod in pods:
        status = k8s_pods.container_status(pod)
        if role == "pserver" and int(status.get("restartCount") or 0) > 0:
            parts.append(pod_log(k8s, ns, pod, role, previous=True))
        if status.get("state", {}).get("running") or status.get("state", {}).get("terminated"):
            parts.append(pod_log(k8s, ns, pod, role))
    text = ""
    for part in parts:
        if text and not text.endswith("\n"):
            text += "\n"
        text += part
    return text


def archive(k8s: kube.Kube, job: Job, ns: str, pods: list[dict[str, Any]]) -> dict[str, str]:
    """Write each worker's log to <output>/<role>_<index>/log.txt, atomically; returns the refusals
    (worker -> message for its row) where its folder was not safe to write.

    The launcher tees the same bytes to that file from inside the pod; where that copy is longer
    (the kubelet rotates container logs, and the API then serves only the newest part), it stays.
    """
    refused = {}
    for (role, index), attempts in k8s_pods.by_worker(pods).items():
        text = worker_text(k8s, ns, role, attempts)
        if not text:
            continue
        try:
            archived = write_archive(job, worker_name(role, index), text.encode())
        except StorageUnavailable as exc:
            raise TransientEngineError(exc.message) from None  # not mounted right now: the next cycle retries
        if archived.refused:
            refused[worker_name(role, index)] = archived.refused
    return refused
