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
