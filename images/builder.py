"""The builder of each build: start it, follow it (one look per datacenter), archive its log into the build row,
and delete it. Idempotent: every step may run again after a crash.

Builders run where the datacenter's engine runs them, asked through its capability
(jobs.engines.capabilities.ImageBuilds: a Kaniko Job on Kubernetes); this module keeps the rows: the checks
of the package, the Dockerfile, the states, the log and when a lost start is sent again.
"""

from __future__ import annotations

import io
import logging
from datetime import timedelta

from django.conf import settings
from django.utils import timezone
from paddlecloud.contract.dockerfile import REQUIREMENTS, runtime_dockerfile

from core.errors import DomainError
from datacenters.models import Datacenter
from images.models import ACTIVE_BUILD_STATES, BuildState, ImageBuild
from images.states import transition
from jobs.engines import engine_for
from jobs.engines.base import EngineError, TransientEngineError
from jobs.engines.capabilities import BuilderLook, BuilderSpec, BuildStatus, ImageBuilds
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


def spec_for(build: ImageBuild) -> BuilderSpec:
    """What the builder builds; the package is resolved again (a link may have changed since the request)."""
    try:
        resolved = paths.resolve(build.owner, build.package, write=False, field="package")
    except DomainError as exc:
        raise EngineError(f"package: {exc.message}") from None
    if resolved.area != paths.HOME or not resolved.real.is_dir():
        raise EngineError(f"package: {build.package} is no longer a folder in your home")
    job_user = f"{settings.PADDLECLOUD_POD_UID}:{settings.PADDLECLOUD_POD_GID}"  # the uid job pods run as
    requirements = (resolved.real / REQUIREMENTS).is_file()
    dockerfile = runtime_dockerfile(
        build.base_image, requirements=requirements, copy_owner=job_user, base_user=job_user
    )
    return BuilderSpec(build.uid, build.owner, build.registry, resolved.name, build.image, dockerfile)


def start(build: ImageBuild) -> None:
    """The builder, with what it needs of the owner's (namespace, quota, registry login)."""
    cluster = cluster_of(build.datacenter)
    ns, name = cluster.start_builder(spec_for(build))
    # Only a build still building gets its builder: one cancelled (and maybe released, with no builder to
    # delete) while the builder was being made would otherwise leave it running, owned by no row.
    if not ImageBuild.objects.filter(pk=build.pk, state=BuildState.BUILDING).update(namespace=ns, k8s_job=name):
        log.info("build %s ended while its builder was made: deleting %s/%s", build.uid, ns, name)
        cluster.delete_builder(ns, name)


def _bounded(text: str) -> tuple[str, int]:
    """The end of the log the row keeps (where the errors are), and how many bytes before it were not."""
    data = text.encode()
    if len(data) <= MAX_LOG:
        return text, 0
    start = len(data) - MAX_LOG
    start = data.index(b"\n", start) + 1 if b"\n" in data[start:] else start  # from a whole line
    return data[start:].decode("utf-8", errors="replace"), start


def release(build: ImageBuild, cluster: ImageBuilds | None = None) -> None:
    """Archive the builder's log into the row (once), then delete the builder."""
    if build.released:
        return
    if build.k8s_job and build.namespace:
        cluster = cluster or cluster_of(build.datacenter)
        if not build.log_archived:
            build.log, build.log_dropped = _bounded(cluster.builder_log(build.namespace, build.uid))
            build.log_archived = True
            ImageBuild.objects.filter(pk=build.pk).update(
                log=build.log, log_dropped=build.log_dropped, log_archived=True
            )
        cluster.delete_builder(build.namespace, build.k8s_job)
    build.released = True
    ImageBuild.objects.filter(pk=build.pk).update(released=True)


def _finish(build: ImageBuild, status: BuildStatus, cluster: ImageBuilds) -> None:
    if status.succeeded:
        transition(build.pk, BuildState.SUCCEEDED, digest=status.digest[:200], message="")
    else:
        message = cluster.builder_error(cluster.builder_log(build.namespace, build.uid)) or status.message
        transition(build.pk, BuildState.FAILED, message=message)
    build.refresh_from_db()
    release(build, cluster)


def poll(datacenter: Datacenter) -> list[int]:
    """Follow every build of the datacenter: one look at its builders, whatever their number.

    Returns the ids of builds whose start was lost (building, no builder, for STUCK_START): start them again.
    """
    cluster = cluster_of(datacenter)
    look = cluster.look_at_builders()
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
        status = look.status(build.uid, build.namespace, build.k8s_job, (now - started).total_seconds())
        if status is None:
            transition(build.pk, BuildState.FAILED, message="the builder Job was deleted outside the portal")
            continue
        if status.done:
            _finish(build, status, cluster)
        elif status.message != build.message:
            ImageBuild.objects.filter(pk=build.pk, state=BuildState.BUILDING).update(message=status.message)
    for build in ImageBuild.objects.filter(
        datacenter=datacenter, released=False, state__in=[s for s in BuildState if s not in ACTIVE_BUILD_STATES]
    ).select_related("owner", "datacenter"):
        release(build, cluster)
    _reap(cluster, look)
    return restart


def _reap(cluster: ImageBuilds, look: BuilderLook) -> None:
    """Delete builders whose row is gone or released (an operator deleted it, a crash mid-release)."""
    found = look.builders()
    keep = set(ImageBuild.objects.filter(uid__in=[b.uid for b in found], released=False).values_list("uid", flat=True))
    now = timezone.now()
    for builder in found:
        if builder.uid in keep or (builder.made and now - builder.made < REAP_GRACE):
            continue  # its build goes on, or it was just made: its row may not be committed yet
        log.info("reaping builder %s/%s", builder.namespace, builder.name)
        cluster.delete_builder(builder.namespace, builder.name)


def read_log(build: ImageBuild, cursor: str) -> LogChunk:
    """The builder's log after `cursor`: live from the pod, then from the archive, with the job logs'
    cursor rule (jobs.files.logfiles.read_chunk). Offsets count from the log's first byte in both, so a
    follower crosses from live to archived without losing or repeating a line."""
    offset = parse_cursor(cursor)
    if build.log_archived:
        data, dropped, final = build.log.encode(), build.log_dropped, True
    elif build.k8s_job and build.namespace:
        try:
            data = cluster_of(build.datacenter).builder_log(build.namespace, build.uid).encode()
        except TransientEngineError:
            return LogChunk(text="", cursor=str(offset), complete=False)
        dropped, final = 0, False
    else:
        return LogChunk(text="", cursor=str(offset), complete=not build.is_active)
    chunk = read_chunk(io.BytesIO(data), max(offset - dropped, 0), final)
    notice = f"[... the first {dropped} bytes of the builder's log were not kept ...]\n" if offset < dropped else ""
    return LogChunk(text=notice + chunk.text, cursor=str(dropped + int(chunk.cursor)), complete=chunk.complete)
