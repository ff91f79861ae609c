"""An image built in the cluster, on the real node: Kaniko (the datacenter's builder image, imported into
the node's containerd) builds a package on the runtime image from the private test registry, pushes the
result there with alice's registry secret, and a job submitted with that build runs on it in real pods.

A failed build (a base image that does not exist) fails the build and the job waiting for it, with
the builder's last error line.
"""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import User
from rest_framework.test import APIClient

from datacenters.models import Datacenter
from images import builder
from images.models import TERMINAL_BUILD_STATES, ImageBuild
from images.tasks import start_build
from jobs.engines.kubernetes.policies import REGISTRY_CIDRS_ENV
from jobs.follow.tasks import submit_job
from jobs.models import Job
from jobs.scheduling import cycle
from tests import background_build
from tests.k8s.conftest import node_datacenter
from tests.k8s.engine_helpers import drive, finished
from tests.wait import wait_for
from tools.k8s.images import read_manifest
from tools.k8s.testcluster import TestCluster, TestRegistry

pytestmark = [pytest.mark.pods, pytest.mark.django_db]

BUILD_TIMEOUT = 600  # seconds: Kaniko pulls the ~1.2 GB base from the registry and pushes one new layer
RUN_TIMEOUT = 300
MARKER = "baked into the image by the in-cluster build"
TRAIN = """import pathlib
print("marker:", pathlib.Path("/workspace/package/marker.txt").read_text().strip())
print("loss 0.1")
"""


@pytest.fixture
def build_dc(
    db: None, k8s_node_cluster: TestCluster, k8s_registry: TestRegistry, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Datacenter:
    # The test registry listens on the node's bridge, a private address: builders reach it only where the
    # datacenter trusts it (jobs/engines/kubernetes/policies.py), as a datacenter with its own registry would.
    monkeypatch.setenv(REGISTRY_CIDRS_ENV, f"{k8s_registry.host.rsplit(':', 1)[0]}/32")
    background_build.wait("images")  # in CI the builder is packed after the node has started
    manifest = read_manifest()
    assert manifest is not None
    if "builder" not in manifest:
        pytest.fail("the builder image is not built: run tools/k8s/build.sh as root", pytrace=False)
    assert k8s_node_cluster.node_runner is not None
    k8s_node_cluster.node_runner.add_image("builder", manifest["builder"])
    dc: Datacenter = node_datacenter(
        k8s_node_cluster,
        tmp_path / "bpfs",
        "bld",
        "b",
        builder_image=manifest["builder"]["ref"],
        builder_ca=k8s_registry.ca_pem,
    )
    return dc


def package(dc: Datacenter, user: User) -> str:
    folder = Path(dc.storage_root) / "home" / user.username / "jobs" / "baked"
    folder.mkdir(parents=True)
    (folder / "train.py").write_text(TRAIN)
    (folder / "marker.txt").write_text(MARKER + "\n")
    return f"/pfs/{dc.name}/home/{user.username}/jobs/baked"


def request(api: APIClient, body: dict[str, Any]) -> ImageBuild:
    response = api.post("/api/v1/images", body, format="json")
    assert response.status_code == 201, response.json()
    build = ImageBuild.objects.get(uid=response.json()["uid"])
    start_build.apply(args=(build.pk,))  # what the on-commit message runs
    return build


def built(dc: Datacenter, build: ImageBuild) -> ImageBuild:
    def done() -> ImageBuild | None:
        builder.poll(dc)
        build.refresh_from_db()
        return build if build.state in TERMINAL_BUILD_STATES and build.released else None

    result: ImageBuild = wait_for(done, f"{build.uid} to end", BUILD_TIMEOUT, interval=2)
    return result


def submit_on(api: APIClient, dc: Datacenter, build: ImageBuild) -> Job:
    spec = {"jobname": "baked", "entry": "python train.py", "datacenter": dc.name, "build": build.uid}
    response = api.post("/api/v1/jobs", {**spec, "cpu": "0.5", "memory": "1Gi"}, format="json")
    assert response.status_code == 201, response.json()
    return Job.objects.get(uid=response.json()["uid"])


def test_an_image_built_in_the_cluster_is_pushed_with_alices_secret_and_a_job_runs_on_it(
    build_dc: Datacenter,
    alice: User,
    alice_api: APIClient,
    k8s_registry: TestRegistry,
    k8s_registry_image: str,
) -> None:
    secret = {"name": "mine", "server": k8s_registry.host, "username": "alice", "password": k8s_registry.users["alice"]}
    assert alice_api.post("/api/v1/registry", secret, format="json").status_code == 201
    target = f"{k8s_registry.host}/alice/baked:{uuid.uuid4().hex[:8]}"
    body = {"package": package(build_dc, alice), "image": target, "registry": "mine", "base_image": k8s_registry_image}
    build = request(alice_api, body)
    job = submit_on(alice_api, build_dc, build)
    submit_job.apply(args=(job.pk,))  # still building: the job waits, queued
    job.refresh_from_db()
    assert (job.state, job.reason) == ("queued", "ImageBuilding"), job.message

    build = built(build_dc, build)
    log = alice_api.get(f"/api/v1/images/{build.uid}/log").json()
    assert build.state == "succeeded", (build.message, log["text"][-3000:])
    assert build.digest.startswith("sha256:") and log["complete"] is True
    assert "/v2/alice/baked/manifests/" in k8s_registry.log_tail("node", 400_000)  # Kaniko pushed it there
    assert build.started_at and build.finished_at
    print(f"in-cluster build: {(build.finished_at - build.started_at).total_seconds():.1f} s")  # for the notes

    assert cycle.schedule(build_dc) == [job.pk]  # the scheduler admits it (this datacenter's capacity is unbounded)
    submit_job.apply(args=(job.pk,))  # what images.states.wake_jobs sends on commit
    job = drive(build_dc, lambda: finished(job), "the job on the built image to finish", RUN_TIMEOUT)
    assert (job.state, job.exit_code) == ("succeeded", 0), job.message
    assert job.spec["image"] == f"{target}@{build.digest}"  # pinned: a later push to the tag changes nothing
    text = alice_api.get("/api/v1/jobs/baked/logs").json()["text"]
    assert f"marker: {MARKER}" in text, text[-2000:]


def test_a_build_from_a_missing_base_fails_and_fails_its_job_with_the_builders_error(
    build_dc: Datacenter, alice: User, alice_api: APIClient, k8s_registry: TestRegistry
) -> None:
    secret = {"name": "mine", "server": k8s_registry.host, "username": "alice", "password": k8s_registry.users["alice"]}
    assert alice_api.post("/api/v1/registry", secret, format="json").status_code == 201
    body = {
        "package": package(build_dc, alice),
        "image": f"{k8s_registry.host}/alice/baked:never",
        "registry": "mine",
        "base_image": f"{k8s_registry.host}/alice/no-such-base:1",
    }
    build = request(alice_api, body)
    job = submit_on(alice_api, build_dc, build)
    build = built(build_dc, build)
    assert build.state == "failed"
    assert "no-such-base" in build.message or "MANIFEST_UNKNOWN" in build.message, build.message
    submit_job.apply(args=(job.pk,))
    job.refresh_from_db()
    assert (job.state, job.reason) == ("failed", "BuildFailed")
    assert build.message in job.message
