"""The build's state machine as conditional UPDATEs (the first mover wins), and what its end wakes up."""

from __future__ import annotations

from typing import Any

from django.db import transaction
from django.utils import timezone

from core import transitions
from images.models import TERMINAL_BUILD_STATES, BuildState, ImageBuild
from jobs.follow.tasks import submit_job
from jobs.models import Job, JobState

# Which states each state may be entered from (the build's state machine, in one place).
ALLOWED_FROM: dict[BuildState, tuple[BuildState, ...]] = {
    BuildState.QUEUED: (),
    BuildState.BUILDING: (BuildState.QUEUED, BuildState.BUILDING),
    BuildState.SUCCEEDED: (BuildState.BUILDING,),
    BuildState.FAILED: (BuildState.QUEUED, BuildState.BUILDING),
    BuildState.CANCELLED: (BuildState.QUEUED, BuildState.BUILDING),
}


def transition(build_id: int, to: BuildState, **fields: Any) -> bool:
    """Move the build to `to` if its state allows it; True if moved. A move to an end wakes its jobs."""
    now = timezone.now()
    if to in TERMINAL_BUILD_STATES:
        fields.setdefault("finished_at", now)
    moved = transitions.move(ImageBuild, build_id, to, ALLOWED_FROM, **fields)
    if moved and to in TERMINAL_BUILD_STATES:
        transaction.on_commit(lambda: wake_jobs(build_id))
    return moved


def wake_jobs(build_id: int) -> None:
    """Send submit_job for every job still queued for this build (`paddlectl submit -build`): each one
    then starts on the image, or fails with the build's message (jobs.hooks.admit asks
    images.jobs_on_builds.gate)."""
    uid = ImageBuild.objects.filter(pk=build_id).values_list("uid", flat=True).first()
    if uid is None:
        return
    for job_id in Job.objects.filter(state=JobState.QUEUED, spec__build=uid).values_list("pk", flat=True):
        submit_job.delay(job_id)
