"""The `kubernetes` engine: one job = a headless Service (the owner), a StatefulSet of pservers and an
Indexed Job of trainers in the user's namespace (see names.py and manifests.py for names, labels and volumes).

- start: creates what is missing (a retry after a crash finds the rest and creates only the rest).
- poll: three list calls per datacenter whatever the number of jobs (pods, Jobs, StatefulSets by
  label selector, all namespaces); a fourth (FailedCreate events) only in a cycle where some job
  lacks a pod it should have, to tell a quota rejection from a slow controller.
- finish: before a job's final state is written: archive every pod's log (trainers and pservers)
  into the job's output folder on the PFS, then stop the pservers (delete the StatefulSet) and any
  trainer still running (suspend the Job). The trainers' Job and Service stay until the TTL.
- stop: finish, plus for a killed job delete the Service: the garbage collector deletes the rest.
- cleanup (after the datacenter's finished_ttl): delete the Service, and with it everything else.
- reap: delete objects with our labels whose job row is gone, cleaned, or past its TTL.
- read_log: the pods' logs while they run (every attempt of a trainer index, in order; a pserver's
  previous and current container), the archive once it is written; one cursor (a byte offset) for both.

Test hook: `job.engine_data["pod_annotations"]` / `["pserver_annotations"]`, set before `start`, are
copied onto the trainer / pserver pods (tests choose what kwok makes of a pod that way).
"""

from __future__ import annotations

import gc
import hashlib
import json
import logging
import os
from dataclasses import replace
from datetime import timedelta
from functools import partial
from pathlib import Path
from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone
from paddlecloud.contract.states import worker_name

from datacenters import quota
from jobs import errorline, layout
from jobs.engines.base import Engine, EngineError, LogChunk, Observation, TransientEngineError, WorkerStatus
from jobs.engines.kubernetes import client as kube
from jobs.engines.kubernetes import manifests as m
from jobs.engines.kubernetes import names, policies
from jobs.engines.kubernetes import status as k8s_status
from jobs.logfiles import MAX_CHUNK, log_tail, parse_cursor, read_log_file, write_archive
from jobs.models import TERMINAL_STATES, Job, JobState, Role, Worker
from registry.models import RegistrySecret
from storage import paths

log = logging.getLogger(__name__)

QUOTA_GRACE_SECONDS = 30  # a quota rejection lasting this long (or half the pending timeout) fails the job
CONTENT_HASH = "paddlecloud.org/content-hash"
REAP_GRACE_SECONDS = 60  # objects younger than this are never reaped (their row may not be visible yet)


class KubernetesEngine(Engine):
    _client: kube.Kube | None = None

    @property
    def k8s(self) -> kube.Kube:
        if self._client is None:
            self._client = kube.for_datacenter(self.datacenter)
        return self._client

    # ----- helpers -----

    def _namespace(self, job: Job) -> str | None:
        ns = (job.engine_data or {}).get("namespace")
        return str(ns) if ns else None

    def _remember(self, job: Job, **values: Any) -> None:
        """Merge values into the row's engine_data (read under a row lock so no concurrent key is lost)."""
        with transaction.atomic():
            row = Job.objects.select_for_update().filter(pk=job.pk).values_list("engine_data", flat=True).first()
            if row is None:
                job.engine_data = {**(job.engine_data or {}), **values}
                return
            job.engine_data = {**(row or {}), **values}
            Job.objects.filter(pk=job.pk).update(engine_data=job.engine_data)

    def _output(self, job: Job) -> Path:
        return layout.output_dir(self.datacenter, job.owner.get_username(), job.name, job.uid)

    def _refused(self, what: str, exc: kube.KubeError) -> EngineError:
        return EngineError(f"the cluster refused {what}: {exc.message}")

    def _ensure(self, kind: str, body: dict[str, Any], read_existing: bool = False) -> dict[str, Any]:
        """Create the object; if it exists already (a retried start), keep it (and read it if asked)."""
        meta = body["metadata"]
        try:
            return self.k8s.create(kind, meta.get("namespace"), body)
        except kube.Conflict:
            return self.k8s.get(kind, meta.get("namespace"), meta["name"]) if read_existing else body
        except kube.KubeError as exc:
            raise self._refused(f"{kind} {meta['name']}", exc) from None

    def _ensure_current(self, kind: str, body: dict[str, Any], readable: bool = True) -> None:
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
            raise self._refused(f"{kind} {name}", exc) from None

    # ----- start -----

    def start(self, job: Job) -> None:
        self.package(job)
        username = job.owner.get_username()
        ns = self._namespace(job) or names.namespace_name(self.datacenter.namespace_prefix, username)
        if self._namespace(job) != ns:
            self._remember(job, namespace=ns)
        plan = m.plan_for(job, self.datacenter, ns)
        # The pods' uid must be able to write the job's folders (its log, its model); a root worker
        # would otherwise leave them root's and the launcher exits 71 (bug found by real pods).
        paths.prepare_dirs(
            self.datacenter,
            paths.places(self.datacenter, username),
            [self._output(job)],
            runs_as_root=os.geteuid() == 0,
            owner=(settings.PADDLECLOUD_POD_UID, settings.PADDLECLOUD_POD_GID),
        )

        self.ensure_user_namespace(job.owner, ns)
        if job.spec.get("registry"):
            self.ensure_registry_secret(job.owner, job.spec["registry"], ns)

        owner = self._ensure("Service", m.service(plan), read_existing=True)  # its uid is the owner reference
        # Before the pods: the namespace denies everything, this lets the job's pods reach each other.
        self._ensure("NetworkPolicy", policies.job_policy(ns, plan.uid, m.labels(plan), m.owner_reference(owner)))
        if plan.pservers:
            self._ensure("StatefulSet", m.pserver_set(plan, owner))
        self._ensure("Job", m.trainer_job(plan, owner))
        for role, count in ((Role.PSERVER, plan.pservers), (Role.TRAINER, plan.trainers)):
            for index in range(count):
                Worker.objects.get_or_create(job=job, role=role, index=index)

    def ensure_user_namespace(self, user: Any, ns: str) -> None:
        """The user's namespace, its ResourceQuota (their compute quota) and its NetworkPolicies (default
        deny, DNS, the egress the datacenter allows: policies.py), made or brought up to date."""
        username = user.get_username()
        try:
            self.k8s.create("Namespace", None, m.namespace(ns, self.datacenter.name, username))
        except kube.Conflict:
            pass
        except kube.KubeError as exc:
            raise self._refused(f"namespace {ns}", exc) from None
        limits = quota.limits(user, self.datacenter)
        self._ensure_current("ResourceQuota", m.resource_quota(ns, self.datacenter.name, username, limits))
        self._ensure_peer_policies(ns)
        labels = m.user_labels(self.datacenter.name, username)
        for policy in policies.namespace_policies(ns, labels, self.datacenter.job_egress, policies.cluster_cidrs()):
            self._ensure_current("NetworkPolicy", policy)

    def _ensure_peer_policies(self, ns: str) -> None:
        """`<uid>-peers` for every job in the namespace, before its default deny: a job started before
        the policies existed (an upgrade) keeps its pods talking. One list call; a create where missing."""
        selector = f"{names.MANAGED_BY}={names.MANAGER},{names.JOB_LABEL}"
        try:
            services = self.k8s.list("Service", ns, label_selector=selector)
            present = {p["metadata"]["name"] for p in self.k8s.list("NetworkPolicy", ns, label_selector=selector)}
        except kube.KubeError as exc:
            raise self._refused(f"the policies of namespace {ns}", exc) from None
        for service in services:
            meta = service["metadata"]
            if f"{meta['name']}-peers" not in present:
                owner = m.owner_reference({**service, "apiVersion": "v1", "kind": "Service"})
                self._ensure("NetworkPolicy", policies.job_policy(ns, meta["name"], meta["labels"], owner))

    def ensure_registry_secret(self, user: Any, name: str, ns: str) -> None:
        """The user's registry secret `name` as the docker-config Secret `pcr-<name>` in their namespace."""
        secret = RegistrySecret.objects.filter(owner=user, name=name).first()
        if secret is None:
            raise EngineError(f"registry: you have no registry secret named {name!r} any more")
        body = m.registry_secret(
            ns, name, self.datacenter.name, user.get_username(), secret.server, secret.username, secret.password
        )
        self._ensure_current("Secret", body, readable=False)

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
        self._ensure("NetworkPolicy", policies.build_policy(ns, uid, labels, owner, addresses, port))

    def image_builder(self) -> KubernetesEngine:
        """Builds run in the user's namespace of this cluster (images.builder), as the user's jobs do."""
        return self

    def revoke_registry_secret(self, username: str, name: str) -> None:
        """Blank `pcr-<name>` in the user's namespace, where one was written (replace only: the portal
        may not delete Secrets, and a namespace that never had it gets nothing)."""
        ns = names.namespace_name(self.datacenter.namespace_prefix, username)
        body = m.revoked_registry_secret(ns, name, self.datacenter.name, username)
        try:
            self.k8s.replace("Secret", ns, body["metadata"]["name"], body)
        except kube.NotFound:
            return

    # ----- poll -----

    def _facts(self, job: Job) -> k8s_status.Facts:
        submitted = job.submitted_at or job.created_at or timezone.now()
        timeout = int(job.spec.get("pending_timeout") or self.datacenter.pending_timeout)
        seen = (job.engine_data or {}).get("pserver_pods") or {}
        return k8s_status.Facts(
            uid=job.uid,
            trainers=job.trainers,
            pservers=job.pservers,
            max_retries=int(job.spec.get("max_retries") or 0),
            age=(timezone.now() - submitted).total_seconds(),
            pserver_pods={int(k): str(v) for k, v in seen.items()},
            running=job.state == JobState.RUNNING,
            quota_grace=min(QUOTA_GRACE_SECONDS, timeout / 2),
        )

    def poll(self, jobs: list[Job]) -> dict[int, Observation]:
        # The lists are megabytes of small dicts, all freed (by reference counting) when _poll returns:
        # with the cyclic collector paused until then, it never walks them (a ~0.15 s pause per 1000 pods).
        enabled = gc.isenabled()
        gc.disable()
        try:
            return self._poll(jobs)
        finally:
            if enabled:
                gc.enable()

    def _poll(self, jobs: list[Job]) -> dict[int, Observation]:
        selector = names.datacenter_selector(self.datacenter.name)
        pods = self.k8s.list("Pod", label_selector=selector)
        trainer_jobs = self.k8s.list("Job", label_selector=selector)
        sets = self.k8s.list("StatefulSet", label_selector=selector)
        objects = k8s_status.group(pods, trainer_jobs, sets)
        facts = {job.pk: self._facts(job) for job in jobs}
        empty = k8s_status.JobObjects()
        if any(k8s_status.missing_pods(facts[job.pk], objects.get(job.uid, empty)) for job in jobs):
            events = self.k8s.list("Event", field_selector="reason=FailedCreate")
            namespaces = {job.uid: self._namespace(job) or "" for job in jobs}
            k8s_status.attach_events(objects, namespaces, events)
        observations = {}
        for job in jobs:
            objs = objects.get(job.uid, empty)
            seen = k8s_status.observe(facts[job.pk], objs)
            observations[job.pk] = k8s_status.explain(seen, partial(self._worker_reason, job))
            self._remember_pservers(job, objs)
        self._check_registry_secrets(jobs, observations)
        return observations

    def _check_registry_secrets(self, jobs: list[Job], observations: dict[int, Observation]) -> None:
        """Jobs whose registry secret the user deleted: blank the namespace's copy once (the portal may
        not delete Secrets, see deploy/base/rbac.yaml; the deleted login must not pull anything any more) and,
        while the job still waits for its pods, say on the job why its image may not come."""
        named = [job for job in jobs if job.spec.get("registry")]
        if not named:
            return
        existing = set(
            RegistrySecret.objects.filter(
                owner_id__in={job.owner_id for job in named}, name__in={job.spec["registry"] for job in named}
            ).values_list("owner_id", "name")
        )
        for job in named:
            name = job.spec["registry"]
            if (job.owner_id, name) in existing:
                continue
            ns = self._namespace(job)
            if ns and not (job.engine_data or {}).get("registry_revoked"):
                body = m.revoked_registry_secret(ns, name, self.datacenter.name, job.owner.get_username())
                self._ensure_current("Secret", body, readable=False)
                self._remember(job, registry_revoked=True)
            seen = observations.get(job.pk)
            if seen is not None and seen.state == JobState.PENDING:
                note = (
                    f"registry secret {name!r} was deleted while the job was pending: its image cannot be "
                    "pulled with it (add the secret again and submit the job again)"
                )
                observations[job.pk] = replace(seen, message=f"{note}; {seen.message}" if seen.message else note)

    def _worker_reason(self, job: Job, worker: WorkerStatus) -> str:
        """A failed worker's last error line, from the log its launcher wrote on the PFS (jobs.errorline)."""
        return errorline.worker_reason(log_tail(job, worker_name(worker.role, worker.index)), worker.role)

    def _remember_pservers(self, job: Job, objs: k8s_status.JobObjects) -> None:
        """Record each pserver pod's uid the first time it runs: a different one later means it was replaced."""
        seen = dict((job.engine_data or {}).get("pserver_pods") or {})
        new = {}
        for (role, index), pods in k8s_status.by_worker(objs.pods).items():
            if role == "pserver" and str(index) not in seen and k8s_status.phase(pods[-1]) == "Running":
                new[str(index)] = pods[-1]["metadata"]["uid"]
        if new:
            self._remember(job, pserver_pods={**seen, **new})

    # ----- finish / stop / cleanup -----

    def _pods(self, job: Job, ns: str) -> list[dict[str, Any]]:
        return self.k8s.list("Pod", ns, label_selector=names.job_selector(job.uid))

    def finish(self, job: Job) -> bool:
        """Archive every pod's log, then stop the pservers and any trainer still running. Idempotent."""
        ns = self._namespace(job)
        if not ns or job.engine_data.get("finished"):
            return True
        if not job.engine_data.get("archived"):
            self._archive(job, ns, self._pods(job, ns))
            self._remember(job, archived=True)
        if job.pservers:
            self.k8s.delete("StatefulSet", ns, names.pserver_set_name(job.uid))
        # Suspending deletes the Job's running pods (and stops it creating any, e.g. after a quota
        # rejection) but keeps the Job and its pods' story until the TTL; a finished Job ignores it.
        try:
            self.k8s.patch("Job", ns, names.trainer_job_name(job.uid), {"spec": {"suspend": True}})
        except kube.KubeError as exc:  # gone already
            log.info("could not suspend the trainers of %s: %s", job.uid, exc.message)
        self._remember(job, finished=True)
        return True

    def stop(self, job: Job) -> bool:
        ns = self._namespace(job)
        if not ns:
            return True
        if job.state == JobState.KILLED or job.engine_data.get("remove"):
            if not job.engine_data.get("archived"):
                self._archive(job, ns, self._pods(job, ns))
                self._remember(job, archived=True)
            if not job.engine_data.get("owner_deleted"):
                self.k8s.delete("Service", ns, job.uid)  # the garbage collector deletes the rest
                self._remember(job, owner_deleted=True)
        else:
            self.finish(job)
        return not [p for p in self._pods(job, ns) if k8s_status.phase(p) in k8s_status.LIVE_PHASES]

    def cleanup(self, job: Job) -> bool:
        ns = self._namespace(job)
        if ns:
            self.k8s.delete("Service", ns, job.uid)
        return True

    def reap(self) -> int:
        """Delete the objects of jobs whose row is gone, cleaned, or finished longer ago than the TTL.

        Per job the owner (its Service) goes, and the garbage collector takes the rest; a StatefulSet or
        Job whose Service is already gone is deleted itself. Returns the number of jobs reaped.
        """
        selector = names.datacenter_selector(self.datacenter.name)
        by_job: dict[str, list[tuple[str, dict[str, Any]]]] = {}
        for kind in ("Service", "StatefulSet", "Job"):
            for obj in self.k8s.list(kind, label_selector=selector):
                by_job.setdefault(k8s_status.labels(obj).get(names.JOB_LABEL, ""), []).append((kind, obj))
        rows = {
            row["uid"]: row
            for row in Job.objects.filter(uid__in=list(by_job)).values("uid", "state", "cleaned", "finished_at")
        }
        now = timezone.now()
        ttl = timedelta(seconds=self.datacenter.finished_ttl)
        reaped = 0
        for uid, found in by_job.items():
            row = rows.get(uid)
            expired = bool(
                row and row["state"] in TERMINAL_STATES and row["finished_at"] and now - row["finished_at"] > ttl
            )
            if row is not None and not row["cleaned"] and not expired:
                continue
            created = [k8s_status.parse_time(obj["metadata"].get("creationTimestamp")) for _, obj in found]
            if row is None and any(c and now - c < timedelta(seconds=REAP_GRACE_SECONDS) for c in created):
                continue  # just made: its row may not be committed yet
            owners = [(kind, obj) for kind, obj in found if kind == "Service"]
            for kind, obj in owners or found:
                meta = obj["metadata"]
                log.info("reaping %s %s/%s (job %s)", kind, meta.get("namespace"), meta["name"], uid)
                self.k8s.delete(kind, meta.get("namespace"), meta["name"])
            reaped += 1
        return reaped

    # ----- logs -----

    def _pod_log(self, ns: str, pod: dict[str, Any], container: str, previous: bool = False) -> str:
        try:
            return self.k8s.log(ns, pod["metadata"]["name"], container, previous=previous)
        except kube.KubeError:
            return ""  # not started yet, no log kept, or gone: nothing to add

    def _worker_text(self, ns: str, role: str, pods: list[dict[str, Any]]) -> str:
        """One worker's log: every attempt in order (and a pserver's previous container before its current one)."""
        parts = []
        for pod in pods:
            status = k8s_status.container_status(pod)
            if role == "pserver" and int(status.get("restartCount") or 0) > 0:
                parts.append(self._pod_log(ns, pod, role, previous=True))
            if status.get("state", {}).get("running") or status.get("state", {}).get("terminated"):
                parts.append(self._pod_log(ns, pod, role))
        text = ""
        for part in parts:
            if text and not text.endswith("\n"):
                text += "\n"
            text += part
        return text

    def _archive(self, job: Job, ns: str, pods: list[dict[str, Any]]) -> None:
        """Write each worker's log to <output>/<role>_<index>/log.txt, atomically.

        The launcher tees the same bytes to that file from inside the pod; where that copy is longer
        (the kubelet rotates container logs, and the API then serves only the newest part), it stays.
        """
        for (role, index), attempts in k8s_status.by_worker(pods).items():
            text = self._worker_text(ns, role, attempts)
            if text:
                write_archive(job, worker_name(role, index), text.encode())

    def read_log(self, job: Job, worker: str, cursor: str) -> LogChunk:
        role, _, index_text = worker.partition("-")
        offset = parse_cursor(cursor)
        if job.engine_data.get("archived"):
            final = job.state in TERMINAL_STATES
            return read_log_file(job, worker, cursor, final=final) or LogChunk("", str(offset), complete=final)
        copy = read_log_file(job, worker, cursor, final=False)  # the launcher's own copy: the pod log's bytes
        if copy is not None:
            return copy
        ns = self._namespace(job)
        if not ns:
            return LogChunk(text="", cursor=str(offset), complete=False)
        try:
            pods = self.k8s.list("Pod", ns, label_selector=names.job_selector(job.uid, role))
            attempts = k8s_status.by_worker(pods).get((role, int(index_text)), [])
            data = self._worker_text(ns, role, attempts).encode()
        except TransientEngineError:
            return LogChunk(text="", cursor=str(offset), complete=False)
        chunk = data[offset : offset + MAX_CHUNK]
        if len(chunk) < MAX_CHUNK:
            chunk = chunk[: chunk.rfind(b"\n") + 1]  # a partial last line waits for its newline
        return LogChunk(text=chunk.decode("utf-8", errors="replace"), cursor=str(offset + len(chunk)), complete=False)
