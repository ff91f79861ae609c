"""GPUs on a flavor of their own on a Kueue datacenter: a job's GPU trainers are placed by the GPU flavor's node
labels (an operator's), its pservers (no GPU) are not, and cpu/memory quota is counted once (kwok nodes)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from django.contrib.auth.models import User
from kubernetes import client as k8s

from datacenters.models import Datacenter, Quota
from jobs.engines.kubernetes import kueue
from jobs.models import JobState
from tests.k8s.conftest import GPU_NODE_LABEL
from tests.k8s.engine_helpers import DELAY, FATE, drive, finished, job_in, submit

pytestmark = [pytest.mark.django_db, pytest.mark.kueue]

KUEUE = ("kueue.x-k8s.io", "v1beta2")


@pytest.fixture
def gpu_flavor_on_gpu_nodes(kueue_api: k8s.ApiClient) -> Iterator[None]:
    """What an operator does: the portal's GPU flavor gets the GPU nodes' label (made here if no job made it yet)."""
    custom = k8s.CustomObjectsApi(kueue_api)
    try:
        custom.create_cluster_custom_object(*KUEUE, "resourceflavors", kueue.resource_flavor(kueue.GPU_FLAVOR))
    except k8s.ApiException as exc:
        assert exc.status == 409, exc
    labelled = {"spec": {"nodeLabels": {GPU_NODE_LABEL: "yes"}}}
    custom.patch_cluster_custom_object(*KUEUE, "resourceflavors", kueue.GPU_FLAVOR, labelled)
    yield
    unlabelled = {"spec": {"nodeLabels": None}}
    custom.patch_cluster_custom_object(*KUEUE, "resourceflavors", kueue.GPU_FLAVOR, unlabelled)


def pods_by_role(kueue_api: k8s.ApiClient, uid: str) -> dict[str, list[Any]]:
    pods = k8s.CoreV1Api(kueue_api).list_pod_for_all_namespaces(label_selector=f"paddlecloud.org/job={uid}").items
    found: dict[str, list[Any]] = {"ps": [], "trainer": []}
    for pod in pods:
        found["ps" if "-ps-" in str(pod.metadata.name) else "trainer"].append(pod)
    return found


def test_gpu_trainers_land_on_the_gpu_flavors_nodes_and_pservers_anywhere(
    kueue_dc: Datacenter, alice: User, kueue_api: k8s.ApiClient, gpu_flavor_on_gpu_nodes: None
) -> None:
    Quota.objects.create(user=alice, datacenter=kueue_dc, cpu="4", memory="16Gi", gpu=2)
    spec = {"jobname": "gpus", "parallelism": 2, "pservers": 1, "gpu": 1, "cpu": "1", "memory": "1Gi",
            "pscpu": "1", "psmemory": "1Gi"}  # fmt: skip
    job = submit(kueue_dc, alice, spec, trainer_annotations={FATE: "succeed", DELAY: "5s"},
                 pserver_annotations={FATE: "hang"})  # fmt: skip
    running = drive(kueue_dc, lambda: job_in(job, JobState.RUNNING), "running on the GPU node")
    pods = pods_by_role(kueue_api, running.uid)
    assert len(pods["trainer"]) == 2 and len(pods["ps"]) == 1
    for trainer in pods["trainer"]:
        assert (trainer.spec.node_selector or {}).get(GPU_NODE_LABEL) == "yes"
        assert trainer.spec.node_name == "kueue-gpu-0"
    (pserver,) = pods["ps"]
    assert GPU_NODE_LABEL not in (pserver.spec.node_selector or {})  # asks no GPU: no GPU flavor, no GPU node rule
    done = drive(kueue_dc, lambda: finished(job), "success")
    assert done.state == JobState.SUCCEEDED, done.message
