"""deploy/base/rbac.yaml applied to a test cluster, and a kubeconfig that authenticates as its ServiceAccount."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import yaml
from kubernetes import client as k8s
from kubernetes.client.exceptions import ApiException

from tools.k8s.testcluster import TestCluster

RBAC = Path(__file__).resolve().parents[2] / "deploy" / "base" / "rbac.yaml"
SERVICE_ACCOUNT = "system:serviceaccount:paddlecloud:paddlecloud"


def create_namespace_once_free(core: k8s.CoreV1Api, body: dict[str, Any], timeout: float = 120) -> None:
    """Create the namespace, waiting while one of its name is still terminating (another test's, deleted a moment
    ago: namespace deletion is asynchronous, and a create meanwhile is a 409)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            core.create_namespace(body)
            return
        except ApiException as exc:
            if exc.status != 409 or time.monotonic() > deadline:
                raise
        time.sleep(1)


@contextlib.contextmanager
def service_account_kubeconfig(cluster: TestCluster, api: k8s.ApiClient) -> Iterator[str]:
    """The manifest applied, and a kubeconfig with a token of its service account (all removed afterwards)."""
    docs = [d for d in yaml.safe_load_all(RBAC.read_text()) if d]
    core, rbac = k8s.CoreV1Api(api), k8s.RbacAuthorizationV1Api(api)
    create: dict[str, Callable[[Any], object]] = {
        "Namespace": lambda d: create_namespace_once_free(core, d),
        "ServiceAccount": lambda d: core.create_namespaced_service_account(d["metadata"]["namespace"], d),
        "ClusterRole": lambda d: rbac.create_cluster_role(d),
        "ClusterRoleBinding": lambda d: rbac.create_cluster_role_binding(d),
    }
    for doc in docs:
        create[doc["kind"]](doc)
    sa = next(d for d in docs if d["kind"] == "ServiceAccount")["metadata"]
    token = core.create_namespaced_service_account_token(
        sa["name"], sa["namespace"], {"spec": {"expirationSeconds": 3600}}
    ).status.token
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {"name": "test", "cluster": {"server": cluster.server, "certificate-authority": str(cluster.ca_file)}}
        ],
        "users": [{"name": "portal", "user": {"token": token}}],
        "contexts": [{"name": "portal", "context": {"cluster": "test", "user": "portal"}}],
        "current-context": "portal",
    }
    try:
        yield yaml.safe_dump(config)
    finally:
        delete = {
            "Namespace": core.delete_namespace,
            "ClusterRole": rbac.delete_cluster_role,
            "ClusterRoleBinding": rbac.delete_cluster_role_binding,
        }
        for doc in reversed(docs):
            if doc["kind"] in delete:  # the ServiceAccount goes with its namespace
                try:
                    delete[doc["kind"]](doc["metadata"]["name"])
                except ApiException as exc:
                    if exc.status != 404:
                        raise


def allowed(api: k8s.ApiClient, group: str, resource: str, verb: str, subresource: str = "") -> bool:
    """Whether the portal's ServiceAccount may `verb` `resource` (cluster-wide), as the API server decides."""
    review = {
        "spec": {
            "user": SERVICE_ACCOUNT,
            "groups": ["system:serviceaccounts", "system:serviceaccounts:paddlecloud", "system:authenticated"],
            "resourceAttributes": {"group": group, "resource": resource, "verb": verb, "subresource": subresource},
        }
    }
    return bool(k8s.AuthorizationV1Api(api).create_subject_access_review(review).status.allowed)
