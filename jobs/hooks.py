"""Hooks: where an app above jobs (images) adds its rules to a job's submit and start, so jobs never imports it.

The app registers its functions in its AppConfig.ready(); jobs calls every registered one:
- a spec check, at submit: may fill the spec (a build's image and registry) or refuse it (Invalid);
- a start gate, before a queued job starts: GO, WAIT (still queued, say why) or FAILED (say why); the
  gate only answers, and `admit` here records its answer on the job (jobs' rows are written by jobs);
- an image source, for the API and the pages: the build a job runs on, for many jobs in one query.
With nothing registered, every spec passes, every job may start and no job shows a build.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from django.utils import timezone

from datacenters.models import Datacenter
from jobs import events
from jobs.models import EventKind, Job, JobState
from jobs.states import transition


class Verdict(StrEnum):
    GO = "go"
    WAIT = "wait"
    FAILED = "failed"


@dataclass(frozen=True)
class StartDecision:
    """A start gate's answer for one queued job."""

    verdict: Verdict
    reason: str = ""  # WAIT, FAILED: the job's Reason
    message: str = ""  # WAIT, FAILED: the job's message
    image: str = ""  # GO: the image the job runs on instead of its spec's ("" keeps the spec's)


GO = StartDecision(Verdict.GO)


@dataclass(frozen=True)
class ImageSource:
    """What the job's API answer and page show of the image build it runs on."""

    uid: str
    state: str
    message: str


SpecCheck = Callable[[Any, Datacenter, dict[str, Any]], None]  # (user, datacenter, spec): fill or raise Invalid
StartGate = Callable[[Job], StartDecision]  # a queued job (spec, owner_id, state loaded)
ImageSources = Callable[[Iterable[Job]], dict[int, ImageSource]]  # by job id, in one query

_spec_checks: list[SpecCheck] = []
_start_gates: list[StartGate] = []
_image_sources: list[ImageSources] = []


def register(
    *,
    spec_check: SpecCheck | None = None,
    start_gate: StartGate | None = None,
    image_sources: ImageSources | None = None,
) -> None:
    """Add an app's hooks (once, from its AppConfig.ready(); a repeat adds nothing)."""
    for hook, table in ((spec_check, _spec_checks), (start_gate, _start_gates), (image_sources, _image_sources)):
        if hook is not None and hook not in table:
            table.append(hook)  # type: ignore[arg-type]


def check_spec(user: Any, datacenter: Datacenter, spec: dict[str, Any]) -> None:
    """Every registered spec check, in order: each may fill `spec` or refuse it."""
    for check in _spec_checks:
        check(user, datacenter, spec)


def _decide(job: Job) -> StartDecision:
    for gate in _start_gates:
        decision = gate(job)
        if decision.verdict != Verdict.GO or decision.image:
            return decision
    return GO


def admit(job_id: int) -> Verdict:
    """May the queued job start? Asks the gates and records the answer: GO (its image pinned where the gate
    names one), WAIT (still queued, its reason and message say why), FAILED (the job fails with the reason)."""
    job = Job.objects.filter(pk=job_id).only("spec", "owner_id", "state").first()
    if job is None or job.state != JobState.QUEUED:
        return Verdict.GO  # gone, or past the queue: submit_job's own transitions decide
    decision = _decide(job)
    if decision.verdict == Verdict.FAILED:
        transition(job_id, JobState.FAILED, reason=decision.reason, message=decision.message[:2000])
    elif decision.verdict == Verdict.WAIT:
        _wait(job_id, decision)
    elif decision.image:
        Job.objects.filter(pk=job_id, state=JobState.QUEUED).update(spec={**job.spec, "image": decision.image})
    return decision.verdict


def _wait(job_id: int, decision: StartDecision) -> None:
    """Note why the job still waits; entering that reason is one timeline event, asking again is none."""
    # Touching updated_at keeps the stuck-submission sweep from re-sending it every cycle.
    values = {"reason": decision.reason, "message": decision.message[:2000], "updated_at": timezone.now()}
    queued = Job.objects.filter(pk=job_id, state=JobState.QUEUED)
    if queued.exclude(reason=decision.reason).update(**values):  # conditional: one event, whoever asks at once
        events.record(job_id, EventKind.QUEUED, f"{decision.reason}: {decision.message}")
    else:
        queued.update(**values)  # the same reason, perhaps a newer message (the build's state)


def image_sources_of(jobs: Iterable[Job]) -> dict[int, ImageSource]:
    """The builds the jobs run on, by job id (a page of the job list names many)."""
    jobs = list(jobs)
    found: dict[int, ImageSource] = {}
    for sources in _image_sources:
        found.update(sources(jobs))
    return found


def image_source_of(job: Job) -> ImageSource | None:
    """The build one job runs on, for its page; None when it names none."""
    return image_sources_of([job]).get(job.pk)
