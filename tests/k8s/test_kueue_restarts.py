"""Restart from the checkpoint on failure (spec `max_restarts`, jobs/follow/restarts.py) on an `admission: kueue`
datacenter (the real control plane running Kueue and JobSet; kwok plays the kubelet): the failed run's JobSet is
deleted, and the job goes through the gate to Kueue again as a new JobSet of attempt 2, told why."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth.models import User
from kubernetes import client as k8s
from paddlecloud.contract.jobenv import env_name

from datacenters.models import Datacenter
from jobs.models import EventKind, Job, JobState, Reason
from tests.jobs.test_checkpoint_listing import save
from tests.k8s.engine_helpers import DELAY, EXIT_CODE, FATE, drive, finished, job_in
from tests.k8s.test_kueue_elastic import queued, through_the_gate
from tests.k8s.test_kueue_priorities import jobsets_of

pytestmark = [pytest.mark.django_db, pytest.mark.kueue]


def test_a_failed_kueue_job_runs_again_as_a_new_jobset_from_its_checkpoint(
    kueue_dc: Datacenter, alice: User, kueue_api: k8s.ApiClient
) -> None:
    job = queued(kueue_dc, alice, "crashy", trainers=1, fate={FATE: "fail", EXIT_CODE: "4", DELAY: "3s"},
                 max_restarts=2)  # fmt: skip
    through_the_gate(kueue_dc, job, fate={FATE: "fail", EXIT_CODE: "4", DELAY: "3s"})
    first = jobsets_of(kueue_api, job)[0]["metadata"]["uid"]
    drive(kueue_dc, lambda: job_in(job, JobState.RUNNING), "the job running")
    save(job, 10, {"step": 10, "time": 1_700_000_000.0})  # what its trainer saved before it failed

    def restarting() -> Job | None:
        found = job_in(job, JobState.QUEUED)
        return found if found is not None and found.attempt == 2 and found.preempted_at is None else None

    job = drive(kueue_dc, restarting, "the failed job stopped and queued again as attempt 2")
    assert (job.reason, job.restarts) == (Reason.RESTARTING, 1), job.message
    said = [e.message for e in job.events.filter(kind=EventKind.STATE)]
    assert any("from its checkpoint of step 10 as attempt 2 (restart 1 of 2)" in m for m in said), said
    assert all(js["metadata"]["uid"] != first for js in jobsets_of(kueue_api, job)), "the failed JobSet is deleted"

    through_the_gate(kueue_dc, job, fate={FATE: "succeed", DELAY: "3s"})
    (body,) = jobsets_of(kueue_api, job)
    (replicated,) = body["spec"]["replicatedJobs"]
    (container,) = replicated["template"]["spec"]["template"]["spec"]["containers"]
    env: dict[str, Any] = {e["name"]: e.get("value") for e in container["env"]}
    assert env[env_name("attempt")] == "2"
    assert env[env_name("restart_reason")].startswith("TrainerFailed: trainer 0"), env[env_name("restart_reason")]
    job = drive(kueue_dc, lambda: finished(job), "the second attempt to succeed")
    assert (job.state, job.attempt, job.restarts) == (JobState.SUCCEEDED, 2, 1), job.message
    assert job.failures[0]["checkpoint_step"] == 10 and job.failures[0]["exit_code"] == 4, job.failures
