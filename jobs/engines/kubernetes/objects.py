"""The cluster objects of a user's namespace, made or brought up to date: the namespace, its quota, its
network policies, the user's registry logins (and a build's egress to its registry).

The Kubernetes engine is made of these (engine.KubernetesEngine); the image builder asks them too.
"""

from __future__ import annotations

import hashlib
import json
import logging
from typing import Any

from datacenters import quota
from datacenters.models import Datacenter
from jobs.engines.base import EngineError, TransientEngineError
from jobs.engines.kubernetes import client as kube
from jobs.engines.kubernetes import manifests as m
from jobs.engines.kubernetes import names, namespaces, policies
from registry.models import RegistrySecret

log = logging.getLogger(__name__)

CONTENT_HASH = "paddlecloud.org/content-hash"


class ClusterObjects:
    """Creates or updates objects in a datacenter's cluster; idempotent (a retry finds what is there)."""

    datacenter: Datacenter
    _client: kube.Kube | None = None

    @property
    def k8s(self) -> kube.Kube:
        if self._client is None:
            self._client = kube.for_datacenter(self.datacenter)
        return self._client

    def refused(self, what: str, exc: kube.KubeError) -> EngineError:
        return EngineError(f"the cluster refused {what}: {exc.message}")

    def ensure(self, kind: str, body: dict[str, Any], read_existing: bool = False) -> dict[str, Any]:
        """Create the object; if it exists already (a retried start), keep it (and read it if asked)."""
        meta = body["metadata"]
        try:
            return self.k8s.create(kind, meta.get("namespace"), body)
        except kube.Conflict:
            return self.k8s.get(kind, meta.get("namespace"), meta["name"]) if read_existing else body
        except kube.KubeError as exc:
            raise self.refused(f"{kind} {meta['name']}", exc) from None

    def ensure_current(self, kind: str, body: dict[str, Any], readable: bool = True) -> None:
        """Create the object, or bring it up to date (a new quota, a new registry login).

        `readable`: compare a hash of the content (an annotation) first and replace only on a change
        (the API server rewrites quantities, so comparing fields would always differ). Secrets are
        written blind instead (create, else replace), so the portal needs no right to read any secret.
        """
        meta = body["metadata"]
        ns, name = meta.get("namespace"), meta["name"]
        try:
            if readable:  # (never for secrets: not even a hash of a password goes on an object)
                content = {k: v for k, v in body.items() if k not in ("metadata", "status")}
                digest = hashlib.sha256(json.dumps(content, sort_keys=True).encode()).hexdigest()[:16]
                meta = {**meta, "annotations": {**(meta.get("annotations") or {}), CONTENT_HASH: digest}}
                body = {**body, "metadata": meta}
                try:
                    current = self.k8s.get(kind, ns, name)
                except kube.NotFound:
                    pass
                else:
                    if (current["metadata"].get("annotations") or {}).get(CONTENT_HASH) != digest:
                        self.k8s.replace(kind, ns, name, body)
                    return
            try:
                self.k8s.create(kind, ns, body)
            except kube.Conflict:
                self.k8s.replace(kind, ns, name, body)  # unconditional: the newest content wins
        except kube.Conflict:
            raise TransientEngineError(f"{kind} {name} changed while being updated; retrying") from None
        except kube.KubeError as exc:
            raise self.refused(f"{kind} {name}", exc) from None

    def ensure_user_namespace(self, user: Any, ns: str) -> None:
        """The user's namespace, its ResourceQuota (their compute quota) and its NetworkPolicies (default
        deny, DNS, the egress the datacenter allows: policies.py), made or brought up to date."""
        username = user.get_username()
        try:
            self.k8s.create("Namespace", None, namespaces.namespace(ns, self.datacenter.name, username))
        except kube.Conflict:
            pass
        except kube.KubeError as exc:
            raise self.refused(f"namespace {ns}", exc) from None
        limits = quota.limits(user, self.datacenter)
        self.ensure_current("ResourceQuota", namespaces.resource_quota(ns, self.datacenter.name, username, limits))
        self._ensure_peer_policies(ns)
        labels = m.user_labels(self.datacenter.name, username)
        for policy in policies.namespace_policies(ns, labels, self.datacenter.job_egress, policies.cluster_cidrs()):
            self.ensure_current("NetworkPolicy", policy)

    def _ensure_peer_policies(self, ns: str) -> None:
        """`<uid>-peers` for every job in the namespace, before its default deny: a job started before
        the policies existed (an upgrade) keeps its pods talking. One list call; a create where missing."""
        selector = f"{names.MANAGED_BY}={names.MANAGER},{names.JOB_LABEL}"
        try:
            services = self.k8s.list("Service", ns, label_selector=selector)
            present = {p["metadata"]["name"] for p in self.k8s.list("NetworkPolicy", ns, label_selector=selector)}
        except kube.KubeError as exc:
            raise self.refused(f"the policies of namespace {ns}", exc) from None
        for service in services:
            meta = service["metadata"]
            if f"{meta['name']}-peers" not in present:
                owner = m.owner_reference({**service, "apiVersion": "v1", "kind": "Service"})
                self.ensure("NetworkPolicy", policies.job_policy(ns, meta["name"], meta["labels"], owner))

    def ensure_registry_secret(self, user: Any, name: str, ns: str) -> None:
        """The user's registry secret `name` as the docker-config Secret `pcr-<name>` in their namespace."""
        secret = RegistrySecret.objects.filter(owner=user, name=name).first()
        if secret is None:
            raise EngineError(f"registry: you have no registry secret named {name!r} any more")
        body = namespaces.registry_secret(
            ns, name, self.datacenter.name, user.get_username(), secret.server, secret.username, secret.password
        )
        self.ensure_current("Secret", body, readable=False)

    def ensure_builder_egress(self, user: Any, registry: str, ns: str, uid: str, owner: dict[str, Any]) -> None:
        """`<uid>-registry`: the builder pod of build `uid` may reach its registry (policies.build_policy),
        owned by `owner` (its Job). Left out where no address is allowed (a name that does not resolve,
        a private address the datacenter does not trust): the push then fails and its log says so."""
        secret = RegistrySecret.objects.filter(owner=user, name=registry).first()
        if secret is None:
            return
        addresses, port = policies.registry_peers(secret.server, policies.cluster_cidrs(), policies.registry_cidrs())
        if not addresses:
            log.warning("build %s: no address of registry %s may be reached from the cluster", uid, secret.server)
            return
        labels = {**m.user_labels(self.datacenter.name, user.get_username()), names.BUILD_LABEL: uid}
        self.ensure("NetworkPolicy", policies.build_policy(ns, uid, labels, owner, addresses, port))

    def revoke_registry_secret(self, username: str, name: str) -> None:
        """Blank `pcr-<name>` in the user's namespace, where one was written (replace only: the portal
        may not delete Secrets, and a namespace that never had it gets nothing)."""
        ns = names.namespace_name(self.datacenter.namespace_prefix, username)
        body = namespaces.revoked_registry_secret(ns, name, self.datacenter.name, username)
        try:
            self.k8s.replace("Secret", ns, body["metadata"]["name"], body)
        except kube.NotFound:
            return
