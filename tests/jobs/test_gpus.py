"""GPUs on the local engine, with a fake GPU list: distinct GPUs, waiting, freeing, quota, detection."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.db import IntegrityError, transaction
from django.test import Client
from rest_framework.test import APIClient

from datacenters.models import Datacenter, Quota
from jobs.engines.local import gpus
from jobs.models import GpuAssignment, Job
from jobs.scheduling import cycle
from tests.jobs.test_local_engine import finished
from tests.wait import wait_for
from tests.workers import WorkerProcess

SMI = """GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-0d7c6f0e-aaaa-bbbb-cccc-000000000000)
GPU 1: NVIDIA H100 80GB HBM3 (UUID: GPU-0d7c6f0e-aaaa-bbbb-cccc-000000000001)
"""


def make_job(user: User, datacenter: Datacenter, name: str, trainers: int, gpu: int) -> Job:
    spec: dict[str, Any] = {"jobname": name, "parallelism": trainers, "pservers": 0, "gpu": gpu, "entry": "true"}
    return Job.objects.create(owner=user, datacenter=datacenter, name=name, uid=f"{name}-x", spec=spec)


def test_nvidia_smi_list_is_parsed_into_indexes() -> None:
    assert gpus.parse_nvidia_smi_list(SMI) == ["0", "1"]
    assert gpus.parse_nvidia_smi_list("No devices were found\n") == []


@pytest.mark.django_db
def test_jobs_get_distinct_gpus_wait_when_none_are_free_and_get_them_once_freed(
    alice: User, bob: User, local_dc: Datacenter
) -> None:
    local_dc.gpus = ["0", "1", "2"]
    local_dc.save()
    first = make_job(alice, local_dc, "first", trainers=2, gpu=1)
    second = make_job(bob, local_dc, "second", trainers=1, gpu=2)
    assert gpus.acquire(first)
    held = gpus.assigned(first)
    assert sorted(held) == [0, 1] and len({g for v in held.values() for g in v}) == 2
    assert gpus.gpu_env(first, 1) == {"CUDA_VISIBLE_DEVICES": held[1][0], "CUDA_DEVICE_ORDER": "PCI_BUS_ID"}
    # Only one GPU is left: the second job takes none (all or nothing) and waits.
    assert not gpus.acquire(second) and gpus.assigned(second) == {}
    assert gpus.free_count(local_dc) == 1
    gpus.release(first)
    assert gpus.acquire(second)
    assert len(gpus.assigned(second)[0]) == 2
    assert gpus.acquire(second)  # idempotent: nothing more is taken
    assert GpuAssignment.objects.filter(job=second).count() == 2


@pytest.mark.django_db
def test_the_database_refuses_one_gpu_for_two_jobs(alice: User, local_dc: Datacenter) -> None:
    a, b = make_job(alice, local_dc, "a", 1, 1), make_job(alice, local_dc, "b", 1, 1)
    GpuAssignment.objects.create(datacenter=local_dc, gpu="0", job=a, trainer=0)
    with pytest.raises(IntegrityError), transaction.atomic():
        GpuAssignment.objects.create(datacenter=local_dc, gpu="0", job=b, trainer=0)


@pytest.mark.django_db
def test_a_job_needing_more_gpus_than_the_datacenter_has_is_refused(
    alice_api: APIClient, alice: User, local_dc: Datacenter, fake_package: Path
) -> None:
    Quota.objects.create(user=alice, datacenter=local_dc, gpu=8)
    local_dc.gpus = ["0"]
    local_dc.save()
    body = {"jobname": "fake", "entry": "python train.py", "parallelism": 2, "gpu": 1}
    response = alice_api.post("/api/v1/jobs", body, format="json")
    assert response.status_code == 400
    assert response.json()["errors"] == [
        {"field": "gpu", "code": "invalid", "message": "the job needs 2 GPUs but datacenter local has 1"}
    ]
    assert not Job.objects.exists()


@pytest.mark.django_db
def test_the_gpu_quota_counts_gpus_of_active_jobs(
    alice_api: APIClient, alice: User, local_dc: Datacenter, fake_package: Path
) -> None:
    Quota.objects.create(user=alice, datacenter=local_dc, gpu=1)
    local_dc.gpus = ["0", "1"]
    local_dc.save()
    body = {"jobname": "fake", "entry": "python train.py", "gpu": 1, "package": "/pfs/local/home/alice/jobs/fake"}
    assert alice_api.post("/api/v1/jobs", body, format="json").status_code == 201
    assert alice_api.post("/api/v1/jobs", {**body, "jobname": "again"}, format="json").status_code == 201
    first, again = Job.objects.get(name="fake"), Job.objects.get(name="again")
    assert cycle.schedule(local_dc) == [first.pk]  # the quota caps the GPUs running at once
    again.refresh_from_db()
    assert (again.state, again.reason) == ("queued", "QuotaExhausted")
    assert "gpu" in again.message
    big = alice_api.post("/api/v1/jobs", {**body, "jobname": "big", "gpu": 2}, format="json")
    assert big.status_code == 400  # more GPUs than the quota: it could never start
    quota_errors = [e["message"] for e in big.json()["errors"] if e["field"] == "quota"]
    assert quota_errors == ["gpu: the job needs 2 but your quota in local is 1, so it could never start"]


@pytest.mark.celery
@pytest.mark.django_db(transaction=True)
def test_a_job_waits_in_the_queue_for_gpus_then_starts_when_they_free_up(
    alice_api: APIClient, alice: User, local_dc: Datacenter, fake_package: Path, worker: WorkerProcess
) -> None:
    Quota.objects.create(user=alice, datacenter=local_dc, gpu=4)
    local_dc.gpus = ["0", "1"]
    local_dc.save()
    entry = 'echo "visible=$CUDA_VISIBLE_DEVICES"; python train.py'
    holder: dict[str, Any] = {"jobname": "holder", "entry": entry, "parallelism": 2, "gpu": 1}
    holder |= {"package": "/pfs/local/home/alice/jobs/fake", "env": {"FAKE_STEPS": "600"}}
    assert alice_api.post("/api/v1/jobs", holder, format="json").status_code == 201
    wait_for(lambda: Job.objects.filter(name="holder", state="running").exists(), "holder running", 90, watch=worker)
    waiting = {**holder, "jobname": "waiting", "parallelism": 1, "gpu": 2, "env": {"FAKE_STEPS": "2"}}
    assert alice_api.post("/api/v1/jobs", waiting, format="json").status_code == 201

    def queued() -> Job | None:  # the scheduler holds it back: the datacenter's 2 GPUs are both held
        return Job.objects.filter(name="waiting", state="queued", reason="WaitingForCapacity").first()

    job = wait_for(queued, "waiting job queued for capacity", 60, watch=worker)
    assert isinstance(job, Job)
    assert "gpu" in job.message, job.message
    assert not job.workers.exists() and not job.engine_data.get("trainer-0")

    # The holder's two trainers saw one distinct GPU each (a loaded host may start trainer 1's shell a moment later).
    def both_said() -> list[str] | None:
        logs = [alice_api.get(f"/api/v1/jobs/holder/logs?worker=trainer-{i}").json()["text"] for i in (0, 1)]
        seen = sorted(line for text in logs for line in text.splitlines() if line.startswith("visible="))
        return seen if len(seen) == 2 else None

    assert wait_for(both_said, "both trainers' visible GPUs", 30, watch=worker) == ["visible=0", "visible=1"]
    alice_api.delete("/api/v1/jobs/holder")
    done = finished("waiting", worker, timeout=120)
    assert (done.state, done.reason) == ("succeeded", ""), done.message
    text = alice_api.get("/api/v1/jobs/waiting/logs?worker=trainer-0").json()["text"]
    assert "visible=0,1" in text
    assert not GpuAssignment.objects.exists()  # both jobs gave their GPUs back


@pytest.fixture
def fake_nvidia_smi(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An `nvidia-smi` on PATH that lists two GPUs, as the real one prints them."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    script = bin_dir / "nvidia-smi"
    script.write_text(f"#!/bin/sh\n[ \"$1\" = -L ] || exit 9\ncat <<'EOF'\n{SMI}EOF\n")
    script.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")


def test_detect_runs_nvidia_smi_and_finds_nothing_without_it(
    fake_nvidia_smi: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert gpus.detect() == ["0", "1"]
    monkeypatch.setenv("PATH", "/nonexistent")
    assert gpus.detect() == []


@pytest.mark.django_db
def test_the_admin_action_fills_a_local_datacenters_gpus(
    fake_nvidia_smi: None, carol: User, local_dc: Datacenter
) -> None:
    client = Client()
    client.force_login(carol)
    response = client.post(
        "/admin/datacenters/datacenter/", {"action": "detect_gpus", "_selected_action": [local_dc.pk]}, follow=True
    )
    assert response.status_code == 200
    local_dc.refresh_from_db()
    assert local_dc.gpus == ["0", "1"]
    assert "2 GPU(s) found (0, 1)" in response.content.decode()
