"""Priorities and preemption by Kueue on an `admission: kueue` datacenter (the real control plane running Kueue and
JobSet; kwok plays the kubelet): the portal's priority classes as WorkloadPriorityClasses, and a job Kueue evicts
requeued as the portal's own preemption does (attempt + 1, a new JobSet)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.utils import timezone
from kubernetes import client as k8s

from datacenters.models import Datacenter
from jobs.engines.kubernetes import jobset, kueue, names
from jobs.follow.tasks import submit_job
from jobs.models import Job, JobState, PriorityClass, Reason
from jobs.scheduling import cycle, preemption_cost
from tests.k8s.engine_helpers import CLUSTER_WAIT, DELAY, FATE, drive, finished, job_in, kill, new_job, start
from tests.wait import wait_for

pytestmark = [pytest.mark.django_db, pytest.mark.kueue]

KUEUE = ("kueue.x-k8s.io", "v1beta2")
JOBSET = ("jobset.x-k8s.io", "v1alpha2")
WHOLE_QUOTA = {"parallelism": 2, "pservers": 2, "cpu": "1", "memory": "1Gi", "pscpu": "1", "psmemory": "1Gi"}
HALF_QUOTA = {**WHOLE_QUOTA, "parallelism": 1, "pservers": 1}
HANG = {FATE: "hang"}
CLASSES = {"low": 10, "normal": 100, "high": 1000}


@pytest.fixture(autouse=True)
def classes(db: None) -> None:
    for name, value in CLASSES.items():
        PriorityClass.objects.update_or_create(name=name, defaults={"value": value, "open_to_all": True})


def submit_with(
    dc: Datacenter, user: User, name: str, priority_class: str, fate: str = "hang", size: dict[str, Any] = WHOLE_QUOTA
) -> Job:
    """A job of all of the user's quota (4 one-core pods; or `size`) in `priority_class`; trainers `fate` after 3 s."""
    job = new_job(dc, user, {"jobname": name, **size}, trainer_annotations={FATE: fate, DELAY: "3s"},
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
    first = submit_with(kueue_dc, alice, "first", "high")
    drive(kueue_dc, lambda: admitted_by_kueue(first), "the first job running")
    low = submit_with(kueue_dc, alice, "low", "low")
    high = submit_with(kueue_dc, alice, "high", "high")
    (body,) = jobsets_of(kueue_api, high)
    assert body["metadata"]["labels"]["kueue.x-k8s.io/priority-class"] == "paddlecloud-high"
    mirrored = k8s.CustomObjectsApi(kueue_api).get_cluster_custom_object(
        *KUEUE, "workloadpriorityclasses", "paddlecloud-low"
    )
    assert mirrored["value"] == 10

    # The room frees only once both wait in Kueue's queue: when the first job ended by itself, a loaded CI run once
    # made the high job's Workload after that (Kueue's JobSet integration makes it), the low job took the room, and
    # the high one then preempted it (2026-11-30).
    with workloads_shown_on_failure(kueue_api, low, high):
        wait_for(lambda: all(waiting_in_kueue(kueue_api, job) for job in (low, high)), "both queued", CLUSTER_WAIT)
    kill(first)
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

    high = drive(kueue_dc, lambda: finished(high), "the high job to run and succeed")
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
    low = drive(kueue_dc, lambda: finished(low), "the low job to run again and end")
    assert (low.state, low.attempt) == (JobState.SUCCEEDED, 2)


def workload_of(kueue_api: k8s.ApiClient, job: Job) -> dict[str, Any] | None:
    """The job's current JobSet's Workload (Kueue names it after the JobSet and owns it by the JobSet's uid)."""
    jobsets = jobsets_of(kueue_api, job)
    if not jobsets:
        return None
    ns, owner = jobsets[0]["metadata"]["namespace"], jobsets[0]["metadata"]["uid"]
    found = k8s.CustomObjectsApi(kueue_api).list_namespaced_custom_object(*KUEUE, ns, "workloads")["items"]
    owned = [w for w in found if any(ref.get("uid") == owner for ref in w["metadata"].get("ownerReferences", []))]
    return owned[0] if owned else None


def waiting_in_kueue(kueue_api: k8s.ApiClient, job: Job) -> dict[str, Any] | None:
    """The job's Workload once Kueue has looked at it and found no room (QuotaReserved=False), else None."""
    workload = workload_of(kueue_api, job) or {}
    conditions = (workload.get("status") or {}).get("conditions") or []
    refused = any(cond.get("type") == "QuotaReserved" and cond.get("status") == "False" for cond in conditions)
    return workload if refused else None


@contextlib.contextmanager
def workloads_shown_on_failure(kueue_api: k8s.ApiClient, *jobs: Job) -> Iterator[None]:
    """A failed wait on Kueue alone (no reconcile) says where each job's Workload stands: its conditions."""
    try:
        yield
    except AssertionError as failure:
        states = {job.name: (workload_of(kueue_api, job) or {}).get("status", {}).get("conditions") for job in jobs}
        raise AssertionError(f"{failure}; the Workloads' conditions: {states}") from None


def test_an_eviction_kueue_undid_before_the_portal_looked_is_still_a_preemption(
    kueue_dc: Datacenter, alice: User, kueue_api: k8s.ApiClient
) -> None:
    """Kueue evicts the low job and admits it again (the high job went) with no reconcile in between: the JobSet
    runs again as if nothing happened, but its pods were stopped. The Workload's schedulingStats count it, and the
    portal requeues the job as any preemption (attempt 2), so the run is accounted and resumes from its checkpoint."""
    low = submit_with(kueue_dc, alice, "low", "low")
    drive(kueue_dc, lambda: admitted_by_kueue(low), "the low job running")
    high = submit_with(kueue_dc, alice, "high", "high")
    # From here no reconcile, until Kueue has evicted the low job, admitted the high one, and (once the high job
    # is killed) admitted the low one again.
    with workloads_shown_on_failure(kueue_api, low, high):
        wait_for(
            lambda: not jobset.suspended(jobsets_of(kueue_api, high)[0]), "Kueue to admit the high job", CLUSTER_WAIT
        )
    kill(high)  # stops only the high job: its release looks at nothing else

    def readmitted() -> dict[str, Any] | None:
        # The JobSet first: Kueue clears Evicted on the Workload before it lets the JobSet run again.
        if jobset.suspended(jobsets_of(kueue_api, low)[0]):
            return None
        workload = workload_of(kueue_api, low)
        return workload if workload and kueue.evictions(workload) else None

    with workloads_shown_on_failure(kueue_api, low, high):
        again = wait_for(readmitted, "Kueue to admit the evicted low job again", CLUSTER_WAIT)
    print("schedulingStats:", again["status"].get("schedulingStats"))
    assert kueue.eviction(again) is None  # nothing on its conditions says it was evicted any more
    low = drive(kueue_dc, lambda: job_in(low, JobState.QUEUED), "the low job seen preempted")
    assert low.reason == Reason.PREEMPTED and "evicted and admitted again" in low.message, low.message
    drive(kueue_dc, lambda: (found := job_in(low, JobState.QUEUED)) and found.attempt == 2 and found, "requeued")
    kill(low)


def test_kueue_stops_the_low_job_that_loses_the_least_work_since_its_checkpoint(
    kueue_dc: Datacenter, alice: User, kueue_api: k8s.ApiClient
) -> None:
    """Of two low jobs of half the quota each, Kueue alone would stop the one it admitted last. That one has run 20
    minutes without a checkpoint, and the other saved one a moment ago: the portal's boost on their Workloads makes
    Kueue stop the one that saved instead (jobs.scheduling.preemption_cost)."""

    def both_running(job: Job) -> Job | None:
        found = job_in(job, JobState.RUNNING)
        return found if found and found.pservers_running == 1 and found.trainers_running == 1 else None

    older = submit_with(kueue_dc, alice, "older", "low", size=HALF_QUOTA)
    drive(kueue_dc, lambda: both_running(older), "the older low job running")
    newer = submit_with(kueue_dc, alice, "newer", "low", size=HALF_QUOTA)
    drive(kueue_dc, lambda: both_running(newer), "the newer low job running")
    now = timezone.now()
    Job.objects.filter(pk=older.pk).update(checkpointed_at=now)
    Job.objects.filter(pk=newer.pk).update(started_at=now - timedelta(minutes=20), checkpointed_at=None)
    preemption_cost.update(kueue_dc, force=True)

    def boost(job: Job) -> str | None:
        found = workload_of(kueue_api, job) or {}
        return ((found.get("metadata") or {}).get("annotations") or {}).get(kueue.BOOST)

    assert (boost(older), boost(newer)) == (None, "4")  # 20 min unsaved: rank 4 (15-31 min); 0 is written as none
    high = submit_with(kueue_dc, alice, "high", "high", fate="succeed", size=HALF_QUOTA)
    older = drive(kueue_dc, lambda: job_in(older, JobState.QUEUED), "the low job that saved last preempted")
    assert older.reason == Reason.PREEMPTED and "preempted by Kueue" in older.message, older.message
    newer.refresh_from_db()
    assert newer.state == JobState.RUNNING and newer.attempt == 1
    drive(kueue_dc, lambda: finished(high), "the high job to run and succeed")
    for job in (older, newer):
        kill(job)
