"""Dependencies (spec `after`, `paddlectl submit -after NAME[:ok|any|failed]`): a job that starts after others.

At submit each name is resolved to the owner's job of that name (jobs.lookup's rule) and kept as a JobDependency
row; a job with one not yet ended as asked is `blocked`, reason WaitingForDependency, and the scheduler passes it
over (it holds no capacity and is charged nothing while it waits). When a job ends (jobs.signals.job_ended), its
dependents are settled: unblocked once every dependency ended as asked, or failed, reason DependencyNeverSatisfied,
never started, once one cannot (a dependency that must succeed failed or was killed). Each scheduling cycle also
settles the blocked jobs whose dependencies ended, the safety net for a dependency that ended while its
dependent's submit was still committing. A dependency that already ended otherwise is refused at submit (400).
"""

from __future__ import annotations

from typing import Any

from django.contrib.auth.models import User
from django.utils import timezone
from paddlecloud.contract.predecessors import parse_after

from core.errors import Invalid
from jobs import events
from jobs.lookup import job_named
from jobs.models import TERMINAL_STATES, EventKind, Job, JobDependency, JobState, Reason
from jobs.states import transition

MAX_SETTLED = 500  # blocked jobs one scheduling cycle settles at most


def met(condition: str, state: str) -> bool:
    """Whether a dependency that ended in `state` is what `condition` asks."""
    return {"ok": state == JobState.SUCCEEDED, "any": True, "failed": state != JobState.SUCCEEDED}[condition]


def resolve(user: User, after: list[str]) -> list[tuple[Job, str]]:
    """Each `NAME[:condition]` as the owner's job and its condition; Invalid naming `after` where one is unknown,
    or ended otherwise than asked (it never could be)."""
    found: list[tuple[Job, str]] = []
    for text in after:
        name, condition = parse_after(text)
        job = job_named(Job.objects.filter(owner=user), name, user)
        if job is None:
            raise Invalid(f"you have no job named {name!r} to start after", "after")
        if any(job.pk == seen.pk for seen, _ in found):
            raise Invalid(f"{text[:60]!r} names job {job.uid} a second time", "after")
        if job.state in TERMINAL_STATES and not met(condition, job.state):
            raise Invalid(f"job {name} ({job.uid}) {job.state}: it can never end {condition}", "after")
        found.append((job, condition))
    return found


def _waiting_message(rows: list[tuple[Job, str]]) -> str:
    return "waiting for " + ", ".join(f"{job.name} ({job.state}) to end {condition}" for job, condition in rows)


def record(job: Job, resolved: list[tuple[Job, str]]) -> None:
    """Keep the job's dependencies (in its submit's transaction); block it while one has not ended as asked."""
    JobDependency.objects.bulk_create(JobDependency(job=job, needs=needs, condition=c) for needs, c in resolved)
    waiting = [(needs, c) for needs, c in resolved if needs.state not in TERMINAL_STATES]
    if waiting:
        job.blocked, job.reason, job.message = True, Reason.WAITING_FOR_DEPENDENCY, _waiting_message(waiting)
        Job.objects.filter(pk=job.pk).update(blocked=True, reason=job.reason, message=job.message)


def settle(job_id: int) -> None:
    """Unblock the blocked job once every dependency ended as asked, or fail it once one cannot."""
    if not Job.objects.filter(pk=job_id, blocked=True, state=JobState.QUEUED).exists():
        return
    rows = [(d.needs, d.condition) for d in JobDependency.objects.filter(job_id=job_id).select_related("needs")]
    never = [(needs, c) for needs, c in rows if needs.state in TERMINAL_STATES and not met(c, needs.state)]
    if never:
        needs, condition = never[0]
        message = f"job {needs.name} ({needs.uid}) {needs.state}, and this job was to start once it ended {condition}"
        transition(job_id, JobState.FAILED, from_states=[JobState.QUEUED], reason=Reason.DEPENDENCY_NEVER_SATISFIED,
                   message=message, blocked=False)  # fmt: skip
        return
    waiting = [(needs, c) for needs, c in rows if needs.state not in TERMINAL_STATES]
    blocked = Job.objects.filter(pk=job_id, blocked=True, state=JobState.QUEUED)
    if waiting:
        blocked.filter(held=False).update(message=_waiting_message(waiting))  # a held job's reason stays Held
        return
    # Its wait in the queue starts now: the scheduler's age (preemption delay, backfill reservations) counts from
    # here, not from a submit hours ago. A job an operator holds stays held, its reason Held.
    now = timezone.now()
    unblocked = blocked.filter(held=False).update(blocked=False, reason=Reason.NONE, message="", queued_at=now)
    unblocked += blocked.filter(held=True).update(blocked=False, queued_at=now)
    if unblocked:
        events.record(job_id, EventKind.QUEUED, "its dependencies ended as asked: it waits for admission")


def on_job_ended(sender: Any, job_id: int, **kwargs: Any) -> None:
    """Receives jobs.signals.job_ended: settle the jobs that start after this one."""
    for dependent in JobDependency.objects.filter(needs_id=job_id).values_list("job_id", flat=True):
        settle(dependent)


def settle_blocked(datacenter_id: int) -> None:
    """The blocked jobs of the datacenter with a dependency that ended (at most MAX_SETTLED): settle each."""
    blocked = {"job__datacenter_id": datacenter_id, "job__blocked": True, "job__state": JobState.QUEUED}
    due = JobDependency.objects.filter(needs__state__in=TERMINAL_STATES, **blocked)
    for job_id in due.values_list("job_id", flat=True).distinct()[:MAX_SETTLED]:
        settle(job_id)
