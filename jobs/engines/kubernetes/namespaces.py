"""Manifests of a user's namespace (plain dicts): the Namespace, its ResourceQuota, the registry login Secrets.

Every user's jobs run in their own namespace (names.namespace_name); these objects are made or brought
up to date before each job of theirs starts (objects.ClusterObjects.ensure_user_namespace).
"""

from __future__ import annotations

import base64
import json
from decimal import Decimal
from typing import Any

from paddlecloud.contract.units import exact_quantity_bytes

from datacenters.quota import Amounts
from jobs.engines.kubernetes import names
from jobs.engines.kubernetes.manifests import GPU_RESOURCE, user_labels


def namespace(name: str, datacenter: str, username: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {"name": name, "labels": user_labels(datacenter, username)},
    }


def _cores(value: Decimal) -> str:
    return f"{value.normalize():f}"


def resource_quota(ns: str, datacenter: str, username: str, limits: Amounts) -> dict[str, Any]:
    """The user's compute quota, enforced by the API server on every pod of theirs in the namespace."""
    hard = {
        "requests.cpu": _cores(limits.cpu),
        "limits.cpu": _cores(limits.cpu),
        "requests.memory": exact_quantity_bytes(limits.memory),
        "limits.memory": exact_quantity_bytes(limits.memory),
        f"requests.{GPU_RESOURCE}": str(limits.gpu),
    }
    return {
        "apiVersion": "v1",
        "kind": "ResourceQuota",
        "metadata": {"name": names.QUOTA_NAME, "namespace": ns, "labels": user_labels(datacenter, username)},
        "spec": {"hard": hard},
    }


def docker_config(server: str, username: str, password: str) -> str:
    """The `.dockerconfigjson` of one registry login (what `kubectl create secret docker-registry` writes)."""
    auth = base64.b64encode(f"{username}:{password}".encode()).decode()
    return json.dumps({"auths": {server: {"username": username, "password": password, "auth": auth}}})


def registry_secret(
    ns: str, registry: str, datacenter: str, username: str, server: str, login: str, password: str
) -> dict[str, Any]:
    payload = base64.b64encode(docker_config(server, login, password).encode()).decode()
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "type": "kubernetes.io/dockerconfigjson",
        "metadata": {
            "name": names.registry_secret_name(registry),
            "namespace": ns,
            "labels": user_labels(datacenter, username),
        },
        "data": {".dockerconfigjson": payload},
    }


def revoked_registry_secret(ns: str, registry: str, datacenter: str, username: str) -> dict[str, Any]:
    """The user's registry secret with no login in it: what stays of it once the user deleted it."""
    body = registry_secret(ns, registry, datacenter, username, "", "", "")
    body["data"] = {".dockerconfigjson": base64.b64encode(json.dumps({"auths": {}}).encode()).decode()}
    return body
