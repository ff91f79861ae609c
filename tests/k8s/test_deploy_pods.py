"""deploy/ on the real node: the portal image (built from Dockerfile.portal without Docker) runs web as rendered.

The web Deployment of deploy/overlays/external, changed only where the test cluster differs (the
image's local name, one replica, its namespace), with its migrate init container, its read-only
root, uid 1000 and the kubelet's own probes: it turns Ready on /readyz, turns NotReady when the
broker goes away and Ready again when it is back. Heavy (the portal image build, ~5 min cold, and
the real node): marker `deploy`; `-m "not deploy"` leaves it out (docs/how-to/operators/kubernetes.md).
"""

from __future__ import annotations

import json
import secrets
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client as k8s

from tests.k8s.deploy_helpers import (
    Broker,
    built_image,
    fernet_key,
    import_image,
    manifest,
    pod_of,
    ready,
    running_broker,
)
from tests.k8s.test_deploy import portal_deployments, render
from tests.wait import wait_for
from tools.k8s.testcluster import TestCluster

pytestmark = pytest.mark.deploy


@pytest.fixture
def broker(k8s_node_cluster: TestCluster, tmp_path: Path) -> Iterator[Broker]:
    yield from running_broker(k8s_node_cluster, tmp_path)


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


def test_the_rendered_web_deployment_migrates_serves_and_follows_its_broker(
    k8s_node_cluster: TestCluster, broker: Broker
) -> None:
    image = built_image("portal")
    import_image(k8s_node_cluster, image)
    namespace = f"deploy-{uuid.uuid4().hex[:6]}"
    with k8s_node_cluster.api_client() as api:
        core, apps = k8s.CoreV1Api(api), k8s.AppsV1Api(api)
        core.create_namespace(manifest({"metadata": {"name": namespace}}))
        k8s_node_cluster.wait_for_default_service_account(namespace)
        web = web_deployment(namespace, image["ref"])
        account = web["spec"]["template"]["spec"]["serviceAccountName"]  # the web pods' own (rbac-web.yaml)
        core.create_namespaced_service_account(namespace, manifest({"metadata": {"name": account}}))
        (config,) = [d for d in render("external") if d["kind"] == "ConfigMap"]
        config = {**config, "metadata": {**config["metadata"], "namespace": namespace}}
        core.create_namespaced_config_map(namespace, manifest(config))
        core.create_namespaced_secret(namespace, manifest({
            "metadata": {"name": "paddlecloud"},
            "stringData": {
                "SECRET_KEY": secrets.token_urlsafe(50),
                "PADDLECLOUD_ENCRYPTION_KEY": fernet_key(),
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
