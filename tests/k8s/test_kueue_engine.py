"""The kubernetes engine on an `admission: kueue` datacenter: each job one JobSet admitted whole by Kueue (the real
control plane running Kueue and JobSet; kwok plays the kubelet, fates as in engine_helpers)."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth.models import User
from kubernetes import client as k8s

from datacenters.models import Datacenter, Quota
from jobs.engines.kubernetes import spans
from jobs.models import Job, JobState, Reason, UsageRecord
from tests.k8s.engine_helpers import DELAY, FATE, drive, finished, job_in, kill, nothing_left, objects_of, submit
from tests.wait import wait_for

pytestmark = [pytest.mark.django_db, pytest.mark.kueue]

JOBSET = ("jobset.x-k8s.io", "v1alpha2")
HANG = {FATE: "hang"}
PS_JOB = {"parallelism": 2, "pservers": 2, "cpu": "1", "memory": "1Gi", "pscpu": "1", "psmemory": "1Gi"}


def jobset_of(kueue_api: k8s.ApiClient, job: Job) -> dict[str, Any] | None:
    found = k8s.CustomObjectsApi(kueue_api).list_namespaced_custom_object(
        *JOBSET, job.engine_data["namespace"], "jobsets", field_selector=f"metadata.name={job.uid}"
    )["items"]
    return dict(found[0]) if found else None


def pods_of(kueue_api: k8s.ApiClient, job: Job) -> list[str]:
    return objects_of(kueue_api, job.uid)["Pod"]


def submit_ps(dc: Datacenter, user: User, name: str, trainer_delay: str = "3s") -> Job:
    fate = {FATE: "succeed", DELAY: trainer_delay}
    return submit(dc, user, {"jobname": name, **PS_JOB}, trainer_annotations=fate, pserver_annotations=HANG)


def waiting_for_kueue(job: Job) -> Job | None:
    found = job_in(job, JobState.PENDING)
    return found if found and "insufficient" in found.message and "quota" in found.message else None


def test_a_ps_job_is_one_jobset_admitted_by_kueue_and_succeeds(
    kueue_dc: Datacenter, alice: User, kueue_api: k8s.ApiClient
) -> None:
    job = submit_ps(kueue_dc, alice, "fit")
    assert job.engine_data["layout"] == "jobset"
    body = jobset_of(kueue_api, job)
    assert body is not None and body["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "paddlecloud"
    running = drive(kueue_dc, lambda: job_in(job, JobState.RUNNING), "running through Kueue")
    assert running.trainers_running == 2 and running.pservers_running == 2
    left = objects_of(kueue_api, job.uid)
    # No Service, StatefulSet or plain Job of the portal layout: the JobSet's child Jobs and its pods.
    assert left["StatefulSet"] == [] and sorted(left["Job"]) == [f"{job.uid}-ps-0", f"{job.uid}-trainer-0"]
    assert left["NetworkPolicy"] == [f"{job.uid}-peers"]

    job = drive(kueue_dc, lambda: finished(job), "success")
    assert (job.state, job.reason, job.exit_code) == ("succeeded", "", 0)
    assert {w.name: w.state for w in job.workers.all()} == {
        "pserver-0": "succeeded",
        "pserver-1": "succeeded",
        "trainer-0": "succeeded",
        "trainer-1": "succeeded",
    }
    # Finished: the JobSet is deleted (its quota back to Kueue), and with it everything of the job.
    assert jobset_of(kueue_api, job) is None
    wait_for(lambda: nothing_left(kueue_api, job.uid), "the garbage collector to delete the rest", timeout=90)


def test_a_gang_larger_than_the_quota_waits_whole_with_kueues_reason_and_a_kill_removes_it(
    kueue_dc: Datacenter, alice: User, kueue_api: k8s.ApiClient
) -> None:
    Quota.objects.create(user=alice, datacenter=kueue_dc, cpu="3")  # room for 3 of its 4 one-core pods
    job = submit_ps(kueue_dc, alice, "gang")
    job = drive(kueue_dc, lambda: waiting_for_kueue(job), "Kueue's reason on the pending job")
    print("pending job:", job.reason, job.message)
    assert job.reason == Reason.QUOTA_EXHAUSTED and job.message.startswith("queued by Kueue: ")
    assert pods_of(kueue_api, job) == []
    assert (jobset_of(kueue_api, job) or {})["spec"]["suspend"] is True
    assert {w.state for w in job.workers.all()} == {"pending"}

    job = kill(job)
    assert job.state == JobState.KILLED
    wait_for(
        lambda: jobset_of(kueue_api, job) is None and nothing_left(kueue_api, job.uid), "the killed job's JobSet gone"
    )


def test_two_jobs_that_fit_one_at_a_time_run_one_after_the_other(
    kueue_dc: Datacenter, alice: User, kueue_api: k8s.ApiClient
) -> None:
    first = submit_ps(kueue_dc, alice, "first", trainer_delay="10s")  # 4 cores: all of alice's quota
    drive(kueue_dc, lambda: job_in(first, JobState.RUNNING), "the first job running")
    second = submit_ps(kueue_dc, alice, "second")
    second = drive(kueue_dc, lambda: waiting_for_kueue(second), "the second job queued by Kueue")
    print("second job:", second.reason, second.message)
    assert second.reason == Reason.QUOTA_EXHAUSTED and pods_of(kueue_api, second) == []
    first = drive(kueue_dc, lambda: finished(first), "the first job to end")
    assert first.state == JobState.SUCCEEDED
    drive(kueue_dc, lambda: job_in(second, JobState.RUNNING, JobState.SUCCEEDED), "the second job admitted")
    second = drive(kueue_dc, lambda: finished(second), "the second job to succeed")
    assert second.state == JobState.SUCCEEDED


def test_the_ledger_charges_each_worker_its_pods_own_start_and_end(
    kueue_dc: Datacenter, alice: User, kueue_api: k8s.ApiClient
) -> None:
    job = submit_ps(kueue_dc, alice, "ledger", trainer_delay="4s")
    job = drive(kueue_dc, lambda: finished(job), "success")
    kept = spans.from_json(job.engine_data["spans"])  # read from the pods as their logs were archived
    records = {r.worker: r for r in UsageRecord.objects.filter(job_uid=job.uid)}
    assert sorted(records) == ["pserver-0", "pserver-1", "trainer-0", "trainer-1"]
    for name in ("trainer-0", "trainer-1"):
        started, ended = kept[name]
        assert started is not None and ended is not None
        assert (records[name].started_at, records[name].ended_at) == (started, ended)
        assert records[name].seconds >= 4  # kwok ends a trainer 4 s after it began running (its fake delay)
        assert job.finished_at is not None and ended <= job.finished_at  # the pod ended before the portal saw it
    # The pservers still ran when the trainers were done (JobSet then ends their pods, often before the archive
    # reads them): charged from their start until the job's end, as on the local engine.
    for name in ("pserver-0", "pserver-1"):
        assert kept.get(name, (None, None))[1] is None and records[name].ended_at == job.finished_at
