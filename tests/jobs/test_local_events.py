"""Local jobs' process events: a job's start and its processes' exits reach its state at once, not at the next poll."""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.test import override_settings
from rest_framework.test import APIClient

from jobs.engines.local import events
from jobs.models import Job
from tests.wait import wait_for
from tests.workers import WorkerProcess, start_worker


def test_lines_that_are_not_job_ids_are_dropped() -> None:
    assert events.parse(b"12\n7\n12\nx\n-3\n\n" + b"9" * 40 + b"\n") == {12, 7}


def _own_pipe(tmp_path: Path) -> override_settings:
    """This test's own pipe: the run's is read by its control workers, which would take (and drop) these lines."""
    return override_settings(VAR_DIR=tmp_path, PADDLECLOUD_EVENTS_PIPE=tmp_path / "local-engine" / "events")


def test_announcing_with_nobody_listening_neither_blocks_nor_raises(tmp_path: Path) -> None:
    with _own_pipe(tmp_path):
        events.announce(5)  # no pipe yet
        os.close(events.open_pipe())
        events.announce(6)  # a pipe, no reader: a non-blocking open fails quietly


def test_a_listener_hears_each_announced_job(tmp_path: Path) -> None:
    heard: list[set[int]] = []
    stop = threading.Event()
    with _own_pipe(tmp_path):
        listener = threading.Thread(target=events.listen, args=(heard.append, stop, 0.05))
        listener.start()
        try:
            wait_for(lambda: events.pipe_path().exists() or None, "the pipe", 5)
            events.announce(41)
            events.announce(42)
            wait_for(lambda: {41, 42} <= set().union(*heard) or None, "both events", 5)
            assert oct(events.pipe_path().stat().st_mode & 0o777) == "0o600"  # the workers' user only
        finally:
            stop.set()
            listener.join(5)


# Beat's first reconcile would come two minutes after it starts: what moves the job is its events.
SLOW_RECONCILE = {"PADDLECLOUD_RECONCILE_SECONDS": "120"}
SPEC: dict[str, Any] = {"jobname": "fake", "entry": "python train.py", "parallelism": 1, "pservers": 0}


@pytest.fixture
def slow_reconcile_worker(transactional_db: None, tmp_path: Path) -> Iterator[WorkerProcess]:
    process = start_worker(tmp_path, beat=True, concurrency=2, extra_env=SLOW_RECONCILE)
    try:
        wait_for(lambda: " ready." in process.log() or None, "the worker to start", 60, watch=process)
        yield process
    finally:
        process.stop()


@pytest.mark.celery
@pytest.mark.django_db(transaction=True)
def test_a_job_is_seen_running_and_then_finished_without_waiting_for_a_reconcile(
    alice_api: APIClient, fake_package: Path, slow_reconcile_worker: WorkerProcess
) -> None:
    env = {"FAKE_STEPS": "30", "FAKE_STEP_SECONDS": "0.1"}  # about 3 s of training
    assert alice_api.post("/api/v1/jobs", {**SPEC, "env": env}, format="json").status_code == 201
    wait_for(
        lambda: Job.objects.filter(name="fake", state="running").first(), "running", 45, watch=slow_reconcile_worker
    )
    job = wait_for(
        lambda: Job.objects.filter(name="fake", state="succeeded", released=True).first(),
        "succeeded and released",
        45,
        watch=slow_reconcile_worker,
    )
    assert isinstance(job, Job) and job.trainers_succeeded == 1
