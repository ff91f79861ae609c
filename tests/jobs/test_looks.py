"""The beat's looks at running jobs (jobs/follow/looks.py): least recently sampled first, never past a run's time."""

from __future__ import annotations

from typing import Any

import pytest

from datacenters.models import Datacenter
from jobs.follow import looks, progress, worker_usage
from jobs.models import Job


def _running(datacenter: Datacenter, owner: Any, name: str) -> Job:
    spec = {"jobname": name, "entry": "python train.py", "parallelism": 1, "pservers": 0}
    return Job.objects.create(
        owner=owner, datacenter=datacenter, name=name, uid=f"{name}-abc12", state="running", spec=spec
    )


@pytest.fixture(autouse=True)
def fresh() -> Any:
    yield
    worker_usage.sampled.forget()
    progress.checked.forget()  # a run looks at progress too: later tests' jobs may reuse these ids


@pytest.mark.django_db
def test_a_run_looks_at_the_jobs_not_looked_at_lately_and_leaves_the_others_for_later(
    local_dc: Datacenter, alice: Any
) -> None:
    lately, never = _running(local_dc, alice, "lately"), _running(local_dc, alice, "never")
    Job.objects.create(owner=alice, datacenter=local_dc, name="done", uid="done-abc12", state="succeeded", spec={})
    worker_usage.sampled.mark(lately.pk)  # sampled a moment ago: not due yet
    assert looks.sample_running() == 1
    assert worker_usage.sampled.last(never.pk) > 0 and worker_usage.sampled.last(lately.pk) > 0
    assert looks.sample_running() == 0  # both were looked at within their interval


@pytest.mark.django_db
def test_a_run_stops_when_its_time_is_spent(local_dc: Datacenter, alice: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    job = _running(local_dc, alice, "late")
    monkeypatch.setattr(looks, "RUN_SECONDS", -1.0)  # spent before the first job
    assert looks.sample_running() == 0
    assert worker_usage.sampled.last(job.pk) == 0.0  # left for the next tick, first in line
