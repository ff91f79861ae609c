"""The objects the kubernetes engine makes: accepted by the real API server, with the labels, env,
volumes, resources and pull secrets the launcher and the cluster need (PS mode and collective mode)."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest
from django.contrib.auth.models import User
from kubernetes import client as k8s

from datacenters.models import Datacenter, StorageKind
from jobs.engines import engine_for
from jobs.engines.base import EngineError
from jobs.engines.kubernetes import manifests as m
from jobs.engines.kubernetes import names
from jobs.follow.records import RECORDS
from registry.models import RegistrySecret
from tests.k8s.engine_helpers import kill, new_job, start
from tests.wait import wait_for

pytestmark = pytest.mark.django_db


def env_of(container: Any) -> dict[str, str]:
    result = {}
    for var in container.env:
        result[var.name] = var.value if var.value_from is None else f"<{var.value_from.field_ref.field_path}>"
    return result


def test_names_are_dns_safe_and_collision_safe() -> None:
    assert names.namespace_name("paddle-", "alice") == "paddle-alice"
    mixed, lower = names.namespace_name("paddle-", "Alice"), names.namespace_name("paddle-", "alice")
    assert mixed != lower and mixed.startswith("paddle-alice-")
    assert names.dns_safe("a.b") != names.dns_safe("a_b")
    assert names.dns_safe("a.b").startswith("a-b-")
    long = names.namespace_name("paddle-", "x" * 100)
    assert len(long) <= 63 and long.startswith("paddle-xxx")
    assert names.namespace_name("", "default") != "default"
    assert names.namespace_name("", "kube-system").startswith("kube-system-")
    assert names.namespace_name("", "paddlecloud").startswith("paddlecloud-")  # the portal's own (deploy/base)
    assert names.dns_safe("@@@").startswith("user-")
    # The longest job name still gives valid object and host names.
    uid = "a" * 40 + "-abcde"
    assert len(names.pserver_set_name(uid)) <= 52  # StatefulSet pods label <set>-<10-char hash> (63 max)
    assert len(names.trainer_host(uid, 999).split(".")[0]) <= 63


def test_ps_job_objects_are_accepted_with_the_env_contract(
    k8s_dc: Datacenter, alice: User, k8s_api: k8s.ApiClient
) -> None:
    RegistrySecret.objects.create(owner=alice, name="hub", server="registry.example:5000", username="al", password="pw")
    spec = {
        "jobname": "ps",
        "parallelism": 2,
        "pservers": 2,
        "cpu": "2",
        "memory": "3Gi",
        "gpu": 1,
        "pscpu": "500m",
        "psmemory": "1Gi",
        "max_retries": 2,
        "passes": 3,
        "registry": "hub",
        "env": {"MY_FLAG": "1"},
    }
    job = start(new_job(k8s_dc, alice, spec, trainer_annotations={"paddlecloud.org/fake-fate": "hang"}))
    ns = job.engine_data["namespace"]
    assert ns == f"{k8s_dc.namespace_prefix}alice"
    core, apps, batch = k8s.CoreV1Api(k8s_api), k8s.AppsV1Api(k8s_api), k8s.BatchV1Api(k8s_api)
    common = {
        "app.kubernetes.io/managed-by": "paddlecloud",
        "paddlecloud.org/datacenter": k8s_dc.name,
        "paddlecloud.org/user": "alice",
        "paddlecloud.org/job": job.uid,
    }

    namespace = core.read_namespace(ns)
    assert namespace.metadata.labels["paddlecloud.org/user"] == "alice"
    quota = core.read_namespaced_resource_quota("paddlecloud-quota", ns)
    assert quota.spec.hard["requests.cpu"] == "64" and quota.spec.hard["requests.nvidia.com/gpu"] == "16"
    assert quota.spec.hard["limits.memory"] == "256Gi"

    secret = core.read_namespaced_secret("pcr-hub", ns)
    assert secret.type == "kubernetes.io/dockerconfigjson"
    config = json.loads(base64.b64decode(secret.data[".dockerconfigjson"]))
    login = config["auths"]["registry.example:5000"]
    assert (login["username"], login["password"]) == ("al", "pw")
    assert base64.b64decode(login["auth"]).decode() == "al:pw"

    svc = core.read_namespaced_service(job.uid, ns)
    assert svc.spec.cluster_ip == "None" and svc.spec.publish_not_ready_addresses
    assert svc.spec.selector == {"paddlecloud.org/job": job.uid}
    assert svc.metadata.labels == common

    sts = apps.read_namespaced_stateful_set(f"{job.uid}-ps", ns)
    trainers = batch.read_namespaced_job(f"{job.uid}-trainer", ns)
    for obj, role in ((sts, "pserver"), (trainers, "trainer")):
        assert obj.metadata.labels == {**common, "paddlecloud.org/role": role}
        assert obj.spec.template.metadata.labels.items() >= {**common, "paddlecloud.org/role": role}.items()
        [owner] = obj.metadata.owner_references or []
        assert (owner.kind, owner.name, owner.uid) == ("Service", job.uid, svc.metadata.uid)
        pod = obj.spec.template.spec
        assert [s.name for s in pod.image_pull_secrets] == ["pcr-hub"]
        assert pod.automount_service_account_token is False
        # The uid the engine hands the job's folders to (settings.PADDLECLOUD_POD_UID), never root.
        sc = pod.security_context
        assert (sc.run_as_user, sc.run_as_group, sc.run_as_non_root) == (1000, 1000, True)
        [container] = pod.containers
        assert container.command == ["paddlecloud-launch"]
        assert container.image == "registry.example/paddle:3.0.0-gpu"  # gpu > 0: the datacenter's GPU image
        mounts = {v.mount_path: (v.name, bool(v.read_only)) for v in container.volume_mounts}
        home, public = f"/pfs/{k8s_dc.name}/home/alice", f"/pfs/{k8s_dc.name}/public"
        assert mounts == {home: ("pfs-home", False), public: ("pfs-public", True)}
        volumes = {v.name: v.host_path.path for v in pod.volumes}
        assert volumes == {"pfs-home": f"{k8s_dc.host_path}/home/alice", "pfs-public": f"{k8s_dc.host_path}/public"}
        env = env_of(container)
        assert env["MY_FLAG"] == "1"
        assert env["PADDLECLOUD_ROLE"] == role
        assert env["PADDLECLOUD_TRAINERS"] == "2" and env["PADDLECLOUD_PSERVERS"] == "2"
        assert env["PADDLECLOUD_PSERVER_HOSTS"] == f"{job.uid}-ps-0.{job.uid},{job.uid}-ps-1.{job.uid}"
        assert env["PADDLECLOUD_TRAINER_HOSTS"] == f"{job.uid}-trainer-0.{job.uid},{job.uid}-trainer-1.{job.uid}"
        assert env["PADDLECLOUD_PSERVER_PORTS"] == "7164" and env["PADDLECLOUD_TRAINER_PORTS"] == "7165"
        assert env["PADDLECLOUD_GLOO_PORT"] == "7166" and env["PADDLECLOUD_MASTER_PORT"] == "7167"
        assert env["PADDLECLOUD_PACKAGE_DIR"] == f"/pfs/{k8s_dc.name}/home/alice/jobs/ps"
        assert env["PADDLECLOUD_OUTPUT_DIR"] == f"/pfs/{k8s_dc.name}/home/alice/jobs/ps/output/{job.uid}"
        assert env["PADDLECLOUD_ENTRY"] == "python train.py" and env["PADDLECLOUD_PASSES"] == "3"
        assert env["PADDLECLOUD_JOB_NAME"] == "ps" and env["PADDLECLOUD_USERNAME"] == "alice"
        assert env["PADDLECLOUD_DATACENTER"] == k8s_dc.name
        assert env["PADDLECLOUD_POD_IP"] == "<status.podIP>"
        assert env["PADDLECLOUD_NODE_IP"] == "<status.hostIP>" and env["PADDLECLOUD_ISOLATION_PORT"] == "10250"
        assert "SECRET_KEY" not in env and "DATABASE_URL" not in env
        if role == "trainer":
            assert env["PADDLECLOUD_INDEX"] == "<metadata.annotations['batch.kubernetes.io/job-completion-index']>"
            assert container.resources.requests == {"cpu": "2", "memory": "3Gi", "nvidia.com/gpu": "1"}
            assert container.resources.limits == container.resources.requests
            assert pod.restart_policy == "Never" and pod.subdomain == job.uid
        else:
            assert env["PADDLECLOUD_INDEX"] == "<metadata.labels['apps.kubernetes.io/pod-index']>"
            assert container.resources.requests == {"cpu": "500m", "memory": "1Gi"}
            assert container.resources.limits == container.resources.requests
    assert sts.spec.service_name == job.uid and sts.spec.replicas == 2
    assert trainers.spec.completion_mode == "Indexed" and trainers.spec.completions == 2
    assert trainers.spec.backoff_limit_per_index == 2 and trainers.spec.max_failed_indexes == 0

    # The controllers accept them too: every pod is created, named and addressed as the env says.
    def pods() -> list[Any] | None:
        found = core.list_namespaced_pod(ns, label_selector=f"paddlecloud.org/job={job.uid}").items
        return found if len(found) == 4 and all(p.status.phase == "Running" for p in found) else None

    running = wait_for(pods, "4 running pods")
    names = sorted(p.spec.hostname or p.metadata.name for p in running)
    assert names == [f"{job.uid}-ps-0", f"{job.uid}-ps-1", f"{job.uid}-trainer-0", f"{job.uid}-trainer-1"]
    assert {p.spec.subdomain for p in running} == {job.uid}
    kill(job)


def test_collective_job_has_no_pservers(k8s_dc: Datacenter, bob: User, k8s_api: k8s.ApiClient) -> None:
    job = start(new_job(k8s_dc, bob, {"jobname": "dp", "parallelism": 3, "image": "my/own:1"}))
    ns = job.engine_data["namespace"]
    apps, batch = k8s.AppsV1Api(k8s_api), k8s.BatchV1Api(k8s_api)
    assert apps.list_namespaced_stateful_set(ns).items == []
    trainers = batch.read_namespaced_job(f"{job.uid}-trainer", ns)
    pod = trainers.spec.template.spec
    assert pod.image_pull_secrets is None
    [container] = pod.containers
    assert container.image == "my/own:1"
    assert container.resources.limits is not None and "nvidia.com/gpu" not in container.resources.limits
    env = env_of(container)
    assert env["PADDLECLOUD_PSERVERS"] == "0" and not env["PADDLECLOUD_PSERVER_HOSTS"]
    assert env["PADDLECLOUD_TRAINERS"] == "3"
    assert env["PADDLECLOUD_TRAINER_HOSTS"].split(",")[2] == f"{job.uid}-trainer-2.{job.uid}"
    assert trainers.spec.backoff_limit_per_index == 0
    kill(job)


@pytest.mark.parametrize("kind", [StorageKind.NFS, StorageKind.CEPHFS, StorageKind.PVC])
def test_every_storage_kind_is_accepted(
    kind: str, k8s_dc: Datacenter, alice: User, k8s_api: k8s.ApiClient, k8s_namespace: str
) -> None:
    k8s_dc.storage_kind = kind
    k8s_dc.nfs_server, k8s_dc.nfs_path = "nfs.example", "/export/pfs"
    k8s_dc.cephfs_monitors, k8s_dc.cephfs_secret_name, k8s_dc.cephfs_path = (
        "10.0.0.1:6789,10.0.0.2:6789",
        "ceph",
        "/pfs",
    )
    k8s_dc.pvc_name = "pfs-claim"
    job = new_job(k8s_dc, alice, {"jobname": "vol", "parallelism": 1, "pservers": 1})
    plan = m.plan_for(job, k8s_dc, k8s_namespace)
    owner = {"metadata": {"name": job.uid, "uid": "00000000-0000-0000-0000-000000000000"}}
    apps, batch = k8s.AppsV1Api(k8s_api), k8s.BatchV1Api(k8s_api)
    # Server-side dry run: full validation and admission, nothing stored.
    apps.create_namespaced_stateful_set(k8s_namespace, m.pserver_set(plan, owner), dry_run="All")
    created = batch.create_namespaced_job(k8s_namespace, m.trainer_job(plan, owner), dry_run="All")
    pod = created.spec.template.spec
    mounts = {v.mount_path: v for v in pod.containers[0].volume_mounts}
    public = mounts[f"/pfs/{k8s_dc.name}/public"]
    assert public.read_only
    if kind == StorageKind.NFS:
        paths = {v.name: (v.nfs.server, v.nfs.path, bool(v.nfs.read_only)) for v in pod.volumes}
        assert paths == {
            "pfs-home": ("nfs.example", "/export/pfs/home/alice", False),
            "pfs-public": ("nfs.example", "/export/pfs/public", True),
        }
    elif kind == StorageKind.CEPHFS:
        home = next(v for v in pod.volumes if v.name == "pfs-home").cephfs
        assert home.monitors == ["10.0.0.1:6789", "10.0.0.2:6789"] and home.path == "/pfs/home/alice"
        assert home.secret_ref.name == "ceph"
    else:
        [volume] = pod.volumes or []
        assert volume.persistent_volume_claim.claim_name == "pfs-claim"
        assert mounts[f"/pfs/{k8s_dc.name}/home/alice"].sub_path == "home/alice"
        assert public.sub_path == "public"


def test_a_schema_error_fails_the_submission_with_the_servers_message(k8s_dc: Datacenter, alice: User) -> None:
    job = new_job(k8s_dc, alice, {"jobname": "bad"})
    job.spec["cpu"] = "-1"  # what the spec's own validation would have refused
    with pytest.raises(EngineError) as refused:
        engine_for(k8s_dc).start(job, RECORDS)
    message = str(refused.value)
    assert message.startswith(f"the cluster refused Job {job.uid}-trainer: ")
    assert "resources.requests[cpu]" in message and "must be greater than or equal to 0" in message
