"""The kubernetes engine through the API and a real Celery worker with beat (submit_job, reconcile, kill_job)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.db import transaction
from kubernetes import client as k8s
from rest_framework.test import APIClient

from datacenters.models import Datacenter
from jobs.models import Job
from tests.k8s.engine_helpers import DELAY, FATE, nothing_left, objects_of, put_package
from tests.wait import wait_for
from tests.workers import WorkerProcess, start_worker
from tools.k8s.testcluster import TestCluster

pytestmark = [pytest.mark.celery, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def worker(transactional_db: None, tmp_path: Path) -> Iterator[WorkerProcess]:
    process = start_worker(tmp_path, beat=True, concurrency=2)
    yield process
    process.stop()


def post_job(api: APIClient, spec: dict[str, Any], trainer_annotations: dict[str, str] | None = None) -> Job:
    """POST the job; the engine's test hook is set in the same transaction, so submit_job sees it."""
    with transaction.atomic():
        response = api.post("/api/v1/jobs", spec, format="json")
        assert response.status_code == 201, response.json()
        job = Job.objects.get(uid=response.json()["uid"])
        if trainer_annotations:
            Job.objects.filter(pk=job.pk).update(engine_data={"pod_annotations": trainer_annotations})
    return job


def state_of(job: Job, *states: str) -> Job | None:
    job.refresh_from_db()
    return job if job.state in states else None


def released(job: Job) -> Job | None:
    job.refresh_from_db()
    return job if job.released else None


def test_a_job_runs_through_the_api_with_live_then_archived_logs_and_kill_leaves_nothing(
    alice_api: APIClient,
    alice: User,
    k8s_dc: Datacenter,
    k8s_cluster: TestCluster,
    k8s_api: k8s.ApiClient,
    worker: WorkerProcess,
) -> None:
    put_package(k8s_dc, alice, "fit")
    k8s_cluster.set_namespace_log_lines(f"{k8s_dc.namespace_prefix}alice", ["step 1", "step 2", "done"])
    spec = {"jobname": "fit", "datacenter": k8s_dc.name, "entry": "python train.py", "parallelism": 2, "pservers": 1}
    job = post_job(alice_api, spec, {FATE: "succeed", DELAY: "5s"})
    wait_for(lambda: state_of(job, "running"), "running", 30, watch=worker)
    live = alice_api.get("/api/v1/jobs/fit/logs?worker=trainer-1").json()
    assert (live["text"], live["complete"], live["state"]) == ("step 1\nstep 2\ndone\n", False, "running")
    job = wait_for(lambda: released(job), "success", 30, watch=worker)
    assert (job.state, job.reason, job.exit_code) == ("succeeded", "", 0)
    after = alice_api.get(f"/api/v1/jobs/fit/logs?worker=trainer-1&cursor={live['cursor']}").json()
    assert (after["text"], after["complete"]) == ("", True)
    whole = alice_api.get("/api/v1/jobs/fit/logs?worker=trainer-0").json()
    assert (whole["text"], whole["complete"]) == ("step 1\nstep 2\ndone\n", True)
    workers = alice_api.get("/api/v1/jobs/fit/workers").json()["results"]
    assert [(w["name"], w["state"]) for w in workers] == [
        ("pserver-0", "succeeded"),
        ("trainer-0", "succeeded"),
        ("trainer-1", "succeeded"),
    ]
    assert objects_of(k8s_api, job.uid)["StatefulSet"] == []

    put_package(k8s_dc, alice, "hang")
    hang = post_job(alice_api, {**spec, "jobname": "hang"}, {FATE: "hang"})
    wait_for(lambda: state_of(hang, "running"), "running", 30, watch=worker)
    assert alice_api.delete("/api/v1/jobs/hang").json()["state"] == "killed"
    wait_for(lambda: released(hang), "kill to release", 30, watch=worker)
    wait_for(lambda: nothing_left(k8s_api, hang.uid), "every object of the killed job to be gone", 30, watch=worker)


def test_the_api_server_down_during_submit_keeps_the_job_queued_until_it_is_back(
    alice_api: APIClient,
    alice: User,
    k8s_dc: Datacenter,
    k8s_cluster: TestCluster,
    k8s_api: k8s.ApiClient,
    worker: WorkerProcess,
) -> None:
    put_package(k8s_dc, alice, "patient")
    spec = {"jobname": "patient", "datacenter": k8s_dc.name, "entry": "python train.py", "parallelism": 2}
    k8s_cluster.stop_component("kube-apiserver")
    try:
        job = post_job(alice_api, {**spec, "pservers": 1})  # no fate: trainers succeed after 1 s
        retrying = wait_for(
            lambda: state_of(job, "submitting") if Job.objects.get(pk=job.pk).message else None,
            "a retry",
            30,
            watch=worker,
        )
        assert retrying.message.startswith("retrying: cannot reach the Kubernetes API server")
        time.sleep(2)  # a while without the API server: the job must stay where it is, not fail
        assert Job.objects.get(pk=job.pk).state in ("queued", "submitting")
    finally:
        k8s_cluster.start_component("kube-apiserver")
    job = wait_for(lambda: released(job), "the job to run and succeed once the server is back", 90, watch=worker)
    assert (job.state, job.reason) == ("succeeded", "")
    found = objects_of(k8s_api, job.uid)
    assert (found["Service"], found["Job"], found["StatefulSet"]) == ([job.uid], [f"{job.uid}-trainer"], [])
    assert len(found["Pod"]) == 2  # one pod per trainer: nothing was created twice
