"""Checks that the test control plane behaves like a cluster: validation, Jobs, scheduling, GC, kwok fates, logs."""

from __future__ import annotations

import functools
import os
from pathlib import Path
from typing import Any, TypeVar

import pytest
from kubernetes import client as k8s
from kubernetes.client.exceptions import ApiException

from tests.wait import wait_for
from tools.k8s.testcluster import (
    DELAY,
    EXIT_CODE,
    FATE,
    FakeNode,
    TestCluster,
    pinned_versions,
)

pytestmark = pytest.mark.k8s  # also added by conftest for every test under tests/k8s

T = TypeVar("T")


def pod_body(
    name: str, annotations: dict[str, str] | None = None, image: str = "paddle:latest", **res: str
) -> dict[str, Any]:
    container: dict[str, Any] = {"name": "main", "image": image}
    if res:
        container["resources"] = {"requests": res, "limits": res}
    return {
        "metadata": {"name": name, "annotations": annotations or {}},
        "spec": {"containers": [container], "restartPolicy": "Never"},
    }


def indexed_job(name: str, annotations: dict[str, str], completions: int = 2, **spec: Any) -> dict[str, Any]:
    template = pod_body("", annotations)
    del template["metadata"]["name"]
    return {
        "metadata": {"name": name},
        "spec": {
            "completionMode": "Indexed",
            "completions": completions,
            "parallelism": completions,
            "template": template,
            **spec,
        },
    }


def job_condition(batch: k8s.BatchV1Api, ns: str, name: str, *types: str) -> str | None:
    job = batch.read_namespaced_job_status(name, ns)
    for c in job.status.conditions or []:
        if c.type in types and c.status == "True":
            return str(c.type)
    return None


def pod_phase(core: k8s.CoreV1Api, ns: str, name: str, phase: str) -> k8s.V1Pod | None:
    pod = core.read_namespaced_pod(name, ns)
    return pod if pod.status.phase == phase else None


def test_apiserver_validates_and_runs_pods(
    k8s_cluster: TestCluster, k8s_api: k8s.ApiClient, k8s_namespace: str
) -> None:
    version = k8s.VersionApi(k8s_api).get_code()
    assert version.git_version == pinned_versions()["K8S_VERSION"]
    core = k8s.CoreV1Api(k8s_api)
    with pytest.raises(ApiException) as bad:  # the real server validates names
        core.create_namespaced_pod(k8s_namespace, pod_body("Not_A_DNS_Name"))
    assert bad.value.status == 422

    core.create_namespaced_pod(k8s_namespace, pod_body("plain"))
    pod = wait_for(lambda: pod_phase(core, k8s_namespace, "plain", "Running"), "bare pod Running")
    assert pod.spec.node_name.startswith("kwok-node-")
    assert pod.status.pod_ip
    assert len(core.list_node().items) == 3
    gpus = {n.metadata.name: n.status.allocatable.get("nvidia.com/gpu") for n in core.list_node().items}
    assert gpus == {"kwok-node-0": "4", "kwok-node-1": "4", "kwok-node-2": None}


def test_indexed_job_succeeds(k8s_api: k8s.ApiClient, k8s_namespace: str) -> None:
    batch = k8s.BatchV1Api(k8s_api)
    batch.create_namespaced_job(k8s_namespace, indexed_job("ok", {FATE: "succeed", DELAY: "1s"}))
    # Newer Job controllers set SuccessCriteriaMet first, then Complete once pods are accounted for.
    wait_for(lambda: job_condition(batch, k8s_namespace, "ok", "Complete"), "Job Complete")
    job = batch.read_namespaced_job_status("ok", k8s_namespace)
    assert job.status.succeeded == 2
    assert job.status.completed_indexes == "0,1"


def test_job_without_fate_succeeds_by_default(k8s_api: k8s.ApiClient, k8s_namespace: str) -> None:
    batch = k8s.BatchV1Api(k8s_api)
    batch.create_namespaced_job(k8s_namespace, indexed_job("plain", {}, completions=1))
    wait_for(lambda: job_condition(batch, k8s_namespace, "plain", "Complete"), "Job Complete")


def test_failing_index_fails_job_with_exit_code(k8s_api: k8s.ApiClient, k8s_namespace: str) -> None:
    batch, core = k8s.BatchV1Api(k8s_api), k8s.CoreV1Api(k8s_api)
    body = indexed_job("bad", {FATE: "fail", EXIT_CODE: "3", DELAY: "500ms"}, completions=1, backoffLimitPerIndex=0)
    batch.create_namespaced_job(k8s_namespace, body)
    wait_for(lambda: job_condition(batch, k8s_namespace, "bad", "Failed"), "Job Failed")
    job = batch.read_namespaced_job_status("bad", k8s_namespace)
    assert job.status.failed_indexes == "0"
    pods = core.list_namespaced_pod(k8s_namespace, label_selector="batch.kubernetes.io/job-name=bad").items
    assert len(pods) == 1
    assert pods[0].status.phase == "Failed"
    terminated = pods[0].status.container_statuses[0].state.terminated
    assert (terminated.exit_code, terminated.reason) == (3, "Error")


def test_oomkilled_and_image_pull_error_fates(k8s_api: k8s.ApiClient, k8s_namespace: str) -> None:
    core = k8s.CoreV1Api(k8s_api)
    core.create_namespaced_pod(k8s_namespace, pod_body("oom", {FATE: "oomkilled", DELAY: "200ms"}))
    core.create_namespaced_pod(k8s_namespace, pod_body("pull", image="registry.example/invalid-image:1"))
    core.create_namespaced_pod(k8s_namespace, pod_body("pull2", {FATE: "image-pull-error"}))
    pod = wait_for(lambda: pod_phase(core, k8s_namespace, "oom", "Failed"), "OOMKilled pod Failed")
    terminated = pod.status.container_statuses[0].state.terminated
    assert (terminated.exit_code, terminated.reason) == (137, "OOMKilled")

    def backoff(name: str) -> k8s.V1Pod | None:
        pod = core.read_namespaced_pod(name, k8s_namespace)
        statuses = pod.status.container_statuses or []
        waiting = statuses[0].state.waiting if statuses else None
        return pod if waiting and waiting.reason == "ImagePullBackOff" else None

    for name in ("pull", "pull2"):
        pod = wait_for(functools.partial(backoff, name), f"{name} ImagePullBackOff")
        assert pod.status.phase == "Pending"


def test_gpu_request_beyond_any_node_is_unschedulable(k8s_api: k8s.ApiClient, k8s_namespace: str) -> None:
    core = k8s.CoreV1Api(k8s_api)
    core.create_namespaced_pod(k8s_namespace, pod_body("greedy", **{"nvidia.com/gpu": "8"}))

    def unschedulable() -> k8s.V1PodCondition | None:
        pod = core.read_namespaced_pod("greedy", k8s_namespace)
        return next((c for c in pod.status.conditions or [] if c.type == "PodScheduled" and c.status == "False"), None)

    cond = wait_for(unschedulable, "PodScheduled=False")
    assert cond.reason == "Unschedulable"
    assert cond.message and "nvidia.com/gpu" in cond.message
    assert core.read_namespaced_pod("greedy", k8s_namespace).status.phase == "Pending"


def test_background_delete_of_job_removes_pods(k8s_api: k8s.ApiClient, k8s_namespace: str) -> None:
    batch, core = k8s.BatchV1Api(k8s_api), k8s.CoreV1Api(k8s_api)
    batch.create_namespaced_job(k8s_namespace, indexed_job("hang", {FATE: "hang"}))
    selector = "batch.kubernetes.io/job-name=hang"

    def running() -> bool:
        pods = core.list_namespaced_pod(k8s_namespace, label_selector=selector).items
        return len(pods) == 2 and all(p.status.phase == "Running" for p in pods)

    wait_for(running, "2 hanging pods Running")
    batch.delete_namespaced_job("hang", k8s_namespace, propagation_policy="Background")
    wait_for(lambda: not core.list_namespaced_pod(k8s_namespace, label_selector=selector).items or None, "pods gone")


def test_statefulset_pods_stay_running(k8s_api: k8s.ApiClient, k8s_namespace: str) -> None:
    apps, batch, core = k8s.AppsV1Api(k8s_api), k8s.BatchV1Api(k8s_api), k8s.CoreV1Api(k8s_api)
    core.create_namespaced_service(
        k8s_namespace,
        {"metadata": {"name": "job"}, "spec": {"clusterIP": "None", "selector": {"app": "ps"}, "ports": [{"port": 1}]}},
    )
    template = pod_body("")
    template["metadata"] = {"labels": {"app": "ps"}}
    template["spec"]["restartPolicy"] = "Always"
    apps.create_namespaced_stateful_set(
        k8s_namespace,
        {
            "metadata": {"name": "job-pserver"},
            "spec": {
                "serviceName": "job",
                "replicas": 2,
                "podManagementPolicy": "Parallel",
                "selector": {"matchLabels": {"app": "ps"}},
                "template": template,
            },
        },
    )
    wait_for(
        lambda: (
            (apps.read_namespaced_stateful_set_status("job-pserver", k8s_namespace).status.ready_replicas or 0) == 2
        ),
        "2 ready pservers",
    )
    # A Job pod finishing (default 1s) proves the fate stages ran meanwhile; the pservers must not follow.
    batch.create_namespaced_job(k8s_namespace, indexed_job("trainer", {}, completions=1))
    wait_for(lambda: job_condition(batch, k8s_namespace, "trainer", "Complete"), "trainer Complete")
    for i in range(2):
        pod = core.read_namespaced_pod(f"job-pserver-{i}", k8s_namespace)
        assert pod.status.phase == "Running"
        assert pod.status.container_statuses[0].state.running is not None


def test_pod_logs_are_served(k8s_cluster: TestCluster, k8s_api: k8s.ApiClient, k8s_namespace: str) -> None:
    core = k8s.CoreV1Api(k8s_api)
    core.create_namespaced_pod(k8s_namespace, pod_body("talker", {FATE: "hang"}))
    core.create_namespaced_pod(k8s_namespace, pod_body("other", {FATE: "hang"}))
    wait_for(lambda: pod_phase(core, k8s_namespace, "talker", "Running"), "talker Running")
    wait_for(lambda: pod_phase(core, k8s_namespace, "other", "Running"), "other Running")

    k8s_cluster.set_namespace_log_lines(k8s_namespace, ["namespace default"])
    k8s_cluster.set_pod_log_lines(k8s_namespace, "talker", ["pass 0, cost 1.5", "pass 1, cost 0.7"])
    assert core.read_namespaced_pod_log("talker", k8s_namespace) == "pass 0, cost 1.5\npass 1, cost 0.7\n"
    assert core.read_namespaced_pod_log("talker", k8s_namespace, tail_lines=1) == "pass 1, cost 0.7\n"
    assert core.read_namespaced_pod_log("other", k8s_namespace, container="main") == "namespace default\n"
    # Replacing the lines takes effect at once (the helper waits until kwok serves the new file).
    k8s_cluster.set_pod_log_lines(k8s_namespace, "talker", ["done"], container="main")
    assert core.read_namespaced_pod_log("talker", k8s_namespace, container="main") == "done\n"


def test_stop_leaves_no_process(k8s_cluster: TestCluster, tmp_path: Path) -> None:
    # A second, private cluster: stopping the shared one would break the other tests.
    cluster = TestCluster(k8s_cluster.bin_dir, tmp_path / "k8s", nodes=[FakeNode("solo")])
    cluster.start()
    pids = cluster.pids
    assert set(pids) == {"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok"}
    cluster.stop()
    for name, pid in pids.items():
        with pytest.raises(ProcessLookupError):
            os.killpg(pid, 0)  # neither the component nor anything in its process group survives
        assert not Path(f"/proc/{pid}").exists(), name
