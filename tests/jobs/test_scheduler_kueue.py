"""The portal's gate on an `admission: kueue` datacenter: every waiting job goes through at once (Kueue queues)."""

from __future__ import annotations

from pathlib import Path

import pytest
from django.contrib.auth.models import User

from datacenters.models import Datacenter, Engine, StorageKind
from jobs.models import Job
from jobs.scheduling import cycle


@pytest.mark.django_db
def test_a_kueue_datacenter_admits_every_waiting_job_however_small_its_capacity(
    alice: User, bob: User, tmp_path: Path
) -> None:
    dc = Datacenter.objects.create(
        name="kq", engine=Engine.KUBERNETES, admission="kueue", kubeconfig="x", storage_kind=StorageKind.HOSTPATH,
        host_path=str(tmp_path), storage_root=str(tmp_path), capacity_cpu="1", default_cpu="1", default_jobs=1,
    )  # fmt: skip
    for i in range(6):
        Job.objects.create(owner=alice if i % 2 else bob, datacenter=dc, name=f"j{i}", uid=f"j{i}-x", spec={},
                           cpu_request=4)  # fmt: skip
    admitted = cycle.schedule(dc)
    assert admitted is not None and len(admitted) == 6
    assert cycle.schedule(dc) == []  # never twice
    assert Job.objects.filter(admitted_at__isnull=False, reason="", message="").count() == 6
