"""deploy/ on the real node: the portal image (built from Dockerfile.portal without Docker) runs web as rendered.

The web Deployment of deploy/overlays/external, changed only where the test cluster differs (the
image's local name, one replica, its namespace), with its migrate init container, its read-only
root, uid 1000 and the kubelet's own probes: it turns Ready on /readyz, turns NotReady when the
broker goes away and Ready again when it is back. Heavy (the portal image build, ~5 min cold, and
the real node): marker `deploy`, run when PADDLECLOUD_DEPLOY_TEST=1 (README "Deploy on Kubernetes").
"""

from __future__ import annotations

import json
import os
import secrets
import socket
import subprocess
import sys
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client as k8s

from tests.k8s.test_deploy import portal_deployments, render
from tests.wait import wait_for
from tools.k8s.images import images_dir, portal_ref
from tools.k8s.testcluster import TestCluster

ROOT = Path(__file__).resolve().parents[2]
pytestmark = [
    pytest.mark.deploy,
    pytest.mark.skipif(os.environ.get("PADDLECLOUD_DEPLOY_TEST") != "1", reason="set PADDLECLOUD_DEPLOY_TEST=1"),
]


def portal_image() -> dict[str, str]:
    """The portal image's OCI layout, built by tools/k8s/images.py (cached by the Dockerfile and its files)."""
    ref = portal_ref()
    layout = images_dir() / f"portal-{ref.rsplit(':', 1)[1]}"
    if not (layout / "index.json").exists():
        subprocess.run([sys.executable, str(ROOT / "tools/k8s/images.py"), "build-portal"], check=True, timeout=1800)
    return {"ref": ref, "layout": str(layout)}


def import_image(cluster: TestCluster, image: dict[str, str]) -> None:
    runner = cluster.node_runner
    assert runner is not None
    tar = subprocess.Popen(["tar", "-C", image["layout"], "-cf", "-", "."], stdout=subprocess.PIPE)
    ctr = [str(runner.node.bin_dir / "ctr"), "--address", str(runner.sock), "-n", "k8s.io", "images", "import", "-"]
    result = subprocess.run(ctr, stdin=tar.stdout, capture_output=True, text=True, timeout=600, check=False)
    assert tar.stdout is not None
    tar.stdout.close()
    tar.wait()
    assert result.returncode == 0, result.stderr


class Broker:
    """A real Redis on the node's bridge address (what pods reach), started and stopped by the test."""

    def __init__(self, address: str, work: Path) -> None:
        with socket.socket() as probe:
            probe.bind((address, 0))
            self.port = int(probe.getsockname()[1])
        self.address, self.work = address, work
        self.password = secrets.token_hex(12)
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://:{self.password}@{self.address}:{self.port}/0"

    def start(self) -> None:
        self.process = subprocess.Popen(
            ["redis-server", "--bind", self.address, "--port", str(self.port), "--requirepass", self.password,
             "--save", "", "--appendonly", "no", "--dir", str(self.work)],
            stdout=subprocess.DEVNULL,
        )  # fmt: skip
        wait_for(self._answers, "redis answers", 10)

    def _answers(self) -> bool:
        try:
            socket.create_connection((self.address, self.port), timeout=1).close()
        except OSError:
            return False
        return True

    def stop(self) -> None:
        if self.process:
            self.process.terminate()
            self.process.wait(10)
            self.process = None


@pytest.fixture
def broker(k8s_node_cluster: TestCluster, tmp_path: Path) -> Iterator[Broker]:
    if not Path("/usr/bin/redis-server").exists():
        pytest.skip("redis-server (Debian package) is needed")
    assert k8s_node_cluster.node is not None
    running = Broker(k8s_node_cluster.node.gateway, tmp_path)
    running.start()
    yield running
    running.stop()


def web_deployment(namespace: str, image: str) -> dict[str, Any]:
    web = portal_deployments(render("external"))["web"]
    web["metadata"]["namespace"] = namespace
    web["spec"]["replicas"] = 1
    pod = web["spec"]["template"]["spec"]
    for container in [*pod["initContainers"], *pod["containers"]]:
        container["image"] = image
        container["resources"]["requests"] = {"cpu": "100m", "memory": "256Mi"}  # the node has 2 cores
    pod["volumes"][0] = {"name": "pfs", "emptyDir": {}}  # no PersistentVolume provisioner here
    return web


def manifest(body: dict[str, Any]) -> Any:
    """A plain dict as the client's body (it takes dicts; its stubs name only its model classes)."""
    return body


def pod_of(core: k8s.CoreV1Api, namespace: str) -> Any:
    pods = core.list_namespaced_pod(namespace, label_selector="app.kubernetes.io/component=web").items
    return pods[0] if pods else None


def ready(core: k8s.CoreV1Api, namespace: str) -> bool | None:
    pod = pod_of(core, namespace)
    conditions = {c.type: c.status for c in (pod.status.conditions or [])} if pod else {}
    return {"True": True, "False": False}.get(conditions.get("Ready", ""))


def test_the_rendered_web_deployment_migrates_serves_and_follows_its_broker(
    k8s_node_cluster: TestCluster, broker: Broker
) -> None:
    image = portal_image()
    import_image(k8s_node_cluster, image)
    namespace = f"deploy-{uuid.uuid4().hex[:6]}"
    with k8s_node_cluster.api_client() as api:
        core, apps = k8s.CoreV1Api(api), k8s.AppsV1Api(api)
        core.create_namespace(manifest({"metadata": {"name": namespace}}))
        k8s_node_cluster.wait_for_default_service_account(namespace)
        core.create_namespaced_service_account(namespace, manifest({"metadata": {"name": "paddlecloud"}}))
        (config,) = [d for d in render("external") if d["kind"] == "ConfigMap"]
        config = {**config, "metadata": {**config["metadata"], "namespace": namespace}}
        core.create_namespaced_config_map(namespace, manifest(config))
        fernet = subprocess.run(["openssl", "rand", "-base64", "32"], capture_output=True, text=True, check=True)
        core.create_namespaced_secret(namespace, manifest({
            "metadata": {"name": "paddlecloud"},
            "stringData": {
                "SECRET_KEY": secrets.token_urlsafe(50),
                "PADDLECLOUD_ENCRYPTION_KEY": fernet.stdout.strip().replace("+", "-").replace("/", "_"),
                "DATABASE_URL": "sqlite:////var/lib/paddlecloud/db.sqlite3",  # the pod's emptyDir
                "CELERY_BROKER_URL": broker.url,
            },
        }))  # fmt: skip
        try:
            apps.create_namespaced_deployment(namespace, manifest(web_deployment(namespace, image["ref"])))
            # Ready only through the kubelet's own readiness probe on /readyz (Host: the pod's IP).
            wait_for(lambda: ready(core, namespace), "web pod Ready", 300)
            pod = pod_of(core, namespace)
            init_log = core.read_namespaced_pod_log(pod.metadata.name, namespace, container="migrate")
            assert "Applying jobs.0001_initial... OK" in init_log  # a fresh database, migrated by the init step
            base = f"http://{pod.status.pod_ip}:8000"
            with urllib.request.urlopen(f"{base}/readyz", timeout=10) as answer:  # noqa: S310
                assert json.loads(answer.read()) == {"database": "ok", "broker": "ok"}
            with urllib.request.urlopen(f"{base}/static/css/portal.css", timeout=10) as answer:  # noqa: S310
                assert answer.status == 200  # collected into the image, served by whitenoise read-only

            broker.stop()
            wait_for(lambda: ready(core, namespace) is False, "web pod NotReady without its broker", 120)
            broker.start()
            wait_for(lambda: ready(core, namespace), "web pod Ready again", 120)
            assert pod_of(core, namespace).status.container_statuses[0].restart_count == 0  # liveness held
        finally:
            core.delete_namespace(namespace)
