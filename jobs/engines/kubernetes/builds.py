"""Image builders in the cluster: the Kubernetes engine's ImageBuilds capability (jobs.engines.capabilities).

A build's builder is a Kaniko Job (kaniko.py) in its owner's namespace, as the owner's jobs run there: the
namespace, its quota and the registry login are made or brought up to date first, then the Job, then the
egress to the registry and the ConfigMap (both owned by the Job, so deleting the Job deletes them). One look
at the builders is one list of Jobs and one of pods, whatever their number.
"""

from __future__ import annotations

import contextlib
from typing import Any

from paddlecloud.contract.units import parse_time

from jobs.engines.base import EngineError
from jobs.engines.capabilities import Builder, BuilderSpec, BuildStatus
from jobs.engines.kubernetes import client as kube
from jobs.engines.kubernetes import kaniko, names
from jobs.engines.kubernetes.manifests import owner_reference
from jobs.engines.kubernetes.objects import ClusterObjects
from jobs.engines.kubernetes.storage import Storage


def _by_build(objects: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    grouped: dict[str, list[dict[str, Any]]] = {}
    for obj in objects:
        uid = (obj["metadata"].get("labels") or {}).get(names.BUILD_LABEL, "")
        grouped.setdefault(uid, []).append(obj)
    for found in grouped.values():
        found.sort(key=lambda o: str(o["metadata"].get("creationTimestamp") or ""))
    return grouped


class KanikoLook:
    """The builder Jobs and pods of one datacenter, listed once (capabilities.BuilderLook)."""

    def __init__(self, k8s: kube.Kube, datacenter: str, pending_timeout: float) -> None:
        selector = names.builds_selector(datacenter)
        self.k8s, self.pending_timeout = k8s, pending_timeout
        self.jobs = _by_build(k8s.list("Job", label_selector=selector))
        self.pods = _by_build(k8s.list("Pod", label_selector=selector))

    def status(self, uid: str, namespace: str, name: str, age: float) -> BuildStatus | None:
        found = self.jobs.get(uid) or self._made_since(namespace, name)
        if not found:
            return None
        return kaniko.observe_build(found[0], self.pods.get(uid, []), age, self.pending_timeout)

    def _made_since(self, namespace: str, name: str) -> list[dict[str, Any]]:
        """The Job asked for by name: it may have been made after the list (the rows are read after it)."""
        try:
            return [self.k8s.get("Job", namespace, name)]
        except kube.NotFound:
            return []

    def builders(self) -> list[Builder]:
        return [
            Builder(uid, job["metadata"].get("namespace", ""), job["metadata"]["name"],
                    parse_time(job["metadata"].get("creationTimestamp")))
            for uid, found in self.jobs.items()
            for job in found
        ]  # fmt: skip


class ClusterBuilds(ClusterObjects):
    """Kaniko builders in the datacenter's cluster (capabilities.ImageBuilds)."""

    def start_builder(self, spec: BuilderSpec) -> tuple[str, str]:
        dc = self.datacenter
        ns = names.namespace_name(dc.namespace_prefix, spec.owner.get_username())
        plan = kaniko.BuildPlan(
            uid=spec.uid,
            username=spec.owner.get_username(),
            datacenter=dc.name,
            namespace=ns,
            builder_image=dc.builder_image,
            package=spec.package,
            image=spec.image,
            dockerfile=spec.dockerfile,
            registry_secret=names.registry_secret_name(spec.registry),
            storage=Storage.of(dc),
            ca_pem=dc.builder_ca,
        )
        self.ensure_user_namespace(spec.owner, ns)
        self.ensure_registry_secret(spec.owner, spec.registry, ns)
        name = names.build_job_name(spec.uid)
        try:
            try:
                job = self.k8s.create("Job", ns, kaniko.build_job(plan))
            except kube.Conflict:
                job = self.k8s.get("Job", ns, name)  # a retried start: the Job is there already
            # Before the ConfigMap, without which the builder's container cannot start.
            owner = {**owner_reference(job), "apiVersion": "batch/v1", "kind": "Job"}
            self.ensure_builder_egress(spec.owner, spec.registry, ns, spec.uid, owner)
            with contextlib.suppress(kube.Conflict):  # a retried start: it is there already
                self.k8s.create("ConfigMap", ns, kaniko.build_config(plan, job))
        except kube.KubeError as exc:
            raise EngineError(f"the cluster refused the builder: {exc.message}") from None
        return ns, name

    def look_at_builders(self) -> KanikoLook:
        return KanikoLook(self.k8s, self.datacenter.name, self.datacenter.pending_timeout)

    def builder_log(self, namespace: str, uid: str) -> str:
        pods = self.k8s.list("Pod", namespace, label_selector=f"{names.BUILD_LABEL}={uid}")
        if not pods:
            return ""
        try:
            return self.k8s.log(namespace, pods[-1]["metadata"]["name"], kaniko.CONTAINER)
        except kube.KubeError:
            return ""  # never started (an image pull failed): no log

    def builder_error(self, log: str) -> str:
        return kaniko.last_error_line(log)

    def delete_builder(self, namespace: str, name: str) -> None:
        self.k8s.delete("Job", namespace, name)
