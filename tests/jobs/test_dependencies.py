"""Dependencies (spec `after`, `-after NAME[:ok|any|failed]`): the rules and their 400s naming `after`, a job that
waits (WaitingForDependency, never admitted, holding nothing) until its dependency ended as asked, and one that
fails DependencyNeverSatisfied (never started, charged nothing) when it cannot; real jobs on the local engine."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import User
from paddlecloud.contract import predecessors
from paddlecloud.sdk import spec as sdk_spec
from paddlecloud.sdk.errors import UsageProblem
from rest_framework.test import APIClient

from datacenters.models import Datacenter
from jobs import services
from jobs.models import Job, JobDependency, UsageRecord
from jobs.scheduling import cycle
from tests.jobs.conftest import put_package
from tests.jobs.test_local_engine import finished
from tests.wait import wait_for
from tests.workers import WorkerProcess

PACKAGE = "/pfs/local/home/alice/jobs/dep"


def spec(name: str, entry: str = "python ok.py", **more: Any) -> dict[str, Any]:
    return {"jobname": name, "entry": entry, "parallelism": 1, "pservers": 0, "cpu": "0.5", "package": PACKAGE,
            **more}  # fmt: skip


@pytest.fixture
def package(local_dc: Datacenter, alice: User, tmp_path: Path) -> str:
    source = tmp_path / "dep"
    source.mkdir()
    (source / "ok.py").write_text("print('done', flush=True)\n")
    (source / "fail.py").write_text("raise SystemExit(3)\n")
    (source / "slow.py").write_text("import time\ntime.sleep(120)\n")
    put_package(local_dc, alice, "dep", source)
    return PACKAGE


@pytest.mark.parametrize(
    ("after", "rule"),
    [
        ("prep", "must be a list"),
        ([1], "a job's name"),
        (["prep:maybe"], "the condition is one of ok, any, failed"),
        (["Bad Name"], "lowercase"),
        ([f"j{i}" for i in range(17)], "at most 16 jobs"),
        (["prep", "prep:any"], "names a job twice"),
    ],
)
def test_a_bad_after_is_refused_naming_the_rule(after: object, rule: str) -> None:
    problem = predecessors.after_problem(after)
    assert problem is not None and rule in problem
    with pytest.raises(UsageProblem, match="-after"):
        sdk_spec.check({"jobname": "x", "entry": "python t.py", "after": after})


@pytest.mark.django_db
def test_the_api_refuses_an_unknown_or_impossible_dependency_and_creates_nothing(
    alice_api: APIClient, bob_api: APIClient, package: str
) -> None:
    for after, words in [(["nope"], "you have no job named 'nope'"), (["x:often"], "the condition is one of")]:
        answer = alice_api.post("/api/v1/jobs", spec("train", after=after), format="json")
        assert answer.status_code == 400, answer.json()
        assert any(e["field"] == "after" and words in e["message"] for e in answer.json()["errors"]), answer.json()
    assert alice_api.post("/api/v1/jobs", spec("prep"), format="json").status_code == 201
    prep = Job.objects.get(name="prep")
    services.kill(prep)
    answer = alice_api.post("/api/v1/jobs", spec("train", after=["prep:ok"]), format="json")
    assert answer.status_code == 400 and "killed: it can never end ok" in answer.json()["errors"][0]["message"]
    twice = alice_api.post("/api/v1/jobs", spec("train", after=["prep:any", f"{prep.uid}:any"]), format="json")
    assert twice.status_code == 400 and "a second time" in twice.json()["errors"][0]["message"], twice.json()
    mine = bob_api.post("/api/v1/jobs", {**spec("train"), "package": "", "after": ["prep:any"]}, format="json")
    assert mine.status_code == 400 and "you have no job named 'prep'" in str(mine.json())  # alice's is not bob's
    assert not Job.objects.filter(name="train").exists() and not JobDependency.objects.exists()


@pytest.mark.celery
@pytest.mark.django_db(transaction=True)
def test_a_job_waits_for_its_dependency_then_runs(
    alice_api: APIClient, local_dc: Datacenter, worker: WorkerProcess, package: str
) -> None:
    assert alice_api.post("/api/v1/jobs", spec("prep", "python slow.py"), format="json").status_code == 201
    wait_for(lambda: Job.objects.filter(name="prep", state="running").first(), "prep to run", 60, watch=worker)
    made = alice_api.post("/api/v1/jobs", spec("train", after=["prep:any"]), format="json")
    assert made.status_code == 201, made.json()
    assert (made.json()["reason"], made.json()["state"]) == ("WaitingForDependency", "queued")
    assert "waiting for prep (running) to end any" in made.json()["message"]
    train = Job.objects.get(name="train")
    services.hold(train)  # an operator holds it, then releases it: it still waits for prep
    services.release(train)
    train.refresh_from_db()
    assert (train.blocked, train.held, train.reason) == (True, False, "WaitingForDependency"), train.message
    assert "waiting for prep (running) to end any" in train.message
    cycle.schedule(local_dc)  # room enough (prep holds 0.5 of 2 cores): still never admitted while blocked
    train.refresh_from_db()
    assert train.blocked and train.admitted_at is None
    assert alice_api.get("/api/v1/jobs/train").json()["reason"] == "WaitingForDependency"
    services.kill(Job.objects.get(name="prep"))  # ended (killed): `any` is satisfied
    done = finished("train", worker)
    assert done.state == "succeeded" and not done.blocked, (done.state, done.message)
    prep_end = Job.objects.get(name="prep").finished_at
    assert done.started_at is not None and prep_end is not None and done.started_at >= prep_end


@pytest.mark.celery
@pytest.mark.django_db(transaction=True)
def test_a_dependency_that_ends_otherwise_fails_its_dependents_unstarted_and_uncharged(
    alice_api: APIClient, worker: WorkerProcess, package: str
) -> None:
    assert alice_api.post("/api/v1/jobs", spec("prep", "python fail.py"), format="json").status_code == 201
    for name, after in [("train", ["prep"]), ("report", ["prep:failed"]), ("evaluate", ["train:ok"])]:
        made = alice_api.post("/api/v1/jobs", spec(name, after=after), format="json")
        assert made.status_code == 201, made.json()
    assert finished("prep", worker).state == "failed"
    train, evaluate = finished("train", worker), finished("evaluate", worker)
    for job, cause in [(train, "job prep"), (evaluate, "job train")]:
        assert (job.state, job.reason) == ("failed", "DependencyNeverSatisfied"), (job.state, job.reason)
        assert cause in job.message and job.started_at is None and job.admitted_at is None
        assert not UsageRecord.objects.filter(job_uid=job.uid).exists()  # never ran: charged nothing
    assert finished("report", worker).state == "succeeded"  # prep failed, as `report` asked
