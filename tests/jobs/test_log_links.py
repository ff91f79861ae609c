"""A job that turns its log into a symlink (or a FIFO) gets a 403 naming the rule, never the file behind it.

Reading writes nothing: the worker's row says it once the reconciler looked (jobs.follow.records.note_refused_logs).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from django.contrib.auth.models import User
from rest_framework.test import APIClient

from datacenters.models import Datacenter, Engine
from jobs.files.logfiles import write_archive
from jobs.follow.records import note_refused_logs, note_worker
from jobs.models import Job, JobState, Role, Worker

SECRET = "the portal's private key: do-not-show-me"


def make_job(datacenter: Datacenter, owner: User, state: JobState = JobState.SUCCEEDED, **engine_data: object) -> Job:
    """A finished job of `owner` with one trainer, laid out on disk as the engines lay it out."""
    job = Job.objects.create(
        owner=owner,
        datacenter=datacenter,
        name="fit",
        uid="fit-ab12c",
        spec={"parallelism": 1, "pservers": 0},
        state=state,
        released=True,
        engine_data=dict(engine_data),
    )
    Worker.objects.create(job=job, role=Role.TRAINER, index=0, state="succeeded")
    return job


def log_dir(datacenter: Datacenter, job: Job) -> Path:
    folder = Path(datacenter.storage_root, "home", job.owner.username, "jobs", job.name, "output", job.uid, "trainer_0")
    folder.mkdir(parents=True, exist_ok=True)
    return folder


@pytest.fixture
def secret_file(tmp_path: Path) -> Path:
    outside = tmp_path / "outside" / "secret.txt"
    outside.parent.mkdir()
    outside.write_text(SECRET + "\n")
    return outside


@pytest.fixture
def kube_dc(db: None, tmp_path: Path) -> Datacenter:
    root = tmp_path / "pfs" / "kube"
    (root / "home").mkdir(parents=True)
    return Datacenter.objects.create(
        name="kube", engine=Engine.KUBERNETES, in_cluster=True, storage_root=str(root)
    )


def assert_refused(api: APIClient, job: Job, what: str) -> None:
    for extra in ({}, {"tail": "5"}, {"cursor": "3"}):
        params = {"worker": "trainer-0", **extra}
        response = api.get(f"/api/v1/jobs/{job.uid}/logs", params)
        assert response.status_code == 403, response.content
        assert SECRET.encode() not in response.content
        payload = response.json()
        assert payload["code"] == "log_refused"
        assert "trainer-0" in payload["detail"] and what in payload["detail"], payload
    assert Worker.objects.get(job=job).message == ""  # a GET writes nothing
    note_refused_logs(job)  # what the reconciler does as it releases the job
    worker = Worker.objects.get(job=job)
    assert what in worker.message and "log refused" in worker.message
    assert SECRET not in worker.message
    workers = api.get(f"/api/v1/jobs/{job.uid}/workers").json()["results"]
    assert what in workers[0]["message"]


def test_a_log_that_is_a_link_out_of_the_home_is_refused_on_the_local_engine(
    alice_api: APIClient, alice: User, local_dc: Datacenter, secret_file: Path
) -> None:
    job = make_job(local_dc, alice)
    (log_dir(local_dc, job) / "log.txt").symlink_to(secret_file)
    assert_refused(alice_api, job, "symbolic link")


def test_a_link_to_a_file_inside_the_home_is_refused_too(
    alice_api: APIClient, alice: User, local_dc: Datacenter
) -> None:
    job = make_job(local_dc, alice)
    folder = log_dir(local_dc, job)
    own = Path(local_dc.storage_root, "home", "alice", "notes.txt")
    own.write_text(SECRET)
    (folder / "log.txt").symlink_to(own)
    assert_refused(alice_api, job, "symbolic link")


def test_a_linked_output_folder_is_refused(
    alice_api: APIClient, alice: User, local_dc: Datacenter, secret_file: Path
) -> None:
    job = make_job(local_dc, alice)
    folder = log_dir(local_dc, job)
    folder.rmdir()
    secret_file.rename(secret_file.parent / "log.txt")
    folder.symlink_to(secret_file.parent)
    assert_refused(alice_api, job, "symbolic link")


def test_a_fifo_at_the_log_is_refused_without_blocking(alice_api: APIClient, alice: User, local_dc: Datacenter) -> None:
    job = make_job(local_dc, alice)
    os.mkfifo(log_dir(local_dc, job) / "log.txt")
    assert_refused(alice_api, job, "not a regular file")


def test_an_operator_reading_the_log_is_refused_too(
    carol_api: APIClient, alice: User, local_dc: Datacenter, secret_file: Path
) -> None:
    job = make_job(local_dc, alice)
    (log_dir(local_dc, job) / "log.txt").symlink_to(secret_file)
    response = carol_api.get(f"/api/v1/jobs/{job.uid}/logs", {"worker": "trainer-0", "all": "1"})
    assert response.status_code == 403 and SECRET.encode() not in response.content


def test_an_archived_kubernetes_log_that_is_a_link_is_refused(
    alice_api: APIClient, alice: User, kube_dc: Datacenter, secret_file: Path
) -> None:
    job = make_job(kube_dc, alice, archived=True, namespace="paddle-alice")
    (log_dir(kube_dc, job) / "log.txt").symlink_to(secret_file)
    assert_refused(alice_api, job, "symbolic link")


def test_the_launchers_copy_on_a_running_kubernetes_job_is_refused_when_a_link(
    alice_api: APIClient, alice: User, kube_dc: Datacenter, secret_file: Path
) -> None:
    job = make_job(kube_dc, alice, state=JobState.RUNNING, namespace="paddle-alice")
    (log_dir(kube_dc, job) / "log.txt").symlink_to(secret_file)
    assert_refused(alice_api, job, "symbolic link")


def test_a_plain_log_is_still_served(alice_api: APIClient, alice: User, local_dc: Datacenter) -> None:
    job = make_job(local_dc, alice)
    (log_dir(local_dc, job) / "log.txt").write_text("loss 1\nloss 0.5\n")
    answer = alice_api.get(f"/api/v1/jobs/{job.uid}/logs", {"worker": "trainer-0"}).json()
    assert answer["text"] == "loss 1\nloss 0.5\n" and answer["complete"]
    assert Worker.objects.get(job=job).message == ""


def test_archiving_replaces_a_linked_log_and_never_writes_through_it(
    alice: User, kube_dc: Datacenter, secret_file: Path
) -> None:
    job = make_job(kube_dc, alice, namespace="paddle-alice")
    link = log_dir(kube_dc, job) / "log.txt"
    link.symlink_to(secret_file)
    assert write_archive(job, "trainer-0", b"step 1 loss 2.5\n").written
    assert secret_file.read_text() == SECRET + "\n"
    assert not link.is_symlink() and link.read_text() == "step 1 loss 2.5\n"
    assert not [p for p in link.parent.iterdir() if p.name.startswith(".log-")]


def test_archiving_into_a_folder_linked_out_of_the_home_writes_nothing_there(
    alice: User, bob: User, kube_dc: Datacenter
) -> None:
    job = make_job(kube_dc, alice, namespace="paddle-alice")
    bobs = Path(kube_dc.storage_root, "home", "bob", "jobs", "x", "output", "u", "trainer_0")
    bobs.mkdir(parents=True)
    (bobs / "log.txt").write_text("bob's log\n")
    folder = log_dir(kube_dc, job)
    folder.rmdir()
    folder.symlink_to(bobs)
    archived = write_archive(job, "trainer-0", b"alice's much longer log that would win\n")
    assert not archived.written and "not archived" in archived.refused
    assert (bobs / "log.txt").read_text() == "bob's log\n" and sorted(p.name for p in bobs.iterdir()) == ["log.txt"]
    note_worker(job, "trainer-0", archived.refused)  # what the engine's Recorder does with it
    assert "not archived" in Worker.objects.get(job=job).message


def test_archiving_keeps_a_longer_launcher_copy(alice: User, kube_dc: Datacenter) -> None:
    job = make_job(kube_dc, alice, namespace="paddle-alice")
    log = log_dir(kube_dc, job) / "log.txt"
    log.write_text("the launcher's longer copy\n")
    assert not write_archive(job, "trainer-0", b"short\n").written
    assert log.read_text() == "the launcher's longer copy\n"
    assert write_archive(job, "trainer-0", b"a pod log longer than the launcher's copy\n").written
    assert log.read_text() == "a pod log longer than the launcher's copy\n"


def test_archiving_over_a_shorter_copy_drops_its_line_times(alice: User, kube_dc: Datacenter) -> None:
    job = make_job(kube_dc, alice, namespace="paddle-alice")
    folder = log_dir(kube_dc, job)
    (folder / "log.txt").write_text("step 1\n")
    (folder / "log.times").write_bytes(b"\0" * 16)  # offsets into the copy that is about to be replaced
    assert write_archive(job, "trainer-0", b"step 1\nstep 2 (the pod log is longer)\n").written
    assert sorted(p.name for p in folder.iterdir()) == ["log.txt"]
