"""deploy/ end to end on the real node: `with-services` installs the portal, PostgreSQL and Redis; a job runs.

Every object of deploy/overlays/with-services applied at once, as an operator's `kubectl apply -k`:
web, worker and beat with their RBAC and the portal image; the PostgreSQL and Redis StatefulSets on
persistent volumes, found through their headless Services by the cluster DNS; in-cluster config (the
pods' own service-account token). The portal pods wait in `migrate_locked` until PostgreSQL answers,
one migrates, and the example job submitted with paddlectl to the in-cluster web pod ends `succeeded`.
What the test cluster lacks is bridged, and only that: no kube-proxy, so the API server is reached
through a relay on the node's bridge under the name its certificate carries; no volume provisioner,
so the test makes the PersistentVolumes the claims bind to; no Docker Hub, so the database and broker
run on tools/k8s/Dockerfile.services (Debian's PostgreSQL and Redis with the official images'
contract). Marker `deploy` (heavy: two image builds when cold); `-m "not deploy"` leaves it out.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client as k8s

from tests.k8s.deploy_helpers import Relay, built_image, fernet_key, import_image, manifest, ready
from tests.k8s.test_deploy import kubectl, portal_deployments, render
from tests.wait import wait_for
from tools.k8s.images import read_manifest
from tools.k8s.testcluster import TestCluster

ROOT = Path(__file__).resolve().parents[2]
API_NAME = "kubernetes.default.svc"  # in the API server's certificate
PORTAL_UID = 1000  # the portal image's user (and the job pods')
SERVICES_UID = 999  # the official postgres and redis images' user
PORTAL_PODS = "app.kubernetes.io/name=paddlecloud-portal"
pytestmark = pytest.mark.deploy


def owned_dir(path: Path, uid: int = PORTAL_UID) -> Path:
    path.mkdir(parents=True)
    os.chown(path, uid, uid)
    return path


def adapt(doc: dict[str, Any], ns: str, images: dict[str, str], gateway: str, relay: Relay, pfs: Path) -> None:
    """The rendered object, changed only where the test cluster differs from a real one."""
    doc["metadata"]["namespace"] = ns
    if doc["kind"] == "ConfigMap":
        doc["data"]["ALLOWED_HOSTS"] = "*"  # the test reaches web by its pod IP
    if doc["kind"] not in ("Deployment", "StatefulSet"):
        return
    pod = doc["spec"]["template"]["spec"]
    for container in [*pod.get("initContainers", []), *pod["containers"]]:
        container["resources"]["requests"] = {"cpu": "100m", "memory": "256Mi"}  # the node has 2 cores
    if doc["kind"] == "StatefulSet":
        for container in pod["containers"]:
            container["image"] = images["services"]
        return
    doc["spec"]["replicas"] = 1
    pod["hostAliases"] = [{"ip": gateway, "hostnames": [API_NAME]}]
    pfs_volume = {"name": "pfs", "hostPath": {"path": str(pfs)}}  # the PFS claim's stand-in
    pod["volumes"] = [v for v in pod["volumes"] if v["name"] != "pfs"] + [pfs_volume]
    for container in [*pod["initContainers"], *pod["containers"]]:
        container["image"] = images["portal"]
        container["env"] += [
            {"name": "KUBERNETES_SERVICE_HOST", "value": API_NAME},
            {"name": "KUBERNETES_SERVICE_PORT", "value": str(relay.port)},
        ]


def claim_volumes(docs: list[dict[str, Any]], ns: str, tag: str, work: Path) -> list[dict[str, Any]]:
    """A hostPath PersistentVolume, bound ahead, for each claim the StatefulSets' templates will make."""
    volumes = []
    for doc in (d for d in docs if d["kind"] == "StatefulSet"):
        for template in doc["spec"]["volumeClaimTemplates"]:
            claim = f"{template['metadata']['name']}-{doc['metadata']['name']}-0"
            folder = owned_dir(work / claim, SERVICES_UID)  # the kubelet applies no fsGroup to a hostPath
            volumes.append({
                "apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": f"{claim}-{tag}"},
                "spec": {
                    "capacity": {"storage": template["spec"]["resources"]["requests"]["storage"]},
                    "accessModes": template["spec"]["accessModes"], "storageClassName": "",
                    "persistentVolumeReclaimPolicy": "Retain", "hostPath": {"path": str(folder), "type": "Directory"},
                    "claimRef": {"namespace": ns, "name": claim},
                },
            })  # fmt: skip
    return volumes


def bootstrap_script(password: str, dc: dict[str, Any]) -> str:
    return (
        "from django.contrib.auth import get_user_model\n"
        "from django.db import connection\n"
        "from datacenters.models import Datacenter\n"
        f"get_user_model().objects.create_user('alice', password={password!r})\n"
        f"Datacenter.objects.create(**{dc!r})\n"
        "print('database', connection.vendor, connection.settings_dict['HOST'])\n"
    )


def run_pod(core: k8s.CoreV1Api, ns: str, template: dict[str, Any], name: str, command: list[str]) -> str:
    """Run ``command`` once in a pod made from a Deployment's pod ``template``, with its labels: the
    overlay's NetworkPolicies let only the portal's pods reach PostgreSQL and Redis."""
    spec = json.loads(json.dumps(template["spec"]))
    spec.pop("initContainers")
    spec["restartPolicy"] = "Never"
    main = spec["containers"][0]
    main.update(name=name, command=command)
    for key in ("ports", "livenessProbe", "readinessProbe", "startupProbe"):
        main.pop(key, None)
    # The portal's name, which the policies admit, but not the web component, which its Service selects.
    labels = {**template["metadata"]["labels"], "app.kubernetes.io/component": name}
    metadata = {"name": name, "labels": labels}
    core.create_namespaced_pod(ns, manifest({"metadata": metadata, "spec": spec}))

    def finished() -> str | None:
        status: Any = core.read_namespaced_pod(name, ns).status
        return str(status.phase) if status.phase in ("Succeeded", "Failed") else None

    phase = wait_for(finished, f"pod {name} finished", 120)
    log = str(core.read_namespaced_pod_log(name, ns))
    assert phase == "Succeeded", log
    return log


def paddlectl(env: dict[str, str], *args: str, stdin: str | None = None) -> str:
    out = subprocess.run(
        [str(ROOT / ".venv" / "bin" / "paddlectl"), *args],
        input=stdin, env=env, capture_output=True, text=True, timeout=300, check=False, cwd=ROOT,
    )  # fmt: skip
    assert out.returncode == 0, out.stdout + out.stderr
    return out.stdout


def cluster_scoped(docs: list[dict[str, Any]], ns: str, tag: str) -> list[dict[str, Any]]:
    """The ClusterRoles and bindings, renamed for this test so they sit beside any other's."""
    scoped = [d for d in docs if d["kind"] in ("ClusterRole", "ClusterRoleBinding")]
    for doc in scoped:
        doc["metadata"]["name"] += f"-{tag}"
        if doc["kind"] == "ClusterRoleBinding":
            doc["roleRef"]["name"] += f"-{tag}"
            doc["subjects"][0]["namespace"] = ns
    return scoped


@pytest.fixture
def relay(k8s_node_cluster: TestCluster) -> Iterator[Relay]:
    assert k8s_node_cluster.node is not None
    port = int(k8s_node_cluster.server.rsplit(":", 1)[1])
    running = Relay(k8s_node_cluster.node.gateway, ("127.0.0.1", port))
    yield running
    running.close()


def portal_secret(ns: str) -> dict[str, Any]:
    """The Secret `paddlecloud` as the deploy guide's with-services steps make it (docs/how-to/operators/kubernetes.md):
    URLs to the overlay's services."""
    db, broker = secrets.token_urlsafe(18), secrets.token_urlsafe(18)
    return {
        "apiVersion": "v1", "kind": "Secret", "metadata": {"name": "paddlecloud", "namespace": ns},
        "stringData": {
            "SECRET_KEY": secrets.token_urlsafe(50),
            "PADDLECLOUD_ENCRYPTION_KEY": fernet_key(),
            "POSTGRES_PASSWORD": db,
            "REDIS_PASSWORD": broker,
            "DATABASE_URL": f"postgresql://paddlecloud:{db}@paddlecloud-postgres:5432/paddlecloud",
            "CELERY_BROKER_URL": f"redis://:{broker}@paddlecloud-redis:6379/0",
            "PADDLECLOUD_CACHE_URL": f"redis://:{broker}@paddlecloud-redis:6379/1",
        },
    }  # fmt: skip


def test_with_services_installs_the_portal_its_database_and_broker_and_runs_the_example_job(
    k8s_node_cluster: TestCluster, relay: Relay, tmp_path: Path
) -> None:
    node = k8s_node_cluster.node
    runtime = read_manifest()
    assert node is not None and runtime is not None
    images = {name: built_image(name) for name in ("portal", "services")}
    for image in images.values():
        import_image(k8s_node_cluster, image)
    tag = uuid.uuid4().hex[:6]
    ns = f"deploy-{tag}"
    pfs = owned_dir(tmp_path / "pfs")
    for sub in ("home", "public"):
        owned_dir(pfs / sub)
    docs = [d for d in render("with-services") if d["kind"] not in ("Namespace", "PersistentVolumeClaim", "Ingress")]
    scoped = cluster_scoped(docs, ns, tag)
    refs = {name: image["ref"] for name, image in images.items()}
    for doc in docs:
        if doc not in scoped:
            adapt(doc, ns, refs, node.gateway, relay, pfs)
    volumes = claim_volumes(docs, ns, tag, tmp_path)
    deployments = portal_deployments(docs)

    def apply(objects: list[dict[str, Any]]) -> None:
        path = tmp_path / f"apply-{uuid.uuid4().hex[:6]}.yaml"
        path.write_text(yaml.safe_dump_all(objects))
        out = subprocess.run([kubectl(), "--kubeconfig", str(k8s_node_cluster.kubeconfig_path), "apply", "-f",
                              str(path)], capture_output=True, text=True, timeout=60, check=False)  # fmt: skip
        assert out.returncode == 0, out.stderr

    with k8s_node_cluster.api_client() as api:
        core = k8s.CoreV1Api(api)
        core.create_namespace(manifest({"metadata": {"name": ns}}))
        k8s_node_cluster.wait_for_default_service_account(ns)
        try:
            apply([portal_secret(ns), *volumes, *docs])  # all at once, as `kubectl apply -k` does
            wait_for(lambda: ready(core, ns), "web Ready", 300)
            password = secrets.token_urlsafe(12)
            dc = {
                "name": "pods", "engine": "kubernetes", "in_cluster": True, "namespace_prefix": f"dj{tag}-",
                "storage_kind": "hostpath", "host_path": str(pfs), "storage_root": "/pfs",
                "cpu_image": runtime["runtime"]["ref"], "gpu_image": runtime["runtime"]["ref"],
                "default_cpu": "8", "default_memory": "16Gi", "default_jobs": 10, "finished_ttl": 5,
            }  # fmt: skip
            template = deployments["web"]["spec"]["template"]
            shell = ["python", "manage.py", "shell", "-c", bootstrap_script(password, dc)]
            assert "database postgresql paddlecloud-postgres" in run_pod(core, ns, template, "bootstrap", shell)
            web: Any = core.list_namespaced_pod(ns, label_selector="app.kubernetes.io/component=web").items[0]
            env = {**os.environ, "PADDLE_CONFIG": str(tmp_path / "paddle.yaml"),
                   "PADDLE_TOKEN_CACHE": str(tmp_path / "tokens")}  # fmt: skip
            paddlectl(env, "config", "init", "--endpoint", f"http://{web.status.pod_ip}:8000", "--username", "alice",
                      "--password-stdin", "--datacenter", "pods", stdin=password)  # fmt: skip
            paddlectl(env, "submit", "-jobname", "fit", "-pservers", "2", "-parallelism", "2", "-cpu", "0.3",
                      "-pscpu", "0.3", "-memory", "1Gi", "-psmemory", "1Gi", "-passes", "2",
                      "-entry", "python train.py", "examples/fit_a_line")  # fmt: skip

            def finished() -> dict[str, Any] | None:
                jobs = json.loads(paddlectl(env, "get", "jobs", "-o", "json"))
                rows = jobs if isinstance(jobs, list) else jobs.get("results", [])
                job: dict[str, Any] = next(j for j in rows if j["name"] == "fit")
                return job if job["state"] in ("succeeded", "failed", "killed") else None

            job = wait_for(finished, "the job finished", 420, interval=3)
            assert job["state"] == "succeeded", job
            # The trainers' logs, archived by the in-cluster worker from the pods, read back through web.
            assert "loss" in paddlectl(env, "logs", "fit").lower()
            # The Deployments' pods (the one-off bootstrap pod carries the portal's name too).
            selector = f"{PORTAL_PODS},app.kubernetes.io/component!=bootstrap"
            portal_pods: list[Any] = core.list_namespaced_pod(ns, label_selector=selector).items
            restarts = {p.metadata.name: [s.restart_count for s in [*p.status.init_container_statuses,
                                                                     *p.status.container_statuses]]
                        for p in portal_pods}  # fmt: skip
            # Every portal pod waited for the database in its migrate step instead of crashing into a
            # backoff, and every probe held since (the worker pod also runs the notifications worker).
            assert len(restarts) == 3, restarts
            assert all(len(counts) >= 2 and not any(counts) for counts in restarts.values()), restarts
        finally:
            core.delete_namespace(ns)
            kubeconfig = str(k8s_node_cluster.kubeconfig_path)
            # --wait=false: a volume keeps its protection finalizer until the namespace's claims are gone, which the
            # namespace deletion above does in its own time; waiting for it here is what once timed this test out.
            for doc in [*scoped, *volumes]:
                subprocess.run([kubectl(), "--kubeconfig", kubeconfig, "delete", "--wait=false", doc["kind"].lower(),
                                doc["metadata"]["name"]], capture_output=True, timeout=60, check=False)  # fmt: skip
            user_namespaces: list[Any] = core.list_namespace(label_selector="paddlecloud.org/datacenter=pods").items
            for user_ns in user_namespaces:
                with contextlib.suppress(k8s.ApiException):
                    core.delete_namespace(user_ns.metadata.name)
