"""jobs.hooks: what an app above jobs registers is called at submit and start; jobs records the gate's answer."""

from __future__ import annotations

from django.contrib.auth.models import User

from datacenters.models import Datacenter
from images import jobs_on_builds
from jobs import hooks
from jobs.models import Job, JobState, Reason
from tests.pages.test_pages import make_job


def _admitted(decision: hooks.StartDecision, job: Job) -> tuple[hooks.Verdict, Job]:
    """What admit answers for `job` when the one gate decides `decision`, and the job's row after."""
    saved = list(hooks._start_gates)
    hooks._start_gates[:] = [lambda _: decision]
    try:
        verdict = hooks.admit(job.pk)
    finally:
        hooks._start_gates[:] = saved
    return verdict, Job.objects.get(pk=job.pk)


def test_admit_records_what_the_gate_answers(local_dc: Datacenter, alice: User) -> None:
    job = make_job(local_dc, alice, state=JobState.QUEUED, released=False)
    verdict, job = _admitted(hooks.StartDecision(hooks.Verdict.WAIT, Reason.IMAGE_BUILDING, "waiting for it"), job)
    assert verdict == hooks.Verdict.WAIT
    assert (job.state, job.reason, job.message) == (JobState.QUEUED, Reason.IMAGE_BUILDING, "waiting for it")
    verdict, job = _admitted(hooks.StartDecision(hooks.Verdict.GO, image="r.example/fit@sha256:" + "ab" * 32), job)
    assert verdict == hooks.Verdict.GO
    assert job.spec["image"].endswith("ab" * 32) and job.state == JobState.QUEUED
    verdict, job = _admitted(hooks.StartDecision(hooks.Verdict.FAILED, Reason.BUILD_FAILED, "it failed"), job)
    assert verdict == hooks.Verdict.FAILED
    assert (job.state, job.reason, job.message) == (JobState.FAILED, Reason.BUILD_FAILED, "it failed")


def test_a_job_past_the_queue_is_not_asked_about(local_dc: Datacenter, alice: User) -> None:
    job = make_job(local_dc, alice, state=JobState.RUNNING, released=False)
    verdict, job = _admitted(hooks.StartDecision(hooks.Verdict.FAILED, Reason.BUILD_FAILED, "never recorded"), job)
    assert verdict == hooks.Verdict.GO and job.state == JobState.RUNNING


def test_images_registers_its_hooks() -> None:
    assert jobs_on_builds.gate in hooks._start_gates and jobs_on_builds.check_build in hooks._spec_checks
    assert jobs_on_builds.builds_of in hooks._image_sources
