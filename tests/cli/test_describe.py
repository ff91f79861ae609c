"""paddlectl describe job, the Stalled warning and PROGRESS in get jobs, on real local jobs (the fake package)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from datacenters.models import Datacenter
from tests.cli.conftest import Portal
from tests.wait import wait_for
from tests.workers import WorkerProcess

pytestmark = [pytest.mark.celery, pytest.mark.django_db(transaction=True), pytest.mark.timeout(300)]
FAKE = Path(__file__).resolve().parents[1] / "jobs" / "fake_package"


def test_describe_job_prints_the_spec_workers_events_and_the_failed_workers_last_lines(
    portal: Portal, worker: WorkerProcess
) -> None:
    bad = portal.run("submit", "-jobname", "bad", "-entry", "python train.py", "-parallelism", "2",
                     "-env", "FAKE_FAIL_TRAINER=1", "-env", "FAKE_EXIT_CODE=3", "-wait", str(FAKE))  # fmt: skip
    assert bad.exit_code == 1, (bad.stderr, worker.log()[-2000:])
    described = portal.run("describe", "job", "bad")
    assert described.exit_code == 0, described.stderr
    text = described.stdout
    for section in ("Spec:", "Workers:", "Events:", "Last lines of trainer-1:"):
        assert f"\n{section}\n" in text, text
    assert "State:" in text and "failed" in text and "TrainerFailed" in text
    assert "entry:" in text and "FAKE_EXIT_CODE, FAKE_FAIL_TRAINER" in text  # env: names only, never values
    events = text.split("\nEvents:\n", 1)[1].split("\nLast lines of", 1)[0]
    assert "Submitted" in events and "WorkerExited" in events and "trainer-1" in events, events
    assert "trainer giving up" in text.split("Last lines of trainer-1:", 1)[1]


def test_get_jobs_shows_a_stalled_job(portal: Portal, worker: WorkerProcess) -> None:
    Datacenter.objects.filter(pk=portal.datacenter.pk).update(stall_timeout=3)  # the default, lowered for a test
    quiet = portal.run("submit", "-jobname", "quiet", "-entry", "python train.py", "-stall-action", "warn",
                       "-env", "FAKE_STEPS=1", "-env", "FAKE_STEP_SECONDS=600", str(FAKE))  # fmt: skip
    assert quiet.exit_code == 0, quiet.stderr

    def stalled_row() -> str | None:
        rows = portal.run("get", "jobs").stdout.splitlines()
        return next((row for row in rows if row.startswith("quiet ") and " Stalled " in row), None)

    row = wait_for(stalled_row, "get jobs to show Stalled", 60, interval=1, watch=worker)
    assert "running" in row and "no trainer has written a log line or used CPU since" in row
    assert portal.run("kill", "quiet").exit_code == 0


def test_get_jobs_and_describe_show_the_progress_a_job_logs_then_done(portal: Portal, worker: WorkerProcess) -> None:
    fit = portal.run("submit", "-jobname", "fit", "-entry", "python train.py", "-parallelism", "2",
                     "-env", "FAKE_STEPS=40", "-env", "FAKE_STEP_SECONDS=0.4", "-env", "FAKE_TOTAL_STEPS=40",
                     str(FAKE))  # fmt: skip
    assert fit.exit_code == 0, fit.stderr

    def row_with_progress() -> str | None:
        rows = portal.run("get", "jobs").stdout.splitlines()
        return next((row for row in rows if re.match(r"fit +running .* \d+%", row)), None)

    wait_for(row_with_progress, "get jobs to show a percentage", 90, interval=0.5, watch=worker)
    (job,) = json.loads(portal.run("get", "jobs", "-o", "json").stdout)
    if job["state"] == "running":  # the API's object behind the row (unless it ended in between)
        assert job["progress"]["total_steps"] == 40 and 0 < job["progress"]["step"] <= 40, job
        assert re.search(r"Progress: +\d+%.* \(step \d+ of 40\)", portal.run("describe", "job", "fit").stdout)

    def done_row() -> str | None:
        rows = portal.run("get", "jobs").stdout.splitlines()
        return next((row for row in rows if row.startswith("fit ") and "succeeded" in row and " done" in row), None)

    wait_for(done_row, "get jobs to show done", 90, interval=0.5, watch=worker)

    def final_progress() -> dict[str, Any] | None:
        # The row says done from the final state on; the stored progress is read once more as the job is
        # released, a moment after (jobs.follow.progress.finish).
        (job,) = json.loads(portal.run("get", "jobs", "-o", "json").stdout)
        return job if job["progress"]["step"] == 40 else None

    job = wait_for(final_progress, "the last step as the job's progress", 30, interval=0.5, watch=worker)
    assert job["progress"] == {**job["progress"], "step": 40, "fraction": 1.0, "eta_seconds": None}, job
