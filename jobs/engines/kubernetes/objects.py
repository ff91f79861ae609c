"""The cluster objects of a user's namespace, made or brought up to date: the namespace, its quota, its
network policies, the user's registry logins (and a build's egress to its registry).

The Kubernetes engine is made of these (engine.KubernetesEngine); the image builder asks them too.
"""

from __future__ import annotations

import hashlib
import json
import logging
import threading
import time
import weakref
from collections.abc import Iterable
from decimal import Decimal
from typing import Any

from paddlecloud.contract import quantity

from datacenters import quota
from datacenters.models import Admission, Datacenter, Quota, TeamQuota, team_of
from jobs.engines.base import EngineError, TransientEngineError
from jobs.engines.kubernetes import client as kube
from jobs.engines.kubernetes import kueue, names, namespaces, policies
from jobs.engines.kubernetes import manifests as m
from registry.models import RegistrySecret

log = logging.getLogger(__name__)

CONTENT_HASH = "paddlecloud.org/content-hash"
# How long a namespace this process made (with its quota and policies) is trusted to be as it made it: a
# quota or policy changed by hand in the cluster is put right at the first start after this.
NAMESPACE_RECHECK_SECONDS = 60.0


class NamespacesMade:
    """The user namespaces this process made or brought up to date in one cluster: when, which namespace
    object (its uid), and a digest of what they were made to hold. Also cluster-wide objects, by `<kind>/<name>`."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._made: dict[str, tuple[str, str, float]] = {}  # namespace -> (its uid, digest, monotonic time)

    def made_as(self, ns: str, digest: str) -> str | None:
        """The uid of the namespace `ns` as made to hold `digest` less than NAMESPACE_RECHECK_SECONDS ago, else None."""
        with self._lock:
            made = self._made.get(ns)
        if made is None:
            return None
        uid, made_digest, when = made
        fresh = made_digest == digest and time.monotonic() - when < NAMESPACE_RECHECK_SECONDS
        return uid if fresh and uid else None

    def remember(self, ns: str, uid: str, digest: str) -> None:
        with self._lock:
            self._made[ns] = (uid, digest, time.monotonic())


_made: weakref.WeakKeyDictionary[kube.Kube, NamespacesMade] = weakref.WeakKeyDictionary()
_made_lock = threading.Lock()


def _made_in(client: kube.Kube) -> NamespacesMade:
    """The namespaces made through this client (one per cluster and credentials: a new cluster starts afresh)."""
    with _made_lock:
        made = _made.get(client)
        if made is None:
            made = _made[client] = NamespacesMade()
        return made


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

    def ensure_current(self, kind: str, body: dict[str, Any], readable: bool = True) -> bool:
        """Create the object, or bring it up to date (a new quota, a new registry login); True if it wrote.

        `readable`: compare a hash of the content (an annotation) first and replace only on a change
        (the API server rewrites quantities, so comparing fields would always differ). Secrets are
        written blind instead (create, else replace), so the portal needs no right to read any secret.
        """
        meta = body["metadata"]
        ns, name = meta.get("namespace"), meta["name"]
        try:
            if readable:  # (never for secrets: not even a hash of a password goes on an object)
                body = _with_content_hash(body)
                current = self._read(kind, ns, name)
                if current is not None:
                    if _content_hash(current) == _content_hash(body):
                        return False
                    # The version read: custom resources (Kueue's queues and cohorts) refuse a PUT without one,
                    # and a change in between is a Conflict, retried.
                    meta = {**body["metadata"], "resourceVersion": current["metadata"].get("resourceVersion")}
                    self.k8s.replace(kind, ns, name, {**body, "metadata": meta})
                    return True
            try:
                self.k8s.create(kind, ns, body)
            except kube.Conflict:
                self.k8s.replace(kind, ns, name, body)  # unconditional: the newest content wins
        except kube.Conflict:
            raise TransientEngineError(f"{kind} {name} changed while being updated; retrying") from None
        except kube.KubeError as exc:
            raise self.refused(f"{kind} {name}", exc) from None
        return True

    def _read(self, kind: str, ns: str | None, name: str) -> dict[str, Any] | None:
        try:
            return self.k8s.get(kind, ns, name)
        except kube.NotFound:
            return None

    def ensure_user_namespace(self, user: Any, ns: str) -> None:
        """The user's namespace, its ResourceQuota (their compute quota) and its NetworkPolicies (default
        deny, DNS, the egress the datacenter allows: policies.py), made or brought up to date.

        At most every NAMESPACE_RECHECK_SECONDS per namespace and process (and whenever what they should
        hold changes): a job's start then costs one read here (the namespace, still the one made) instead
        of seven calls, two of them lists as long as the user's jobs (the start grew with every job).
        """
        username = user.get_username()
        wanted = namespaces.namespace(ns, self.datacenter.name, username)
        limits = quota.limits(user, self.datacenter)
        quota_body = namespaces.resource_quota(ns, self.datacenter.name, username, limits)
        labels = m.user_labels(self.datacenter.name, username)
        policy_bodies = policies.namespace_policies(ns, labels, self.datacenter.job_egress, policies.cluster_cidrs())
        queues = self._queue_bodies(user, ns, limits)
        digest = _digest([wanted, quota_body, *policy_bodies, *queues])
        made = _made_in(self.k8s).made_as(ns, digest)
        if made and made == _made_as(self._read("Namespace", None, ns) or {}):
            return  # still the namespace made, holding what it should: nothing to read or write
        try:
            current = self.k8s.create("Namespace", None, wanted)
        except kube.Conflict:
            current = self._read("Namespace", None, ns) or {}
        except kube.KubeError as exc:
            raise self.refused(f"namespace {ns}", exc) from None
        self.ensure_current("ResourceQuota", quota_body)
        deny = next(p for p in policy_bodies if p["metadata"]["name"] == policies.DEFAULT_DENY)
        if self._stale("NetworkPolicy", deny):
            self._ensure_peer_policies(ns)  # only where the deny is (re)made: after it, every job made its own
        for policy in policy_bodies:
            self.ensure_current("NetworkPolicy", policy)
        if queues:
            self._ensure_gpu_flavor()
        for body in queues:  # the flavors before the ClusterQueue naming them, that before its LocalQueue
            self.ensure_current(body["kind"], body)
        _made_in(self.k8s).remember(ns, _made_as(current), digest)

    def _queue_bodies(self, user: Any, ns: str, limits: quota.Amounts) -> list[dict[str, Any]]:
        """Kueue's objects for the user (kueue.py) where Kueue admits the datacenter's jobs, with the Cohorts of
        the datacenter's teams (the flavor and cohorts before the queues naming them); else none."""
        if self.datacenter.admission != Admission.KUEUE:
            return []
        dc, username = self.datacenter.name, user.get_username()
        weight = Quota.objects.filter(user=user, datacenter=self.datacenter).values_list("weight")
        team = team_of(user, self.datacenter)  # where the user's jobs count (jobs.services), so where they queue
        team_name = team.group.name if team else None
        cluster_queue = kueue.cluster_queue(ns, dc, username, limits, (weight.first() or (Decimal(1),))[0], team_name)
        # Every team's Cohort, not only the user's: a team's idle quota is only there to borrow once its Cohort is.
        cohorts = [team_cohort(dc, each) for each in self._teams()]
        return [kueue.resource_flavor(), *cohorts, cluster_queue, kueue.local_queue(ns, dc, username)]

    def _ensure_gpu_flavor(self) -> None:
        # Made when missing, never rewritten: the operator's node labels on it stay (kueue.GPU_FLAVOR).
        self.ensure("ResourceFlavor", kueue.resource_flavor(kueue.GPU_FLAVOR))

    def ensure_priority_class(self, portal_class: str, value: int) -> str:
        """Kueue's WorkloadPriorityClass for the portal's class, made or given its value; its name.

        Once per NAMESPACE_RECHECK_SECONDS per class and process (and whenever the value changes): a start costs
        no call for it in between."""
        body = kueue.workload_priority_class(portal_class, value)
        name = kueue.priority_class_name(portal_class)
        key, digest = f"WorkloadPriorityClass/{name}", _digest(body)  # a "/" in no namespace's name
        made = _made_in(self.k8s)
        if made.made_as(key, digest) is None:
            self.ensure_current("WorkloadPriorityClass", body)
            made.remember(key, name, digest)
        return name

    def _stale(self, kind: str, body: dict[str, Any]) -> bool:
        current = self._read(kind, body["metadata"].get("namespace"), body["metadata"]["name"])
        return current is None or _content_hash(current) != _content_hash(_with_content_hash(body))

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

    def apply_quotas(self, users: Iterable[Any]) -> None:
        """The users' namespace quota and ClusterQueue, and every team's Cohort (a team's quota, may_borrow and
        weight), rewritten where they changed; a deleted team's Cohort goes, so its quota lends no more."""
        if self.datacenter.admission == Admission.KUEUE:
            wanted = [team_cohort(self.datacenter.name, team) for team in self._teams()]
            for body in wanted:
                self.ensure_current("Cohort", body)
            self._delete_cohorts_but({body["metadata"]["name"] for body in wanted})
        prefix = self.datacenter.namespace_prefix
        for user in users:
            self.ensure_user_namespace(user, names.namespace_name(prefix, user.get_username()))

    def _teams(self) -> list[TeamQuota]:
        teams = TeamQuota.objects.filter(datacenter=self.datacenter).select_related("group")
        return list(teams.order_by("group__name"))

    def _delete_cohorts_but(self, keep: set[str]) -> None:
        try:
            made = self.k8s.list("Cohort", None, label_selector=names.datacenter_selector(self.datacenter.name))
            for cohort in made:
                if cohort["metadata"]["name"] not in keep:
                    self.k8s.delete("Cohort", None, cohort["metadata"]["name"])
        except kube.KubeError as exc:
            raise self.refused("the teams' cohorts", exc) from None

    def revoke_registry_secret(self, username: str, name: str) -> None:
        """Blank `pcr-<name>` in the user's namespace, where one was written (replace only: the portal
        may not delete Secrets, and a namespace that never had it gets nothing)."""
        ns = names.namespace_name(self.datacenter.namespace_prefix, username)
        body = namespaces.revoked_registry_secret(ns, name, self.datacenter.name, username)
        try:
            self.k8s.replace("Secret", ns, body["metadata"]["name"], body)
        except kube.NotFound:
            return


def _content_hash(obj: dict[str, Any]) -> str | None:
    return ((obj.get("metadata") or {}).get("annotations") or {}).get(CONTENT_HASH)


def _with_content_hash(body: dict[str, Any]) -> dict[str, Any]:
    """The body with a hash of its content (all but metadata and status) as an annotation."""
    content = {k: v for k, v in body.items() if k not in ("metadata", "status")}
    meta = body["metadata"]
    annotations = {**(meta.get("annotations") or {}), CONTENT_HASH: _digest(content)}
    return {**body, "metadata": {**meta, "annotations": annotations}}


def _digest(content: Any) -> str:
    return hashlib.sha256(json.dumps(content, sort_keys=True).encode()).hexdigest()[:16]


def _made_as(namespace: dict[str, Any]) -> str:
    """The namespace's uid: one deleted and made again (by anyone) is a new one, whose objects are not ours yet."""
    meta = namespace.get("metadata") or {}
    return "" if meta.get("deletionTimestamp") else str(meta.get("uid") or "")


def team_cohort(datacenter: str, team: TeamQuota) -> dict[str, Any]:
    """The team's Cohort (kueue.team_cohort) from its TeamQuota row."""
    guaranteed = quota.Amounts(
        cpu=quantity.parse(team.cpu or "0", quantity.CPU, "cpu"),
        memory=int(quantity.parse(team.memory or "0", quantity.MEMORY, "memory")),
        gpu=team.gpu,
    )
    return kueue.team_cohort(datacenter, team.group.name, guaranteed, team.may_borrow, team.weight)
