"""A kill is final, in every state: every process the job has or is about to have is gone within the grace,
no worker of a killed job ends `succeeded`, and a final job's counts say so at once (issue 21)."""

from __future__ import annotations

import signal
import threading
import time
from functools import partial
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings
from django.db import connection
from rest_framework.test import APIClient

from core.locks import exclusive, job_lock
from jobs.engines import engine_for
from jobs.engines.local import processes
from jobs.follow import tasks
from jobs.follow.records import RECORDS
from jobs.models import Job, JobState, Worker
from jobs.scheduling import cycle
from jobs.states import transition
from tests.wait import wait_for
from tests.workers import WorkerProcess, start_worker

pytestmark = [pytest.mark.celery, pytest.mark.django_db(transaction=True)]

SPEC: dict[str, Any] = {"jobname": "fake", "entry": "python train.py", "parallelism": 2, "pservers": 1}
GRACE = settings.PADDLECLOUD_KILL_GRACE_SECONDS


def job_processes(uid: str) -> list[int]:
    """Every process on this host whose environment names the job's output folder (it holds the uid).

    Found without the engine's record of the job, so a process that the record lost is found too.
    """
    found = []
    marker = f"/output/{uid}".encode()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            environ = (entry / "environ").read_bytes()
        except OSError:
            continue  # ended meanwhile, or not ours to read
        if any(var.startswith(b"PADDLECLOUD_OUTPUT_DIR=") and marker in var for var in environ.split(b"\0")):
            found.append(int(entry.name))
    return found


def counts_final(job: dict[str, Any]) -> bool:
    return all(job[role][count] == 0 for role in ("trainers", "pservers") for count in ("running", "pending"))


def submit(api: APIClient, spec: dict[str, Any] | None = None, /, **env: str) -> dict[str, Any]:
    created = api.post("/api/v1/jobs", {**SPEC, **(spec or {}), "env": env}, format="json")
    assert created.status_code == 201, created.json()
    answer: dict[str, Any] = created.json()
    return answer


def kill(api: APIClient, uid: str) -> dict[str, Any]:
    killed = api.delete(f"/api/v1/jobs/{uid}")
    assert killed.status_code == 200, killed.json()
    answer: dict[str, Any] = killed.json()
    assert answer["state"] == "killed"
    assert counts_final(answer), answer  # the answer that says killed says nothing runs any more
    return answer


def released(uid: str) -> bool:
    return Job.objects.get(uid=uid).released


def assert_all_gone(uids: list[str], worker: WorkerProcess, since: float) -> None:
    """Every process of these jobs is gone within the grace (counted from the kill), and stays gone."""
    for uid in uids:
        wait_for(partial(released, uid), f"{uid} to be released", GRACE + 30, watch=worker)
    left = GRACE + 5 - (time.monotonic() - since)
    wait_for(lambda: not any(job_processes(uid) for uid in uids), "every process to be gone", max(left, 1))
    time.sleep(2)  # a start that was under way at the kill would show up now
    assert {uid: job_processes(uid) for uid in uids} == {uid: [] for uid in uids}
    succeeded = Worker.objects.filter(job__uid__in=uids, state="succeeded").values_list("job__uid", "role", "index")
    assert list(succeeded) == []


def test_a_queued_job_killed_never_starts(alice_api: APIClient, fake_package: Path, tmp_path: Path) -> None:
    job = submit(alice_api, FAKE_STEPS="600")  # no worker yet: it stays queued
    kill(alice_api, job["uid"])
    worker = start_worker(tmp_path, beat=True)  # now its submit_job runs, after the kill
    try:
        assert_all_gone([job["uid"]], worker, time.monotonic())
        assert not Worker.objects.filter(job__uid=job["uid"]).exists()
    finally:
        worker.stop()


@pytest.mark.parametrize(
    "env", [{"FAKE_STEPS": "600", "FAKE_IGNORE_TERM": "1"}, {"FAKE_STEPS": "3"}], ids=["deaf-to-sigterm", "short"]
)
def test_a_job_killed_while_it_starts_stops_every_process(
    alice_api: APIClient, fake_package: Path, worker: WorkerProcess, env: dict[str, str]
) -> None:
    """Killed right after submit, while submit_job starts its processes (submitting, pending)."""
    uids = []
    for delay in (0, 0.05, 0.2, 0.5, 1.0):
        job = submit(alice_api, **env)
        time.sleep(delay)
        kill(alice_api, job["uid"])
        uids.append(job["uid"])
    assert_all_gone(uids, worker, time.monotonic())


def test_a_running_job_killed_stops_every_process(
    alice_api: APIClient, fake_package: Path, worker: WorkerProcess
) -> None:
    job = submit(alice_api, FAKE_STEPS="600")
    wait_for(lambda: Job.objects.filter(uid=job["uid"], state="running").exists(), "running", 60, watch=worker)
    kill(alice_api, job["uid"])
    assert_all_gone([job["uid"]], worker, time.monotonic())


def first_final(api: APIClient, uid: str, worker: WorkerProcess) -> dict[str, Any]:
    """The job as the API first shows it final (polled as fast as the API answers)."""

    def final() -> dict[str, Any] | None:
        answer: dict[str, Any] = api.get(f"/api/v1/jobs/{uid}").json()
        return answer if answer["state"] in ("succeeded", "failed", "killed") else None

    return wait_for(final, f"{uid} to end", 60, interval=0.02, watch=worker)


def test_a_failed_job_counts_nothing_running_as_soon_as_it_is_failed(
    alice_api: APIClient, fake_package: Path, worker: WorkerProcess
) -> None:
    job = submit(alice_api, FAKE_FAIL_TRAINER="1", FAKE_STEPS="600", FAKE_STEP_SECONDS="0.02")
    failed = first_final(alice_api, job["uid"], worker)
    assert failed["state"] == "failed"
    assert counts_final(failed), failed
    assert failed["trainers"]["failed"] == 2 and failed["pservers"]["failed"] == 1  # trainer 1, and those stopped


def test_a_succeeded_job_counts_nothing_running_as_soon_as_it_succeeded(
    alice_api: APIClient, fake_package: Path, worker: WorkerProcess
) -> None:
    job = submit(alice_api, FAKE_STEPS="3")
    done = first_final(alice_api, job["uid"], worker)
    assert done["state"] == "succeeded"
    assert counts_final(done), done
    assert done["trainers"]["succeeded"] == 2


# The races between submit_job and a kill, played step by step with the real tasks and processes (no worker):


def release_by_looks(pk: int) -> None:
    """Take kill_job's looks in turn (a worker would take each one half a second apart) until it is released."""
    deadline = time.monotonic() + GRACE + 20
    while (job := Job.objects.filter(pk=pk).first()) is not None and not job.released:
        assert time.monotonic() < deadline, "the kill never released the job"
        tasks.kill_job.run(pk)
        time.sleep(0.2)


def test_a_stop_with_a_stale_copy_keeps_a_process_recorded_since(alice_api: APIClient, fake_package: Path) -> None:
    """kill_job's look read the job before a trainer was restarted: its stop must not drop the new process's record."""
    uid = submit(alice_api, {"max_retries": 1}, FAKE_STEPS="600", FAKE_IGNORE_TERM="1")["uid"]
    pk = Job.objects.get(uid=uid).pk
    assert cycle.schedule(Job.objects.get(pk=pk).datacenter) == [pk]  # admitted, as the scheduler's cycle would
    tasks.submit_job.run(pk)
    stale = Job.objects.select_related("owner", "datacenter").get(pk=pk)
    first = stale.engine_data["trainer-0"]["pid"]
    processes.signal_groups([first], signal.SIGKILL)  # trainer 0 dies; the reconciler restarts it

    def restarted() -> bool:
        tasks.reconcile.run()
        return bool(Job.objects.get(pk=pk).engine_data["trainer-0"]["pid"] != first)

    wait_for(restarted, "trainer 0 to be restarted", 30)
    kill(alice_api, uid)
    engine_for(stale.datacenter).stop(stale, RECORDS)  # the kill's first look, with its copy from before the restart
    release_by_looks(pk)
    assert job_processes(uid) == []


def test_a_release_waits_for_a_start_under_way(alice_api: APIClient, fake_package: Path) -> None:
    """While submit_job holds the job's lock (it is starting processes), a kill's release does not conclude."""
    pk = Job.objects.get(uid=submit(alice_api)["uid"]).pk
    kill(alice_api, Job.objects.get(pk=pk).uid)
    holding, done = threading.Event(), threading.Event()

    def start_under_way() -> None:
        with exclusive(job_lock(pk)) as held:
            assert held
            holding.set()
            done.wait(30)
        connection.close()

    starter = threading.Thread(target=start_under_way)
    starter.start()
    try:
        assert holding.wait(10)
        tasks.kill_job.run(pk)
        assert not Job.objects.get(pk=pk).released  # it looks again later, once the start let go
    finally:
        done.set()
        starter.join()
    tasks.kill_job.run(pk)
    assert Job.objects.get(pk=pk).released


def test_a_start_that_comes_after_the_kill_starts_nothing(alice_api: APIClient, fake_package: Path) -> None:
    """submit_job was past its state check when the kill and its release ran: it must not start anything now."""
    uid = submit(alice_api, FAKE_STEPS="600", FAKE_IGNORE_TERM="1")["uid"]
    job = Job.objects.select_related("owner", "datacenter").get(uid=uid)
    assert transition(job.pk, JobState.SUBMITTING)  # submit_job's first step
    job.refresh_from_db()
    kill(alice_api, uid)
    release_by_looks(job.pk)  # nothing ran yet: released at once
    engine_for(job.datacenter).start(job, RECORDS)  # the rest of that submit_job, with its copy of the job (submitting)
    assert job_processes(uid) == []
    assert not Worker.objects.filter(job=job, state="running").exists()
