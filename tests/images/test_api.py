"""POST/GET/DELETE /api/v1/images and its log: owner-only, every bad input a 400 naming its field."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from rest_framework.test import APIClient

from datacenters.models import Datacenter
from images import builder, services, states
from images.models import BuildState, ImageBuild
from jobs import hooks
from jobs.follow.tasks import submit_job
from jobs.models import Job, JobState, Reason
from registry.models import RegistrySecret
from tests.images import REGISTRY
from tests.images.conftest import PACKAGE, build_request

pytestmark = pytest.mark.usefixtures("alice_package", "alice_secret")


def create(api: APIClient, **overrides: str) -> dict[str, Any]:
    response = api.post("/api/v1/images", build_request(**overrides), format="json")
    assert response.status_code == 201, response.json()
    answer: dict[str, Any] = response.json()
    return answer


def refused(api: APIClient, body: Any, status: int = 400) -> list[str]:
    response = api.post("/api/v1/images", body, format="json")
    assert response.status_code == status, response.json()
    assert not ImageBuild.objects.exists()  # nothing half-created
    return [e["field"] for e in response.json().get("errors") or []]


def test_alice_requests_a_build_and_it_is_queued_with_its_start_on_commit(
    alice_api: APIClient, django_capture_on_commit_callbacks: Any
) -> None:
    with django_capture_on_commit_callbacks() as callbacks:
        build = create(alice_api)
    assert build["uid"].startswith("build-") and build["state"] == "queued"
    assert build["owner"] == "alice" and build["datacenter"] == "kdc" and build["package"] == PACKAGE
    assert build["base_image"] == f"{REGISTRY}/paddle:3.0.0"  # the datacenter's cpu_image by default
    assert build["log_url"].endswith(f"/api/v1/images/{build['uid']}/log")
    assert len(callbacks) == 1
    assert alice_api.get(f"/api/v1/images/{build['uid']}").json()["state"] == "queued"
    assert [b["uid"] for b in alice_api.get("/api/v1/images").json()["results"]] == [build["uid"]]


def test_a_dry_run_answers_the_build_and_creates_nothing(alice_api: APIClient) -> None:
    response = alice_api.post("/api/v1/images?dry_run=1", build_request(), format="json")
    assert response.status_code == 200, response.json()
    assert response.json()["build"]["image"] == f"{REGISTRY}/alice/fit:1"
    assert not ImageBuild.objects.exists()


def test_bob_cannot_push_with_alices_secret(bob_api: APIClient, kdc: Datacenter, bob: User) -> None:
    (Path(kdc.storage_root) / "home" / "bob" / "pkg").mkdir(parents=True)
    assert refused(bob_api, build_request(package="/pfs/kdc/home/bob/pkg")) == ["registry"]


def test_bob_cannot_build_from_alices_home(bob_api: APIClient, bob: User) -> None:
    RegistrySecret.objects.create(owner=bob, name="mine", server=REGISTRY, username="bob", password="pw")
    assert refused(bob_api, build_request()) == ["package"]


def test_bob_and_anonymous_see_nothing_of_alices_builds_and_carol_sees_them_with_all(
    alice_api: APIClient, bob_api: APIClient, carol_api: APIClient, anon_api: APIClient
) -> None:
    uid = create(alice_api)["uid"]
    assert bob_api.get("/api/v1/images").json()["results"] == []
    for url in (f"/api/v1/images/{uid}", f"/api/v1/images/{uid}/log"):
        assert bob_api.get(url).status_code == 404
        assert anon_api.get(url).status_code == 401
    assert bob_api.delete(f"/api/v1/images/{uid}").status_code == 404
    assert ImageBuild.objects.get(uid=uid).state == BuildState.QUEUED
    assert carol_api.get("/api/v1/images").json()["results"] == []
    assert [b["uid"] for b in carol_api.get("/api/v1/images?all=1").json()["results"]] == [uid]


@pytest.mark.parametrize(
    ("overrides", "field"),
    [
        ({"image": "r.example:5000/Alice/fit"}, "image"),
        ({"image": "r.example:5000/alice/fit:-x"}, "image"),
        ({"image": "other.example/alice/fit:1"}, "image"),
        ({"image": "x" * 301}, "image"),
        ({"base_image": "no spaces allowed"}, "base_image"),
        ({"registry": "nope"}, "registry"),
        ({"package": "/pfs/kdc/home/alice/jobs/missing"}, "package"),
        ({"package": "/pfs/kdc/public"}, "package"),
        ({"package": "/pfs/kdc/home/alice/../bob"}, "package"),
        ({"package": "relative/path"}, "package"),
        ({"package": "/pfs/kdc/home/alice/jobs/fit/train.py"}, "package"),
        ({"datacenter": "nowhere"}, "datacenter"),
        ({"colour": "blue"}, "colour"),
    ],
)
def test_bad_input_is_a_400_naming_the_field(alice_api: APIClient, overrides: dict[str, str], field: str) -> None:
    assert refused(alice_api, build_request(**overrides)) == [field]


def test_a_link_out_of_the_home_is_refused(alice_api: APIClient, kdc: Datacenter, tmp_path: Path) -> None:
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (Path(kdc.storage_root) / "home" / "alice" / "out").symlink_to(outside)
    assert refused(alice_api, build_request(package="/pfs/kdc/home/alice/out")) == ["package"]


def test_a_datacenter_without_a_builder_or_a_local_one_is_refused(
    alice_api: APIClient, kdc: Datacenter, local_dc: Datacenter
) -> None:
    assert refused(alice_api, build_request(datacenter="local")) == ["datacenter"]
    Datacenter.objects.filter(pk=kdc.pk).update(builder_image="")
    assert refused(alice_api, build_request(datacenter="kdc")) == ["datacenter"]


def test_at_most_a_few_builds_run_at_once_per_user(alice_api: APIClient) -> None:
    for _ in range(services.MAX_ACTIVE_BUILDS):
        create(alice_api)
    response = alice_api.post("/api/v1/images", build_request(), format="json")
    assert response.status_code == 409
    assert ImageBuild.objects.count() == services.MAX_ACTIVE_BUILDS


def test_cancelling_a_queued_build_ends_it_and_its_log_is_empty_and_complete(alice_api: APIClient) -> None:
    uid = create(alice_api)["uid"]
    log = alice_api.get(f"/api/v1/images/{uid}/log").json()
    assert log == {"build": uid, "text": "", "cursor": "0", "complete": False, "state": "queued"}
    answer = alice_api.delete(f"/api/v1/images/{uid}").json()
    assert answer["state"] == "cancelled" and answer["message"] == "cancelled by request"
    assert alice_api.get(f"/api/v1/images/{uid}/log").json()["complete"] is True
    assert alice_api.get(f"/api/v1/images/{uid}/log?cursor=-1").status_code == 400


def test_an_archived_log_is_read_by_cursor(alice_api: APIClient) -> None:
    uid = create(alice_api)["uid"]
    ImageBuild.objects.filter(uid=uid).update(state=BuildState.FAILED, log="one\ntwo\n", log_archived=True)
    first = alice_api.get(f"/api/v1/images/{uid}/log").json()
    assert first["text"] == "one\ntwo\n" and first["complete"] is True
    assert alice_api.get(f"/api/v1/images/{uid}/log?cursor=4").json()["text"] == "two\n"


# ----- jobs that run on a build (paddlectl submit -build) -----

JOB = {"jobname": "fit", "entry": "python train.py", "datacenter": "kdc", "package": PACKAGE}


def test_a_job_naming_a_build_takes_its_image_and_registry(alice_api: APIClient) -> None:
    build = create(alice_api)
    response = alice_api.post("/api/v1/jobs", {**JOB, "build": build["uid"]}, format="json")
    assert response.status_code == 201, response.json()
    spec = response.json()["spec"]
    assert (spec["image"], spec["registry"], spec["build"]) == (build["image"], "mine", build["uid"])
    shown = alice_api.get(f"/api/v1/jobs/{response.json()['uid']}").json()["build"]
    assert (shown["uid"], shown["state"]) == (build["uid"], "queued")
    assert shown["log_url"].endswith(f"/api/v1/images/{build['uid']}/log")


def test_the_job_page_shows_its_build_and_links_the_builders_log(alice_api: APIClient, alice: User) -> None:
    _, job = _waiting_job(alice_api)
    client = Client()
    client.force_login(alice)
    page = client.get(f"/jobs/{job.uid}/").content.decode()
    assert 'data-testid="image-build"' in page and job.spec["build"] in page
    assert f"/api/v1/images/{job.spec['build']}/log" in page


@pytest.mark.parametrize(
    ("extra", "field"),
    [({"build": "build-nothere"}, "build"), ({"image": "r.example:5000/alice/other:1"}, "image")],
)
def test_a_job_naming_a_bad_build_is_refused(alice_api: APIClient, extra: dict[str, str], field: str) -> None:
    build = create(alice_api)
    response = alice_api.post("/api/v1/jobs", {**JOB, "build": build["uid"], **extra}, format="json")
    assert response.status_code == 400
    assert [e["field"] for e in response.json()["errors"]] == [field]
    assert not Job.objects.exists()


def test_bob_cannot_run_on_alices_build(alice_api: APIClient, bob_api: APIClient, kdc: Datacenter) -> None:
    build = create(alice_api)
    (Path(kdc.storage_root) / "home" / "bob" / "pkg").mkdir(parents=True)
    body = {**JOB, "package": "/pfs/kdc/home/bob/pkg", "build": build["uid"]}
    response = bob_api.post("/api/v1/jobs", body, format="json")
    assert response.status_code == 400 and response.json()["errors"][0]["field"] == "build"


def _waiting_job(alice_api: APIClient) -> tuple[ImageBuild, Job]:
    uid = create(alice_api)["uid"]
    response = alice_api.post("/api/v1/jobs", {**JOB, "build": uid}, format="json")
    assert response.status_code == 201, response.json()
    return ImageBuild.objects.get(uid=uid), Job.objects.get(uid=response.json()["uid"])


def test_a_job_waits_while_its_image_builds_then_may_start(alice_api: APIClient) -> None:
    build, job = _waiting_job(alice_api)
    assert hooks.admit(job.pk) == hooks.Verdict.WAIT
    job.refresh_from_db()
    assert job.state == JobState.QUEUED and job.reason == Reason.IMAGE_BUILDING
    assert build.uid in job.message
    digest = "sha256:" + "ab" * 32
    ImageBuild.objects.filter(pk=build.pk).update(state=BuildState.SUCCEEDED, digest=digest)
    assert hooks.admit(job.pk) == hooks.Verdict.GO
    job.refresh_from_db()
    assert job.spec["image"] == f"{build.image}@{digest}"  # pinned to what the build pushed
    assert hooks.admit(job.pk) == hooks.Verdict.GO and Job.objects.get(pk=job.pk).spec["image"].count("@") == 1


def test_a_failed_build_fails_its_job_with_the_builders_last_error_line(alice_api: APIClient) -> None:
    build, job = _waiting_job(alice_api)
    ImageBuild.objects.filter(pk=build.pk).update(state=BuildState.FAILED, message="error building image: boom")
    assert hooks.admit(job.pk) == hooks.Verdict.FAILED
    job.refresh_from_db()
    assert job.state == JobState.FAILED and job.reason == Reason.BUILD_FAILED
    assert "error building image: boom" in job.message


def test_the_end_of_a_build_wakes_the_jobs_waiting_for_it(
    alice_api: APIClient, monkeypatch: pytest.MonkeyPatch, django_capture_on_commit_callbacks: Any
) -> None:
    build, job = _waiting_job(alice_api)
    # The message the wake-up sends runs here at once, as a worker would run it.
    monkeypatch.setattr(submit_job, "delay", lambda job_id: submit_job.apply(args=(job_id,)))
    with django_capture_on_commit_callbacks(execute=True):
        assert states.transition(build.pk, BuildState.FAILED, message="error building image: no base")
    job.refresh_from_db()
    assert (job.state, job.reason) == (JobState.FAILED, Reason.BUILD_FAILED)
    assert "error building image: no base" in job.message


@pytest.mark.parametrize("image", ["Not An Image", "r.example:5000/alice/fit:", "r.example:5000//fit"])
def test_a_job_whose_image_is_no_reference_is_refused_on_a_kubernetes_datacenter(
    alice_api: APIClient, image: str
) -> None:
    response = alice_api.post("/api/v1/jobs", {**JOB, "image": image}, format="json")
    assert response.status_code == 400, response.json()
    assert [e["field"] for e in response.json()["errors"]] == ["image"]
    assert not Job.objects.exists()


def test_the_job_list_reads_the_builds_of_its_page_in_one_query(alice_api: APIClient) -> None:
    def listing() -> tuple[int, list[dict[str, Any]]]:
        with CaptureQueriesContext(connection) as queries:
            response = alice_api.get("/api/v1/jobs")
        assert response.status_code == 200
        return len(queries), response.json()["results"]

    _waiting_job(alice_api)
    one, _ = listing()
    for name in ("fit2", "fit3"):
        uid = create(alice_api)["uid"]
        assert alice_api.post("/api/v1/jobs", {**JOB, "jobname": name, "build": uid}, format="json").status_code == 201
    three, jobs = listing()
    assert three == one and all(job["build"]["state"] == "queued" for job in jobs)


def test_a_long_archived_log_keeps_its_offsets_so_a_follower_loses_and_repeats_nothing(
    alice_api: APIClient,
) -> None:
    uid = create(alice_api)["uid"]
    whole = "".join(f"step {i:07d} of the build\n" for i in range(300_000)).encode()  # over MAX_LOG
    kept, dropped = builder._bounded(whole.decode())
    assert dropped > 0 and whole[dropped:] == kept.encode() and whole[dropped - 1 : dropped] == b"\n"
    ImageBuild.objects.filter(uid=uid).update(
        state=BuildState.FAILED, log=kept, log_dropped=dropped, log_archived=True, released=True
    )
    url = f"/api/v1/images/{uid}/log"
    first = alice_api.get(url).json()
    assert first["text"].startswith(f"[... the first {dropped} bytes of the builder's log were not kept ...]\n")
    follower_at = dropped + 700  # where a follower of the live log had got to, in the same byte offsets
    resumed = alice_api.get(url, {"cursor": str(follower_at)}).json()
    assert resumed["text"].encode() == whole[follower_at : follower_at + len(resumed["text"].encode())]
    assert int(resumed["cursor"]) == follower_at + len(resumed["text"].encode())
