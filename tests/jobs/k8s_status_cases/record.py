"""Re-record the status-rule cases from the real test control plane (not collected by a normal run).

    .venv/bin/python -m pytest tests/jobs/k8s_status_cases/record.py -p tests.k8s.conftest -q

Each scenario submits a job to the kubernetes engine on the test cluster (kwok plays the kubelet and
gives trainer and pserver pods the fate their annotations ask for), drives the reconciler, and saves
the first poll whose observation matches what the scenario is after: the job row's facts and the pods,
Job, StatefulSet and FailedCreate events the engine listed, trimmed to what `k8s_status` reads
(`tests/jobs/k8s_status_cases/__init__.py`). `tests/jobs/test_k8s_status.py` replays them with no cluster.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest
from django.contrib.auth.models import User
from kubernetes import client as k8s

from datacenters.models import Datacenter
from jobs.engines.base import Observation
from jobs.engines.kubernetes import pods as k8s_pods
from jobs.engines.kubernetes import status as k8s_status
from jobs.models import Job, JobState, Reason
from tests.jobs.k8s_status_cases import save, to_case
from tests.k8s.engine_helpers import DELAY, EXIT_CODE, FATE, drive, kill, submit

pytestmark = pytest.mark.django_db

HANG = {FATE: "hang"}
Seen = tuple[k8s_status.Facts, k8s_pods.JobObjects, Observation]
Wanted = Callable[[k8s_status.Facts, k8s_pods.JobObjects, Observation], bool]


@dataclass
class Scenario:
    spec: dict[str, Any]
    wanted: Wanted
    trainers: dict[str, str] = field(default_factory=dict)
    pservers: dict[str, str] = field(default_factory=dict)
    timeout: float = 60.0


def _state(state: str, reason: str = "") -> Wanted:
    return lambda f, o, obs: obs.state == state and obs.reason == reason


def _restarting(f: k8s_status.Facts, o: k8s_pods.JobObjects, obs: Observation) -> bool:
    return any("restarting after" in w.message for w in obs.workers)


def _trainers_job_gone(f: k8s_status.Facts, o: k8s_pods.JobObjects, obs: Observation) -> bool:
    return o.trainer_job is None and bool(o.pods or o.pserver_set)


SCENARIOS = {
    "first_poll": Scenario({"jobname": "first", "pservers": 1}, lambda f, o, obs: True, HANG),
    "running": Scenario({"jobname": "run", "parallelism": 2, "pservers": 1}, _state(JobState.RUNNING), HANG),
    "succeeded": Scenario({"jobname": "ok", "parallelism": 2}, _state(JobState.SUCCEEDED), {FATE: "succeed"}),
    "trainer_restarting": Scenario(
        {"jobname": "retry", "max_retries": 1}, _restarting, {FATE: "fail", EXIT_CODE: "3", DELAY: "300ms"}
    ),
    "backoff_limit": Scenario(
        {"jobname": "backoff", "max_retries": 1},
        _state(JobState.FAILED, Reason.BACKOFF_LIMIT),
        {FATE: "fail", EXIT_CODE: "3", DELAY: "300ms"},
        timeout=90,
    ),
    "trainer_failed": Scenario(
        {"jobname": "bad", "parallelism": 2},
        _state(JobState.FAILED, Reason.TRAINER_FAILED),
        {FATE: "fail", EXIT_CODE: "2", DELAY: "300ms"},
    ),
    "oomkilled": Scenario(
        {"jobname": "oom"}, _state(JobState.FAILED, Reason.OOM_KILLED), {FATE: "oomkilled", DELAY: "300ms"}
    ),
    "pserver_failed": Scenario(
        {"jobname": "lost", "pservers": 2},
        _state(JobState.FAILED, Reason.PSERVER_LOST),
        HANG,
        {FATE: "fail", EXIT_CODE: "137", DELAY: "2s"},
    ),
    "image_pull": Scenario(
        {"jobname": "pull", "image": "registry.example/invalid-image:1"},
        lambda f, o, obs: obs.reason == Reason.IMAGE_PULL,
    ),
    "unschedulable": Scenario(
        {"jobname": "greedy", "gpu": 8}, lambda f, o, obs: obs.reason == Reason.UNSCHEDULABLE, HANG
    ),
    "quota_exceeded": Scenario(
        {"jobname": "big", "cpu": "4", "pending_timeout": 600},
        lambda f, o, obs: obs.reason == Reason.QUOTA_EXCEEDED,
        HANG,
    ),
    "trainers_job_deleted": Scenario({"jobname": "gone", "pservers": 1}, _trainers_job_gone, HANG),
    "pserver_pod_deleted": Scenario(
        {"jobname": "evicted", "pservers": 1}, _state(JobState.FAILED, Reason.PSERVER_LOST), HANG
    ),
}


def _after_start(name: str, job: Job, api: k8s.ApiClient) -> None:
    """What a scenario does to the cluster behind the engine's back once the job runs."""
    ns = job.engine_data["namespace"]
    if name == "trainers_job_deleted":
        k8s.BatchV1Api(api).delete_namespaced_job(f"{job.uid}-trainer", ns, propagation_policy="Background")
    if name == "pserver_pod_deleted":
        k8s.CoreV1Api(api).delete_namespaced_pod(f"{job.uid}-ps-0", ns, grace_period_seconds=0)


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_record(
    name: str, k8s_dc: Datacenter, alice: User, k8s_api: k8s.ApiClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    scenario = SCENARIOS[name]
    if name == "quota_exceeded":
        k8s_dc.default_cpu = "2"
        k8s_dc.save()
    seen: list[Seen] = []
    observe = k8s_status.observe

    def recording(f: k8s_status.Facts, objs: k8s_pods.JobObjects) -> Observation:
        observation = observe(f, objs)
        seen.append((f, objs, observation))
        return observation

    monkeypatch.setattr(k8s_status, "observe", recording)
    job = submit(
        k8s_dc,
        alice,
        scenario.spec,
        trainer_annotations=scenario.trainers or None,
        pserver_annotations=scenario.pservers or None,
    )
    if name in ("trainers_job_deleted", "pserver_pod_deleted"):
        drive(k8s_dc, lambda: Job.objects.get(pk=job.pk).state == JobState.RUNNING or None, "running")
        job.refresh_from_db()
        _after_start(name, job, k8s_api)

    def matched() -> Seen | None:
        return next((s for s in seen if s[0].uid == job.uid and scenario.wanted(*s)), None)

    found = drive(k8s_dc, matched, f"{name}: the wanted observation", scenario.timeout)
    save(name, to_case(found[0], found[1]))
    job.refresh_from_db()
    if job.state not in (JobState.FAILED, JobState.SUCCEEDED, JobState.KILLED):
        kill(job)
