"""A burst on the embedded broker: 100 submits at 3/s all end, and no reconcile tick expires in the queue.

Not timed (bench/submit_latency.py gives the figures). kombu's filesystem transport fell behind such a
burst (each freed worker slot idled up to a second), and the reconcile ticks, which expire after
2 x PADDLECLOUD_RECONCILE_SECONDS, were discarded while they waited behind it (74 of them in one run).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests
from django.contrib.auth.models import User

from accounts.models import issue_token
from core import lanes
from datacenters.models import Datacenter
from jobs.models import TERMINAL_STATES, Job
from tests.jobs.conftest import put_package
from tests.servers import portal
from tests.wait import wait_for
from tests.workers import WorkerProcess, start_worker

pytestmark = [pytest.mark.celery, pytest.mark.django_db(transaction=True)]

JOBS = 100
RATE = 3.0  # submits per second
FAKE_PACKAGE = Path(__file__).parent / "fake_package"
# The smallest job: one trainer, one step, no sleep; the test is about the queue, not the job.
SPEC = {"entry": "python train.py", "cpu": "100m", "memory": "128Mi",
        "env": {"FAKE_STEPS": "1", "FAKE_STEP_SECONDS": "0"}}  # fmt: skip


# The embedded broker whatever this run's broker is (CI runs the suite on Redis): the portal that
# takes the submits and every worker are started on it.
EMBEDDED = {"CELERY_BROKER_URL": "pcfs://"}


@pytest.fixture
def lane_workers(transactional_db: None, tmp_path: Path) -> Iterator[list[WorkerProcess]]:
    """One worker per lane, as `make run` starts them (scripts/common.sh): the control lane has beat."""
    workers = [
        start_worker(tmp_path, (lanes.JOBS,), concurrency=2, extra_env=EMBEDDED),
        start_worker(tmp_path, (lanes.CONTROL,), beat=True, concurrency=2, extra_env=EMBEDDED),
        start_worker(tmp_path, (lanes.SIDE, lanes.NOTIFY), concurrency=4, extra_env=EMBEDDED),
    ]
    yield workers
    for worker in workers:
        worker.stop()


def test_a_burst_of_submits_on_the_embedded_broker_all_end_and_no_reconcile_is_discarded(
    alice: User, local_dc: Datacenter, lane_workers: list[WorkerProcess], tmp_path: Path
) -> None:
    local_dc.default_jobs = JOBS  # the quota would hold back what the broker is to hold
    local_dc.save(update_fields=["default_jobs"])
    names = [f"burst{i}" for i in range(JOBS)]
    for name in names:
        put_package(local_dc, alice, name, FAKE_PACKAGE)
    session = requests.Session()
    session.headers["Authorization"] = f"Token {issue_token(alice).key}"
    with portal(tmp_path, **EMBEDDED) as url:
        started = time.monotonic()
        for index, name in enumerate(names):
            time.sleep(max(0.0, started + index / RATE - time.monotonic()))
            answer = session.post(f"{url}/api/v1/jobs", json={**SPEC, "jobname": name}, timeout=30)
            assert answer.status_code == 201, answer.text

    def all_final() -> bool:
        return Job.objects.filter(name__in=names, state__in=TERMINAL_STATES, released=True).count() == JOBS

    control = lane_workers[1]
    wait_for(all_final, f"{JOBS} jobs to end", 120, watch=control)
    assert set(Job.objects.filter(name__in=names).values_list("state", flat=True)) == {"succeeded"}
    log = control.log()
    assert "jobs.reconcile" in log, "the worker ran no reconcile: its log is not the one expected"
    assert log.count("Discarding revoked task: jobs.follow.reconcile") == 0
