"""A real Celery worker process runs a task through the configured broker; the result is in the database."""

from __future__ import annotations

from pathlib import Path

import pytest

from portal.health.models import WorkerHeartbeat
from portal.health.tasks import heartbeat
from tests.wait import wait_for
from tests.workers import start_worker

pytestmark = [pytest.mark.celery, pytest.mark.django_db(transaction=True)]


def test_a_worker_process_runs_the_heartbeat_task_into_the_database(tmp_path: Path) -> None:
    worker = start_worker(tmp_path)
    try:
        heartbeat.apply_async(args=("test-host-1",), queue=worker.queue)
        heartbeat.apply_async(args=("test-host-1",), queue=worker.queue)
        row = wait_for(
            lambda: WorkerHeartbeat.objects.filter(hostname="test-host-1", beats=2).first(),
            timeout=90,
            what="two heartbeats recorded by the worker",
            watch=worker,
        )
        assert isinstance(row, WorkerHeartbeat)
    finally:
        worker.stop()
    assert worker.process.returncode is not None
