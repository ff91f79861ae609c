"""Real pulls from the private test registry on the real node: the kubelet pulls a job's image with the
user's registry secret (materialized in her namespace by the engine); without it, or with a wrong
password, the job shows the kubelet's ImagePullBackOff / ErrImagePull and the registry's answer."""

from __future__ import annotations

import tarfile
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import User
from rest_framework.test import APIClient

from datacenters.models import Datacenter
from jobs.models import Job
from tests.k8s.conftest import node_datacenter
from tests.k8s.engine_helpers import drive, finished, kill, submit
from tests.k8s.registry_fixtures import RUNTIME_REPOSITORY
from tools.k8s.images import read_manifest
from tools.k8s.testcluster import TestCluster, TestRegistry

pytestmark = [pytest.mark.pods, pytest.mark.django_db]

SMALL = {"cpu": "0.5", "memory": "1Gi", "parallelism": 1, "pservers": 0}
PULL_TIMEOUT = 300  # seconds: layers the node already holds are not fetched again, but a cold pull is ~1.2 GB


@pytest.fixture
def registry_dc(db: None, k8s_node_cluster: TestCluster, tmp_path: Path) -> Iterator[Datacenter]:
    """A `kubernetes` datacenter on the real node (its default image is the node's imported one)."""
    yield node_datacenter(k8s_node_cluster, tmp_path / "regpfs", "reg", "r")


def add_secret(api: APIClient, name: str, registry: TestRegistry, username: str, password: str) -> None:
    body = {"name": name, "server": registry.host, "username": username, "password": password}
    response = api.post("/api/v1/registry", body, format="json")
    assert response.status_code == 201, response.json()


def unpulled_tag(registry: TestRegistry, image: str) -> str:
    """The same image under a tag the node has never pulled (a cached image would not ask the registry)."""
    manifest = read_manifest()
    assert manifest is not None
    return registry.push_layout(
        Path(manifest["runtime"]["layout"]), f"{RUNTIME_REPOSITORY}:denied-{uuid.uuid4().hex[:8]}"
    )


def job_with(dc: Datacenter, user: User, name: str, image: str, registry: str = "") -> Job:
    spec: dict[str, Any] = {"jobname": name, "image": image, **SMALL}
    if registry:
        spec["registry"] = registry
    return submit(dc, user, spec)


def pull_refused(job: Job, saying: str = "") -> Job | None:
    job.refresh_from_db()
    return job if job.reason == "ImagePullBackOff" and saying in job.message else None


def test_a_job_pulls_its_image_with_the_users_registry_secret_and_succeeds(
    registry_dc: Datacenter,
    alice: User,
    bob: User,
    alice_api: APIClient,
    k8s_registry: TestRegistry,
    k8s_registry_image: str,
    tmp_path: Path,
) -> None:
    # The runtime image plus a layer the node has never seen, so the pull has bytes to fetch with the login
    # (the node already holds the runtime image's own layers: it imported them at start).
    (tmp_path / "layer" / "etc").mkdir(parents=True)
    (tmp_path / "layer" / "etc" / "pulled-from-the-test-registry").write_text(uuid.uuid4().hex)
    with tarfile.open(tmp_path / "layer.tar", "w") as tar:
        tar.add(tmp_path / "layer" / "etc", arcname="etc")
    image = k8s_registry.append_layer(
        k8s_registry_image, tmp_path / "layer.tar", f"{RUNTIME_REPOSITORY}:fresh-{uuid.uuid4().hex[:8]}"
    )
    new_layer = k8s_registry.layer_digests(image)[-1]

    add_secret(alice_api, "mine", k8s_registry, "alice", k8s_registry.users["alice"])
    job = job_with(registry_dc, alice, "pulled", image, registry="mine")
    job = drive(registry_dc, lambda: finished(job), "the job to finish", PULL_TIMEOUT)
    assert (job.state, job.exit_code) == ("succeeded", 0), job.message
    assert image.startswith(f"{k8s_registry.host}/alice/paddle:fresh-")
    # containerd on the node fetched the new layer from the bridge-side registry process, logged in.
    fetched = f'"GET /v2/alice/paddle/blobs/{new_layer} HTTP/1.1" 200'
    assert any(fetched in line and "containerd/" in line for line in k8s_registry.log_tail("node", 10**6).splitlines())

    # The image is on the node now; bob, with no login of his own, still may not run it from there.
    stolen = job_with(registry_dc, bob, "stolen", image)
    stolen = drive(registry_dc, lambda: pull_refused(stolen), "bob's pull refused", PULL_TIMEOUT)
    assert stolen.state == "pending" and "no basic auth credentials" in stolen.message, stolen.message
    kill(stolen)


@pytest.mark.parametrize(
    ("login", "answer"),
    [
        ("no secret", "no basic auth credentials (the registry wants a login"),
        ("wrong password", "401 Unauthorized (the registry refused the login"),
    ],
)
def test_a_job_without_a_valid_login_shows_the_registrys_refusal(
    login: str,
    answer: str,
    registry_dc: Datacenter,
    alice: User,
    alice_api: APIClient,
    k8s_registry: TestRegistry,
    k8s_registry_image: str,
) -> None:
    image = unpulled_tag(k8s_registry, k8s_registry_image)
    registry = ""
    if login == "wrong password":
        add_secret(alice_api, "typo", k8s_registry, "alice", "not-her-password")
        registry = "typo"
    job = job_with(registry_dc, alice, "denied", image, registry)
    job = drive(registry_dc, lambda: pull_refused(job), "ImagePullBackOff", PULL_TIMEOUT)
    assert job.state == "pending"
    assert job.message.startswith("trainer 0: ")
    assert image in job.message
    assert answer in job.message, job.message
    if registry:  # deleting the secret while the job waits is said on the job
        assert alice_api.delete(f"/api/v1/registry/{registry}").status_code == 204
        job = drive(registry_dc, lambda: pull_refused(job, "was deleted"), "the deletion noticed", 60)
        assert job.message.startswith(f"registry secret {registry!r} was deleted while the job was pending")
    kill(job)


def test_a_registry_the_node_does_not_trust_is_named(
    registry_dc: Datacenter, alice: User, alice_api: APIClient, tmp_path: Path
) -> None:
    with TestRegistry(work_dir=tmp_path / "untrusted", hosts_dir=None) as untrusted:  # containerd is not told
        untrusted.add_user("alice", "pw")
        add_secret(alice_api, "untrusted", untrusted, "alice", "pw")
        job = job_with(registry_dc, alice, "untrusted", f"{untrusted.host}/alice/paddle:1", "untrusted")
        job = drive(registry_dc, lambda: pull_refused(job), "ImagePullBackOff", PULL_TIMEOUT)
        assert "certificate signed by unknown authority" in job.message, job.message
        assert "(the node does not trust the registry's certificate" in job.message
        kill(job)
