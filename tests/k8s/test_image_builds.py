"""In-cluster image builds on the real control plane (kwok plays the kubelet): the builder Job and its
ConfigMap as the cluster stores them, and its end (success, a stuck pull, a cancel) reaching the build row.

kwok succeeds every pod a Job owns; a builder image whose name contains "invalid" never pulls.
"""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import User
from kubernetes import client as k8s

from datacenters.models import Datacenter
from images import builder, services
from images.models import BuildState, ImageBuild
from images.tasks import start_build, stop_build
from registry.models import RegistrySecret
from tests.wait import wait_for

pytestmark = pytest.mark.django_db

REGISTRY = "registry.example:5000"


@pytest.fixture
def build_dc(k8s_dc: Datacenter) -> Datacenter:
    k8s_dc.builder_image = f"{REGISTRY}/tools/kaniko:1"
    k8s_dc.cpu_image = f"{REGISTRY}/paddle:3"
    k8s_dc.save()
    return k8s_dc


def request_build(dc: Datacenter, user: User, with_requirements: bool = False) -> ImageBuild:
    folder = Path(dc.storage_root) / "home" / user.username / "jobs" / "fit"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "train.py").write_text("print('training')\n")
    if with_requirements:
        (folder / "requirements.txt").write_text("numpy\n")
    RegistrySecret.objects.get_or_create(
        owner=user, name="mine", defaults={"server": REGISTRY, "username": user.username, "password": "s3cret"}
    )
    data = {"package": f"/pfs/{dc.name}/home/{user.username}/jobs/fit", "image": f"{REGISTRY}/alice/fit:1"}
    build = services.create(services.check(user, {**data, "registry": "mine"}))
    start_build.apply(args=(build.pk,))  # what the on-commit message runs, here at once
    build.refresh_from_db()
    return build


def poll_until(dc: Datacenter, build: ImageBuild, *states: str, timeout: float = 30) -> ImageBuild:
    def check() -> ImageBuild | None:
        builder.poll(dc)
        build.refresh_from_db()
        return build if build.state in states and build.released else None

    return wait_for(check, f"{build.uid} to be {'/'.join(states)} and released", timeout, interval=0.3)


def test_the_builder_job_mounts_the_package_read_only_with_the_secret_and_succeeds(
    build_dc: Datacenter, alice: User, k8s_api: k8s.ApiClient
) -> None:
    build = request_build(build_dc, alice, with_requirements=True)
    assert build.state == BuildState.BUILDING and build.k8s_job == build.uid
    batch, core = k8s.BatchV1Api(k8s_api), k8s.CoreV1Api(k8s_api)
    job: Any = batch.read_namespaced_job(build.k8s_job, build.namespace)
    pod: Any = job.spec.template.spec
    volumes = {v.name: v for v in pod.volumes}
    assert volumes["package"].host_path.path == f"{build_dc.host_path}/home/alice"
    assert volumes["docker-config"].secret.secret_name == "pcr-mine"
    mounts = {m.name: m for m in pod.containers[0].volume_mounts}
    assert mounts["package"].read_only and mounts["package"].mount_path == "/kaniko/buildcontext"
    assert mounts["package"].sub_path == "jobs/fit"
    assert f"--destination={REGISTRY}/alice/fit:1" in pod.containers[0].args
    assert pod.containers[0].image == build_dc.builder_image
    secret: Any = core.read_namespaced_secret("pcr-mine", build.namespace)
    auths = json.loads(base64.b64decode(secret.data[".dockerconfigjson"]))["auths"]
    assert auths[REGISTRY]["username"] == "alice"
    config: Any = core.read_namespaced_config_map(build.uid, build.namespace)
    assert config.data["Dockerfile"].startswith(f"FROM {REGISTRY}/paddle:3\n")
    assert "requirements.txt" in config.data["Dockerfile"]
    assert config.metadata.owner_references[0].name == build.uid

    start_build.apply(args=(build.pk,))  # a repeat changes nothing
    assert (
        len(batch.list_namespaced_job(build.namespace, label_selector=f"paddlecloud.org/build={build.uid}").items) == 1
    )

    done = poll_until(build_dc, build, BuildState.SUCCEEDED)
    assert done.finished_at is not None and done.log_archived
    wait_for(
        lambda: (
            not batch.list_namespaced_job(build.namespace, label_selector=f"paddlecloud.org/build={build.uid}").items
        ),
        "the builder Job to be deleted",
        30,
    )


def test_a_builder_that_cannot_be_pulled_says_so_then_fails_after_the_pending_timeout(
    build_dc: Datacenter, alice: User
) -> None:
    Datacenter.objects.filter(pk=build_dc.pk).update(builder_image=f"{REGISTRY}/invalid/kaniko:1", pending_timeout=3)
    build = request_build(Datacenter.objects.get(pk=build_dc.pk), alice)
    dc = Datacenter.objects.get(pk=build_dc.pk)

    def waiting() -> ImageBuild | None:
        builder.poll(dc)
        build.refresh_from_db()
        return build if "the builder pod is waiting" in build.message else None

    wait_for(waiting, "the build to report the pull error", 30, interval=0.3)
    failed = poll_until(dc, build, BuildState.FAILED)
    assert "ErrImagePull" in failed.message or "ImagePullBackOff" in failed.message


def test_a_cancelled_build_loses_its_builder(build_dc: Datacenter, alice: User, k8s_api: k8s.ApiClient) -> None:
    Datacenter.objects.filter(pk=build_dc.pk).update(builder_image=f"{REGISTRY}/invalid/kaniko:1")
    build = request_build(Datacenter.objects.get(pk=build_dc.pk), alice)
    assert services.cancel(build)
    stop_build.apply(args=(build.pk,))
    build.refresh_from_db()
    assert build.state == BuildState.CANCELLED and build.released
    batch = k8s.BatchV1Api(k8s_api)
    wait_for(
        lambda: (
            not batch.list_namespaced_job(build.namespace, label_selector=f"paddlecloud.org/build={build.uid}").items
        ),
        "the builder Job to be deleted",
        30,
    )


def test_a_build_cancelled_while_its_builder_is_made_leaves_no_job(
    build_dc: Datacenter, alice: User, k8s_api: k8s.ApiClient
) -> None:
    build = request_build(Datacenter.objects.get(pk=build_dc.pk), alice)
    batch = k8s.BatchV1Api(k8s_api)
    # The race: start_build read the row as building, then the cancel (and its release, with no Job
    # yet) ran before start made the Job (here a repeated start finds it made).
    ImageBuild.objects.filter(pk=build.pk).update(k8s_job="", state=BuildState.CANCELLED, released=True)
    starting = ImageBuild.objects.select_related("owner", "datacenter").get(pk=build.pk)
    builder.start(starting)
    starting.refresh_from_db()
    assert starting.state == BuildState.CANCELLED and not starting.k8s_job
    wait_for(
        lambda: (
            not batch.list_namespaced_job(build.namespace, label_selector=f"paddlecloud.org/build={build.uid}").items
        ),
        "the builder Job made after the cancel to be deleted",
        30,
    )


def test_a_job_missing_from_polls_list_is_asked_for_before_its_build_fails(
    build_dc: Datacenter, alice: User, k8s_api: k8s.ApiClient
) -> None:
    build = request_build(build_dc, alice)
    # Poll lists Jobs, then reads rows: a Job made in between is not in the list. Dropping its label
    # hides it from the list the same way.
    batch = k8s.BatchV1Api(k8s_api)
    batch.patch_namespaced_job(
        build.uid, build.namespace, [{"op": "remove", "path": "/metadata/labels/paddlecloud.org~1build"}]
    )
    builder.poll(Datacenter.objects.get(pk=build_dc.pk))
    build.refresh_from_db()
    assert build.state != BuildState.FAILED, build.message
