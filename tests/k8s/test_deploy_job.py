"""deploy/ end to end on the real node: the portal installed from the rendered overlay runs a job in real pods.

web, worker and beat from deploy/overlays/external with their RBAC and the portal image; in-cluster
config (the pods' own service-account token); the example job submitted with paddlectl to the
in-cluster web pod ends `succeeded`. What the test cluster lacks is bridged, and only that: no
kube-proxy, so the API server is reached through a relay on the node's bridge under the name its
certificate carries; SQLite on a hostPath folder stands in for PostgreSQL; Redis runs on the bridge.
Marker `deploy`, run when PADDLECLOUD_DEPLOY_TEST=1.
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

from tests.k8s.deploy_helpers import (
    Broker,
    Relay,
    fernet_key,
    import_image,
    manifest,
    portal_image,
    ready,
    running_broker,
)
from tests.k8s.test_deploy import kubectl, portal_deployments, render
from tests.wait import wait_for
from tools.k8s.images import read_manifest
from tools.k8s.testcluster import TestCluster

ROOT = Path(__file__).resolve().parents[2]
API_NAME = "kubernetes.default.svc"  # in the API server's certificate
UID = 1000
PORTAL_PODS = "app.kubernetes.io/name=paddlecloud-portal"
pytestmark = [
    pytest.mark.deploy,
    pytest.mark.skipif(os.environ.get("PADDLECLOUD_DEPLOY_TEST") != "1", reason="set PADDLECLOUD_DEPLOY_TEST=1"),
]


def owned_dir(path: Path) -> Path:
    path.mkdir(parents=True)
    os.chown(path, UID, UID)
    return path


def adapt(doc: dict[str, Any], ns: str, image: str, gateway: str, relay: Relay, dirs: dict[str, Path]) -> None:
    """The rendered object, changed only where the test cluster differs from a real one."""
    doc["metadata"]["namespace"] = ns
    if doc["kind"] == "ConfigMap":
        doc["data"]["ALLOWED_HOSTS"] = "*"  # the test reaches web by its pod IP
    if doc["kind"] != "Deployment":
        return
    doc["spec"]["replicas"] = 1
    pod = doc["spec"]["template"]["spec"]
    pod["hostAliases"] = [{"ip": gateway, "hostnames": [API_NAME]}]
    pod["volumes"] = [v for v in pod["volumes"] if v["name"] != "pfs"]
    pod["volumes"] += [{"name": name, "hostPath": {"path": str(path)}} for name, path in dirs.items()]
    for container in [*pod["initContainers"], *pod["containers"]]:
        container["image"] = image
        container["resources"]["requests"] = {"cpu": "100m", "memory": "256Mi"}  # the node has 2 cores
        container["env"] += [
            {"name": "KUBERNETES_SERVICE_HOST", "value": API_NAME},
            {"name": "KUBERNETES_SERVICE_PORT", "value": str(relay.port)},
        ]
        mounts = [m for m in container["volumeMounts"] if m["name"] != "pfs"]
        container["volumeMounts"] = [*mounts, *({"name": n, "mountPath": f"/{n}"} for n in dirs)]


def bootstrap_script(password: str, dc: dict[str, Any]) -> str:
    return (
        "from django.contrib.auth import get_user_model\n"
        "from portal.datacenters.models import Datacenter\n"
        f"get_user_model().objects.create_user('alice', password={password!r})\n"
        f"Datacenter.objects.create(**{dc!r})\n"
    )


def run_pod(core: k8s.CoreV1Api, ns: str, template: dict[str, Any], name: str, command: list[str]) -> str:
    spec = json.loads(json.dumps(template))
    spec.pop("initContainers")
    spec["restartPolicy"] = "Never"
    main = spec["containers"][0]
    main.update(name=name, command=command)
    for key in ("ports", "livenessProbe", "readinessProbe", "startupProbe"):
        main.pop(key, None)
    core.create_namespaced_pod(ns, manifest({"metadata": {"name": name}, "spec": spec}))

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


@pytest.fixture
def broker(k8s_node_cluster: TestCluster, tmp_path: Path) -> Iterator[Broker]:
    yield from running_broker(k8s_node_cluster, tmp_path)


@pytest.fixture
def relay(k8s_node_cluster: TestCluster) -> Iterator[Relay]:
    assert k8s_node_cluster.node is not None
    port = int(k8s_node_cluster.server.rsplit(":", 1)[1])
    running = Relay(k8s_node_cluster.node.gateway, ("127.0.0.1", port))
    yield running
    running.close()


def test_the_installed_portal_runs_the_example_job_in_real_pods(
    k8s_node_cluster: TestCluster, broker: Broker, relay: Relay, tmp_path: Path
) -> None:
    node = k8s_node_cluster.node
    runtime = read_manifest()
    assert node is not None and runtime is not None
    image = portal_image()
    import_image(k8s_node_cluster, image)
    tag = uuid.uuid4().hex[:6]
    ns = f"deploy-{tag}"
    pfs = owned_dir(tmp_path / "pfs")
    for sub in ("home", "public"):
        owned_dir(pfs / sub)
    dirs = {"pfs": pfs, "db": owned_dir(tmp_path / "db")}
    docs = [d for d in render("external") if d["kind"] not in ("Namespace", "PersistentVolumeClaim", "Ingress")]
    for doc in docs:
        if doc["kind"] in ("ClusterRole", "ClusterRoleBinding"):  # this test's own, beside any other
            doc["metadata"]["name"] += f"-{tag}"
            if doc["kind"] == "ClusterRoleBinding":
                doc["roleRef"]["name"] += f"-{tag}"
                doc["subjects"][0]["namespace"] = ns
        else:
            adapt(doc, ns, image["ref"], node.gateway, relay, dirs)
    deployments = portal_deployments(docs)
    secret = {
        "apiVersion": "v1", "kind": "Secret", "metadata": {"name": "paddlecloud", "namespace": ns},
        "stringData": {
            "SECRET_KEY": secrets.token_urlsafe(50),
            "PADDLECLOUD_ENCRYPTION_KEY": fernet_key(),
            "DATABASE_URL": "sqlite:////db/portal.sqlite3",
            "CELERY_BROKER_URL": broker.url,
        },
    }  # fmt: skip
    first = [d for d in docs if d["kind"] != "Deployment"] + [deployments["web"]]  # web migrates alone first

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
            apply([secret, *first])
            wait_for(lambda: ready(core, ns), "web Ready", 300)
            apply([deployments["worker"], deployments["beat"]])
            password = secrets.token_urlsafe(12)
            dc = {
                "name": "pods", "engine": "kubernetes", "in_cluster": True, "namespace_prefix": f"dj{tag}-",
                "storage_kind": "hostpath", "host_path": str(pfs), "storage_root": "/pfs",
                "cpu_image": runtime["runtime"]["ref"], "gpu_image": runtime["runtime"]["ref"],
                "default_cpu": "8", "default_memory": "16Gi", "default_jobs": 10, "finished_ttl": 5,
            }  # fmt: skip
            template = deployments["web"]["spec"]["template"]["spec"]
            shell = ["python", "manage.py", "shell", "-c", bootstrap_script(password, dc)]
            run_pod(core, ns, template, "bootstrap", shell)
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
            portal_pods: list[Any] = core.list_namespaced_pod(ns, label_selector=PORTAL_PODS).items
            restarts = {p.metadata.name: p.status.container_statuses[0].restart_count for p in portal_pods}
            assert len(restarts) == 3 and set(restarts.values()) == {0}, restarts  # every probe held
        finally:
            core.delete_namespace(ns)
            for kind in ("clusterrolebinding", "clusterrole"):
                subprocess.run([kubectl(), "--kubeconfig", str(k8s_node_cluster.kubeconfig_path), "delete", kind,
                                f"paddlecloud-engine-{tag}"], capture_output=True, timeout=60, check=False)  # fmt: skip
            user_namespaces: list[Any] = core.list_namespace(label_selector="paddlecloud.org/datacenter=pods").items
            for user_ns in user_namespaces:
                with contextlib.suppress(k8s.ApiException):
                    core.delete_namespace(user_ns.metadata.name)
