"""The builder in the cluster: start its Job, follow it (one list of Jobs and one of pods per datacenter),
archive its log into the build row, and delete it. Idempotent: every step may run again after a crash.

The cluster is the datacenter's engine's, asked through its capability (jobs.engines.capabilities.ImageBuilds):
the user's namespace and registry secret, the builder's egress, and its API client; the manifests are
images.kaniko's.
"""

from __future__ import annotations

import contextlib
import io
import logging
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.utils import timezone
from paddlecloud.contract.dockerfile import REQUIREMENTS, runtime_dockerfile
from paddlecloud.contract.units import parse_time

from core.errors import DomainError
from datacenters.models import Datacenter
from images import kaniko as b
from images.models import ACTIVE_BUILD_STATES, BuildState, ImageBuild
from images.states import transition
from jobs.engines import engine_for
from jobs.engines.base import EngineError, TransientEngineError
from jobs.engines.capabilities import ImageBuilds
from jobs.engines.kubernetes import client as kube
from jobs.engines.kubernetes import names
from jobs.engines.kubernetes.manifests import owner_reference
from jobs.engines.kubernetes.storage import Storage
from jobs.files.logfiles import LogChunk, parse_cursor, read_chunk
from storage import paths

log = logging.getLogger(__name__)

MAX_LOG = 4 * 1024 * 1024  # bytes of the builder's log kept in the row (the end, where errors are)
# Queued, or building without a Job, this long (since the last start attempt): its start_build was lost
# or gave up retrying, so poll starts it again. Longer than start_build's longest retry countdown.
STUCK_START = timedelta(minutes=5)
REAP_GRACE = timedelta(seconds=60)


def cluster_of(datacenter: Datacenter) -> ImageBuilds:
    """What the datacenter's engine offers builds; EngineError where its engine builds none."""
    cluster = engine_for(datacenter)
    if not isinstance(cluster, ImageBuilds):
        raise EngineError(f"{datacenter.name} cannot build images (its engine is {datacenter.engine})")
    return cluster


def plan_for(build: ImageBuild, namespace: str) -> b.BuildPlan:
    """The build's plan; the package is resolved again (a link may have changed since the request)."""
    try:
        resolved = paths.resolve(build.owner, build.package, write=False, field="package")
    except DomainError as exc:
        raise EngineError(f"package: {exc.message}") from None
    if resolved.area != paths.HOME or not resolved.real.is_dir():
        raise EngineError(f"package: {build.package} is no longer a folder in your home")
    dc = build.datacenter
    job_user = f"{settings.PADDLECLOUD_POD_UID}:{settings.PADDLECLOUD_POD_GID}"  # the uid job pods run as
    requirements = (resolved.real / REQUIREMENTS).is_file()
    dockerfile = runtime_dockerfile(
        build.base_image, requirements=requirements, copy_owner=job_user, base_user=job_user
    )
    return b.BuildPlan(
        uid=build.uid,
        username=build.owner.get_username(),
        datacenter=dc.name,
        namespace=namespace,
        builder_image=dc.builder_image,
        package=resolved.name,
        image=build.image,
        dockerfile=dockerfile,
        registry_secret=names.registry_secret_name(build.registry),
        storage=Storage.of(dc),
        ca_pem=dc.builder_ca,
    )


def start(build: ImageBuild) -> None:
    """The user's namespace, quota and registry secret, then the builder Job and its ConfigMap."""
    cluster = cluster_of(build.datacenter)
    ns = names.namespace_name(build.datacenter.namespace_prefix, build.owner.get_username())
    plan = plan_for(build, ns)
    cluster.ensure_user_namespace(build.owner, ns)
    cluster.ensure_registry_secret(build.owner, build.registry, ns)
    name = names.build_job_name(build.uid)
    try:
        try:
            job = cluster.k8s.create("Job", ns, b.build_job(plan))
        except kube.Conflict:
            job = cluster.k8s.get("Job", ns, name)  # a retried start: the Job is there already
        # Before the ConfigMap, without which the builder's container cannot start.
        owner = {**owner_reference(job), "apiVersion": "batch/v1", "kind": "Job"}
        cluster.ensure_builder_egress(build.owner, build.registry, ns, build.uid, owner)
        with contextlib.suppress(kube.Conflict):  # a retried start: it is there already
            cluster.k8s.create("ConfigMap", ns, b.build_config(plan, job))
    except kube.KubeError as exc:
        raise EngineError(f"the cluster refused the builder: {exc.message}") from None
    # Only a build still building gets its Job: one cancelled (and maybe released, with no Job to
    # delete) while the Job was being made would otherwise leave it running, owned by no row.
    if not ImageBuild.objects.filter(pk=build.pk, state=BuildState.BUILDING).update(namespace=ns, k8s_job=name):
        log.info("build %s ended while its builder was made: deleting Job %s/%s", build.uid, ns, name)
        cluster.k8s.delete("Job", ns, name)


def _pod_log(k8s: kube.Kube, build: ImageBuild) -> str:
    pods = k8s.list("Pod", build.namespace, label_selector=f"{names.BUILD_LABEL}={build.uid}")
    if not pods:
        return ""
    try:
        return k8s.log(build.namespace, pods[-1]["metadata"]["name"], b.CONTAINER)
    except kube.KubeError:
        return ""  # never started (an image pull failed): no log


def _bounded(text: str) -> tuple[str, int]:
    """The end of the log the row keeps (where the errors are), and how many bytes before it were not."""
    data = text.encode()
    if len(data) <= MAX_LOG:
        return text, 0
    start = len(data) - MAX_LOG
    start = data.index(b"\n", start) + 1 if b"\n" in data[start:] else start  # from a whole line
    return data[start:].decode("utf-8", errors="replace"), start


def release(build: ImageBuild, k8s: kube.Kube | None = None) -> None:
    """Archive the builder's log into the row (once), then delete its Job (its pod and ConfigMap go with it)."""
    if build.released:
        return
    if build.k8s_job and build.namespace:
        k8s = k8s or cluster_of(build.datacenter).k8s
        if not build.log_archived:
            build.log, build.log_dropped = _bounded(_pod_log(k8s, build))
            build.log_archived = True
            ImageBuild.objects.filter(pk=build.pk).update(
                log=build.log, log_dropped=build.log_dropped, log_archived=True
            )
        k8s.delete("Job", build.namespace, build.k8s_job)
    build.released = True
    ImageBuild.objects.filter(pk=build.pk).update(released=True)


def _finish(build: ImageBuild, status: b.BuildStatus, k8s: kube.Kube) -> None:
    if status.succeeded:
        transition(build.pk, BuildState.SUCCEEDED, digest=status.digest[:200], message="")
    else:
        text = _pod_log(k8s, build)
        message = b.last_error_line(text) or status.message
        transition(build.pk, BuildState.FAILED, message=message)
    build.refresh_from_db()
    release(build, k8s)


def _by_build(objects: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    grouped: dict[str, list[dict[str, Any]]] = {}
    for obj in objects:
        uid = (obj["metadata"].get("labels") or {}).get(names.BUILD_LABEL, "")
        grouped.setdefault(uid, []).append(obj)
    for pods in grouped.values():
        pods.sort(key=lambda o: str(o["metadata"].get("creationTimestamp") or ""))
    return grouped


def poll(datacenter: Datacenter) -> list[int]:
    """Follow every build of the datacenter: two list calls, whatever their number.

    Returns the ids of builds whose start was lost (building, no Job, for STUCK_START): start them again.
    """
    k8s = cluster_of(datacenter).k8s
    selector = names.builds_selector(datacenter.name)
    jobs = _by_build(k8s.list("Job", label_selector=selector))
    pods = _by_build(k8s.list("Pod", label_selector=selector))
    now = timezone.now()
    stuck = ImageBuild.objects.filter(datacenter=datacenter, state=BuildState.QUEUED, updated_at__lt=now - STUCK_START)
    restart = list(stuck.values_list("pk", flat=True))  # their start_build message was lost
    ImageBuild.objects.filter(pk__in=restart).update(updated_at=now)
    for build in ImageBuild.objects.filter(datacenter=datacenter, state=BuildState.BUILDING).select_related(
        "owner", "datacenter"
    ):
        started = build.started_at or build.created_at
        if not build.k8s_job:
            if now - build.updated_at > STUCK_START:
                restart.append(build.pk)
                ImageBuild.objects.filter(pk=build.pk).update(updated_at=now)
            continue
        found = jobs.get(build.uid) or _job_made_since(k8s, build)
        if not found:
            transition(build.pk, BuildState.FAILED, message="the builder Job was deleted outside the portal")
            continue
        status = b.observe_build(
            found[0], pods.get(build.uid, []), (now - started).total_seconds(), datacenter.pending_timeout
        )
        if status.done:
            _finish(build, status, k8s)
        elif status.message != build.message:
            ImageBuild.objects.filter(pk=build.pk, state=BuildState.BUILDING).update(message=status.message)
    for build in ImageBuild.objects.filter(
        datacenter=datacenter, released=False, state__in=[s for s in BuildState if s not in ACTIVE_BUILD_STATES]
    ).select_related("owner", "datacenter"):
        release(build, k8s)
    _reap(k8s, jobs, now)
    return restart


def _job_made_since(k8s: kube.Kube, build: ImageBuild) -> list[dict[str, Any]]:
    """The build's Job asked for by name: it may have been made after the list (rows are read after it)."""
    try:
        return [k8s.get("Job", build.namespace, build.k8s_job)]
    except kube.NotFound:
        return []


def _reap(k8s: kube.Kube, jobs: dict[str, list[dict[str, Any]]], now: datetime) -> None:
    """Delete builder Jobs whose row is gone or released (an operator deleted it, a crash mid-release)."""
    keep = set(ImageBuild.objects.filter(uid__in=list(jobs), released=False).values_list("uid", flat=True))
    for uid, found in jobs.items():
        if uid in keep:
            continue
        for job in found:
            meta = job["metadata"]
            created = parse_time(meta.get("creationTimestamp"))
            if created and now - created < REAP_GRACE:
                continue  # just made: its row may not be committed yet
            log.info("reaping builder Job %s/%s", meta.get("namespace"), meta["name"])
            k8s.delete("Job", meta.get("namespace"), meta["name"])


def read_log(build: ImageBuild, cursor: str) -> LogChunk:
    """The builder's log after `cursor`: live from the pod, then from the archive, with the job logs'
    cursor rule (jobs.files.logfiles.read_chunk). Offsets count from the log's first byte in both, so a
    follower crosses from live to archived without losing or repeating a line."""
    offset = parse_cursor(cursor)
    if build.log_archived:
        data, dropped, final = build.log.encode(), build.log_dropped, True
    elif build.k8s_job and build.namespace:
        try:
            data = _pod_log(cluster_of(build.datacenter).k8s, build).encode()
        except TransientEngineError:
            return LogChunk(text="", cursor=str(offset), complete=False)
        dropped, final = 0, False
    else:
        return LogChunk(text="", cursor=str(offset), complete=not build.is_active)
    chunk = read_chunk(io.BytesIO(data), max(offset - dropped, 0), final)
    notice = f"[... the first {dropped} bytes of the builder's log were not kept ...]\n" if offset < dropped else ""
    return LogChunk(text=notice + chunk.text, cursor=str(dropped + int(chunk.cursor)), complete=chunk.complete)
