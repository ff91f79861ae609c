"""Lanes: control loops, per-job work, side work and notifications go to queues of their own."""

from __future__ import annotations

from pathlib import Path

import pytest
from celery import current_app
from django.conf import settings
from django.contrib.auth.models import User

from core import lanes
from datacenters.models import Datacenter
from health.models import WorkerHeartbeat
from health.tasks import heartbeat
from jobs.models import Job, JobState
from tests.wait import wait_for
from tests.workers import start_worker


def test_every_periodic_loop_but_the_heartbeat_runs_off_the_jobs_lane() -> None:
    for entry in settings.CELERY_BEAT_SCHEDULE.values():
        assert isinstance(entry["task"], str)
        expected = lanes.JOBS if entry["task"] == "portal.heartbeat" else lanes.CONTROL
        assert lanes.lane_of(entry["task"]) in (expected, lanes.SIDE), entry["task"]
    assert lanes.lane_of("jobs.reconcile") == lanes.CONTROL


def test_per_job_side_and_notification_tasks_have_their_lanes() -> None:
    assert {
        name: lanes.lane_of(name) for name in ("jobs.submit_job", "jobs.kill_job", "images.start_build")
    } == dict.fromkeys(("jobs.submit_job", "jobs.kill_job", "images.start_build"), lanes.JOBS)
    assert lanes.lane_of("storage.verify_upload") == lanes.SIDE
    assert lanes.lane_of("notifications.send") == lanes.NOTIFY


def test_queues_derive_from_the_default_queue_and_the_router_uses_them() -> None:
    default = current_app.conf.task_default_queue
    assert [lanes.queue(lane) for lane in lanes.LANES] == [
        default,
        f"{default}-control",
        f"{default}-side",
        f"{default}-notify",
    ]
    assert lanes.route("jobs.reconcile", (), {}, {}) == {"queue": f"{default}-control"}


@pytest.mark.celery
@pytest.mark.django_db(transaction=True)
def test_the_reconciler_runs_while_the_jobs_lane_has_a_backlog(
    tmp_path: Path, alice: User, local_dc: Datacenter
) -> None:
    """Hundreds of per-job messages wait on the jobs lane; the control lane's worker still follows jobs."""
    for _ in range(300):
        heartbeat.delay("backlog")  # per-job lane, and no worker of that lane runs
    job = Job.objects.create(
        owner=alice, datacenter=local_dc, name="fit", uid="fit-ab12c", spec={"parallelism": 1, "pservers": 0},
        state=JobState.KILLED, released=False,
    )  # fmt: skip
    control = start_worker(tmp_path, (lanes.CONTROL,), beat=True, concurrency=2)
    try:
        wait_for(lambda: Job.objects.filter(pk=job.pk, released=True).exists(), "the reconciler to release the job",
                 30, watch=control)  # fmt: skip
    finally:
        control.stop()
    assert not WorkerHeartbeat.objects.exists()  # the backlog was not the control worker's to take
    assert "expired" not in control.log()
