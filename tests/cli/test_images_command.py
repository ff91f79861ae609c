"""paddlectl and in-cluster image builds: `submit -build` uploads, requests the build and submits a job
that waits for it; `images`, `image-status`, `image-logs` and `image-cancel` read and cancel builds."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from paddlecloud.sdk import images, jobs
from paddlecloud.sdk.errors import APIError, UsageProblem
from paddlecloud.sdk.session import Session

from datacenters.models import Datacenter
from images.models import ImageBuild
from jobs.models import Job
from registry.models import RegistrySecret
from tests.cli.conftest import Portal
from tests.images import REGISTRY, builder_datacenter


@pytest.fixture
def kdc(portal: Portal, tmp_path: Path) -> Datacenter:
    RegistrySecret.objects.create(owner=portal.user, name="mine", server=REGISTRY, username="alice", password="pw")
    return builder_datacenter(tmp_path / "kpfs")


def test_submit_build_uploads_requests_the_build_and_the_job_waits_for_it(
    portal: Portal, kdc: Datacenter, tmp_path: Path
) -> None:
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "train.py").write_text("print('loss 0.1')\n")
    image = f"{REGISTRY}/alice/fit:1"
    result = portal.run(
        "submit",
        "-build",
        "-image",
        image,
        "-registry",
        "mine",
        "-datacenter",
        "kdc",
        "-jobname",
        "fit",
        "-entry",
        "python train.py",
        str(package),
    )
    assert result.exit_code == 0, result.output
    build = ImageBuild.objects.get()
    assert (build.image, build.registry, build.package) == (image, "mine", "/pfs/kdc/home/alice/jobs/fit")
    assert (Path(kdc.storage_root) / "home" / "alice" / "jobs" / "fit" / "train.py").exists()
    job = Job.objects.get(name="fit")
    assert (job.spec["build"], job.spec["image"], job.state) == (build.uid, image, "queued")
    assert build.uid in result.stderr

    listed = portal.run("images", "-o", "json")
    assert [b["uid"] for b in json.loads(listed.stdout)] == [build.uid]
    header, row = portal.run("images").stdout.splitlines()
    assert header.split() == ["UID", "STATE", "IMAGE", "DATACENTER", "AGE", "MESSAGE"]
    assert row.split()[:4] == [build.uid, "queued", image, "kdc"]
    status = portal.run("image-status", build.uid)
    assert build.uid in status.stdout and "queued" in status.stdout
    assert portal.run("image-logs", build.uid).exit_code == 0
    cancelled = portal.run("image-cancel", build.uid)
    assert "cancelled" in cancelled.stdout


def test_submit_build_without_image_or_registry_is_refused_before_anything_is_sent(
    portal: Portal, kdc: Datacenter, tmp_path: Path
) -> None:
    result = portal.run("submit", "-build", "-entry", "python t.py", str(tmp_path))
    assert result.exit_code != 0
    assert "-build needs -image" in result.stderr
    assert not ImageBuild.objects.exists() and not Job.objects.exists()


def test_the_sdk_uploads_a_local_package_then_requests_its_build(
    portal: Portal, kdc: Datacenter, tmp_path: Path
) -> None:
    package = tmp_path / "mymodel"
    package.mkdir()
    (package / "train.py").write_text("print('loss 0.1')\n")
    session = Session.from_config(portal.config)
    folder = images.package_folder(session, package, "kdc")
    assert folder == "/pfs/kdc/home/alice/builds/mymodel"
    assert (Path(kdc.storage_root) / "home" / "alice" / "builds" / "mymodel" / "train.py").exists()
    build = images.request_build(session, folder, f"{REGISTRY}/alice/mymodel:1", "mine", datacenter="kdc")
    assert images.get_build(session, build["uid"])["state"] == "queued"
    assert [b["uid"] for b in images.list_builds(session, active=True)] == [build["uid"]]
    with pytest.raises(UsageProblem, match="-image"):
        images.request_build(session, folder, "Not An Image", "mine")


def test_build_remote_uploads_the_package_and_requests_the_build(
    portal: Portal, kdc: Datacenter, tmp_path: Path
) -> None:
    package = tmp_path / "fit"
    package.mkdir()
    (package / "train.py").write_text("print('loss 0.1')\n")
    image, base = f"{REGISTRY}/alice/fit:2", f"{REGISTRY}/paddle:3"
    args = ["build", "--remote", "--datacenter", "kdc", str(package), "/workspace/package", base, image]
    no_registry = portal.run(*args)
    assert (
        no_registry.exit_code == 2
        and "--registry: --remote pushes with one of your registry secrets" in no_registry.stderr
    )
    wrong_dest = portal.run(*[a if a != "/workspace/package" else "/opt/job" for a in args], "--registry", "mine")
    assert wrong_dest.exit_code == 2 and "DEST: the in-cluster builder puts the package at /workspace/package" in (
        wrong_dest.stderr
    )
    assert not ImageBuild.objects.exists()
    result = portal.run(*args, "--registry", "mine", "--detach")
    assert result.exit_code == 0, result.output
    build = ImageBuild.objects.get()
    assert (build.image, build.base_image, build.registry, build.state) == (image, base, "mine", "queued")
    assert (Path(kdc.storage_root) / build.package.removeprefix("/pfs/kdc/") / "train.py").exists()
    assert build.uid in result.stderr


def test_a_build_requested_for_a_job_the_portal_then_refuses_is_cancelled(
    portal: Portal, kdc: Datacenter, tmp_path: Path
) -> None:
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "train.py").write_text("print('loss 0.1')\n")
    session = Session.from_config(portal.config)
    image = f"{REGISTRY}/alice/fit:1"
    spec = {"jobname": "fit", "entry": "python train.py", "image": image, "registry": "mine", "datacenter": "kdc"}

    def request_then_change(body: dict[str, Any]) -> None:
        body["build"] = images.request_build(session, body["package"], image, "mine", datacenter="kdc")["uid"]
        body["image"] = "Not An Image"  # what changed between the dry run and the job: the portal refuses it

    with pytest.raises(APIError):
        jobs.submit(session, spec, package, before_create=request_then_change)
    build = ImageBuild.objects.get()
    assert build.state == "cancelled"
    assert not Job.objects.filter(name="fit").exists()
    assert not (Path(kdc.storage_root) / "home" / "alice" / "jobs" / "fit" / "train.py").exists()
