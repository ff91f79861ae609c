"""Restart from the checkpoint on failure (spec `max_restarts`, jobs/follow/restarts.py): a real job on the local
engine that fails after saving runs again from that checkpoint and succeeds; one that fails without getting
further ends CrashLoop; failures a restart cannot mend are not restarted."""

from __future__ import annotations

from pathlib import Path

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.utils import timezone
from rest_framework.test import APIClient

from datacenters.models import Datacenter
from jobs.follow import reconcile, restarts
from jobs.models import EventKind, Job, JobState, Reason
from tests.jobs.conftest import put_package
from tests.jobs.test_checkpoint_listing import save
from tests.jobs.test_local_engine import finished
from tests.jobs.test_queue_api import make_job
from tests.workers import WorkerProcess

GOOD = {"entry": "python train.py", "parallelism": 1, "pservers": 0, "cpu": "0.5"}

FAIL_ONCE = """\
import os, sys
from paddlecloud import checkpoint
last = checkpoint.latest()
print("attempt", os.environ["PADDLECLOUD_ATTEMPT"], "from", last.step if last else None,
      "because", os.environ.get("PADDLECLOUD_RESTART_REASON"), "preempted", os.environ.get("PADDLECLOUD_PREEMPTED"),
      flush=True)
if last is None:
    checkpoint.save(10, lambda folder: (folder / "w.bin").write_bytes(b"w"))
    sys.exit(4)  # a crash after step 10 was saved
print("resumed at step", last.step + 1, flush=True)
"""

ALWAYS_FAIL = "import sys\nprint('failing', flush=True)\nsys.exit(5)\n"


def _log(job: Job) -> str:
    path = Path(job.datacenter.storage_root, "home", job.owner.username, "jobs", job.name, "output", job.uid)
    return (path / "trainer_0" / "log.txt").read_text()


def _submit(api: APIClient, dc: Datacenter, owner: User, tmp_path: Path, name: str, code: str, **spec: object) -> None:
    source = tmp_path / name
    source.mkdir()
    (source / "train.py").write_text(code)
    put_package(dc, owner, name, source)
    body = {**GOOD, "jobname": name, "package": f"/pfs/local/home/{owner.username}/jobs/{name}", **spec}
    created = api.post("/api/v1/jobs", body, format="json")
    assert created.status_code == 201, created.json()


@pytest.mark.celery
@pytest.mark.django_db(transaction=True)
def test_a_job_that_crashes_runs_again_from_its_checkpoint_and_succeeds(
    alice_api: APIClient, alice: User, local_dc: Datacenter, worker: WorkerProcess, tmp_path: Path
) -> None:
    _submit(alice_api, local_dc, alice, tmp_path, "crash", FAIL_ONCE, max_restarts=2)
    job = finished("crash", worker, timeout=150)
    assert (job.state, job.attempt, job.restarts) == (JobState.SUCCEEDED, 2, 1), job.message
    log = _log(job)
    assert "attempt 1 from None because None preempted None" in log, log
    assert "attempt 2 from 10 because TrainerFailed: trainer 0 exited with code 4" in log, log
    assert "preempted None" in log.split("attempt 2", 1)[1] and "resumed at step 11" in log, log
    assert [f["reason"] for f in job.failures] == [Reason.TRAINER_FAILED] and job.failures[0]["checkpoint_step"] == 10
    said = [e.message for e in job.events.filter(kind=EventKind.STATE)]
    assert any(m.startswith("queued Restarting: trainer 0 exited with code 4") and "from its checkpoint of step 10 "
               "as attempt 2 (restart 1 of 2)" in m for m in said), said  # fmt: skip
    answer = alice_api.get(f"/api/v1/jobs/{job.uid}").json()
    assert (answer["attempt"], answer["restarts"], answer["failures"][0]["exit_code"]) == (2, 1, 4), answer
    browser = Client()
    browser.force_login(alice)
    page = browser.get(f"/jobs/{job.uid}/").content.decode()
    assert "attempt 2: restarted once after failing" in page and "whole-job restarts 1 of 2" in page, page


@pytest.mark.celery
@pytest.mark.django_db(transaction=True)
def test_a_job_that_fails_without_getting_further_ends_crash_loop(
    alice_api: APIClient, alice: User, local_dc: Datacenter, worker: WorkerProcess, tmp_path: Path
) -> None:
    _submit(alice_api, local_dc, alice, tmp_path, "loop", ALWAYS_FAIL, max_restarts=10)
    job = finished("loop", worker, timeout=150)
    assert (job.state, job.reason, job.attempt, job.restarts) == (JobState.FAILED, Reason.CRASH_LOOP, 3, 2)
    assert job.message == (
        "trainer 0 exited with code 5; the last 3 attempts each failed without a checkpoint: not restarted"
    ), job.message


@pytest.mark.django_db
def test_only_failures_a_restart_can_mend_are_restarted(local_dc: Datacenter, alice: User) -> None:
    quota = make_job(local_dc, alice, "quota", state=JobState.RUNNING)
    Job.objects.filter(pk=quota.pk).update(spec={**quota.spec, "max_restarts": 3})
    quota.refresh_from_db()
    told = restarts.failed(quota, Reason.STORAGE_QUOTA_EXCEEDED, "your files outgrew 1 GiB")
    assert told == (Reason.STORAGE_QUOTA_EXCEEDED, "your files outgrew 1 GiB")
    never = make_job(local_dc, alice, "never", state=JobState.RUNNING)  # max_restarts 0: fails as before
    assert restarts.failed(never, Reason.TRAINER_FAILED, "exit 1") == (Reason.TRAINER_FAILED, "exit 1")
    save(quota, 30, {"step": 30, "time": 1.0})
    assert restarts.failed(quota, Reason.OOM_KILLED, "trainer 0 was OOM-killed", 137) is None
    quota.refresh_from_db()
    assert (quota.state, quota.reason, quota.restarts) == (JobState.QUEUED, Reason.RESTARTING, 1)
    assert quota.preempted_at is not None and restarts.waited(quota)  # the first failure at a checkpoint: no backoff
    assert quota.failures[0]["exit_code"] == 137 and quota.failures[0]["checkpoint_step"] == 30
    assert "restarting from its checkpoint of step 30 as attempt 2 (restart 1 of 3)" in quota.message
    assert [restarts.backoff(n).total_seconds() for n in (1, 2, 3, 4, 5, 6, 9)] == [0, 5, 10, 20, 40, 60, 60]
    # The backoff grows only while failures repeat at one checkpoint: a run that got further starts again soon.
    steps = [{"checkpoint_step": s} for s in (None, 10, 20, 20, 30)]
    assert [restarts.streak(steps[: n + 1]) for n in range(5)] == [1, 1, 1, 2, 1]


@pytest.mark.django_db
def test_one_jobs_breakage_is_logged_once_and_the_cycle_goes_on(
    local_dc: Datacenter, alice: User, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """(jobs/follow/reconcile.py `_alone`) A step that raises for one job neither stops the others' nor logs a
    traceback every cycle."""
    other = make_job(local_dc, alice, "other", state=JobState.RUNNING, admitted_at=timezone.now())
    broken = make_job(local_dc, alice, "broken", state=JobState.RUNNING, admitted_at=timezone.now())  # looked at first
    real_apply, applied = reconcile.apply, []

    def apply(job: Job, *args: object, **kwargs: object) -> None:
        if job.pk == broken.pk:
            raise RuntimeError("nothing foresaw this")
        applied.append(job.pk)
        real_apply(job, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(reconcile, "apply", apply)
    monkeypatch.setattr(reconcile, "_told", {})
    for _ in range(3):
        reconcile.reconcile_datacenter(local_dc)
    assert other.pk in applied  # after the broken one, in the same cycle
    tracebacks = [r for r in caplog.records if r.exc_info and "cannot follow broken" in r.getMessage()]
    assert len(tracebacks) == 1, [r.getMessage() for r in caplog.records]


@pytest.mark.django_db
def test_a_job_one_step_breaks_cycle_after_cycle_is_failed_and_a_recovered_one_is_not(
    local_dc: Datacenter, alice: User, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 34: a job whose follow breaks every cycle held its room for good; after FAIL_AFTER cycles in a row it
    fails EngineError naming the cause. A job that broke fewer cycles in a row, then was followed, starts over."""
    other = make_job(local_dc, alice, "other", state=JobState.RUNNING, admitted_at=timezone.now())
    broken = make_job(local_dc, alice, "broken", state=JobState.RUNNING, admitted_at=timezone.now())
    real_apply, breaking = reconcile.apply, {broken.pk, other.pk}

    def apply(job: Job, *args: object, **kwargs: object) -> None:
        if job.pk in breaking:
            raise RuntimeError("nothing foresaw this")
        real_apply(job, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(reconcile, "apply", apply)
    monkeypatch.setattr(reconcile, "FAIL_AFTER", 4)
    monkeypatch.setattr(reconcile, "FAIL_AFTER_SECONDS", 0.0)  # the cycles' count alone (60 s in production)
    monkeypatch.setattr(reconcile, "_broke", {})
    for cycle in range(7):
        if cycle == 2:
            breaking.discard(other.pk)  # other's trouble passes after 2 cycles: its count starts again
        if cycle == 4:
            breaking.add(other.pk)  # and comes back: 3 more in a row are still under the bound
        reconcile.reconcile_datacenter(local_dc)
    broken.refresh_from_db()
    other.refresh_from_db()
    assert (broken.state, broken.reason) == (JobState.FAILED, Reason.ENGINE_ERROR)
    assert broken.message.startswith("the portal could not follow this job in 4 cycles in a row (RuntimeError: "
                                     "nothing foresaw this)"), broken.message  # fmt: skip
    assert other.state == JobState.RUNNING


HANG = """\
import os, sys, time
rank = int(os.environ["PADDLECLOUD_INDEX"])
if rank == 1:
    print("step 1 loss 0.9", flush=True)
    time.sleep(300)  # hangs: its peer waits on it
for step in range(16):
    print(f"waiting for rank 1 in step {step}", flush=True)
    time.sleep(1)
print("RuntimeError: [gloo] Timed out waiting 15 s for rank 1", flush=True)
sys.exit(3)
"""


@pytest.mark.celery
@pytest.mark.django_db(transaction=True)
def test_a_cascade_names_the_rank_that_went_quiet_first(
    alice_api: APIClient, alice: User, local_dc: Datacenter, worker: WorkerProcess, tmp_path: Path
) -> None:
    """The issue's hung rank: rank 1 hangs, rank 0 times out waiting on it and exits first. The message quotes rank
    0's error, and names rank 1 as the one that went quiet first (jobs/files/quiet.py)."""
    _submit(alice_api, local_dc, alice, tmp_path, "hang", HANG, parallelism=2, cpu="0.25")
    job = finished("hang", worker, timeout=120)
    assert (job.state, job.reason) == (JobState.FAILED, Reason.TRAINER_FAILED), job.message
    assert job.message.startswith("trainer 0 exited with code 3: RuntimeError: [gloo] Timed out"), job.message
    assert "; trainer 1 went quiet first: its last line came at " in job.message, job.message
    assert job.message.endswith("before any other trainer's (step 1 loss 0.9)"), job.message
