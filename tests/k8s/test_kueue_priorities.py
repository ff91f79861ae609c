"""Priorities and preemption by Kueue on an `admission: kueue` datacenter (the real control plane running Kueue and
JobSet; kwok plays the kubelet): the portal's priority classes as WorkloadPriorityClasses, and a job Kueue evicts
requeued as the portal's own preemption does (attempt + 1, a new JobSet)."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth.models import User
from kubernetes import client as k8s

from datacenters.models import Datacenter
from jobs.engines.kubernetes import names
from jobs.models import Job, JobState, PriorityClass, Reason
from jobs.scheduling import cycle
from jobs.tasks import submit_job
from tests.k8s.engine_helpers import DELAY, FATE, drive, finished, job_in, kill, new_job, start

pytestmark = [pytest.mark.django_db, pytest.mark.kueue]

KUEUE = ("kueue.x-k8s.io", "v1beta2")
JOBSET = ("jobset.x-k8s.io", "v1alpha2")
WHOLE_QUOTA = {"parallelism": 2, "pservers": 2, "cpu": "1", "memory": "1Gi", "pscpu": "1", "psmemory": "1Gi"}
HANG = {FATE: "hang"}
CLASSES = {"low": 10, "normal": 100, "high": 1000}


@pytest.fixture(autouse=True)
def classes(db: None) -> None:
    for name, value in CLASSES.items():
        PriorityClass.objects.update_or_create(name=name, defaults={"value": value, "open_to_all": True})


def submit_with(dc: Datacenter, user: User, name: str, priority_class: str, fate: str = "hang") -> Job:
    """A job of all of the user's quota (4 one-core pods) in `priority_class`; trainers `fate` after 3 s."""
    job = new_job(dc, user, {"jobname": name, **WHOLE_QUOTA}, trainer_annotations={FATE: fate, DELAY: "3s"},
                  pserver_annotations=HANG)  # fmt: skip
    Job.objects.filter(pk=job.pk).update(priority_class=priority_class, priority=CLASSES[priority_class])
    job.refresh_from_db()
    return start(job)


def jobsets_of(kueue_api: k8s.ApiClient, job: Job) -> list[dict[str, Any]]:
    ns = names.namespace_name(job.datacenter.namespace_prefix, job.owner.username)  # also with no engine data
    found = k8s.CustomObjectsApi(kueue_api).list_namespaced_custom_object(
        *JOBSET, ns, "jobsets", field_selector=f"metadata.name={job.uid}"
    )
    return list(found["items"])


def admitted_by_kueue(job: Job) -> Job | None:
    found = job_in(job, JobState.RUNNING)
    return found if found and found.pservers_running == 2 and found.trainers_running == 2 else None


def test_priority_classes_become_workload_priority_classes_and_high_is_admitted_before_an_earlier_low(
    kueue_dc: Datacenter, alice: User, kueue_api: k8s.ApiClient
) -> None:
    first = submit_with(kueue_dc, alice, "first", "high", fate="succeed")
    drive(kueue_dc, lambda: admitted_by_kueue(first), "the first job running")
    low = submit_with(kueue_dc, alice, "low", "low")
    high = submit_with(kueue_dc, alice, "high", "high")
    (body,) = jobsets_of(kueue_api, high)
    assert body["metadata"]["labels"]["kueue.x-k8s.io/priority-class"] == "paddlecloud-high"
    mirrored = k8s.CustomObjectsApi(kueue_api).get_cluster_custom_object(
        *KUEUE, "workloadpriorityclasses", "paddlecloud-low"
    )
    assert mirrored["value"] == 10

    drive(kueue_dc, lambda: finished(first), "the first job to end", timeout=60)
    high = drive(kueue_dc, lambda: admitted_by_kueue(high), "the later high job admitted first")
    low.refresh_from_db()
    assert low.state == JobState.PENDING and "queued by Kueue" in low.message
    for job in (high, low):
        kill(job)


def test_kueue_preempts_a_low_job_for_a_high_one_and_the_low_job_runs_again_as_attempt_2(
    kueue_dc: Datacenter, alice: User, kueue_api: k8s.ApiClient
) -> None:
    low = submit_with(kueue_dc, alice, "low", "low")
    drive(kueue_dc, lambda: admitted_by_kueue(low), "the low job running")
    old_jobset = jobsets_of(kueue_api, low)[0]["metadata"]["uid"]
    high = submit_with(kueue_dc, alice, "high", "high", fate="succeed")

    low = drive(kueue_dc, lambda: job_in(low, JobState.QUEUED), "the low job preempted by Kueue")
    print("preempted:", low.reason, low.message)
    assert low.reason == Reason.PREEMPTED and "preempted by Kueue" in low.message
    requeued = drive(kueue_dc, lambda: job_in(low, JobState.QUEUED) and (low if low.attempt == 2 else None), "requeued")
    assert requeued.preempted_at is None and requeued.admitted_at is None
    assert all(js["metadata"]["uid"] != old_jobset for js in jobsets_of(kueue_api, low)), (
        "the evicted JobSet is deleted"
    )

    high = drive(kueue_dc, lambda: finished(high), "the high job to run and succeed", timeout=60)
    assert high.state == JobState.SUCCEEDED and high.started_at is not None

    assert cycle.schedule(kueue_dc) == [low.pk]  # the portal's gate lets it through to Kueue again
    # The engine's test hook again (the requeue emptied the engine data): pservers run, trainers succeed.
    hook = {"pod_annotations": {FATE: "succeed"}, "pserver_annotations": HANG}
    Job.objects.filter(pk=low.pk).update(engine_data=hook)
    submit_job.apply(args=(low.pk,))
    (body,) = jobsets_of(kueue_api, low)
    assert body["metadata"]["uid"] != old_jobset
    for replicated in body["spec"]["replicatedJobs"]:
        (container,) = replicated["template"]["spec"]["template"]["spec"]["containers"]
        env = {e["name"]: e.get("value") for e in container["env"]}
        assert env["PADDLECLOUD_ATTEMPT"] == "2", replicated["name"]
    low = drive(kueue_dc, lambda: finished(low), "the low job to run again and end", timeout=60)
    assert (low.state, low.attempt) == (JobState.SUCCEEDED, 2)
