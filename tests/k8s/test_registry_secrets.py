"""Registry secrets and the kubernetes engine on the control plane (kwok): a deleted secret while a job is
pending, and a registry name the user does not own (refused by the API)."""

from __future__ import annotations

import base64
import json

import pytest
from django.contrib.auth.models import User
from kubernetes import client as k8s
from rest_framework.test import APIClient

from datacenters.models import Datacenter
from jobs.models import Job
from tests.k8s.engine_helpers import drive, kill, submit

pytestmark = pytest.mark.django_db

def saying(job: Job, text: str) -> Job | None:
    job.refresh_from_db()
    return job if text in job.message else None


SECRET = {"name": "private", "server": "registry.example:5000", "username": "alice", "password": "s3cret"}


def test_a_registry_secret_deleted_while_the_job_is_pending_is_reported_and_its_login_leaves_the_cluster(
    k8s_dc: Datacenter, alice: User, alice_api: APIClient, k8s_api: k8s.ApiClient
) -> None:
    assert alice_api.post("/api/v1/registry", SECRET, format="json").status_code == 201
    # kwok leaves a pod whose image names `invalid` in ErrImagePull / ImagePullBackOff.
    job = submit(
        k8s_dc, alice, {"jobname": "pull", "image": "registry.example:5000/invalid-image:1", "registry": "private"}
    )
    ns = job.engine_data["namespace"]
    core = k8s.CoreV1Api(k8s_api)

    def auths() -> dict[str, object]:
        data = core.read_namespaced_secret("pcr-private", ns).data or {}
        config = json.loads(base64.b64decode(data[".dockerconfigjson"]))
        result: dict[str, object] = config["auths"]
        return result

    assert list(auths()) == ["registry.example:5000"]
    drive(k8s_dc, lambda: Job.objects.get(pk=job.pk).reason == "ImagePullBackOff", "ImagePullBackOff")

    assert alice_api.delete("/api/v1/registry/private").status_code == 204
    pending = drive(k8s_dc, lambda: saying(job, "was deleted"), "the deletion noticed")
    assert (pending.state, pending.reason) == ("pending", "ImagePullBackOff")
    assert pending.message.startswith(
        "registry secret 'private' was deleted while the job was pending: its image cannot be pulled with it"
    )
    assert "; trainer 0: " in pending.message and "invalid-image:1" in pending.message  # then the kubelet's words
    assert auths() == {}  # the deleted login is gone from alice's namespace
    kill(job)


def test_bob_cannot_submit_with_alices_registry_secret(
    k8s_dc: Datacenter, alice_api: APIClient, bob_api: APIClient
) -> None:
    assert alice_api.post("/api/v1/registry", SECRET, format="json").status_code == 201
    assert bob_api.get("/api/v1/registry/private").status_code == 404
    spec = {"datacenter": k8s_dc.name, "jobname": "steal", "entry": "python train.py", "registry": "private"}
    response = bob_api.post("/api/v1/jobs", spec, format="json")
    assert response.status_code == 400
    body = response.json()
    assert "registry" in json.dumps(body)
    assert "you have no registry secret named 'private'" in json.dumps(body)
    assert not Job.objects.filter(name="steal").exists()
