"""Helpers for the kubernetes engine tests: start jobs on the engine directly and drive the reconciler."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from django.contrib.auth.models import User
from django.utils import timezone
from kubernetes import client as k8s

from datacenters.models import Datacenter
from jobs.engines import engine_for
from jobs.follow.reconcile import reconcile_datacenter, release
from jobs.follow.records import RECORDS
from jobs.models import TERMINAL_STATES, Job, JobState
from jobs.spec import JobSpecSerializer
from jobs.states import transition
from tests.wait import wait_for
from tools.k8s.testcluster import DELAY, EXIT_CODE, FATE

T = TypeVar("T")
__all__ = ["DELAY", "EXIT_CODE", "FATE"]


def put_package(dc: Datacenter, user: User, jobname: str) -> Path:
    """The job's package folder on the datacenter's storage (what `paddlectl submit` uploads)."""
    path = Path(dc.storage_root) / "home" / user.username / "jobs" / jobname
    path.mkdir(parents=True, exist_ok=True)
    (path / "train.py").write_text("print('training')\n")
    return path


def new_job(
    dc: Datacenter,
    user: User,
    spec: dict[str, Any],
    trainer_annotations: dict[str, str] | None = None,
    pserver_annotations: dict[str, str] | None = None,
    uid: str | None = None,
) -> Job:
    """A job row as the API would write it (spec validated and defaulted), with the engine's test hook set."""
    serializer = JobSpecSerializer(data={"entry": "python train.py", **spec})
    serializer.is_valid(raise_exception=True)
    data = {**serializer.validated_data, "datacenter": dc.name}
    put_package(dc, user, data["jobname"])
    engine_data: dict[str, Any] = {}
    if trainer_annotations:
        engine_data["pod_annotations"] = trainer_annotations
    if pserver_annotations:
        engine_data["pserver_annotations"] = pserver_annotations
    return Job.objects.create(
        owner=user,
        datacenter=dc,
        name=data["jobname"],
        uid=uid or f"{data['jobname']}-{uuid.uuid4().hex[:5]}",
        spec=data,
        state=JobState.SUBMITTING,
        engine_data=engine_data,
    )


def start(job: Job) -> Job:
    """What submit_job does: engine.start, then pending."""
    engine_for(job.datacenter).start(job, RECORDS)
    transition(job.pk, JobState.PENDING, submitted_at=timezone.now())
    job.refresh_from_db()
    return job


def submit(dc: Datacenter, user: User, spec: dict[str, Any], **kwargs: Any) -> Job:
    return start(new_job(dc, user, spec, **kwargs))


# The bound of a wait on the cluster's controllers (Kueue, JobSet, kwok's pods). A wait, not a speed: an admission
# took over 30 s on a CI host loaded to 12, and a Kueue preemption with no reconcile in between over 60 s on the CI
# host (2026-11-30). A test about how fast something happens asserts that itself.
CLUSTER_WAIT = 120.0


def drive(dc: Datacenter, until: Callable[[], T | None], what: str, timeout: float = CLUSTER_WAIT) -> T:
    """Run reconcile cycles (as the beat does every 2 s, here faster) until `until()` is truthy."""

    def cycle() -> T | None:
        reconcile_datacenter(dc)
        return until()

    return wait_for(cycle, what, timeout, interval=0.3)


def job_in(job: Job, *states: str) -> Job | None:
    job.refresh_from_db()
    return job if job.state in states else None


def finished(job: Job) -> Job | None:
    job.refresh_from_db()
    return job if job.state in TERMINAL_STATES and job.released else None


def kill(job: Job, timeout: float = 30.0) -> Job:
    """What services.kill + kill_job do: killed at once, then release until nothing runs."""
    transition(job.pk, JobState.KILLED, reason="Killed", message="killed by request")
    job.refresh_from_db()
    engine = engine_for(job.datacenter)
    wait_for(lambda: release(job, engine), f"{job.uid} to be released", timeout)
    job.refresh_from_db()
    return job


def objects_of(api: k8s.ApiClient, uid: str) -> dict[str, list[str]]:
    """Names of everything in the cluster labelled with the job uid, by kind (empty lists: nothing left)."""
    selector = f"paddlecloud.org/job={uid}"
    core, apps, batch = k8s.CoreV1Api(api), k8s.AppsV1Api(api), k8s.BatchV1Api(api)
    networking = k8s.NetworkingV1Api(api)
    return {
        "Service": _names(core.list_service_for_all_namespaces(label_selector=selector).items),
        "StatefulSet": _names(apps.list_stateful_set_for_all_namespaces(label_selector=selector).items),
        "Job": _names(batch.list_job_for_all_namespaces(label_selector=selector).items),
        "Pod": _names(core.list_pod_for_all_namespaces(label_selector=selector).items),
        "NetworkPolicy": _names(networking.list_network_policy_for_all_namespaces(label_selector=selector).items),
    }


def _names(items: list[Any]) -> list[str]:
    """The names of objects the API listed (any kind: each has metadata.name)."""
    return [o.metadata.name for o in items]


def nothing_left(api: k8s.ApiClient, uid: str) -> bool:
    return not any(objects_of(api, uid).values())
