"""Forecasts from the plan: positions and estimated starts from the replayed scheduler, against what the real
scheduler then does (tests/jobs/trace.py: the real cycle, ledger and database on a virtual clock), and the basis
each estimate rests on."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.core.cache import cache
from django.utils import timezone
from rest_framework.test import APIClient

from datacenters.models import Datacenter
from jobs.models import Job, JobState
from jobs.scheduling import forecast
from tests.jobs.trace import GI, Clock, Run, Seen, finished_before, replay_trace, spec, virtual


@pytest.fixture
def two_cores(local_dc: Datacenter) -> Datacenter:
    local_dc.capacity_cpu, local_dc.capacity_memory, local_dc.capacity_gpu = "2", "16Gi", 0
    local_dc.save()
    return local_dc


def six_jobs(alice: User, bob: User) -> list[Run]:
    """Two users' bursts, alice's first: long and short runs mixed, so fair share and ends reorder them."""
    return [
        Run("a1", alice, 0, 300), Run("a2", alice, 0, 120), Run("a3", alice, 0, 600),
        Run("b1", bob, 5, 200), Run("b2", bob, 5, 400), Run("b3", bob, 5, 100),
    ]  # fmt: skip


def test_a_six_job_two_user_queue_starts_in_the_forecast_order_at_the_forecast_times(
    two_cores: Datacenter, alice: User, bob: User
) -> None:
    runs = six_jobs(alice, bob)
    for run in runs:  # each name ran before for as long: the estimates rest on history
        finished_before(two_cores, run, run.seconds, timedelta(days=2))
    said: dict[float, Any] = {}

    def look(moment: float, submitted: list[Run], seen: dict[str, Seen]) -> None:
        places = forecast.places(two_cores)
        ids = {s.job_id: name for name, s in seen.items()}
        said[moment] = {ids[job_id]: place for job_id, place in places.items()}

    clock = Clock()
    with virtual(clock):
        start = clock.now
        seen = replay_trace(two_cores, runs, clock, look)
    real_order = sorted((s.started, name) for name, s in seen.items() if s.started and s.started > 5)
    at_last_submit = said[5.0]
    assert [name for _, name in real_order] == sorted(at_last_submit, key=lambda n: at_last_submit[n].position)
    for name, place in at_last_submit.items():
        assert place.basis == "history"
        assert place.estimated_start is not None and place.estimated_end is not None
        real = start + timedelta(seconds=seen[name].started or 0)
        assert abs((place.estimated_start - real).total_seconds()) < 1, name
        ran = (seen[name].ended or 0) - (seen[name].started or 0)
        assert abs((place.estimated_end - place.estimated_start).total_seconds() - ran) < 1


def _job(dc: Datacenter, owner: User, name: str, **fields: Any) -> Job:
    return Job.objects.create(owner=owner, datacenter=dc, name=name, uid=f"{name}-{owner.username}",
                              spec=spec(name, 1), cpu_request=1, memory_request=GI, **fields)  # fmt: skip


def test_estimates_say_what_they_rest_on_and_none_rests_on_nothing(
    two_cores: Datacenter, alice: User, bob: User, alice_api: APIClient
) -> None:
    now = timezone.now()
    # Two running jobs: one whose trainers give an ETA of 60 s, one stalled (its ETA no measure) with no history.
    _job(two_cores, alice, "fast", state=JobState.RUNNING, admitted_at=now, started_at=now,
         progress={"step": 10, "total_steps": 100, "fraction": 0.1, "eta_seconds": 60})  # fmt: skip
    _job(two_cores, bob, "hung", state=JobState.RUNNING, admitted_at=now, started_at=now, stalled_at=now,
         progress={"step": 5, "total_steps": 100, "fraction": 0.05, "eta_seconds": None})  # fmt: skip
    waiting = _job(two_cores, alice, "next")
    behind = _job(two_cores, alice, "after")
    places = forecast.places(two_cores)
    # Nothing finished here yet: `next` starts when `fast` ends (by its progress), for a time nobody knows;
    # `after` waits behind two unknown ends: a position, no estimate.
    assert places[waiting.pk].position == 1 and places[waiting.pk].basis is None
    next_start = places[waiting.pk].estimated_start
    assert next_start is not None and abs((next_start - now).total_seconds() - 60) < 2
    assert places[waiting.pk].estimated_end is None
    assert (places[behind.pk].position, places[behind.pk].estimated_start) == (2, None)
    # One finished job gives an average: now every estimate rests on it at worst, and `after` has one too.
    _job(two_cores, bob, "old", state=JobState.SUCCEEDED, released=True, started_at=now - timedelta(seconds=600),
         finished_at=now - timedelta(seconds=300))  # fmt: skip
    cache.clear()  # a finished job written here, not ended: the queue's fingerprint did not change
    places = forecast.places(two_cores)
    assert places[waiting.pk].basis == "average" and places[behind.pk].estimated_start is not None
    one = alice_api.get("/api/v1/jobs/next").json()
    assert one["queue_position"] == 1 and one["estimate_basis"] == "average"
    assert one["estimated_start"] and one["estimated_end"]
    running = alice_api.get("/api/v1/jobs/fast").json()
    assert running["queue_position"] is None and running["estimate_basis"] == "progress"
    assert running["estimated_start"] is None and running["estimated_end"]
    row = next(r for r in alice_api.get("/api/v1/queue?datacenter=local").json()["results"] if r["job"] == "after")
    assert row["position"] == 2 and row["estimate_basis"] == "average" and row["estimated_end"]


def test_jobs_kueue_holds_are_replayed_in_kueues_order_over_what_runs(local_dc: Datacenter, alice: User) -> None:
    """Kueue's positions given (its visibility API's, per ClusterQueue): the gate let every job through, so the two
    pending ones hold nothing yet; alice's quota (4 cores) takes one 4-core job at a time."""
    local_dc.admission, local_dc.default_cpu = "kueue", "4"
    local_dc.save()
    now = timezone.now()
    _job(local_dc, alice, "before", state=JobState.SUCCEEDED, released=True, started_at=now - timedelta(minutes=20),
         finished_at=now - timedelta(minutes=10))  # fmt: skip
    Job.objects.filter(name="before").update(cpu_request=4)
    running = _job(local_dc, alice, "first", state=JobState.RUNNING, admitted_at=now, started_at=now)
    pending = [_job(local_dc, alice, name, state=JobState.PENDING, admitted_at=now) for name in ("second", "third")]
    Job.objects.filter(owner=alice).update(cpu_request=4)
    pending = [Job.objects.get(pk=job.pk) for job in pending]
    # Kueue's order is not the submission order here: third is first in its ClusterQueue.
    places = forecast.kueue_places(local_dc, pending, {pending[0].uid: 2, pending[1].uid: 1})
    second, third = places[pending[0].pk], places[pending[1].pk]
    assert (third.position, second.position) == (1, 2) and {third.basis, second.basis} == {"average"}
    assert third.estimated_start and second.estimated_start and running.started_at
    assert abs((third.estimated_start - running.started_at).total_seconds() - 600) < 2
    assert abs((second.estimated_start - third.estimated_start).total_seconds() - 600) < 2
