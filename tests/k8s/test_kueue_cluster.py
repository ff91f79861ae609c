"""Kueue and JobSet on the test control plane: admission of a whole JobSet, gang waiting, objects Kueue must leave
alone, and pending positions from Kueue's visibility API through the API server's aggregation layer."""

from __future__ import annotations

import functools
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client as k8s

from tests.wait import wait_for
from tools.k8s.testcluster import FATE, TestCluster

pytestmark = [pytest.mark.kueue]

KUEUE = ("kueue.x-k8s.io", "v1beta2")
JOBSET = ("jobset.x-k8s.io", "v1alpha2")
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
JOBSET_NAME_LABEL = "jobset.sigs.k8s.io/jobset-name"
FLAVOR = "kwok-cpu"


@pytest.fixture(scope="module")
def kueue_api(kueue_cluster: TestCluster) -> Iterator[k8s.ApiClient]:
    """An admin ApiClient of the Kueue cluster, with the one ResourceFlavor every ClusterQueue here uses."""
    with kueue_cluster.api_client() as api:
        flavor = {"apiVersion": "/".join(KUEUE), "kind": "ResourceFlavor", "metadata": {"name": FLAVOR}}
        k8s.CustomObjectsApi(api).create_cluster_custom_object(*KUEUE, "resourceflavors", flavor)
        yield api


@pytest.fixture
def queue_ns(kueue_cluster: TestCluster, kueue_api: k8s.ApiClient) -> Iterator[str]:
    """A fresh namespace (default ServiceAccount ready); deleted afterwards with the ClusterQueues named after it."""
    name = f"kq-{uuid.uuid4().hex[:8]}"
    core = k8s.CoreV1Api(kueue_api)
    core.create_namespace({"metadata": {"name": name}})
    kueue_cluster.wait_for_default_service_account(name)
    yield name
    core.delete_namespace(name)
    custom = k8s.CustomObjectsApi(kueue_api)
    for cq in custom.list_cluster_custom_object(*KUEUE, "clusterqueues")["items"]:
        if cq["metadata"]["name"].startswith(name):
            custom.delete_cluster_custom_object(*KUEUE, "clusterqueues", cq["metadata"]["name"])


def make_queues(api: k8s.ApiClient, ns: str, cpu: int) -> str:
    """A ClusterQueue `<ns>-cq` with `cpu` nominal cores of FLAVOR and a LocalQueue `lq` in ns pointing at it."""
    custom = k8s.CustomObjectsApi(api)
    cq_name = f"{ns}-cq"
    cluster_queue = {
        "apiVersion": "/".join(KUEUE),
        "kind": "ClusterQueue",
        "metadata": {"name": cq_name},
        "spec": {
            "namespaceSelector": {},
            "resourceGroups": [
                {
                    "coveredResources": ["cpu"],
                    "flavors": [{"name": FLAVOR, "resources": [{"name": "cpu", "nominalQuota": cpu}]}],
                }
            ],
        },
    }
    custom.create_cluster_custom_object(*KUEUE, "clusterqueues", cluster_queue)
    local_queue = {
        "apiVersion": "/".join(KUEUE),
        "kind": "LocalQueue",
        "metadata": {"name": "lq", "namespace": ns},
        "spec": {"clusterQueue": cq_name},
    }
    custom.create_namespaced_custom_object(*KUEUE, ns, "localqueues", local_queue)

    def active() -> bool:
        queue: Any = custom.get_namespaced_custom_object(*KUEUE, ns, "localqueues", "lq")
        status = queue.get("status", {})
        return any(c["type"] == "Active" and c["status"] == "True" for c in status.get("conditions", []))

    wait_for(active, f"LocalQueue {ns}/lq Active")
    return cq_name


def jobset(name: str, pods_per_job: list[int], cpu: str = "1", queue: str | None = "lq") -> dict[str, Any]:
    """A suspended JobSet with one replicated job per entry of `pods_per_job` (that many pods each, `cpu` each);
    its pods stay Running under kwok (fate `hang`) so admitted quota stays in use."""
    resources = {"requests": {"cpu": cpu}, "limits": {"cpu": cpu}}
    container = {"name": "main", "image": "paddle:test", "resources": resources}
    pod = {"metadata": {"annotations": {FATE: "hang"}}, "spec": {"restartPolicy": "Never", "containers": [container]}}
    jobs = [
        {"name": f"rj{i}", "replicas": 1, "template": {"spec": {"parallelism": n, "completions": n, "template": pod}}}
        for i, n in enumerate(pods_per_job)
    ]
    labels = {QUEUE_LABEL: queue} if queue else {}
    return {
        "apiVersion": "/".join(JOBSET),
        "kind": "JobSet",
        "metadata": {"name": name, "labels": labels},
        "spec": {"suspend": True, "replicatedJobs": jobs},
    }


def create_jobset(api: k8s.ApiClient, ns: str, body: dict[str, Any]) -> None:
    k8s.CustomObjectsApi(api).create_namespaced_custom_object(*JOBSET, ns, "jobsets", body)


def workload_of(api: k8s.ApiClient, ns: str, jobset_name: str) -> dict[str, Any] | None:
    """The Workload Kueue made for a JobSet (it owns it), or None before it exists."""
    items = k8s.CustomObjectsApi(api).list_namespaced_custom_object(*KUEUE, ns, "workloads")["items"]
    for wl in items:
        if any(ref["name"] == jobset_name for ref in wl["metadata"].get("ownerReferences", [])):
            return dict(wl)
    return None


def condition(obj: dict[str, Any] | None, kind: str) -> dict[str, Any] | None:
    for cond in (obj or {}).get("status", {}).get("conditions", []):
        if cond["type"] == kind:
            return dict(cond)
    return None


def pods_of(api: k8s.ApiClient, ns: str, jobset_name: str) -> list[k8s.V1Pod]:
    return list(k8s.CoreV1Api(api).list_namespaced_pod(ns, label_selector=f"{JOBSET_NAME_LABEL}={jobset_name}").items)


def suspended(api: k8s.ApiClient, ns: str, jobset_name: str) -> bool:
    obj = k8s.CustomObjectsApi(api).get_namespaced_custom_object(*JOBSET, ns, "jobsets", jobset_name)
    return bool(obj["spec"].get("suspend"))


def test_a_queued_jobset_is_admitted_whole_and_its_pods_run(kueue_api: k8s.ApiClient, queue_ns: str) -> None:
    make_queues(kueue_api, queue_ns, cpu=4)
    create_jobset(kueue_api, queue_ns, jobset("train", [1, 1]))

    admitted = wait_for(
        lambda: (c := condition(workload_of(kueue_api, queue_ns, "train"), "Admitted")) and c["status"] == "True",
        "the JobSet's Workload Admitted",
    )
    assert admitted
    wait_for(lambda: not suspended(kueue_api, queue_ns, "train"), "Kueue to unsuspend the JobSet")

    def all_running() -> list[k8s.V1Pod] | None:
        pods = pods_of(kueue_api, queue_ns, "train")
        return pods if pods and all(p.status.phase == "Running" for p in pods) else None

    running = wait_for(all_running, "both pods Running under kwok")
    assert sorted(p.metadata.labels["jobset.sigs.k8s.io/replicatedjob-name"] for p in running) == ["rj0", "rj1"]
    workload = workload_of(kueue_api, queue_ns, "train")
    assert workload is not None
    assigned = workload["status"]["admission"]["podSetAssignments"]
    assert {a["name"]: a["flavors"]["cpu"] for a in assigned} == {"rj0": FLAVOR, "rj1": FLAVOR}


def test_a_gang_larger_than_the_quota_waits_whole_and_its_workload_says_why(
    kueue_api: k8s.ApiClient, queue_ns: str
) -> None:
    make_queues(kueue_api, queue_ns, cpu=3)
    create_jobset(kueue_api, queue_ns, jobset("gang", [2, 2]))  # 4 pods of 1 cpu on a 3-cpu queue

    def quota_refused() -> dict[str, Any] | None:
        cond = condition(workload_of(kueue_api, queue_ns, "gang"), "QuotaReserved")
        return cond if cond and cond["status"] == "False" and cond.get("message") else None

    reason = wait_for(quota_refused, "Kueue's verdict on the gang's Workload")
    print(f"Workload condition QuotaReserved=False {reason['reason']}: {reason['message']}")
    assert "insufficient" in reason["message"].lower() or "quota" in reason["message"].lower()
    time.sleep(2)  # give JobSet's controller time to make pods if it wrongly would
    assert suspended(kueue_api, queue_ns, "gang")
    assert pods_of(kueue_api, queue_ns, "gang") == []
    jobs = k8s.BatchV1Api(kueue_api).list_namespaced_job(queue_ns, label_selector=f"{JOBSET_NAME_LABEL}=gang").items
    assert all(j.spec.suspend for j in jobs), "every child Job stays suspended: no half of the gang starts"


def test_objects_without_a_queue_name_are_left_alone(kueue_api: k8s.ApiClient, queue_ns: str) -> None:
    batch, core = k8s.BatchV1Api(kueue_api), k8s.CoreV1Api(kueue_api)
    template = {"spec": {"restartPolicy": "Never", "containers": [{"name": "main", "image": "paddle:test"}]}}
    batch.create_namespaced_job(queue_ns, {"metadata": {"name": "plain"}, "spec": {"template": template}})
    core.create_namespaced_pod(queue_ns, {"metadata": {"name": "bare"}, **template})
    unqueued = jobset("no-queue", [1], queue=None)
    unqueued["spec"]["suspend"] = False
    create_jobset(kueue_api, queue_ns, unqueued)

    job = batch.read_namespaced_job("plain", queue_ns)
    assert not job.spec.suspend

    def complete() -> bool:
        conditions = batch.read_namespaced_job_status("plain", queue_ns).status.conditions or []
        return any(c.type == "Complete" and c.status == "True" for c in conditions)

    wait_for(complete, "the plain Job to complete (kwok ends a Job's pods after 1 s)")
    wait_for(lambda: core.read_namespaced_pod("bare", queue_ns).status.phase == "Running", "the bare pod Running")
    wait_for(lambda: pods_of(kueue_api, queue_ns, "no-queue"), "the JobSet without a queue name to make its pod")
    assert workload_of(kueue_api, queue_ns, "plain") is None
    assert k8s.CustomObjectsApi(kueue_api).list_namespaced_custom_object(*KUEUE, queue_ns, "workloads")["items"] == []
    # Nothing of Kueue's stands in the way of pods and Jobs: only its own objects' and JobSets' webhooks are registered.
    hooks = k8s.AdmissionregistrationV1Api(kueue_api).list_mutating_webhook_configuration().items
    hooks += k8s.AdmissionregistrationV1Api(kueue_api).list_validating_webhook_configuration().items
    for config in hooks:
        for hook in config.webhooks:
            resources = {r for rule in hook.rules for r in rule.resources}
            if resources & {"pods", "jobs"}:
                where = f"{config.metadata.name}/{hook.name}"
                assert hook.object_selector is not None, f"{where} would see every one of {resources}"


def test_the_visibility_api_lists_waiting_workloads_with_their_positions(
    kueue_cluster: TestCluster, kueue_api: k8s.ApiClient, queue_ns: str
) -> None:
    cq = make_queues(kueue_api, queue_ns, cpu=1)
    create_jobset(kueue_api, queue_ns, jobset("first", [1]))
    wait_for(lambda: pods_of(kueue_api, queue_ns, "first"), "the first JobSet admitted and its pod made")
    for name in ("second", "third"):
        create_jobset(kueue_api, queue_ns, jobset(name, [1]))
        wait_for(functools.partial(workload_of, kueue_api, queue_ns, name), f"{name}'s Workload")
        # Kueue orders a queue (BestEffortFIFO) by creationTimestamp, which has whole seconds: two Workloads made in
        # the same second tie (and then come in no documented order).
        time.sleep(1.1)

    def both_pending() -> list[dict[str, Any]] | None:
        items = kueue_cluster.pending_workloads(f"clusterqueues/{cq}")
        return items if len(items) == 2 else None

    items = wait_for(both_pending, f"two pending workloads in ClusterQueue {cq}")
    positions = [(i["metadata"]["name"], i["positionInClusterQueue"], i["positionInLocalQueue"]) for i in items]
    print("pending in", cq, "(workload, position in ClusterQueue, in LocalQueue):", positions)
    by_position = sorted(items, key=lambda i: i["positionInClusterQueue"])
    expected = [(workload_of(kueue_api, queue_ns, n) or {})["metadata"]["name"] for n in ("second", "third")]
    assert [i["metadata"]["name"] for i in by_position] == expected
    assert [i["positionInClusterQueue"] for i in by_position] == [0, 1]
    assert all(i["localQueueName"] == "lq" for i in items)
    local = kueue_cluster.pending_workloads(f"namespaces/{queue_ns}/localqueues/lq")
    assert sorted(i["positionInLocalQueue"] for i in local) == [0, 1]
