"""Both engines hand the datacenter's job log limit to the launcher as PADDLECLOUD_LOG_LIMIT (bytes)."""

from __future__ import annotations

from django.contrib.auth.models import User

from datacenters.models import Datacenter
from jobs.engines.kubernetes import manifests
from jobs.engines.local.engine import LocalEngine
from jobs.files.logfiles import log_limit
from jobs.follow.records import RECORDS
from jobs.models import Job, Role
from tests.jobs.test_log_links import kube_dc  # noqa: F401 - a fixture

SPEC = {"parallelism": 1, "pservers": 0, "entry": "python train.py"}


def test_the_local_engine_sets_the_limit(alice: User, local_dc: Datacenter) -> None:
    Datacenter.objects.filter(pk=local_dc.pk).update(job_log_limit="3Mi")
    local_dc.refresh_from_db()
    job = Job.objects.create(owner=alice, datacenter=local_dc, name="fit", uid="fit-ab12c", spec=SPEC)
    env = LocalEngine(local_dc).supervisor.env(job, Role.TRAINER, 0, "/pkg", "/out", None, RECORDS)
    assert env["PADDLECLOUD_LOG_LIMIT"] == str(3 * 1024 * 1024)


def test_the_kubernetes_engine_sets_the_limit(alice: User, kube_dc: Datacenter) -> None:  # noqa: F811
    job = Job.objects.create(owner=alice, datacenter=kube_dc, name="fit", uid="fit-ab12c", spec=SPEC)
    env = {item["name"]: item.get("value") for item in manifests.env(manifests.plan_for(job, kube_dc), "trainer")}
    assert env["PADDLECLOUD_LOG_LIMIT"] == str(256 * 1024 * 1024)  # the default, 256Mi


def test_a_limit_below_what_the_launcher_keeps_is_raised_to_it(local_dc: Datacenter) -> None:
    local_dc.job_log_limit = "0"
    assert log_limit(local_dc) == 64 * 1024
