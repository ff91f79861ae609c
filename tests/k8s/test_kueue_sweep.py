"""A sweep on an `admission: kueue` datacenter: its trials are ordinary jobs, each one JobSet queued and admitted by
Kueue within the owner's quota (here two at a time), each told its params, experiment and trial; nothing in the
experiment knows the engine (the real control plane running Kueue and JobSet; kwok pods)."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth.models import User
from kubernetes import client as k8s

from datacenters.models import Datacenter
from experiments import services
from experiments.models import Experiment
from jobs.follow.tasks import submit_job
from jobs.models import Job, JobState
from jobs.scheduling import cycle
from tests.k8s.engine_helpers import drive, put_package
from tests.k8s.test_kueue_engine import jobset_of

pytestmark = [pytest.mark.django_db, pytest.mark.kueue]


def env_of(body: dict[str, Any]) -> dict[str, str]:
    replicated = body["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
    return {e["name"]: e.get("value", "") for e in replicated["containers"][0].get("env", [])}


def test_a_sweeps_trials_are_jobsets_that_kueue_admits_within_the_quota(
    kueue_dc: Datacenter, alice: User, kueue_api: k8s.ApiClient
) -> None:
    put_package(kueue_dc, alice, "sweep")
    template = {"entry": "python train.py", "parallelism": 1, "pservers": 0, "cpu": "2", "memory": "1Gi",
                "package": f"/pfs/{kueue_dc.name}/home/alice/jobs/sweep"}  # fmt: skip
    sweep = {"name": "sweep", "params": {"lr": {"values": [0.1, 0.2, 0.3, 0.4]}}, "parallel": 4,
             "metric": {"name": "loss"}, "template": template}  # fmt: skip
    experiment = services.create(alice, sweep)
    services.advance(experiment.pk)  # four trials, four ordinary jobs in the queue
    trials = list(Job.objects.filter(owner=alice).order_by("name"))
    assert [j.name for j in trials] == ["sweep-0", "sweep-1", "sweep-2", "sweep-3"]
    for job_id in cycle.schedule(kueue_dc) or []:  # the portal's gate lets each through to Kueue
        submit_job.apply(args=[job_id])
    seen_held = set()

    def all_done() -> bool:
        for job in trials:
            job.refresh_from_db()
            if job.state == JobState.PENDING and "quota" in job.message:
                seen_held.add(job.name)  # Kueue holds it: alice's 4 cores fit two 2-core trials at once
        return all(j.state == JobState.SUCCEEDED and j.released for j in trials)

    drive(kueue_dc, all_done, "every trial to succeed through Kueue")
    assert seen_held, "Kueue never held a trial: the quota should fit two of four at once"
    for index, job in enumerate(trials):
        assert job.engine_data["layout"] == "jobset"
        assert job.spec["params"] == {"lr": [0.1, 0.2, 0.3, 0.4][index]}
    services.advance(experiment.pk)
    ended = Experiment.objects.get(pk=experiment.pk)
    assert (ended.state, ended.message) == ("succeeded", "4 of 4 trials succeeded")


def test_each_trial_is_told_its_params_experiment_and_trial(
    kueue_dc: Datacenter, alice: User, kueue_api: k8s.ApiClient
) -> None:
    put_package(kueue_dc, alice, "one")
    template = {"entry": "python train.py", "parallelism": 1, "pservers": 0, "cpu": "1", "memory": "1Gi",
                "package": f"/pfs/{kueue_dc.name}/home/alice/jobs/one"}  # fmt: skip
    experiment = services.create(alice, {"name": "one", "params": {"lr": {"values": [0.5]}}, "template": template})
    services.advance(experiment.pk)
    job = Job.objects.get(name="one-0")
    for job_id in cycle.schedule(kueue_dc) or []:
        submit_job.apply(args=[job_id])
    job.refresh_from_db()
    body = jobset_of(kueue_api, job)
    assert body is not None and body["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "paddlecloud"
    env = env_of(body)
    assert env["PADDLECLOUD_PARAMS"] == '{"lr": 0.5}'
    assert (env["PADDLECLOUD_EXPERIMENT"], env["PADDLECLOUD_TRIAL"]) == (experiment.uid, "0")
