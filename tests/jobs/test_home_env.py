"""Both engines tell every job process its owner's PFS home as PADDLECLOUD_HOME (`/pfs/<dc>/home/<user>`)."""

from __future__ import annotations

from pathlib import Path

import pytest
from django.contrib.auth.models import User
from rest_framework.test import APIClient

from datacenters.models import Datacenter
from jobs.engines.kubernetes import manifests
from jobs.engines.local.engine import LocalEngine
from jobs.follow.records import RECORDS
from jobs.models import Job, Role
from tests.jobs.test_local_engine import finished
from tests.jobs.test_log_links import kube_dc  # noqa: F401 - a fixture
from tests.workers import WorkerProcess

SPEC = {"parallelism": 1, "pservers": 0, "entry": "python train.py"}


def test_the_local_engine_without_a_sandbox_gives_the_real_home(alice: User, local_dc: Datacenter) -> None:
    job = Job.objects.create(owner=alice, datacenter=local_dc, name="fit", uid="fit-ab12c", spec=SPEC)
    env = LocalEngine(local_dc).supervisor.env(job, Role.TRAINER, 0, "/pkg", "/out", None, RECORDS)
    assert env["PADDLECLOUD_HOME"] == str(Path(local_dc.storage_root) / "home" / "alice")


def test_the_kubernetes_engine_gives_the_mounted_home(alice: User, kube_dc: Datacenter) -> None:  # noqa: F811
    job = Job.objects.create(owner=alice, datacenter=kube_dc, name="fit", uid="fit-ab12c", spec=SPEC)
    for role in ("trainer", "pserver"):
        env = {item["name"]: item.get("value") for item in manifests.env(manifests.plan_for(job, kube_dc), role)}
        assert env["PADDLECLOUD_HOME"] == f"/pfs/{kube_dc.name}/home/alice"


@pytest.mark.celery
@pytest.mark.django_db(transaction=True)
def test_a_sandboxed_job_sees_its_home_at_pfs(
    alice_api: APIClient, local_dc: Datacenter, fake_package: Path, worker: WorkerProcess
) -> None:
    entry = 'echo "home=$PADDLECLOUD_HOME"; ls -d "$PADDLECLOUD_HOME/jobs/fake" && echo "home is there"'
    spec = {"jobname": "fake", "entry": entry, "parallelism": 1, "pservers": 0}
    assert alice_api.post("/api/v1/jobs", spec, format="json").status_code == 201
    job = finished("fake", worker)
    text = alice_api.get("/api/v1/jobs/fake/logs?worker=trainer-0").json()["text"]
    assert job.state == "succeeded", (job.message, text)
    assert "home=/pfs/local/home/alice\n" in text and "home is there" in text, text
