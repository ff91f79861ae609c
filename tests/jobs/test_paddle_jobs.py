"""Real PaddlePaddle jobs on the local engine, through the API and a real Celery worker with beat.

The first run installs paddlepaddle==3.0.0 into the launcher's cached environment (~20 s); later
runs reuse it.
"""

from __future__ import annotations

import os
import re
import signal
import time
from pathlib import Path

import pytest
from django.contrib.auth.models import User
from rest_framework.test import APIClient

from datacenters.models import Datacenter
from jobs.files import layout
from jobs.models import Job
from tests.jobs.conftest import EXAMPLES, alive, put_package
from tests.jobs.test_local_engine import finished
from tests.wait import wait_for
from tests.workers import WorkerProcess

pytestmark = [pytest.mark.paddle, pytest.mark.celery, pytest.mark.django_db(transaction=True)]


def losses(text: str) -> list[float]:
    return [float(v) for v in re.findall(r"loss ([0-9.]+)", text)]


def test_the_ps_example_trains_with_falling_loss(
    alice_api: APIClient, alice: User, local_dc: Datacenter, worker: WorkerProcess
) -> None:
    put_package(local_dc, alice, "fit", EXAMPLES / "fit_a_line")
    spec = {"jobname": "fit", "entry": "python train.py", "parallelism": 2, "pservers": 2, "passes": 4}
    assert alice_api.post("/api/v1/jobs", spec, format="json").status_code == 201
    job = finished("fit", worker, timeout=300)
    assert (job.state, job.exit_code) == ("succeeded", 0), job.message
    for trainer in (0, 1):
        text = alice_api.get(f"/api/v1/jobs/fit/logs?worker=trainer-{trainer}").json()["text"]
        values = losses(text)
        assert len(values) >= 3, text[-2000:]
        assert values[-1] < values[0] / 5, values
        # The trainer waited for its pservers inside Paddle's init_worker (pserver_gate), in the job's sandbox.
        assert "[paddlecloud-launch] all 2 pserver(s) accept connections" in text, text[:3000]
    assert alive(job) == []


def test_the_collective_example_succeeds(
    alice_api: APIClient, alice: User, local_dc: Datacenter, worker: WorkerProcess
) -> None:
    put_package(local_dc, alice, "dp", EXAMPLES / "fit_a_line_collective")
    spec = {"jobname": "dp", "entry": "python train.py", "parallelism": 2, "pservers": 0, "passes": 2}
    assert alice_api.post("/api/v1/jobs", spec, format="json").status_code == 201
    job = finished("dp", worker, timeout=300)
    assert (job.state, job.exit_code) == ("succeeded", 0), job.message
    text = alice_api.get("/api/v1/jobs/dp/logs?worker=trainer-1").json()["text"]
    assert len(losses(text)) >= 2
    assert alive(job) == []


def test_a_pserver_killed_mid_training_is_reported_although_trainers_exit_0(
    alice_api: APIClient, alice: User, local_dc: Datacenter, worker: WorkerProcess
) -> None:
    put_package(local_dc, alice, "fit", EXAMPLES / "fit_a_line")
    spec = {"jobname": "fit", "entry": "python train.py", "parallelism": 2, "pservers": 2, "passes": 400}
    alice_api.post("/api/v1/jobs", spec, format="json")

    def training() -> bool:
        log = alice_api.get("/api/v1/jobs/fit/logs?worker=trainer-0").json()["text"]
        return "step 50 loss" in log

    wait_for(training, "trainer 0 to train", 300, watch=worker)
    job = Job.objects.get(name="fit")
    os.kill(job.engine_data["pserver-0"]["pid"], signal.SIGKILL)
    killed_at = time.monotonic()
    failed = wait_for(lambda: Job.objects.filter(name="fit", state="failed").first(), "PserverLost", 30, watch=worker)
    assert isinstance(failed, Job)
    assert failed.reason == "PserverLost" and time.monotonic() - killed_at < 10
    assert alive(finished("fit", worker)) == []


def test_a_trainer_exiting_3_mid_training_stops_the_pservers(
    alice_api: APIClient, alice: User, local_dc: Datacenter, worker: WorkerProcess, tmp_path: Path
) -> None:
    put_package(local_dc, alice, "fit", EXAMPLES / "fit_a_line")
    # Trainer 1 trains for a while, then its entry exits 3 (what a crashing script does).
    entry = (
        'python train.py & pid=$!; if [ "$PADDLE_TRAINER_ID" = 1 ]; then sleep 6; kill -9 $pid; exit 3; fi; wait $pid'
    )
    spec = {"jobname": "fit", "entry": entry, "parallelism": 2, "pservers": 2, "passes": 400}
    alice_api.post("/api/v1/jobs", spec, format="json")
    job = finished("fit", worker, timeout=300)
    assert (job.state, job.reason, job.exit_code) == ("failed", "TrainerFailed", 3), job.message
    assert alive(job) == []


def test_a_preempted_example_resumes_from_its_checkpoint_and_succeeds(
    alice_api: APIClient, carol_api: APIClient, alice: User, carol: User, local_dc: Datacenter,
    worker: WorkerProcess,
) -> None:  # fmt: skip
    """The example (2 pservers + 2 trainers at half a core) fills 2 cores; a `high` job preempts it; it runs
    again as attempt 2, starts after the last pass trainer 0 saved, and trains to the end."""
    local_dc.capacity_cpu, local_dc.preemption_delay, local_dc.preemption_grace = "2", 0, 5
    local_dc.save()
    put_package(local_dc, alice, "fit", EXAMPLES / "fit_a_line")
    put_package(local_dc, carol, "fake", Path(__file__).parent / "fake_package")
    # A pass is ~0.1 s on a free core: the pause keeps the run going (>= 30 s) until the preemption comes.
    spec = {"jobname": "fit", "entry": "python train.py", "parallelism": 2, "pservers": 2, "passes": 30,
            "cpu": "0.5", "pscpu": "0.5", "memory": "1Gi", "psmemory": "1Gi", "priority": "low",
            "env": {"FIT_A_LINE_PASS_PAUSE": "1"}}  # fmt: skip
    created = alice_api.post("/api/v1/jobs", spec, format="json")
    assert created.status_code == 201, created.json()
    job = Job.objects.get(name="fit")
    checkpoints = layout.output_dir(local_dc, "alice", "fit", job.uid) / "checkpoints"

    def saved_after_pass_1() -> bool:  # step-1 or later: only the newest two are kept
        return any(p.name.startswith("step-") and int(p.name[5:]) >= 1 for p in checkpoints.glob("step-[0-9]*"))

    wait_for(saved_after_pass_1, "trainer 0's checkpoint of pass 1", 300, watch=worker)
    urgent = {"jobname": "urgent", "entry": "python train.py", "cpu": "1", "priority": "high",
              "package": "/pfs/local/home/carol/jobs/fake"}  # fmt: skip
    assert carol_api.post("/api/v1/jobs", urgent, format="json").status_code == 201
    wait_for(lambda: Job.objects.filter(name="fit", attempt=2).first(), "the example preempted", 90, watch=worker)
    done = finished("fit", worker, timeout=400)
    assert (done.state, done.attempt) == ("succeeded", 2), done.message
    text = alice_api.get("/api/v1/jobs/fit/logs?worker=trainer-0").json()["text"]
    resumed = re.search(r"attempt 2 resumes after pass (\d+)", text)
    assert resumed and int(resumed.group(1)) >= 1, text[-3000:]
    assert "pass 29 step" in text  # it trained to the last pass
    values = losses(text)
    assert values[-1] < values[0] / 5, values  # the first attempt's first loss against the second's last
    assert Job.objects.get(name="urgent").state == "succeeded"


def test_a_collective_job_that_loses_a_rank_resumes_from_its_checkpoint_and_ends_as_an_undisturbed_run(
    alice_api: APIClient, alice: User, local_dc: Datacenter, worker: WorkerProcess
) -> None:
    """Two runs of the same seeded 2-trainer gloo training, side by side: one undisturbed; in the other, trainer 1
    kills itself (SIGKILL) in pass 3 of attempt 1. With -max-restarts 2 the whole job stops and runs again as
    attempt 2 from the checkpoint of pass 2, and ends with the very same loss and weights."""
    local_dc.preemption_grace = 5  # the surviving rank, stuck in its all-reduce, is stopped within this
    local_dc.save()
    package = Path(__file__).parent / "collective_restart_package"
    base = {"entry": "python train.py", "parallelism": 2, "pservers": 0, "passes": 6, "cpu": "0.5", "memory": "1Gi"}
    for name, extra in (("steady", {}), ("crashy", {"max_restarts": 2, "env": {"CRASH_AT_PASS": "3"}})):
        put_package(local_dc, alice, name, package)
        created = alice_api.post("/api/v1/jobs", {**base, "jobname": name, **extra}, format="json")
        assert created.status_code == 201, created.json()
    steady, crashy = finished("steady", worker, timeout=400), finished("crashy", worker, timeout=400)
    assert (steady.state, steady.attempt) == ("succeeded", 1), steady.message
    assert (crashy.state, crashy.attempt, crashy.restarts) == ("succeeded", 2, 1), crashy.message
    assert crashy.failures[0]["checkpoint_step"] == 2, crashy.failures
    logs = {name: alice_api.get(f"/api/v1/jobs/{name}/logs?worker=trainer-0").json()["text"] for name in
            ("steady", "crashy")}  # fmt: skip
    assert "trainer 0 of 2 attempt 2 starts at pass 3 (restarted because: " in logs["crashy"], logs["crashy"][-3000:]
    assert "trainer 1" in crashy.failures[0]["message"], crashy.failures  # the rank that was lost, named
    finals = {name: re.findall(r"final loss \S+ weights \S+", text) for name, text in logs.items()}
    assert finals["steady"] and finals["crashy"][-1:] == finals["steady"], finals
    assert alive(crashy) == []


def test_a_collective_job_oom_killed_at_the_same_pass_on_every_attempt_ends_crash_loop(
    alice_api: APIClient, alice: User, local_dc: Datacenter, worker: WorkerProcess
) -> None:
    """Trainer 1 outgrows its 1 GiB three steps into pass 2 on every attempt. Attempt 1 saved passes 0 and 1;
    attempts 2 and 3 resume from pass 1's checkpoint and die at the same place: the job ends CrashLoop after 3
    attempts, not the 10 restarts it allowed, each failure an OOM kill naming trainer 1."""
    local_dc.preemption_grace = 5  # the surviving rank, stuck in its all-reduce, is stopped within this
    local_dc.save()
    put_package(local_dc, alice, "leaky", Path(__file__).parent / "collective_restart_package")
    spec = {"jobname": "leaky", "entry": "python train.py", "parallelism": 2, "pservers": 0, "passes": 6,
            "cpu": "0.5", "memory": "1Gi", "max_restarts": 10, "env": {"OOM_AT_PASS": "2"}}  # fmt: skip
    created = alice_api.post("/api/v1/jobs", spec, format="json")
    assert created.status_code == 201, created.json()
    job = finished("leaky", worker, timeout=400)
    assert (job.state, job.reason, job.attempt, job.restarts) == ("failed", "CrashLoop", 3, 2), job.message
    # The failures it restarted after (the third ended it: its message says so).
    assert [(f["reason"], f["checkpoint_step"]) for f in job.failures] == [("OOMKilled", 1)] * 2, job.failures
    assert all("trainer 1" in f["message"] for f in job.failures), job.failures
    ended = "; the last 3 attempts each failed at step 1: not restarted"
    assert "trainer 1" in job.message and job.message.endswith(ended), job.message
    text = alice_api.get("/api/v1/jobs/leaky/logs?worker=trainer-0").json()["text"]
    assert "trainer 0 of 2 attempt 3 starts at pass 2 (restarted because: OOMKilled" in text, text[-3000:]
    assert alive(job) == []


def test_an_elastic_job_starts_with_the_trainers_that_fit_and_grows_when_room_frees(
    alice_api: APIClient, bob_api: APIClient, alice: User, bob: User, local_dc: Datacenter, worker: WorkerProcess
) -> None:
    """2 cores, bob's job on one: `-parallelism 1:2` starts with 1 trainer (world size 1); when bob's ends, it grows
    (stopped with its grace after the pass it is in, which saved) and runs on from that checkpoint with 2."""
    local_dc.capacity_cpu, local_dc.elastic_grow_after, local_dc.preemption_grace = "2", 5, 10
    local_dc.save()
    put_package(local_dc, bob, "busy", Path(__file__).parent / "fake_package")
    busy = {"jobname": "busy", "entry": "python train.py", "cpu": "1", "env": {"FAKE_STEPS": "150"},
            "package": "/pfs/local/home/bob/jobs/busy"}  # fmt: skip
    assert bob_api.post("/api/v1/jobs", busy, format="json").status_code == 201
    wait_for(lambda: Job.objects.filter(name="busy", state="running").first(), "bob's job running", 60, watch=worker)
    put_package(local_dc, alice, "grow", Path(__file__).parent / "collective_restart_package")
    spec = {"jobname": "grow", "entry": "python train.py", "parallelism": 2, "min_parallelism": 1, "cpu": "1",
            "memory": "1Gi", "passes": 40, "env": {"PASS_PAUSE": "1"}}  # fmt: skip
    assert alice_api.post("/api/v1/jobs", spec, format="json").status_code == 201
    done = finished("grow", worker, timeout=400)
    assert (done.state, done.attempt, done.trainers) == ("succeeded", 2, 2), done.message
    text = alice_api.get("/api/v1/jobs/grow/logs?worker=trainer-0").json()["text"]
    first = re.search(r"trainer 0 of 1 attempt 1 starts at pass 0", text)
    grown = re.search(r"trainer 0 of 2 attempt 2 starts at pass (\d+)", text)
    assert first and grown and int(grown.group(1)) >= 1, text[-3000:]
    said = [e.message for e in done.events.all()]
    assert any("with 1 trainers" in m for m in said) and any("growing from 1 to 2 trainers" in m for m in said), said
    assert Job.objects.get(name="busy").state == "succeeded"
