"""The experiments API: a sweep over a job template checked with its key named, trials submitted up to `parallel`
as ordinary jobs, the next ones as trials end, kill, and nobody else's experiment to see (404)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import User
from paddlecloud.contract.layout import CHECKPOINT_META
from rest_framework.test import APIClient

from datacenters.models import Datacenter
from experiments import services
from experiments.models import Experiment
from jobs import services as jobs
from jobs.files.layout import output_dir
from jobs.models import Job, JobState
from jobs.scheduling import cycle
from tests.jobs.conftest import put_package

TEMPLATE: dict[str, Any] = {"entry": "python train.py", "parallelism": 1, "pservers": 0, "cpu": "0.5"}
SWEEP: dict[str, Any] = {
    "name": "lr-sweep",
    "params": {"lr": {"values": [0.01, 0.03]}, "batch": {"values": [32, 64]}},
    "parallel": 2,
    "metric": {"name": "loss", "goal": "minimize"},
}


@pytest.fixture
def package(local_dc: Datacenter, alice: User, tmp_path: Path) -> str:
    source = tmp_path / "sweep"
    source.mkdir()
    (source / "train.py").write_text("print('hello')\n")
    put_package(local_dc, alice, "lr-sweep", source)
    return "/pfs/local/home/alice/jobs/lr-sweep"  # as the user names it


def body(package: str, **change: Any) -> dict[str, Any]:
    """The sweep with `change`; a template given as an object gets the package too."""
    template = change.pop("template", TEMPLATE)
    return {**SWEEP, "template": {**template, "package": package} if isinstance(template, dict) else template, **change}


@pytest.mark.parametrize(
    ("change", "field", "words"),
    [
        ({"search": "asha", "max_trials": 4}, "asha", "required with search: asha"),
        ({"params": {"lr": {"values": []}}}, "params.lr.values", "a list of 1 to 1000"),
        ({"template": {**TEMPLATE, "cpu": "lots"}}, "template.cpu", "is not a quantity"),
        ({"template": {**TEMPLATE, "params": {"lr": 1}}}, "template.params", "the sweep sets it"),
        ({"template": "python train.py"}, "template", "must be an object"),
        ({"then": "python eval.py"}, "then", "must be an object"),
        ({"then": {"entry": "python eval.py", "params": {"lr": 1}}}, "then.params", "the best trial sets it"),
        ({"then": {"entry": "python eval.py", "cpu": "lots"}}, "then.cpu", "is not a quantity"),
        ({"template": {**TEMPLATE, "cpu": "512"}}, "template.quota", "could never start"),
    ],
)
def test_a_bad_sweep_or_template_is_a_400_naming_it_and_creates_nothing(
    alice_api: APIClient, package: str, change: dict[str, Any], field: str, words: str
) -> None:
    response = alice_api.post("/api/v1/experiments", body(package, **change), format="json")
    assert response.status_code == 400, response.json()
    errors = response.json()["errors"]
    assert any(e["field"] == field and words in e["message"] for e in errors), errors
    assert not Experiment.objects.exists() and not Job.objects.exists()


def test_trials_are_submitted_up_to_parallel_and_the_next_as_they_end(
    alice_api: APIClient, bob_api: APIClient, package: str
) -> None:
    created = alice_api.post("/api/v1/experiments", body(package), format="json")
    assert created.status_code == 201, created.json()
    assert created.json()["trials"] == {"total": 4, "waiting": 4} and created.json()["state"] == "running"
    experiment = Experiment.objects.get()
    services.advance(experiment.pk)
    services.advance(experiment.pk)  # twice: still two at once
    jobs_made = Job.objects.order_by("name")
    assert [j.name for j in jobs_made] == ["lr-sweep-0", "lr-sweep-1"]
    assert jobs_made[0].spec["params"] == {"lr": 0.01, "batch": 32} and jobs_made[0].spec["package"] == package
    jobs.kill(jobs_made[0])
    Job.objects.filter(pk=jobs_made[0].pk).update(released=True)  # as the reconciler does once nothing runs
    services.advance(experiment.pk)
    assert sorted(Job.objects.values_list("name", flat=True)) == ["lr-sweep-0", "lr-sweep-1", "lr-sweep-2"]
    trials = alice_api.get("/api/v1/experiments/lr-sweep/trials?ordering=index").json()["results"]
    assert [(t["index"], t["state"]) for t in trials] == [
        (0, "killed"), (1, "queued"), (2, "queued"), (3, "waiting"),
    ]  # fmt: skip
    assert bob_api.get("/api/v1/experiments/lr-sweep").status_code == 404
    assert bob_api.post("/api/v1/experiments/lr-sweep/kill").status_code == 404
    again = alice_api.post("/api/v1/experiments", body(package), format="json")
    assert again.status_code == 409 and again.json()["errors"][0]["field"] == "name"
    killed = alice_api.post("/api/v1/experiments/lr-sweep/kill").json()
    assert killed["state"] == "killed"
    assert set(Job.objects.values_list("state", flat=True)) == {JobState.KILLED}
    assert alice_api.post("/api/v1/experiments/lr-sweep/kill").status_code == 409
    assert alice_api.get("/api/v1/experiments/lr-sweep/trials?ordering=colour").status_code == 400


def test_a_trial_whose_job_was_removed_has_ended_and_the_experiment_can_end(alice_api: APIClient, package: str) -> None:
    created = alice_api.post("/api/v1/experiments", body(package, params={"lr": {"values": [0.1]}}), format="json")
    assert created.status_code == 201, created.json()
    experiment = Experiment.objects.get()
    services.advance(experiment.pk)
    job = Job.objects.get()
    jobs.kill(job)
    jobs.remove(Job.objects.get(pk=job.pk))  # `kill -rm`: the row goes once released, or at once
    Job.objects.filter(pk=job.pk).update(released=True)
    Job.objects.filter(pk=job.pk).delete()
    services.advance(experiment.pk)
    experiment.refresh_from_db()
    assert (experiment.state, experiment.message) == ("failed", "0 of 1 trials succeeded")
    assert list(experiment.trials.values_list("state", "message")) == [("removed", "its job was removed")]


def test_a_full_queue_leaves_the_trial_waiting_and_a_killed_experiment_still_records_its_trials(
    alice_api: APIClient, local_dc: Datacenter, package: str
) -> None:
    local_dc.max_queued_jobs = 1
    local_dc.save()
    assert alice_api.post("/api/v1/experiments", body(package), format="json").status_code == 201
    experiment = Experiment.objects.get()
    assert services.advance(experiment.pk) is False
    states = dict(experiment.trials.values_list("index", "state"))
    assert states == {0: "queued", 1: "waiting", 2: "waiting", 3: "waiting"}  # the queue's refusal passes
    assert alice_api.post("/api/v1/experiments/lr-sweep/kill").status_code == 200
    Job.objects.update(released=True)  # as the reconciler does once nothing of the killed job runs
    services.advance(experiment.pk)
    assert dict(experiment.trials.values_list("index", "state")) == {
        0: "killed", 1: "refused", 2: "refused", 3: "refused",
    }  # fmt: skip


def test_a_template_without_its_package_is_refused(alice_api: APIClient, package: str) -> None:
    template = {k: v for k, v in TEMPLATE.items()}
    response = alice_api.post("/api/v1/experiments", {**SWEEP, "template": template}, format="json")
    assert response.status_code == 400
    assert response.json()["errors"][0]["field"] == "template.package"


def test_two_users_experiments_share_a_full_datacenter_fairly(
    alice_api: APIClient, bob_api: APIClient, local_dc: Datacenter, bob: User, package: str, tmp_path: Path
) -> None:
    """Trials are ordinary jobs, so fair share orders them: alice's sweep, submitted first with four trials at
    once, does not take the whole room from bob's; each cycle admits one of each while both wait."""
    source = tmp_path / "bob-sweep"
    source.mkdir()
    (source / "train.py").write_text("print('hello')\n")
    put_package(local_dc, bob, "lr-sweep", source)
    Datacenter.objects.filter(pk=local_dc.pk).update(capacity_cpu="1")  # room for two 0.5-cpu trials
    for api, owner in ((alice_api, "alice"), (bob_api, "bob")):
        sweep = body(f"/pfs/local/home/{owner}/jobs/lr-sweep", parallel=4)
        assert api.post("/api/v1/experiments", sweep, format="json").status_code == 201
    for experiment in Experiment.objects.order_by("pk"):  # alice's trials are queued first
        services.advance(experiment.pk)
    assert Job.objects.filter(state=JobState.QUEUED).count() == 8
    dc = Datacenter.objects.get(pk=local_dc.pk)
    for _ in range(2):
        admitted = cycle.schedule(dc) or []
        owners = sorted(Job.objects.filter(pk__in=admitted).values_list("owner__username", flat=True))
        assert owners == ["alice", "bob"]
        Job.objects.filter(pk__in=admitted).update(state=JobState.SUCCEEDED, released=True)  # room again


def test_a_preempted_trial_waits_again_and_its_experiment_goes_on_to_succeed(
    alice_api: APIClient, package: str
) -> None:
    sweep = body(package, params={"lr": {"values": [0.1]}})
    assert alice_api.post("/api/v1/experiments", sweep, format="json").status_code == 201
    experiment = Experiment.objects.get()
    services.advance(experiment.pk)
    job = Job.objects.get()
    Job.objects.filter(pk=job.pk).update(state=JobState.RUNNING)
    cycle.mark_preempted(job.pk, "preempted by a higher priority job")
    services.advance(experiment.pk)
    experiment.refresh_from_db()
    trial = experiment.trials.get()
    assert (trial.state, trial.job_id, experiment.state) == (JobState.QUEUED, job.pk, "running")
    assert Job.objects.count() == 1  # the same job runs again (its next attempt), not a new trial
    Job.objects.filter(pk=job.pk).update(state=JobState.SUCCEEDED, released=True)
    services.advance(experiment.pk)
    experiment.refresh_from_db()
    assert (experiment.trials.get().state, experiment.state) == (JobState.SUCCEEDED, "succeeded")


def checkpoint(job: Job, step: int, metric: float | None) -> Path:
    """A checkpoint as paddlecloud.checkpoint.save writes it: step-<n> with a weight file and its meta."""
    folder = output_dir(job.datacenter, job.owner.get_username(), job.name, job.uid) / "checkpoints" / f"step-{step}"
    folder.mkdir(parents=True)
    (folder / "model.pdparams").write_bytes(b"w" * 1000)
    meta = {"step": step, "time": 1.0} | ({"metric": metric} if metric is not None else {})
    (folder / CHECKPOINT_META).write_text(json.dumps(meta))
    return folder


@pytest.mark.parametrize(
    ("keep", "left"),
    [
        (None, [20, 40]),  # the default: the best 1 (the lowest loss, step 20) and the latest 1
        ({"best": 2, "latest": 0}, [20, 40]),  # step 30 has no metric: never among the best
        ({"best": 0, "latest": 2}, [30, 40]),
        ({"best": 3, "latest": 1}, [10, 20, 40]),
    ],
)
def test_a_trial_that_ended_keeps_the_checkpoints_its_experiment_keeps(
    alice_api: APIClient, package: str, keep: dict[str, int] | None, left: list[int]
) -> None:
    sweep = body(package, params={"lr": {"values": [0.1, 0.2]}}, **({"keep": keep} if keep else {}))
    assert alice_api.post("/api/v1/experiments", sweep, format="json").status_code == 201
    experiment = Experiment.objects.get()
    services.advance(experiment.pk)
    ended, running = (t.job for t in experiment.trials.select_related("job__owner", "job__datacenter"))
    assert ended is not None and running is not None
    saved = ((10, 0.5), (20, 0.2), (30, None), (40, 0.3))  # (step, loss)
    folders = {job.pk: {step: checkpoint(job, step, loss) for step, loss in saved} for job in (ended, running)}
    Job.objects.filter(pk=ended.pk).update(state=JobState.SUCCEEDED, released=True)
    Job.objects.filter(pk=running.pk).update(state=JobState.RUNNING)
    services.advance(experiment.pk)
    assert [step for step, folder in folders[ended.pk].items() if folder.exists()] == left
    assert all(folder.exists() for folder in folders[running.pk].values())  # a running trial is never touched
    trials = alice_api.get("/api/v1/experiments/lr-sweep/trials?ordering=index").json()["results"]
    assert [t["checkpoints_pruned"] for t in trials] == [True, False]
    checkpoint(ended, 50, 0.01)  # written after its end (by hand): the policy was applied once, not again
    services.advance(experiment.pk)
    assert (folders[ended.pk][10].parent / "step-50").exists()


@pytest.mark.parametrize(
    ("keep", "field", "words"),
    [
        ({"best": -1}, "keep.best", "an integer from 0 to 1000"),
        ({"latest": "all"}, "keep.latest", "an integer from 0 to 1000"),
        ({"newest": 2}, "keep", "must be {best: N, latest: M}"),
        ({"best": 0, "latest": 0}, "keep", "at least one checkpoint"),
        ("best", "keep", "must be {best: N, latest: M}"),
    ],
)
def test_a_bad_keep_is_a_400_naming_its_key(
    alice_api: APIClient, package: str, keep: object, field: str, words: str
) -> None:
    response = alice_api.post("/api/v1/experiments", body(package, keep=keep), format="json")
    assert response.status_code == 400, response.json()
    assert any(e["field"] == field and words in e["message"] for e in response.json()["errors"]), response.json()
