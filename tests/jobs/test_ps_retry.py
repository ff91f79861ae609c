"""A parameter-server trainer retried (max_retries), real Paddle, local engine: it finishes, or fails in bound.

Before rendezvous rounds a retried trainer waited in gloo's rendezvous for peers of the old mesh (Paddle
waits an hour) and the job stayed `running`: both tests then end at their own deadline.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from django.contrib.auth.models import User
from rest_framework.test import APIClient

from datacenters.models import Datacenter
from tests.jobs.conftest import alive, put_package
from tests.jobs.test_local_engine import finished
from tests.workers import WorkerProcess, start_worker

pytestmark = [pytest.mark.paddle, pytest.mark.celery, pytest.mark.django_db(transaction=True)]

PACKAGE = Path(__file__).parent / "ps_retry_package"
BOUND = 15  # seconds: the rendezvous bound the second test's worker gives its jobs
SPEC = {"jobname": "retry", "entry": "python train.py", "parallelism": 2, "pservers": 2, "max_retries": 1}


@pytest.fixture
def bounded_worker(transactional_db: None, tmp_path: Path) -> Iterator[WorkerProcess]:
    process = start_worker(tmp_path, beat=True, concurrency=2, extra_env={"PADDLECLOUD_RENDEZVOUS_TIMEOUT": str(BOUND)})
    yield process
    process.stop()


def log(api: APIClient, worker: str) -> str:
    return str(api.get(f"/api/v1/jobs/retry/logs?worker={worker}").json()["text"])


def test_a_trainer_that_fails_once_is_retried_and_the_job_succeeds(
    alice_api: APIClient, alice: User, local_dc: Datacenter, worker: WorkerProcess
) -> None:
    put_package(local_dc, alice, "retry", PACKAGE)
    spec = {**SPEC, "env": {"RETRY_FAIL_TRAINER": "0", "RETRY_STEPS": "3000"}}
    assert alice_api.post("/api/v1/jobs", spec, format="json").status_code == 201
    job = finished("retry", worker, timeout=300)
    assert (job.state, job.exit_code) == ("succeeded", 0), job.message
    assert job.workers.get(role="trainer", index=0).restarts == 1
    first = log(alice_api, "trainer-0")
    assert "fails once on purpose" in first and "rendezvous round 1" in first, first[-3000:]
    for trainer in (0, 1):
        assert f"trainer {trainer} done: 3000 steps" in log(alice_api, f"trainer-{trainer}")
    assert alive(job) == []


def test_a_retried_trainer_whose_peer_has_left_fails_the_job_at_the_bound(
    alice_api: APIClient, alice: User, local_dc: Datacenter, bounded_worker: WorkerProcess
) -> None:
    put_package(local_dc, alice, "retry", PACKAGE)
    env = {"RETRY_FAIL_TRAINER": "0", "RETRY_FAIL_STEP": "0", "RETRY_FAIL_AFTER_LEAVE": "1", "RETRY_LEAVE_TRAINER": "1"}
    spec = {**SPEC, "pservers": 1, "env": env}
    assert alice_api.post("/api/v1/jobs", spec, format="json").status_code == 201
    job = finished("retry", bounded_worker, timeout=BOUND + 150)
    assert (job.state, job.reason) == ("failed", "RendezvousTimeout"), job.message
    assert job.exit_code == 72
    assert f"did not complete within {BOUND}s (PADDLECLOUD_RENDEZVOUS_TIMEOUT)" in job.message
    assert "trainer(s) 1 never reached it" in job.message
    assert job.workers.get(role="trainer", index=0).restarts == 1
    # Trainer 0's retry waited the bound in the rendezvous, then its launcher stopped it.
    stopped = re.search(r"entry stopped after ([0-9.]+)s: the gloo rendezvous", log(alice_api, "trainer-0"))
    assert stopped is not None and float(stopped.group(1)) >= BOUND
    assert alive(job) == []
