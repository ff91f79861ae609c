"""Jobs that run on an image build (`paddlectl submit -build`): their spec check, start gate and build shown.

A job whose spec names a build runs on that build's image, pulled with its registry secret. It is
written `queued` at once (its quota counted) and stays there while the build runs: submit_job asks the
start gate first (jobs.hooks.admit, which records the answer) and returns without starting it; when the
build ends, images.states.wake_jobs enqueues submit_job again (the reconciler's stuck-submission sweep
is the safety net). No worker slot waits. These functions only read: jobs writes its own rows.
Registered into jobs.hooks by images.apps.ImagesConfig.ready().
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from core.errors import Invalid
from images.models import BuildState, ImageBuild
from jobs.hooks import GO, ImageSource, StartDecision, Verdict
from jobs.models import Job, Reason


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


def builds_of(jobs: Iterable[Job]) -> dict[int, ImageSource]:
    """The builds the jobs run on, by job id, in one query (a page of the job list names many)."""
    wanted = {(job.owner_id, (job.spec or {}).get("build")): job.pk for job in jobs if (job.spec or {}).get("build")}
    if not wanted:
        return {}
    builds = ImageBuild.objects.filter(uid__in={uid for _, uid in wanted})
    return {
        wanted[(b.owner_id, b.uid)]: ImageSource(uid=b.uid, state=b.state, message=b.message)
        for b in builds
        if (b.owner_id, b.uid) in wanted
    }


def _pinned(job: Job, digest: str) -> str:
    """Run the job on what the build pushed, `image@sha256:...`: a later push to the tag changes nothing."""
    image = (job.spec or {}).get("image", "")
    if re.fullmatch(r"sha256:[0-9a-f]{64}", digest) and image and "@" not in image:
        return f"{image}@{digest}"
    return ""


def gate(job: Job) -> StartDecision:
    """May the queued job start? GO (no build, or it succeeded: on its digest), WAIT (still building), FAILED."""
    uid = (job.spec or {}).get("build")
    if not uid:
        return GO
    build = ImageBuild.objects.filter(owner_id=job.owner_id, uid=uid).only("state", "message", "digest").first()
    if build is None:
        return StartDecision(Verdict.FAILED, Reason.BUILD_FAILED, f"image build {uid} is gone")
    if build.state == BuildState.SUCCEEDED:
        return StartDecision(Verdict.GO, image=_pinned(job, build.digest))
    if build.state in (BuildState.FAILED, BuildState.CANCELLED):
        return StartDecision(Verdict.FAILED, Reason.BUILD_FAILED, f"image build {uid} {build.state}: {build.message}")
    return StartDecision(Verdict.WAIT, Reason.IMAGE_BUILDING, f"waiting for image build {uid} ({build.state})")
