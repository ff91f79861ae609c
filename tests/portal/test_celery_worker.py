"""A real Celery worker process runs a task through the configured broker; the result is in the database."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from health.models import WorkerHeartbeat
from health.tasks import heartbeat
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


class Payload:
    """A pickled task argument whose unpickling would create `marker` (or run any command)."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple[Any, ...]:
        return (Path.touch, (self.marker,))


def test_a_worker_refuses_a_pickled_message(tmp_path: Path) -> None:
    """What a process that reaches the broker could push: the worker never unpickles it."""
    marker = tmp_path / "ran"
    worker = start_worker(tmp_path)
    try:
        heartbeat.apply_async(args=(Payload(marker),), queue=worker.queue, serializer="pickle")
        heartbeat.apply_async(args=("after-the-pickle",), queue=worker.queue)  # JSON: runs
        wait_for(lambda: WorkerHeartbeat.objects.filter(hostname="after-the-pickle").exists(),
                 "the JSON message after the pickled one", 90, watch=worker)  # fmt: skip
        assert "Refusing to deserialize untrusted content of type pickle" in worker.log()
    finally:
        worker.stop()
    assert not marker.exists()
