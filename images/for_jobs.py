"""What jobs need of image builds (`paddlectl submit -build`): check a submit's `build`, and gate its start.

A job whose spec names a build runs on that build's image, pulled with its registry secret. It is
written `queued` at once (its quota counted) and stays there while the build runs: submit_job asks
`gate` first and returns without starting it; when the build ends, images.states.wake_jobs enqueues
submit_job again (the reconciler's stuck-submission sweep is the safety net). No worker slot waits.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from django.utils import timezone

from core.errors import Invalid
from images.models import BuildState, ImageBuild
from jobs.models import Job, JobState, Reason
from jobs.states import transition


def check_build(user: Any, datacenter: Any, spec: dict[str, Any]) -> None:
    """Fill `image` and `registry` of a spec naming a build from the build; refuse a mismatch (400, naming it)."""
    uid = spec.get("build") or ""
    if not uid:
        return
    build = ImageBuild.objects.filter(owner=user, uid=uid).first()
    if build is None:
        raise Invalid(f"you have no image build {uid[:40]!r} (see `paddlectl images`)", "build")
    if build.datacenter_id != datacenter.pk:
        raise Invalid(f"{uid} builds in {build.datacenter.name}, not in {datacenter.name}", "build")
    if build.state in (BuildState.FAILED, BuildState.CANCELLED):
        raise Invalid(f"{uid} {build.state}: {build.message[:200]}", "build")
    for field, value in (("image", build.image), ("registry", build.registry)):
        if spec.get(field) and spec[field] != value:
            raise Invalid(f"must be {value!r} (what build {uid} uses) or left out", field)
        spec[field] = value


def build_of(job: Job) -> ImageBuild | None:
    """The build a job runs on (spec `build`), for its page; None when it names none."""
    return builds_of([job]).get(job.pk)


def builds_of(jobs: Iterable[Job]) -> dict[int, ImageBuild]:
    """The builds the jobs run on, by job id, in one query (a page of the job list names many)."""
    wanted = {(job.owner_id, (job.spec or {}).get("build")): job.pk for job in jobs if (job.spec or {}).get("build")}
    if not wanted:
        return {}
    builds = ImageBuild.objects.filter(uid__in={uid for _, uid in wanted})
    return {wanted[(b.owner_id, b.uid)]: b for b in builds if (b.owner_id, b.uid) in wanted}


WAIT, GO, FAILED = "wait", "go", "failed"


def _pin(job: Job, digest: str) -> None:
    """Run the job on what the build pushed, `image@sha256:...`: a later push to the tag changes nothing."""
    image = (job.spec or {}).get("image", "")
    if re.fullmatch(r"sha256:[0-9a-f]{64}", digest) and image and "@" not in image:
        Job.objects.filter(pk=job.pk, state=JobState.QUEUED).update(spec={**job.spec, "image": f"{image}@{digest}"})


def gate(job_id: int) -> str:
    """May the queued job start? GO (no build, or it succeeded), WAIT (still building), FAILED (job failed)."""
    job = Job.objects.filter(pk=job_id).only("spec", "owner_id", "state").first()
    uid = (job.spec or {}).get("build") if job else ""
    if job is None or not uid or job.state != JobState.QUEUED:
        return GO
    build = ImageBuild.objects.filter(owner_id=job.owner_id, uid=uid).only("state", "message", "digest").first()
    if build is None:
        transition(job_id, JobState.FAILED, reason=Reason.BUILD_FAILED, message=f"image build {uid} is gone")
        return FAILED
    if build.state == BuildState.SUCCEEDED:
        _pin(job, build.digest)
        return GO
    if build.state in (BuildState.FAILED, BuildState.CANCELLED):
        message = f"image build {uid} {build.state}: {build.message}"[:2000]
        transition(job_id, JobState.FAILED, reason=Reason.BUILD_FAILED, message=message)
        return FAILED
    # Touching updated_at keeps the stuck-submission sweep from re-sending it every cycle.
    Job.objects.filter(pk=job_id, state=JobState.QUEUED).update(
        reason=Reason.IMAGE_BUILDING,
        message=f"waiting for image build {uid} ({build.state})",
        updated_at=timezone.now(),
    )
    return WAIT
