"""The `kubernetes` engine: one job = a headless Service (the owner), a StatefulSet of pservers and an
Indexed Job of trainers in the user's namespace (see names.py and manifests.py for names, labels and volumes);
on a datacenter with `admission: kueue`, one JobSet admitted whole by Kueue (jobset.py, kueue.py), recorded
as `engine_data["layout"] = "jobset"` at start (a job keeps the layout it started with).

- start: creates what is missing (a retry after a crash finds the rest and creates only the rest).
- poll: in the control worker, no call at all: it reads the datacenter's pods, Jobs, StatefulSets and
  FailedCreate events from their watched mirror (watch.py). Elsewhere, or while a watch is broken, three
  list calls per datacenter whatever the number of jobs (pods, Jobs, StatefulSets by label selector, all
  namespaces); a fourth (FailedCreate events) only in a cycle where some job lacks a pod it should have,
  to tell a quota rejection from a slow controller.
- finish: before a job's final state is written: archive every pod's log (trainers and pservers)
  into the job's output folder on the PFS, then stop the pservers (delete the StatefulSet) and any
  trainer still running (suspend the Job). The trainers' Job and Service stay until the TTL.
- stop: finish, plus for a killed job delete the Service: the garbage collector deletes the rest.
- cleanup (after the datacenter's finished_ttl): delete the Service, and with it everything else.
- reap: delete objects with our labels whose job row is gone, cleaned, or past its TTL.
- read_log: the pods' logs while they run (every attempt of a trainer index, in order; a pserver's
  previous and current container), the archive once it is written; one cursor (a byte offset) for both
  (podlogs.py).

It writes no row: what it must remember (its namespace, that the logs are archived, ...) it reports to
the Recorder it is handed; the objects of a user's namespace are made by objects.py.

Test hook: `job.engine_data["pod_annotations"]` / `["pserver_annotations"]`, set before `start`, are
copied onto the trainer / pserver pods (tests choose what kwok makes of a pod that way).
"""

from __future__ import annotations

import gc
import logging
import os
import time
from collections.abc import Hashable, Mapping
from datetime import datetime, timedelta
from functools import partial
from pathlib import Path
from typing import Any

from django.conf import settings
from django.utils import timezone
from paddlecloud.contract.states import worker_name
from paddlecloud.contract.units import parse_time

from datacenters.models import Admission
from jobs.engines.base import Engine, EngineError, Observation, Recorder, TransientEngineError, WorkerStatus
from jobs.engines.kubernetes import client as kube
from jobs.engines.kubernetes import (
    jobset,
    kueue,
    names,
    podlogs,
    policies,
    revoked,
    spans,
    visibility,
    watch,
)
from jobs.engines.kubernetes import manifests as m
from jobs.engines.kubernetes import pods as k8s_pods
from jobs.engines.kubernetes import status as k8s_status
from jobs.engines.kubernetes import usage as k8s_usage
from jobs.engines.kubernetes.builds import ClusterBuilds
from jobs.engines.usage_samples import WorkerUsage
from jobs.files import errorline, layout
from jobs.files.logfiles import MAX_CHUNK, LogChunk, log_tail, parse_cursor, read_log_file
from jobs.models import TERMINAL_STATES, Job, JobState, Reason, Role
from storage import paths

log = logging.getLogger(__name__)

QUOTA_GRACE_SECONDS = 30  # a quota rejection lasting this long (or half the pending timeout) fails the job
REAP_GRACE_SECONDS = 60  # objects younger than this are never reaped (their row may not be visible yet)


class KubernetesEngine(ClusterBuilds, Engine):
    def _namespace(self, job: Job) -> str | None:
        ns = (job.engine_data or {}).get("namespace")
        return str(ns) if ns else None

    def _output(self, job: Job) -> Path:
        return layout.output_dir(self.datacenter, job.owner.get_username(), job.name, job.uid)

    # ----- start -----

    def start(self, job: Job, recorder: Recorder) -> None:
        package = self.package(job)
        username = job.owner.get_username()
        ns = self._namespace(job) or names.namespace_name(self.datacenter.namespace_prefix, username)
        if self._namespace(job) != ns:
            recorder.keep(job, {"namespace": ns})
        plan = m.plan_for(job, self.datacenter, ns)
        # The pods' uid must be able to write the job's folders (its log, its model); a root worker
        # would otherwise leave them root's and the launcher exits 71 (bug found by real pods).
        where = paths.places(self.datacenter, username)
        paths.prepare_dirs(
            self.datacenter,
            where,
            paths.job_dirs(where, package, self._output(job)),
            runs_as_root=os.geteuid() == 0,
            owner=(settings.PADDLECLOUD_POD_UID, settings.PADDLECLOUD_POD_GID),
        )

        self.ensure_user_namespace(job.owner, ns)
        if job.spec.get("registry"):
            self.ensure_registry_secret(job.owner, job.spec["registry"], ns)

        layout = (job.engine_data or {}).get("layout")  # a retried start keeps the layout it began with
        if layout is None and self.datacenter.admission == Admission.KUEUE:
            layout = jobset.LAYOUT
            recorder.keep(job, {"layout": layout})
        if layout == jobset.LAYOUT:
            # Suspended until Kueue admits it, so no pod starts before its NetworkPolicy exists.
            # The class's value as it was at submit (Job.priority), as the portal's scheduler ranks it: Kueue copies
            # the WorkloadPriorityClass's value into the Workload as it is made, so it is set to this job's own.
            priority_class = self.ensure_priority_class(job.priority_class, job.priority)
            owner = self.ensure("JobSet", jobset.jobset(plan, priority_class), read_existing=True)
        else:
            owner = self.ensure("Service", m.service(plan), read_existing=True)  # its uid is the owner reference
        # Before the pods: the namespace denies everything, this lets the job's pods reach each other.
        self.ensure("NetworkPolicy", policies.job_policy(ns, plan.uid, m.labels(plan), m.owner_reference(owner)))
        if layout != jobset.LAYOUT:
            if plan.pservers:
                self.ensure("StatefulSet", m.pserver_set(plan, owner))
            self.ensure("Job", m.trainer_job(plan, owner))
        recorder.planned(job, [(Role.PSERVER, index) for index in range(plan.pservers)])
        recorder.planned(job, [(Role.TRAINER, index) for index in range(plan.trainers)])

    # ----- poll -----

    def _facts(self, job: Job) -> k8s_status.Facts:
        submitted = job.submitted_at or job.created_at or timezone.now()
        timeout = int(job.spec.get("pending_timeout") or self.datacenter.pending_timeout)
        seen = (job.engine_data or {}).get("pserver_pods") or {}
        rejected_at = (job.engine_data or {}).get("quota_rejected_at")
        return k8s_status.Facts(
            uid=job.uid,
            trainers=job.trainers,
            pservers=job.pservers,
            max_retries=int(job.spec.get("max_retries") or 0),
            age=(timezone.now() - submitted).total_seconds(),
            pserver_pods={int(k): str(v) for k, v in seen.items()},
            running=job.state == JobState.RUNNING,
            quota_grace=min(QUOTA_GRACE_SECONDS, timeout / 2),
            quota_rejected_for=max(time.time() - float(rejected_at), 0.0) if rejected_at else 0.0,
        )

    def poll(self, jobs: list[Job], recorder: Recorder) -> dict[int, Observation]:
        # The lists are megabytes of small dicts, all freed (by reference counting) when _poll returns:
        # with the cyclic collector paused until then, it never walks them (a ~0.15 s pause per 1000 pods).
        enabled = gc.isenabled()
        gc.disable()
        try:
            return self._poll(jobs, recorder)
        finally:
            if enabled:
                gc.enable()

    def _poll(self, jobs: list[Job], recorder: Recorder) -> dict[int, Observation]:
        selector = names.datacenter_selector(self.datacenter.name)
        mirror = self._mirror()
        held = self._held(jobs, selector, mirror)
        admitted = [job for job in jobs if job.pk not in held]
        if not admitted:
            return held
        if mirror is not None:  # the watched copy: no call at all, and only these jobs' objects
            uids = [job.uid for job in admitted]
            pods, trainer_jobs = mirror.items("Pod", uids), mirror.items("Job", uids)
            sets = mirror.items("StatefulSet", uids)
        else:
            pods = self.k8s.list("Pod", label_selector=selector)
            trainer_jobs = self.k8s.list("Job", label_selector=selector)
            sets = self.k8s.list("StatefulSet", label_selector=selector)
        objects = k8s_pods.group(pods, trainer_jobs, sets)
        facts = {job.pk: self._facts(job) for job in admitted}
        empty = k8s_pods.JobObjects()
        if any(k8s_status.missing_pods(facts[job.pk], objects.get(job.uid, empty)) for job in admitted):
            if mirror is not None:
                events = mirror.items("Event")
            else:
                events = self.k8s.list("Event", field_selector="reason=FailedCreate")
            namespaces = {job.uid: self._namespace(job) or "" for job in admitted}
            k8s_pods.attach_events(objects, namespaces, events)
        observations = {}
        for job in admitted:
            objs = objects.get(job.uid, empty)
            seen = k8s_status.observe(facts[job.pk], objs)
            observations[job.pk] = k8s_status.explain(seen, partial(self._worker_reason, job))
            self._remember_pservers(job, objs, recorder)
            self._remember_quota_rejection(job, seen, recorder)
        observations.update(held)
        revoked.check_registry_secrets(jobs, observations, recorder, self.ensure_current)
        return observations

    def _mirror(self) -> watch.Mirror | None:
        """The datacenter's watched copy where this process keeps one and it is current (watch.mirror_for)."""
        selector, kueue_kinds = names.datacenter_selector(self.datacenter.name), self.datacenter.admission
        return watch.mirror_for(self.datacenter.pk, self.k8s, selector, kueue_kinds == Admission.KUEUE)

    def versions(self, job_uids: list[str], complete: bool = False) -> dict[str, Hashable] | None:
        """From the watched copy: each job's last change it saw (watch.Mirror.versions); None without one."""
        mirror = self._mirror()
        return None if mirror is None else dict(mirror.versions(job_uids, complete))

    def sample_usage(self, job: Job) -> dict[str, WorkerUsage]:
        """Its workers' use, from the kubelets their pods run on (usage.py); the pods from the watched copy if any."""
        mirror, ns = self._mirror(), self._namespace(job)
        pods = mirror.items("Pod", [job.uid]) if mirror is not None else self._pods(job, ns) if ns else []
        return k8s_usage.workers_usage(self.k8s, self.datacenter.kubelet_port, pods)

    def _held(self, jobs: list[Job], selector: str, mirror: watch.Mirror | None) -> dict[int, Observation]:
        """The JobSet-layout jobs Kueue has not admitted (or whose JobSet is gone): Kueue's reason (kueue.held)."""
        queued = [job for job in jobs if _layout(job) == jobset.LAYOUT]
        if not queued:
            return {}
        if mirror is not None and "JobSet" not in mirror.informers:
            mirror = None  # JobSet jobs of a datacenter switched back to `portal`: its mirror follows no JobSets
        uids = [job.uid for job in queued]
        found = mirror.items("JobSet", uids) if mirror is not None else self.k8s.list("JobSet", label_selector=selector)
        by_uid = {k8s_pods.labels(js).get(names.JOB_LABEL, ""): js for js in found}
        # Admitted jobs' Workloads too: an eviction Kueue undid before this look (the high job that preempted it
        # went) shows only there (kueue.held), and missing it would read the replaced pods as PserverLost. From the
        # watched copy that costs no call; without one, the list is one more call of a cycle that lists anyway.
        listed = mirror.items("Workload", uids) if mirror is not None else self.k8s.list("Workload")
        workloads = kueue.workloads_by_jobset(listed)
        result = {}
        for job in queued:
            its_jobset = by_uid.get(job.uid)
            workload = workloads.get(((its_jobset or {}).get("metadata") or {}).get("uid", ""))
            seen = kueue.held(self._facts(job), its_jobset, workload)
            if seen is not None:
                result[job.pk] = seen
        return result

    def queue_positions(self, jobs: list[Job]) -> dict[str, int]:
        """From Kueue's visibility API: each user's ClusterQueue is named as their namespace (kueue.cluster_queue)."""
        if self.datacenter.admission != Admission.KUEUE:
            return {}
        queues = {ns for job in jobs if _layout(job) == jobset.LAYOUT and (ns := self._namespace(job))}
        return visibility.queue_positions(self.datacenter.pk, lambda: self.k8s, queues) if queues else {}

    def set_preemption_costs(self, costs: Mapping[str, int]) -> int:
        """Each admitted JobSet job's priority boost (job uid -> boost) on its Workload, where it differs
        (kueue.boost_writes), at most kueue.MAX_BOOST_WRITES a call: the rest at the next. How many were written."""
        if self.datacenter.admission != Admission.KUEUE or not costs:
            return 0
        mirror = self._mirror()
        if mirror is not None and "JobSet" not in mirror.informers:
            mirror = None
        uids = list(costs)
        selector = names.datacenter_selector(self.datacenter.name)
        found = mirror.items("JobSet", uids) if mirror is not None else self.k8s.list("JobSet", label_selector=selector)
        listed = mirror.items("Workload", uids) if mirror is not None else self.k8s.list("Workload")
        written, refused = 0, ""
        for ns, name, boost in kueue.boost_writes(costs, found, listed)[: kueue.MAX_BOOST_WRITES]:
            try:
                self.k8s.patch("Workload", ns, name, {"metadata": {"annotations": {kueue.BOOST: boost}}})
                written += 1
            except kube.NotFound:
                continue  # its job ended meanwhile
            except kube.KubeError as exc:  # e.g. no `patch` on workloads (deploy/base/rbac.yaml grants it)
                refused = refused or f"{ns}/{name}: {exc}"
        if refused:
            raise EngineError(f"Kueue's Workloads refused their priority boost ({refused})")
        return written

    def _worker_reason(self, job: Job, worker: WorkerStatus) -> str:
        """A failed worker's last error line, from the log its launcher wrote on the PFS (jobs.files.errorline)."""
        return errorline.worker_reason(log_tail(job, worker_name(worker.role, worker.index)), worker.role)

    def _remember_pservers(self, job: Job, objs: k8s_pods.JobObjects, recorder: Recorder) -> None:
        """Record each pserver pod's uid the first time it runs: a different one later means it was replaced."""
        seen = dict((job.engine_data or {}).get("pserver_pods") or {})
        new = {}
        for (role, index), pods in objs.workers().items():
            if role == "pserver" and str(index) not in seen and k8s_pods.phase(pods[-1]) == "Running":
                new[str(index)] = pods[-1]["metadata"]["uid"]
        if new:
            recorder.keep(job, {"pserver_pods": {**seen, **new}})

    def _remember_quota_rejection(self, job: Job, seen: Observation, recorder: Recorder) -> None:
        """When its pods were first refused by the quota (the grace counts from then); forgotten once they are not."""
        since = (job.engine_data or {}).get("quota_rejected_at")
        if seen.reason == Reason.QUOTA_EXCEEDED and not since:
            recorder.keep(job, {"quota_rejected_at": time.time()})
        elif seen.reason != Reason.QUOTA_EXCEEDED and since:
            recorder.keep(job, {"quota_rejected_at": None})

    # ----- finish / stop / cleanup -----

    def _pods(self, job: Job, ns: str) -> list[dict[str, Any]]:
        return self.k8s.list("Pod", ns, label_selector=names.job_selector(job.uid))

    def finish(self, job: Job, recorder: Recorder) -> bool:
        """Archive every pod's log, then stop the pservers and any trainer still running. Idempotent."""
        ns = self._namespace(job)
        if not ns or job.engine_data.get("finished"):
            return True
        self._archive_once(job, ns, recorder)
        if _layout(job) == jobset.LAYOUT:
            # Kueue would unsuspend an admitted JobSet: deleting it stops every pod and gives the quota back
            # to the queue at once (the logs are archived, the job's rows keep its story).
            self.k8s.delete("JobSet", ns, job.uid)
            recorder.keep(job, {"finished": True, "owner_deleted": True})
            return True
        if job.pservers:
            self.k8s.delete("StatefulSet", ns, names.pserver_set_name(job.uid))
        # Suspending deletes the Job's running pods (and stops it creating any, e.g. after a quota
        # rejection) but keeps the Job and its pods' story until the TTL; a finished Job ignores it.
        try:
            self.k8s.patch("Job", ns, names.trainer_job_name(job.uid), {"spec": {"suspend": True}})
        except kube.KubeError as exc:  # gone already
            log.info("could not suspend the trainers of %s: %s", job.uid, exc.message)
        recorder.keep(job, {"finished": True})
        return True

    def _archive_once(self, job: Job, ns: str, recorder: Recorder) -> None:
        """Keep every pod's log on the PFS (podlogs.archive), once; a refused folder is said on its worker."""
        if job.engine_data.get("archived"):
            return
        pods = self._pods(job, ns)
        for worker, message in podlogs.archive(self.k8s, job, ns, pods).items():
            recorder.note(job, worker, message)
        # The pods go next (a JobSet is deleted at once): their real start and end times are kept for the ledger.
        recorder.keep(job, {"archived": True, "spans": spans.to_json(spans.worker_spans(pods))})

    def worker_spans(self, job: Job) -> dict[str, tuple[datetime | None, datetime | None]]:
        """The pods' own start and end times, as read when their logs were archived (spans.py)."""
        return spans.from_json(job.engine_data.get("spans"))

    def stop(self, job: Job, recorder: Recorder, grace: float | None = None) -> bool:
        """Pods get their own terminationGracePeriodSeconds; `grace` is the local engine's concern."""
        ns = self._namespace(job)
        if not ns:
            return True
        if job.state == JobState.KILLED or job.remove_when_released or job.preempted_at is not None:
            self._archive_once(job, ns, recorder)
            if not job.engine_data.get("owner_deleted"):
                # The garbage collector deletes the rest; a JobSet in the foreground: it stays until its child
                # Jobs are gone, whose names a requeued job's next JobSet takes (it would find and keep them).
                propagation = "Foreground" if _layout(job) == jobset.LAYOUT else "Background"
                self.k8s.delete(_owner_kind(job), ns, job.uid, propagation=propagation)
                recorder.keep(job, {"owner_deleted": True})
        else:
            self.finish(job, recorder)
        if _layout(job) == jobset.LAYOUT and self._read("JobSet", ns, job.uid) is not None:
            return False  # not stopped until the JobSet and its child Jobs are gone (see above)
        return not [p for p in self._pods(job, ns) if k8s_pods.phase(p) in k8s_pods.LIVE_PHASES]

    def cleanup(self, job: Job, recorder: Recorder) -> bool:
        ns = self._namespace(job)
        if ns:
            self.k8s.delete(_owner_kind(job), ns, job.uid)
        return True

    def reap(self) -> int:
        """Delete the objects of jobs whose row is gone, cleaned, or finished longer ago than the TTL.

        Per job the owner (its Service) goes, and the garbage collector takes the rest; a StatefulSet or
        Job whose Service is already gone is deleted itself. Returns the number of jobs reaped.
        """
        selector = names.datacenter_selector(self.datacenter.name)
        by_job: dict[str, list[tuple[str, dict[str, Any]]]] = {}
        kinds = ["Service", "StatefulSet", "Job"] + (["JobSet"] if self.datacenter.admission == Admission.KUEUE else [])
        for kind in kinds:
            for obj in self.k8s.list(kind, label_selector=selector):
                by_job.setdefault(k8s_pods.labels(obj).get(names.JOB_LABEL, ""), []).append((kind, obj))
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
            created = [parse_time(obj["metadata"].get("creationTimestamp")) for _, obj in found]
            if row is None and any(c and now - c < timedelta(seconds=REAP_GRACE_SECONDS) for c in created):
                continue  # just made: its row may not be committed yet
            owners = [(kind, obj) for kind, obj in found if kind in ("Service", "JobSet")]
            for kind, obj in owners or found:
                meta = obj["metadata"]
                log.info("reaping %s %s/%s (job %s)", kind, meta.get("namespace"), meta["name"], uid)
                self.k8s.delete(kind, meta.get("namespace"), meta["name"])
            reaped += 1
        return reaped

    # ----- logs -----

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
            attempts = k8s_pods.by_worker(pods).get((role, int(index_text)), [])
            data = podlogs.worker_text(self.k8s, ns, role, attempts).encode()
        except TransientEngineError:
            return LogChunk(text="", cursor=str(offset), complete=False)
        chunk = data[offset : offset + MAX_CHUNK]
        if len(chunk) < MAX_CHUNK:
            chunk = chunk[: chunk.rfind(b"\n") + 1]  # a partial last line waits for its newline
        return LogChunk(text=chunk.decode("utf-8", errors="replace"), cursor=str(offset + len(chunk)), complete=False)


def _layout(job: Job) -> str:
    """How the job was started: "jobset" (one JobSet admitted by Kueue), else the Service + StatefulSet + Job."""
    return str((job.engine_data or {}).get("layout") or "")


def _owner_kind(job: Job) -> str:
    """The object whose deletion deletes everything else of the job."""
    return "JobSet" if _layout(job) == jobset.LAYOUT else "Service"
