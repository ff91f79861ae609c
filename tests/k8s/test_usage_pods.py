"""jobs/engines/kubernetes/usage.py against the real node's kubelet: a working pod's CPU and memory, read with
the portal's own credentials (deploy/base/rbac.yaml), and nothing for an account the kubelet does not authorize."""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client as k8s
from kubernetes import config as k8s_config

from jobs.engines.kubernetes import client as kube
from jobs.engines.kubernetes import names, usage
from tests.k8s import rbac_helpers
from tests.k8s.conftest import node_datacenter
from tests.wait import wait_for
from tools.k8s.images import read_manifest
from tools.k8s.testcluster import TestCluster

pytestmark = [pytest.mark.pods, pytest.mark.django_db]

MIB = 1024 * 1024
# Holds 64 MiB (written, so the pages are resident) and keeps one core busy.
WORK = (
    "print('working', flush=True)\n"
    "x = bytearray(64 << 20)\n"
    "for i in range(len(x) // 4096): x[i * 4096] = 1\n"
    "while True: sum(range(100000))"
)


@pytest.fixture
def working_pod(k8s_node_cluster: TestCluster) -> Iterator[dict[str, Any]]:
    """A pod of the runtime image on the real node, running WORK, as the API returns it once Running."""
    manifest = read_manifest()
    assert manifest is not None
    ns = f"usage-{uuid.uuid4().hex[:6]}"
    container = {"name": "c", "image": manifest["runtime"]["ref"], "command": ["python", "-c", WORK]}
    body = {  # labelled as a job's trainer 0, so the engine's per-worker mapping reads it too
        "metadata": {"name": "busy", "labels": {names.ROLE_LABEL: "trainer", names.TRAINER_INDEX: "0"}},
        "spec": {"restartPolicy": "Never", "automountServiceAccountToken": False, "containers": [container]},
    }
    with k8s_node_cluster.api_client() as api:
        core = k8s.CoreV1Api(api)
        core.create_namespace({"metadata": {"name": ns}})
        try:
            k8s_node_cluster.wait_for_default_service_account(ns)
            core.create_namespaced_pod(ns, body)

            def running() -> dict[str, Any] | None:
                pod = api.sanitize_for_serialization(core.read_namespaced_pod("busy", ns))
                return pod if pod["status"].get("phase") == "Running" else None

            yield wait_for(running, "the busy pod to run", 120)
        finally:
            core.delete_namespace(ns)


def _kube_from(kubeconfig: str) -> kube.Kube:
    conf = k8s.Configuration()
    k8s_config.load_kube_config_from_dict(yaml.safe_load(kubeconfig), client_configuration=conf, persist_config=False)
    return kube.Kube(k8s.ApiClient(conf))


def test_a_working_pods_memory_and_cpu_come_from_its_kubelet_with_the_portals_rights_alone(
    k8s_node_cluster: TestCluster, working_pod: dict[str, Any], tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with k8s_node_cluster.api_client() as api, rbac_helpers.service_account_kubeconfig(k8s_node_cluster, api) as conf:
        dc = node_datacenter(k8s_node_cluster, tmp_path / "pfs", "usage", "u")
        dc.kubeconfig, dc.kube_context = conf, "portal"
        dc.save()
        portal = kube.for_datacenter(dc)

        def sampled() -> usage.PodUsage | None:
            usage.forget()  # a fresh read each try, not the cached one
            found = usage.read_pods_usage(portal, dc.kubelet_port, [working_pod])
            busy = found.get("busy")
            # The kubelet reports CPU as a rate once it has two samples of the pod's cgroup.
            return busy if busy and busy["memory_bytes"] > 64 * MIB and busy["cpu_cores"] > 0.2 else None

        busy = wait_for(sampled, "the busy pod's usage from its kubelet", 120)
        print(f"the busy pod, from its kubelet: {busy}")
        # What the engine's sample_usage gives the portal: the same figures as the worker's WorkerUsage.
        worker = usage.workers_usage(portal, dc.kubelet_port, [working_pod])["trainer-0"]
        assert worker.memory_bytes > 64 * MIB and worker.cpu_cores > 0 and worker.sampled_at is not None
        assert busy["gpu_util"] is None and busy["gpu_memory_bytes"] is None  # kubelets report no GPU use now
        # The kubelet now checks every caller: the API server's own requests (logs) still pass, with its client cert.
        assert "working" in k8s.CoreV1Api(api).read_namespaced_pod_log("busy", working_pod["metadata"]["namespace"])

        # An account without `get nodes/stats` (the namespace's default ServiceAccount) is refused by the
        # kubelet itself: no usage, one warning, nothing raised.
        token = k8s.CoreV1Api(api).create_namespaced_service_account_token(
            "default", working_pod["metadata"]["namespace"], {"spec": {"expirationSeconds": 600}}
        ).status.token
        stranger = yaml.safe_load(conf)
        stranger["users"][0]["user"]["token"] = token
        usage.forget()
        with caplog.at_level(logging.WARNING, logger=usage.__name__):
            assert usage.read_pods_usage(_kube_from(yaml.safe_dump(stranger)), dc.kubelet_port, [working_pod]) == {}
        assert "answered 403" in caplog.text
