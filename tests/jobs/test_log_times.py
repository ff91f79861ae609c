"""The logs API's `times`: a real job on the local engine, its lines' arrival times as the launcher kept them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from paddlecloud.contract import logtimes
from rest_framework.test import APIClient

from jobs.files.logfiles import line_count
from tests.jobs.test_local_engine import SPEC, finished
from tests.workers import WorkerProcess

pytestmark = [pytest.mark.celery, pytest.mark.django_db(transaction=True)]


def test_every_line_of_a_finished_job_has_its_arrival_time(
    alice_api: APIClient, fake_package: Path, worker: WorkerProcess
) -> None:
    spec: dict[str, Any] = {**SPEC, "pservers": 0, "parallelism": 1, "env": {"FAKE_STEP_SECONDS": "0.3"}}
    assert alice_api.post("/api/v1/jobs", spec, format="json").status_code == 201
    job = finished("fake", worker)
    assert job.state == "succeeded" and job.started_at and job.finished_at

    whole = alice_api.get("/api/v1/jobs/fake/logs?worker=trainer-0").json()
    assert whole["complete"] and len(whole["times"]) == line_count(whole["text"]) > 7
    times: list[float] = whole["times"]
    assert all(isinstance(t, float) for t in times) and times == sorted(times)
    assert job.created_at.timestamp() - 1 <= times[0] and times[-1] <= job.finished_at.timestamp() + 1
    lines = whole["text"].splitlines()
    step = {int(line.split()[3]): t for line, t in zip(lines, times, strict=True) if " step " in line}
    assert step[4] - step[0] >= 4 * 0.3 - 0.05  # the times are when each line came, not when it was read

    # Read in small steps from cursors, and as a tail: the same time for the same line.
    tail = alice_api.get("/api/v1/jobs/fake/logs?worker=trainer-0&tail=3").json()
    assert tail["times"] == times[-3:] and tail["text"] == "\n".join(lines[-3:]) + "\n"
    middle = whole["text"].index("step 2")
    resumed = alice_api.get(f"/api/v1/jobs/fake/logs?worker=trainer-0&cursor={len(whole['text'][:middle].encode())}")
    assert resumed.json()["times"][1:] == times[-len(resumed.json()["times"]) + 1 :]
    assert (Path(job.datacenter.storage_root) / "home" / "alice" / "jobs" / "fake" / "output" / job.uid / "trainer_0"
            / logtimes.TIMES_NAME).stat().st_size % logtimes.RECORD.size == 0
