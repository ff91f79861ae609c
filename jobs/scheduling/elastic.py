"""Elastic collective jobs (spec `min_parallelism`): admitted with the most trainers that fit, grown when room frees.

Admission: the policy tries an elastic job's sizes from its most trainers down to its fewest (shapes.Candidate.sizes)
and admits the largest that fits its owner's quota and the free capacity; the job then holds only those trainers'
requests (`admitted_size`) and runs with them (Job.trainers: PADDLE_TRAINERS_NUM, the ranks, the workers).

Growth (`grow`): in a cycle that left no job waiting for capacity and while no preemption, restart or growth is
under way, the elastic job longest running below its most trainers, for at least the datacenter's
`elastic_grow_after` seconds, with room free now for one more trainer or more (and quota), is stopped with the
preemption grace (its SIGTERM: save a checkpoint) and queued again (Resizing); the next cycle admits it with as many
trainers as fit then, from its checkpoint. One growth at a time.

Shrinking: a preempted (or failed, restarting) elastic job waits again at its full size (`full_size`) and is
admitted with what fits then: under a job of higher priority it runs on with fewer trainers instead of waiting for
all of them. Scaling the batch size or learning rate to the trainers it got is the job's own (PADDLE_TRAINERS_NUM).

On Kueue (`admission: kueue`) the gate lets every waiting job through to Kueue at once, and Kueue admits a JobSet
whole at the size it was made with (v0.17's JobSet integration has no partial admission): the gate gives an elastic
job the most trainers that fit its owner's quota and the free room now, as the portal's own admission would, or its
fewest where none fit, to start first when room frees (`kueue_sizes`). It grows as above (`grow_on_kueue`) once
nothing waits, in the portal or in Kueue. Under a higher priority Kueue stops it whole: it waits again at its full
size and the gate sizes it anew, to what fits beside the job that took its room (a shrink, by a restart).
"""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal
from typing import Any

from django.db.models import F
from django.utils import timezone

from datacenters.models import Datacenter
from jobs import spec
from jobs.models import Job, JobState, Reason
from jobs.scheduling import policy
from jobs.scheduling.shapes import WAITING_FOR_CAPACITY, Amount, Bound, Candidate, Plan, World
from jobs.scheduling.strategies import build
from jobs.states import transition

# How the gate of a Kueue datacenter sizes an elastic job: what fits now, nothing held for jobs in between.
KUEUE_SIZING = build("fair-share", "greedy", "never")
MAX_LOOKED = 20  # elastic jobs below their most that one cycle considers growing
CORES = Decimal("0.001")  # the requests' precision (Job.cpu_request)


def admitted_size(job_id: int, trainers: int) -> dict[str, Any]:
    """The fields an elastic job is admitted with at `trainers` trainers: those trainers' requests."""
    row = Job.objects.values("cpu_request", "memory_request", "gpu_request", "max_trainers").get(pk=job_id)
    most = max(int(row["max_trainers"]), 1)
    return {
        "trainers_now": trainers,
        "cpu_request": (Decimal(row["cpu_request"]) / most * trainers).quantize(CORES),
        "memory_request": int(row["memory_request"]) // most * trainers,
        "gpu_request": int(row["gpu_request"]) // most * trainers,
    }


def full_size(job: Job) -> dict[str, Any]:
    """The fields an elastic job waits again with (preempted, restarting, growing): its most trainers' requests."""
    if not job.trainers_now:
        return {}
    cpu, memory, gpu = spec.requested(job.spec)
    return {"trainers_now": 0, "cpu_request": cpu, "memory_request": memory, "gpu_request": gpu}


def _room(world: World, owner: int, one: Amount, most: int) -> int:
    """How many more trainers of `one` each fit the free capacity and the owner's quota now (at most `most`)."""
    limits = world.owner_limits.get(owner, Bound())
    held = world.owner_in_use.get(owner, Amount())
    more = 0
    while more < most:
        extra = one.times(more + 1)
        if world.capacity.over(world.in_use + extra) or limits.over(held + extra, world.owner_jobs.get(owner, 0)):
            break
        more += 1
    return more


def grow(datacenter: Datacenter, result: Plan, world: World) -> int | None:
    """Mark one elastic job to grow into the free room (see the module); its id, or None."""
    if any(reason == WAITING_FOR_CAPACITY for reason, _ in result.waiting.values()):
        return None  # the room is for the jobs that wait for it
    stopping = Job.objects.filter(datacenter=datacenter, state=JobState.QUEUED, preempted_at__isnull=False)
    if stopping.exists():
        return None
    since = timezone.now() - timedelta(seconds=datacenter.elastic_grow_after)
    below = Job.objects.filter(
        datacenter=datacenter, state=JobState.RUNNING, released=False, min_trainers__gt=0, trainers_now__gt=0,
        trainers_now__lt=F("max_trainers"), admitted_at__lte=since,
    ).order_by("admitted_at", "id")  # fmt: skip
    columns = ("id", "owner_id", "cpu_request", "memory_request", "gpu_request", "trainers_now", "max_trainers")
    for row in below.values(*columns)[:MAX_LOOKED]:
        now = row["trainers_now"]
        one = Amount(float(row["cpu_request"]) / now, row["memory_request"] / now, row["gpu_request"] / now)
        more = _room(world, row["owner_id"], one, row["max_trainers"] - now)
        if not more:
            continue
        message = (
            f"growing from {now} to {now + more} trainers (room freed): it stops with its grace to save a checkpoint, "
            "then runs again with as many as fit"
        )
        if transition(row["id"], JobState.QUEUED, from_states=[JobState.RUNNING], reason=Reason.RESIZING,
                      message=message, preempted_at=timezone.now()):  # fmt: skip
            return int(row["id"])
    return None


def kueue_sizes(candidates: list[Candidate], world: World) -> dict[int, int]:
    """The trainers each elastic job of `candidates` goes through to Kueue with, where fewer than its most: as many
    as fit now in the policy's order (policy.plan over `world`, which it fills), its fewest where none fit."""
    fitted = policy.plan(candidates, world, strategies=KUEUE_SIZING)
    sizes = dict(fitted.sizes)
    for candidate in candidates:
        if candidate.job_id in fitted.waiting and 0 < candidate.min_trainers < candidate.trainers:
            sizes[candidate.job_id] = candidate.min_trainers
    return sizes


def grow_on_kueue(datacenter: Datacenter, world: World) -> int | None:
    """`grow` on a Kueue datacenter, whose waiting jobs are Kueue's (let through by the gate, not running yet): only
    while none waits there either."""
    held_by_kueue = Job.objects.filter(
        datacenter=datacenter, state=JobState.PENDING, admitted_at__isnull=False, released=False
    )
    return None if held_by_kueue.exists() else grow(datacenter, Plan(), world)
