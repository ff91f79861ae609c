"""A registry secret deleted after its jobs ended: a real Celery worker blanks its login in the namespace
(the deletion's signal sends `jobs.revoke_registry_login` once the delete commits)."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from django.contrib.auth.models import User
from kubernetes import client as k8s
from rest_framework.test import APIClient

from datacenters.models import Datacenter
from tests.k8s.engine_helpers import kill, submit
from tests.wait import wait_for
from tests.workers import WorkerProcess, start_worker

pytestmark = [pytest.mark.celery, pytest.mark.django_db(transaction=True)]
SECRET = {"name": "private", "server": "registry.example:5000", "username": "alice", "password": "s3cret"}


@pytest.fixture
def worker(transactional_db: None, tmp_path: Path) -> Iterator[WorkerProcess]:
    process = start_worker(tmp_path, concurrency=1)
    yield process
    process.stop()


def test_a_deleted_registry_secret_leaves_no_login_in_the_cluster(
    k8s_dc: Datacenter, alice: User, alice_api: APIClient, k8s_api: k8s.ApiClient, worker: WorkerProcess
) -> None:
    assert alice_api.post("/api/v1/registry", SECRET, format="json").status_code == 201
    job = submit(k8s_dc, alice, {"jobname": "pull", "image": "registry.example:5000/alice/x:1", "registry": "private"})
    ns = job.engine_data["namespace"]
    kill(job)  # no active job names the secret any more: the engine's polls will not look at it again
    core = k8s.CoreV1Api(k8s_api)

    def logins() -> dict[str, object]:
        data = core.read_namespaced_secret("pcr-private", ns).data or {}
        auths: dict[str, object] = json.loads(base64.b64decode(data[".dockerconfigjson"]))["auths"]
        return auths

    assert list(logins()) == ["registry.example:5000"]
    assert alice_api.delete("/api/v1/registry/private").status_code == 204
    wait_for(lambda: logins() == {}, "the deleted login to leave alice's namespace", 30, watch=worker)
