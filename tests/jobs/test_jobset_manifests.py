"""The JobSet layout's pure builders (jobset.py, kueue.py) and the watch sources of a Kueue datacenter."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest
from django.core.exceptions import ValidationError

from datacenters.quota import Amounts
from jobs.engines.kubernetes import jobset, kueue, watch
from jobs.engines.kubernetes import manifests as m
from jobs.engines.kubernetes.status import Facts
from jobs.engines.kubernetes.storage import Storage
from jobs.models import JobState, Reason

PLAN = m.Plan(
    uid="fit-abcde", name="fit", username="alice", datacenter="dc", namespace="paddle-alice", trainers=2, pservers=2,
    image="paddle:3", cpu="1", memory="1Gi", gpu=0, pscpu="1", psmemory="1Gi", max_retries=2, entry="python t.py",
    passes=1, package_dir="/pfs/dc/home/alice/jobs/fit", output_dir="/pfs/dc/home/alice/jobs/fit/output/fit-abcde",
    storage=Storage(kind="hostPath", host_path="/srv/pfs"),
)  # fmt: skip


def env_of(template: dict[str, Any]) -> dict[str, str]:
    result = {}
    for var in template["spec"]["containers"][0]["env"]:
        result[var["name"]] = var.get("value") or f"<{var['valueFrom']['fieldRef']['fieldPath']}>"
    return result


def test_a_ps_job_is_one_suspended_jobset_in_the_users_local_queue() -> None:
    body = jobset.jobset(PLAN)
    meta = body["metadata"]
    assert (body["kind"], meta["name"], meta["namespace"]) == ("JobSet", "fit-abcde", "paddle-alice")
    assert body["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "paddlecloud"
    assert body["metadata"]["labels"]["paddlecloud.org/job"] == "fit-abcde"
    spec = body["spec"]
    assert spec["suspend"] is True
    assert spec["network"] == {"enableDNSHostnames": True, "subdomain": "fit-abcde", "publishNotReadyAddresses": True}
    assert spec["successPolicy"] == {"operator": "All", "targetReplicatedJobs": ["trainer"]}
    assert spec["failurePolicy"] == {"maxRestarts": 0}
    ps, trainer = spec["replicatedJobs"]
    assert (ps["name"], ps["replicas"], trainer["name"]) == ("ps", 1, "trainer")
    ps_job, trainer_job = ps["template"]["spec"], trainer["template"]["spec"]
    assert (ps_job["completionMode"], ps_job["completions"], ps_job["parallelism"]) == ("Indexed", 2, 2)
    assert ps_job["template"]["spec"]["restartPolicy"] == "OnFailure"
    assert trainer_job["backoffLimitPerIndex"] == 2 and trainer_job["maxFailedIndexes"] == 0
    assert trainer_job["podReplacementPolicy"] == "Failed"
    assert trainer_job["template"]["spec"]["restartPolicy"] == "Never"
    assert "subdomain" not in trainer_job["template"]["spec"]  # JobSet sets it
    assert ps["template"]["metadata"]["labels"]["paddlecloud.org/role"] == "pserver"
    assert trainer_job["template"]["metadata"]["labels"]["paddlecloud.org/role"] == "trainer"


def test_the_env_contract_names_jobsets_pod_hosts_and_the_completion_index() -> None:
    body = jobset.jobset(PLAN)
    for replicated in body["spec"]["replicatedJobs"]:
        env = env_of(replicated["template"]["spec"]["template"])
        assert env["PADDLECLOUD_PSERVER_HOSTS"] == "fit-abcde-ps-0-0.fit-abcde,fit-abcde-ps-0-1.fit-abcde"
        assert env["PADDLECLOUD_TRAINER_HOSTS"] == "fit-abcde-trainer-0-0.fit-abcde,fit-abcde-trainer-0-1.fit-abcde"
        assert env["PADDLECLOUD_INDEX"] == "<metadata.annotations['batch.kubernetes.io/job-completion-index']>"


def test_a_collective_job_has_no_pserver_replicated_job() -> None:
    body = jobset.jobset(m.Plan(**{**PLAN.__dict__, "pservers": 0}))
    assert [r["name"] for r in body["spec"]["replicatedJobs"]] == ["trainer"]


def test_the_users_cluster_queue_holds_their_quota_cpu_and_memory_on_one_flavor_gpus_on_another() -> None:
    limits = Amounts(cpu=Decimal("3.5"), memory=16 * 2**30, gpu=1)
    queue = kueue.cluster_queue("paddle-alice", "dc", "alice", limits)
    assert queue["metadata"]["name"] == "paddle-alice"
    assert queue["spec"]["namespaceSelector"] == {"matchLabels": {"kubernetes.io/metadata.name": "paddle-alice"}}
    compute, gpus = queue["spec"]["resourceGroups"]
    assert compute["coveredResources"] == ["cpu", "memory"] and gpus["coveredResources"] == ["nvidia.com/gpu"]
    (flavor,) = compute["flavors"]
    assert flavor["name"] == kueue.FLAVOR == kueue.resource_flavor()["metadata"]["name"]
    assert {r["name"]: r["nominalQuota"] for r in flavor["resources"]} == {"cpu": "3.5", "memory": "16Gi"}
    (gpu_flavor,) = gpus["flavors"]
    assert gpu_flavor["name"] == kueue.GPU_FLAVOR == kueue.resource_flavor(kueue.GPU_FLAVOR)["metadata"]["name"]
    assert [(r["name"], r["nominalQuota"]) for r in gpu_flavor["resources"]] == [("nvidia.com/gpu", "1")]
    local = kueue.local_queue("paddle-alice", "dc", "alice")
    assert (local["metadata"]["name"], local["metadata"]["namespace"]) == ("paddlecloud", "paddle-alice")
    assert local["spec"] == {"clusterQueue": "paddle-alice"}


FACTS = Facts(uid="fit-abcde", trainers=2, pservers=2, max_retries=0, age=5.0)
WORKLOAD = {
    "metadata": {
        "namespace": "paddle-alice",
        "ownerReferences": [{"kind": "JobSet", "name": "fit-abcde", "uid": "jobset-uid-1"}],
    },
    "status": {"conditions": [{"type": "QuotaReserved", "status": "False", "reason": "Pending",
                               "message": "couldn't assign flavors to pod set trainer: insufficient quota for cpu"}]},
}  # fmt: skip


@pytest.mark.parametrize("age", [5.0, 60.0])
def test_a_suspended_jobset_is_pending_with_kueues_own_reason(age: float) -> None:
    found = kueue.workloads_by_jobset([WORKLOAD])["jobset-uid-1"]
    seen = kueue.held(Facts(**{**FACTS.__dict__, "age": age}), {"spec": {"suspend": True}}, found)
    assert seen is not None and seen.state == JobState.PENDING and seen.reason == Reason.QUOTA_EXHAUSTED
    assert seen.message == "queued by Kueue: couldn't assign flavors to pod set trainer: insufficient quota for cpu"
    assert len(seen.workers) == 4


def test_an_admitted_jobset_is_read_from_its_child_jobs_and_a_vanished_one_fails() -> None:
    assert kueue.held(FACTS, {"spec": {"suspend": False}}, None) is None
    assert kueue.held(FACTS, None, None) is not None and kueue.held(FACTS, None, None).state == JobState.PENDING  # type: ignore[union-attr]
    gone = kueue.held(Facts(**{**FACTS.__dict__, "age": 60.0}), None, None)
    assert gone is not None and (gone.state, gone.reason) == (JobState.FAILED, Reason.LAUNCH_FAILED)


def test_only_a_kueue_datacenters_mirror_follows_jobsets_and_workloads() -> None:
    assert "JobSet" not in {s.kind for s in watch.sources("sel")}  # their CRDs may be missing there
    assert {s.kind for s in watch.sources("sel", kueue=True)} >= {"JobSet", "Workload"}


@pytest.mark.django_db
def test_kueue_admission_is_refused_on_the_local_engine(local_dc: Any) -> None:
    local_dc.admission = "kueue"
    with pytest.raises(ValidationError) as refused:
        local_dc.full_clean()
    assert "admission" in refused.value.message_dict


def test_a_portal_priority_class_is_mirrored_as_a_workload_priority_class_named_on_the_jobset() -> None:
    body = kueue.workload_priority_class("high", 1000)
    assert (body["kind"], body["metadata"]["name"]) == ("WorkloadPriorityClass", "paddlecloud-high")
    assert body["value"] == 1000
    labels = jobset.jobset(PLAN, kueue.priority_class_name("high"))["metadata"]["labels"]
    assert labels[jobset.PRIORITY_LABEL] == "paddlecloud-high" == labels["kueue.x-k8s.io/priority-class"]
    assert jobset.PRIORITY_LABEL not in jobset.jobset(PLAN)["metadata"]["labels"]


def test_the_cluster_queue_preempts_lower_priority_in_a_datacenter_cohort_with_the_users_weight() -> None:
    limits = Amounts(cpu=Decimal("4"), memory=16 * 2**30, gpu=0)
    spec = kueue.cluster_queue("paddle-alice", "dc", "alice", limits, Decimal("2.500"))["spec"]
    assert spec["cohortName"] == "paddlecloud-dc"
    assert spec["preemption"] == {
        "withinClusterQueue": "LowerPriority",
        "reclaimWithinCohort": "Any",
        "borrowWithinCohort": {"policy": "LowerPriority"},
    }
    assert spec["fairSharing"] == {"weight": "2.5"}
    # Nothing borrowed while the namespace's ResourceQuota still holds the user to their own quota.
    assert {r["borrowingLimit"] for g in spec["resourceGroups"] for r in g["flavors"][0]["resources"]} == {"0"}


EVICTED_CONDITION = {"type": "Evicted", "status": "True", "reason": "Preempted",
                     "message": "Preempted to accommodate a workload due to prioritization in the ClusterQueue"}
EVICTED = {
    **WORKLOAD,
    "status": {"conditions": [
        EVICTED_CONDITION,
        {"type": "QuotaReserved", "status": "False", "reason": "Pending", "message": "insufficient unused quota"},
    ]},
}  # fmt: skip


def test_a_jobset_kueue_evicted_is_reported_preempted_for_the_reconciler_to_requeue() -> None:
    running = Facts(**{**FACTS.__dict__, "running": True})
    seen = kueue.held(running, {"spec": {"suspend": True}}, EVICTED)
    assert seen is not None and (seen.state, seen.reason) == (JobState.QUEUED, Reason.PREEMPTED)
    assert "prioritization in the ClusterQueue" in seen.message
    not_evicted = {**EVICTED, "status": {"conditions": [{**EVICTED_CONDITION, "status": "False"}]}}
    assert kueue.eviction(not_evicted) is None and kueue.eviction(None) is None
    # Evicted, then admitted again before the portal looked: running, read from its child Jobs.
    assert kueue.held(running, {"spec": {"suspend": False}}, EVICTED) is None


def test_an_eviction_kueue_undid_before_the_portal_looked_is_still_a_preemption() -> None:
    running = Facts(**{**FACTS.__dict__, "running": True})
    stats = {"evictions": [{"reason": "Preempted", "underlyingCause": "", "count": 1}]}
    readmitted = {**EVICTED, "status": {"conditions": [], "schedulingStats": stats}}
    assert kueue.evictions(readmitted) == 1 and kueue.evictions(None) == 0
    seen = kueue.held(running, {"spec": {"suspend": False}}, readmitted)
    assert seen is not None and (seen.state, seen.reason) == (JobState.QUEUED, Reason.PREEMPTED)
    assert "evicted and admitted again" in seen.message
