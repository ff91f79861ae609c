"""Every write to jobs goes through here: submit (check, then a short transaction), dry run, kill and remove, and
the operators' queue verbs (hold, release, front).

Check-then-do: `submit_request` (what the API and the submit page both call) validates the spec with its
serializer, `check` turns the valid spec into a typed `Checked` (every check that needs no lock), and
`submit` / `dry_run` take only that.
"""

from __future__ import annotations

import logging
import secrets
import string
from collections.abc import Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from django.contrib.auth.models import User
from django.db import IntegrityError, transaction
from django.db.models import QuerySet
from django.utils import timezone
from kombu.exceptions import OperationalError as KombuOperationalError
from paddlecloud.contract.units import quantity_bytes

from core.errors import Conflict, Invalid
from datacenters import quota
from datacenters.models import Datacenter, rules_for, team_of, usable_datacenter
from jobs import events, hooks, spec
from jobs.files import checkpoints, layout
from jobs.follow.reconcile import workers_stopping
from jobs.follow.tasks import kill_job, schedule
from jobs.models import (
    ACTIVE_STATES,
    RESUME_CHECKPOINT,
    SPEC_EXPERIMENT,
    SPEC_TRIAL,
    TERMINAL_STATES,
    EventKind,
    Job,
    JobState,
    Reason,
)
from jobs.scheduling import cycle, dependencies, priorities
from jobs.spec import JobSpecSerializer
from jobs.states import remove_when_released, transition
from registry.models import RegistrySecret

log = logging.getLogger(__name__)

_SUFFIX_ALPHABET = string.ascii_lowercase + string.digits


def _uid(name: str) -> str:
    return f"{name}-{''.join(secrets.choice(_SUFFIX_ALPHABET) for _ in range(5))}"


def choose_datacenter(user: User, name: str | None) -> Datacenter:
    if name:
        return usable_datacenter(user, name)
    usable = list(Datacenter.objects.usable_by(user)[:2])
    if len(usable) == 1:
        return usable[0]
    names = ", ".join(Datacenter.objects.usable_by(user).values_list("name", flat=True)) or "none"
    raise Invalid(f"required; you may use: {names}", "datacenter")


def _cores(value: Any) -> str:
    return f"{Decimal(value).normalize():f} cores"


@dataclass(frozen=True)
class Checked:
    """A submission that passed every check needing no lock: the spec, and the amounts already parsed."""

    user: User
    datacenter: Datacenter
    spec: dict[str, Any]
    cpu: Decimal
    memory: int
    gpu: int
    limits: quota.Amounts
    priority: int
    after: list[tuple[Job, str]] = field(default_factory=list)  # its dependencies, resolved (spec `after`)


def check(user: User, valid_spec: Mapping[str, Any], upload_pending: bool = False, auto_resume: bool = True) -> Checked:
    """Every check of a submission that needs no lock: datacenter, registry, package, engine, quantities.

    valid_spec: what the job spec serializer validated (jobs.spec.JobSpecSerializer).
    upload_pending: the package is about to be uploaded (a dry run before `paddlectl submit`
    uploads), so its path must be one the user may write, but need not exist yet.
    auto_resume: a rerun of a failed job resumes from its latest checkpoint unless `resume_from` says otherwise.
    """
    data = dict(valid_spec)
    datacenter = choose_datacenter(user, data.pop("datacenter", None))
    data["datacenter"] = datacenter.name
    after = dependencies.resolve(user, data.get("after") or [])  # the user's own jobs, each ended as asked or not yet
    resume = checkpoints.resume_point(user, datacenter, data, auto_resume)
    if resume is not None:  # the job finds it as paddlecloud.checkpoint.latest() (PADDLECLOUD_RESUME_FROM)
        data[RESUME_CHECKPOINT] = {"path": resume.path, "step": resume.step}
    hooks.check_spec(user, datacenter, data)  # e.g. a build's image and registry become the job's
    if data["registry"] and not RegistrySecret.objects.filter(owner=user, name=data["registry"]).exists():
        raise Invalid(
            f"you have no registry secret named {data['registry']!r} (see `paddlectl get registry`)", "registry"
        )
    if upload_pending:
        layout.check_upload_target(datacenter, user, data["package"], data["jobname"])
    else:
        layout.resolve_package(datacenter, user, data["package"], data["jobname"])
    rules_for(datacenter.engine).check_spec(datacenter, data)  # the local engine: `image` names a runtime, ...
    cpu, memory, gpu = spec.requested(data)
    chosen = priorities.resolve(user, data.get("priority"))
    priorities.check_opt_out(user, chosen, bool(data.get("no_preempt")))
    data["priority"] = chosen.name
    limits = quota.limits(user, datacenter)
    return Checked(user, datacenter, data, cpu, memory, gpu, limits, chosen.value, after)


def _check_could_start(checked: Checked) -> None:
    """Refuse only a job that could never start: bigger than its owner's quota or the datacenter's capacity.

    Everything else is accepted and queued (jobs/scheduling): the quota caps what runs at once, not what
    may be submitted. Only already-parsed numbers, so it is quick.
    """
    limits, name = checked.limits, checked.datacenter.name
    problems = [
        f"{label}: the job needs {show(asked)} but your quota in {name} is {show(limit)}, so it could never start"
        for label, asked, limit, show in (
            ("cpu", checked.cpu, limits.cpu, _cores),
            ("memory", checked.memory, limits.memory, lambda n: quantity_bytes(int(n))),
            ("gpu", checked.gpu, limits.gpu, str),
            ("jobs", 1, limits.jobs, lambda n: f"{n} running jobs"),
        )
        if asked > limit
    ]
    if problems:
        raise Invalid(problems, "quota")
    room = cycle.never_fits(checked.datacenter, (checked.cpu, checked.memory, checked.gpu))
    if room:
        raise Invalid([f"{problem}, so it could never start" for problem in room], "capacity")


def _check_queue_room(checked: Checked) -> None:
    """A user's waiting jobs are bounded (the datacenter's max_queued_jobs): the queue is shared."""
    bound = checked.datacenter.max_queued_jobs
    if cycle.waiting(checked.datacenter).filter(owner=checked.user).count() >= bound:
        raise Invalid(
            f"you already have {bound} jobs waiting in {checked.datacenter.name}, the most allowed; "
            "let some start or kill some",
            "queue",
        )


def _check_name_free(checked: Checked) -> None:
    name = checked.spec["jobname"]
    state = Job.objects.filter(owner=checked.user, name=name, state__in=ACTIVE_STATES).values_list("state", flat=True)
    if state:
        raise Conflict(
            f"you already have an active job named {name!r} ({state[0]}); kill it or choose another name", "jobname"
        )


def dry_run(checked: Checked) -> Job:
    """Answer what submit would, quota and name included, creating nothing: the job as it would be."""
    _check_could_start(checked)
    _check_queue_room(checked)
    _check_name_free(checked)
    name = checked.spec["jobname"]
    return Job(owner=checked.user, datacenter=checked.datacenter, name=name, uid="", spec=checked.spec)


IDEMPOTENCY_KEY = "idempotency_key"  # where a submit's key is kept: in the job's spec, shown with it


def submitted_with(user: User, key: str | None, jobname: str) -> Job | None:
    """The job an earlier submit with this idempotency key created (a retried submit gets it back), else None.

    A key names one submission: the same key with another job name is a client's mistake, refused.
    """
    if not key:
        return None
    earlier = Job.objects.filter(owner=user, **{f"spec__{IDEMPOTENCY_KEY}": key}).order_by("-created_at").first()
    if earlier is not None and earlier.name != jobname:
        raise Conflict(
            f"this idempotency key was used to submit job {earlier.name!r}, not {jobname!r}", "Idempotency-Key"
        )
    return earlier


def _elastic(spec: dict[str, Any]) -> dict[str, int]:
    """An elastic job's size bounds (spec min_parallelism below parallelism); {} for a fixed size."""
    least, most = int(spec.get("min_parallelism") or 0), int(spec.get("parallelism") or 1)
    return {"min_trainers": least, "max_trainers": most} if 0 < least < most else {}


def submit(checked: Checked, idempotency_key: str | None = None) -> Job:
    """Check the quota and the name again under the user's lock and create the job; submit_job runs on commit.

    With an idempotency key, a submit that already created its job returns that job instead of a second
    one (or a name conflict): a client whose answer was lost can send the same submit again.
    """
    user, data = checked.user, checked.spec
    if idempotency_key:
        data = {**data, IDEMPOTENCY_KEY: idempotency_key}
    # Short: the checks above needed no lock; here only the quota and name re-check and one insert.
    with transaction.atomic():
        # Serialize this user's submissions so two at once cannot both fit in the last slot of quota.
        User.objects.select_for_update().filter(pk=user.pk).first()
        earlier = submitted_with(user, idempotency_key, data["jobname"])
        if earlier is not None:
            return earlier
        _check_could_start(checked)
        _check_queue_room(checked)
        _check_name_free(checked)
        try:
            with transaction.atomic():
                job = Job.objects.create(
                    owner=user,
                    datacenter=checked.datacenter,
                    name=data["jobname"],
                    uid=_uid(data["jobname"]),
                    spec=data,
                    cpu_request=checked.cpu,
                    memory_request=checked.memory,
                    gpu_request=checked.gpu,
                    priority_class=data["priority"],
                    priority=checked.priority,
                    preemptible=not data.get("no_preempt"),
                    **_elastic(data),
                    team=team.group if (team := team_of(user, checked.datacenter)) else None,
                    queued_at=timezone.now(),
                )
        except IntegrityError:
            # Another submit won the race for the name: the same submission (its key) answers with its job.
            earlier = submitted_with(user, idempotency_key, data["jobname"])
            if earlier is not None:
                return earlier
            raise Conflict(f"you already have an active job named {data['jobname']!r}", "jobname") from None
        events.record(job.pk, EventKind.SUBMITTED, _submitted_message(job))
        if RESUME_CHECKPOINT in data:
            events.record(job.pk, EventKind.SUBMITTED, f"resumes from {data[RESUME_CHECKPOINT]['path']}")
        if checked.after:
            dependencies.record(job, checked.after)
        transaction.on_commit(lambda: wake_scheduler(checked.datacenter.pk))
    return job


def _submitted_message(job: Job) -> str:
    roles = f"{job.trainers} trainer(s)" + (f" and {job.pservers} pserver(s)" if job.pservers else "")
    return f"to datacenter {job.datacenter.name}: {roles}, priority {job.priority_class}"


class InvalidSpec(Invalid):
    """The spec breaks the job spec serializer's rules: `problems` holds each field's messages."""

    def __init__(self, problems: Mapping[str, Any]) -> None:
        super().__init__([f"{field}: {problem}" for field, found in problems.items() for problem in found])
        self.problems = problems


@dataclass(frozen=True)
class Submitted:
    """What a submit request did: the job it created (or would create), and how it got there."""

    job: Job
    checked: Checked | None  # None where the job is an earlier submit's (a replay)
    replayed: bool = False  # the idempotency key named an earlier submit: its job, nothing created


def submit_request(
    user: User,
    data: Mapping[str, Any],
    check_only: bool = False,
    upload_pending: bool = False,
    idempotency_key: str | None = None,
    trial_of: tuple[str, int] | None = None,
) -> Submitted:
    """A submission as the client sends it: validate, check, then create the job (or, `check_only`, a dry run).
    `trial_of` (an experiment's uid, the trial's index) is for experiments' own submits; no client sets it.

    InvalidSpec when the spec breaks its serializer's rules; a DomainError naming its field when a check fails.
    """
    serializer = JobSpecSerializer(data=data)
    if not serializer.is_valid():
        raise InvalidSpec(serializer.errors)
    valid = serializer.validated_data
    # Before the checks: the job a retried submit made counts in the quota and holds the name.
    earlier = None if check_only else submitted_with(user, idempotency_key, valid["jobname"])
    if earlier is not None:
        return Submitted(earlier, None, replayed=True)
    checked = check(user, valid, upload_pending, auto_resume=trial_of is None)
    if trial_of is not None:
        checked.spec.update({SPEC_EXPERIMENT: trial_of[0], SPEC_TRIAL: trial_of[1]})
    if check_only:
        return Submitted(dry_run(checked), checked)
    return Submitted(submit(checked, idempotency_key), checked)


def wake_scheduler(datacenter_id: int) -> None:
    """Ask for a scheduling cycle now. The job exists whatever the broker does: if the broker cannot take
    the message, the job stays queued and the scheduler's periodic cycle admits it once the broker is back."""
    try:
        schedule.delay(datacenter_id)
    except (KombuOperationalError, OSError) as exc:
        log.warning(
            "datacenter %s: the broker did not take a scheduling request (%s); the next cycle runs it",
            datacenter_id,
            exc,
        )


def kill(job: Job, reason: Reason = Reason.KILLED, message: str = "killed by request") -> bool:
    """Mark the job killed at once (its name is free again) and let kill_job stop what runs."""
    with transaction.atomic():
        killed = transition(job.pk, JobState.KILLED, reason=reason, message=message)
        if killed:
            workers_stopping(job.pk, JobState.KILLED)  # no worker shows running once the job is killed
    if killed or (job.state in TERMINAL_STATES and not job.released):
        transaction.on_commit(lambda: kill_job.delay(job.pk))
    job.refresh_from_db()
    return killed


def remove(job: Job) -> None:
    """Forget a finished job (`kill -rm`); an active one is killed first and removed once released."""
    if job.state in TERMINAL_STATES and job.released:
        job.delete()
        return
    remove_when_released(job.pk)  # first, so the release that kill() leads to sees it
    kill(job)


# --- operators' queue verbs: conditional UPDATEs of a queued, not yet admitted job; a job the scheduler admits
# meanwhile is not changed, and the verb answers 409 naming `state`.

HELD_MESSAGE = "held by an operator"


def _waiting_row(job: Job) -> QuerySet[Job]:
    return cycle.unadmitted(job.datacenter_id).filter(pk=job.pk)  # type: ignore[no-any-return]


def _changed(job: Job, rows: int, verb: str, wake: bool) -> Job:
    """The job as it is now; a 409 naming `state` if no row was changed (it no longer waits)."""
    job.refresh_from_db()
    if not rows:
        state = job.state if job.state != JobState.QUEUED else "already admitted (starting)"
        raise Conflict(f"job {job.name} is {state}; only a job waiting in the queue can be {verb}", "state")
    if wake:  # what it changed may let a job start now: a cycle looks at once (beat is the safety net)
        datacenter_id = job.datacenter_id
        transaction.on_commit(lambda: wake_scheduler(datacenter_id))
    return job


def hold(job: Job) -> Job:
    """Keep a waiting job out of admission until released; its reason says so (holding twice is no change)."""
    # A conditional UPDATE: only the hold that changed the row writes the timeline's event.
    newly = _waiting_row(job).filter(held=False).update(held=True, reason=Reason.HELD, message=HELD_MESSAGE)
    if newly:
        events.record(job.pk, EventKind.QUEUED, f"{Reason.HELD}: {HELD_MESSAGE}")
    rows = newly or _waiting_row(job).update(held=True, reason=Reason.HELD, message=HELD_MESSAGE)
    return _changed(job, rows, "held", wake=False)


def release(job: Job) -> Job:
    """Let a held job be admitted again; a waiting job not held stays as it is. One still blocked by a dependency
    waits on for it (its reason says so again)."""
    held = _waiting_row(job).filter(held=True)
    held.filter(blocked=False).update(held=False, reason=Reason.NONE, message="")
    still = {"reason": Reason.WAITING_FOR_DEPENDENCY, "message": "waiting for the jobs of its `after`"}
    held.filter(blocked=True).update(held=False, **still)
    if Job.objects.filter(pk=job.pk, blocked=True).exists():
        dependencies.settle(job.pk)  # its message names what it waits for again
    return _changed(job, _waiting_row(job).count(), "released", wake=True)


def front(job: Job) -> Job:
    """Move a waiting job to the front of its priority (ahead of fair share and age, not of higher priorities)."""
    return _changed(job, _waiting_row(job).update(queue_boost=True), "moved to the front", wake=True)
