"""Celery tasks for image builds: passed ids, idempotent, safe to run twice or after a worker died."""

from __future__ import annotations

import logging

from celery import shared_task
from celery.app.task import Task
from django.db.models import Q
from django.utils import timezone

from core.locks import exclusive
from datacenters.models import Datacenter
from images import builder
from images.models import ACTIVE_BUILD_STATES, BuildState, ImageBuild
from images.states import transition
from jobs.engines.base import EngineError, TransientEngineError

log = logging.getLogger(__name__)

# A cluster that stays unreachable is not retried here forever: after these the row waits, and the
# beat's poll (builder.STUCK_START, longer than any countdown) starts it again.
START_RETRIES = 5
MAX_COUNTDOWN = 60


def retry_countdown(retries: int) -> int:
    """Seconds before retry number `retries` + 1: 5, 10, 20, 40, then MAX_COUNTDOWN."""
    return min(MAX_COUNTDOWN, 5 << min(retries, 6))


@shared_task(name="images.start_build", bind=True, max_retries=START_RETRIES, acks_late=True)
def start_build(self: Task, build_id: int) -> None:  # type: ignore[type-arg]
    """Claim the build (queued -> building) and create its builder; a repeat finds the Job and stops."""
    transition(build_id, BuildState.BUILDING, started_at=timezone.now())
    build = ImageBuild.objects.select_related("owner", "datacenter").filter(pk=build_id).first()
    if build is None or build.state != BuildState.BUILDING or build.k8s_job:
        return  # cancelled, gone, or started already
    with exclusive(f"build-{build_id}") as held:
        if not held:
            return  # another worker is starting this very build
        try:
            builder.start(build)
        except EngineError as exc:
            transition(build_id, BuildState.FAILED, message=str(exc))
        except TransientEngineError as exc:
            # updated_at restarts poll's STUCK_START clock: no second start while this one retries.
            ImageBuild.objects.filter(pk=build_id, state=BuildState.BUILDING).update(
                message=f"retrying: {exc}", updated_at=timezone.now()
            )
            if self.request.retries >= START_RETRIES:
                log.warning("starting build %s gave up retrying (poll starts it again): %s", build_id, exc)
                return
            raise self.retry(countdown=retry_countdown(self.request.retries)) from None
    build.refresh_from_db()
    if build.state == BuildState.CANCELLED:
        stop_build.delay(build_id)  # cancelled while its Job was being made


@shared_task(name="images.stop_build", acks_late=True)
def stop_build(build_id: int) -> None:
    """Archive a finished or cancelled build's log and delete its builder."""
    build = ImageBuild.objects.select_related("owner", "datacenter").filter(pk=build_id).first()
    if build is None or build.is_active or build.released:
        return
    try:
        builder.release(build)
    except (EngineError, TransientEngineError) as exc:
        log.warning("releasing build %s failed (the next poll retries): %s", build.uid, exc)


@shared_task(name="images.poll_builds", ignore_result=True)
def poll_builds() -> None:
    with exclusive("poll-builds") as held:
        if not held:
            return  # the previous cycle is still running
        busy = Datacenter.objects.filter(
            Q(image_builds__state__in=ACTIVE_BUILD_STATES) | Q(image_builds__released=False)
        ).distinct()
        for datacenter in busy:
            try:
                for build_id in builder.poll(datacenter):
                    start_build.delay(build_id)
            except Exception:
                # One broken datacenter must not stop the others from being followed.
                log.exception("polling the builds of datacenter %s failed", datacenter.name)
