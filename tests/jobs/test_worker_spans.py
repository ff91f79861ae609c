"""On Kubernetes the ledger charges each worker from its pods' real start to their real end (spans.py), not from
when the reconciler looked; without spans (the local engine) it runs from the worker's start to the job's end."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.contrib.auth.models import User

from datacenters.models import Datacenter
from jobs.engines.base import Observation, WorkerStatus
from jobs.engines.kubernetes import names, spans
from jobs.follow.records import record_workers
from jobs.models import Job, JobState, Role, Worker, WorkerState
from jobs.scheduling import ledger

T0 = datetime(2026, 1, 2, 3, 0, 0, tzinfo=UTC)


def at(seconds: int) -> str:
    return (T0 + timedelta(seconds=seconds)).isoformat().replace("+00:00", "Z")


def pod(role: str, index: int, state: dict[str, Any], last: dict[str, Any] | None = None, start: int = 0) -> Any:
    index_label = names.TRAINER_INDEX if role == "trainer" else names.PSERVER_INDEX
    status = {"state": state, "lastState": {"terminated": last} if last else {}}
    return {
        "metadata": {"name": f"p-{role}-{index}", "labels": {names.ROLE_LABEL: role, index_label: str(index)},
                     "creationTimestamp": at(start)},
        "status": {"startTime": at(start), "containerStatuses": [status]},
    }  # fmt: skip


def test_a_worker_spans_from_its_first_containers_start_to_its_last_containers_end() -> None:
    restarted = pod("pserver", 0, {"terminated": {"startedAt": at(50), "finishedAt": at(90)}},
                    last={"startedAt": at(5), "finishedAt": at(40)}, start=1)  # fmt: skip
    found = spans.worker_spans([
        pod("trainer", 0, {"terminated": {"startedAt": at(3), "finishedAt": at(63)}}),
        restarted,
        pod("trainer", 1, {"running": {"startedAt": at(4)}}),
        pod("trainer", 2, {"waiting": {"reason": "ContainerCreating"}}, start=2),  # accepted, not started: startTime
    ])  # fmt: skip
    assert found == {
        "trainer-0": (T0 + timedelta(seconds=3), T0 + timedelta(seconds=63)),
        "pserver-0": (T0 + timedelta(seconds=5), T0 + timedelta(seconds=90)),
        "trainer-1": (T0 + timedelta(seconds=4), None),  # still running: the ledger ends it with the job
        "trainer-2": (T0 + timedelta(seconds=2), None),
    }
    assert spans.from_json(spans.to_json(found)) == found
    assert spans.from_json("not a mapping") == {} and spans.from_json({"trainer-0": "x"}) == {}


@pytest.fixture
def finished_job(local_dc: Datacenter, alice: User) -> Job:
    job = Job.objects.create(owner=alice, datacenter=local_dc, name="j", uid="j-abcde", state=JobState.SUCCEEDED,
                             spec={"parallelism": 2, "cpu": "1", "memory": "1Gi"},
                             finished_at=T0 + timedelta(seconds=200))  # fmt: skip
    # What the reconciler saw: it looked at 30 s, long after the pods started.
    Worker.objects.create(job=job, role="trainer", index=0, started_at=T0 + timedelta(seconds=30))
    Worker.objects.create(job=job, role="trainer", index=1, started_at=T0 + timedelta(seconds=30))
    Worker.objects.create(job=job, role="trainer", index=2)  # never seen running
    return job


def test_the_ledger_charges_the_pods_real_times_and_the_jobs_end_where_a_pod_has_none(finished_job: Job) -> None:
    pod_times: dict[str, ledger.Span] = {
        "trainer-0": (T0 + timedelta(seconds=3), T0 + timedelta(seconds=63)),
        "trainer-1": (T0 + timedelta(seconds=4), None),
        "trainer-2": (T0 + timedelta(seconds=10), T0 + timedelta(seconds=20)),  # ran between two looks
    }
    records = {r.worker: r for r in ledger.record(finished_job, spans=pod_times, now=T0 + timedelta(seconds=300))}
    assert {name: r.seconds for name, r in records.items()} == {"trainer-0": 60, "trainer-1": 196, "trainer-2": 10}


def test_without_spans_the_ledger_runs_from_the_workers_start_to_the_jobs_end(finished_job: Job) -> None:
    records = ledger.record(finished_job, now=T0 + timedelta(seconds=300))
    assert sorted((r.worker, r.seconds) for r in records) == [("trainer-0", 170), ("trainer-1", 170)]


def test_a_worker_whose_pod_is_gone_keeps_the_start_it_had(finished_job: Job) -> None:
    gone = WorkerStatus(role=Role.TRAINER, index=0, state=WorkerState.FAILED, message="its pod was deleted")
    record_workers(finished_job, Observation(JobState.SUCCEEDED, workers=[gone]))
    assert Worker.objects.get(job=finished_job, index=0).started_at == T0 + timedelta(seconds=30)
