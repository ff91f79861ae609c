"""A job's keep policy (spec `keep`, `-keep`, `PaddleJob(keep=)`): the one rule (paddlecloud.contract.keeping) the
job's own save and the portal share, the 400s that name `keep.<key>`, and a real job on the local engine whose
checkpoints past its policy are removed by the worker once it ended, its last one never."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import User
from paddlecloud.contract import keeping
from paddlecloud.sdk import spec as sdk_spec
from paddlecloud.sdk.errors import UsageProblem
from paddlecloud.sdk.job import PaddleJob
from rest_framework.test import APIClient

from datacenters.models import Datacenter
from jobs.follow import tasks
from jobs.models import Job, JobState
from tests.jobs.conftest import put_package
from tests.jobs.test_checkpoint_listing import folder_of, save
from tests.jobs.test_local_engine import finished
from tests.jobs.test_queue_api import make_job
from tests.wait import wait_for
from tests.workers import WorkerProcess

GOOD: dict[str, Any] = {"jobname": "kept", "entry": "python train.py", "parallelism": 1, "pservers": 0}
SAVED = [(10, 0.5), (20, 0.2), (30, None), (40, 0.3)]  # (step, the loss it was saved with)


@pytest.mark.parametrize(
    ("best", "latest", "goal", "kept"),
    [
        (1, 1, "minimize", {20, 40}),
        (2, 0, "minimize", {20, 40}),  # step 30 has no metric: never among the best
        (0, 2, "minimize", {30, 40}),
        (1, 0, "maximize", {10}),
        (3, 1, "minimize", {10, 20, 40}),
    ],
)
def test_the_policy_keeps_the_latest_and_the_best(best: int, latest: int, goal: str, kept: set[int]) -> None:
    assert keeping.kept_steps(SAVED, best, latest, goal) == kept


def test_a_policy_never_leaves_a_run_without_a_checkpoint() -> None:
    unscored = [(1, None), (2, None)]
    assert keeping.kept_steps(unscored, best=1, latest=0) == {2}  # the best of none: the latest stays
    assert keeping.kept_steps([(5, 0.1), (7, 0.1)], best=1, latest=0) == {7}  # of two alike, the later
    assert keeping.kept_steps([], best=1, latest=1) == set()


@pytest.mark.parametrize(
    ("keep", "field", "words"),
    [
        ({"best": -1}, "keep.best", "an integer from 0 to 1000"),
        ({"latest": True}, "keep.latest", "an integer from 0 to 1000"),
        ({"latest": 1001}, "keep.latest", "an integer from 0 to 1000"),
        ({"goal": "lowest"}, "keep.goal", "minimize, maximize"),
        ({"newest": 2}, "keep", "must be {best: N, latest: M, goal"),
        ({"best": 0, "latest": 0}, "keep", "at least one checkpoint"),
        ("best", "keep", "must be {best: N, latest: M, goal"),
    ],
)
@pytest.mark.django_db
def test_a_bad_keep_is_a_400_naming_its_key_and_creates_nothing(
    alice_api: APIClient, local_dc: Datacenter, keep: object, field: str, words: str
) -> None:
    response = alice_api.post("/api/v1/jobs", {**GOOD, "keep": keep}, format="json")
    assert response.status_code == 400, response.json()
    assert any(e["field"] == field and words in e["message"] for e in response.json()["errors"]), response.json()
    assert not Job.objects.exists()
    with pytest.raises(UsageProblem, match=f"-keep: {field}"):
        sdk_spec.check({**GOOD, "keep": keep})


def test_paddlectl_and_the_sdk_say_the_policy_as_the_spec_does() -> None:
    assert keeping.parse_flag("best=1, latest=2,goal=maximize") == {"best": 1, "latest": 2, "goal": "maximize"}
    assert keeping.parse_flag("best=x") == {"best": "x"}  # refused by the rule, naming keep.best
    with pytest.raises(ValueError, match="must be KEY=VALUE"):
        keeping.parse_flag("best")
    job = PaddleJob("kept", "python train.py", keep={"latest": 2})
    assert job.to_spec()["keep"] == {"latest": 2}


@pytest.mark.django_db
def test_only_an_ended_released_job_with_a_policy_is_pruned(local_dc: Datacenter, alice: User) -> None:
    policy = {"best": 1, "latest": 1}
    running = make_job(local_dc, alice, "running", state=JobState.RUNNING)
    without = make_job(local_dc, alice, "without", state=JobState.SUCCEEDED, released=True)
    ended = make_job(local_dc, alice, "ended", state=JobState.FAILED, released=True)
    Job.objects.filter(pk__in=[running.pk, ended.pk]).update(spec={**running.spec, "keep": policy})
    for job in (running, without, ended):
        for step, loss in SAVED:
            save(job, step, {"step": step, "time": 1.0, "metric": loss})
    outside = Path(local_dc.storage_root) / "elsewhere"
    outside.mkdir()
    (outside / "keep-me").write_text("not the job's")
    (folder_of(ended) / "step-5").symlink_to(outside)  # a link the job left, an old "step": removed, never followed
    for job in (running, without, ended):
        tasks.prune_checkpoints(job.pk)
        tasks.prune_checkpoints(job.pk)  # twice is once
    left = {job.name: sorted(p.name for p in folder_of(job).iterdir()) for job in (running, without, ended)}
    assert left == {
        "running": ["step-10", "step-20", "step-30", "step-40"],
        "without": ["step-10", "step-20", "step-30", "step-40"],
        "ended": ["step-20", "step-40"],
    }
    assert (outside / "keep-me").read_text() == "not the job's"


TRAIN = """\
from paddlecloud import checkpoint
for step, loss in ((10, 0.5), (20, 0.2), (30, 0.9), (40, 0.3)):
    checkpoint.save(step, lambda folder: (folder / "w.bin").write_bytes(b"w" * 1000), keep=10, metric=loss)
print("saved four", flush=True)
"""


@pytest.mark.celery
@pytest.mark.django_db(transaction=True)
def test_a_real_jobs_checkpoints_past_its_policy_go_once_it_ended(
    alice_api: APIClient, alice: User, local_dc: Datacenter, worker: WorkerProcess, tmp_path: Path
) -> None:
    source = tmp_path / "package"
    source.mkdir()
    (source / "train.py").write_text(TRAIN)
    put_package(local_dc, alice, "kept", source)
    body = {**GOOD, "cpu": "0.5", "keep": {"best": 1, "latest": 1}, "package": "/pfs/local/home/alice/jobs/kept"}
    created = alice_api.post("/api/v1/jobs", body, format="json")
    assert created.status_code == 201, created.json()
    assert created.json()["spec"]["keep"] == {"best": 1, "latest": 1}
    job = finished("kept", worker)
    assert job.state == JobState.SUCCEEDED, job.message

    def pruned() -> list[int] | None:
        steps = sorted(c["step"] for c in alice_api.get(f"/api/v1/jobs/{job.uid}/checkpoints").json()["checkpoints"])
        return steps if steps == [20, 40] else None

    wait_for(pruned, "the checkpoints past the policy to be removed", 60, watch=worker)
