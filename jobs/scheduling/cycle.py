"""One scheduling cycle of a datacenter: read what runs and what waits, ask the policy, admit and explain.

One cycle at a time per datacenter (a database lock); admission is a conditional UPDATE of a queued,
unheld, unadmitted job, so a cycle that dies half-way, or runs again at once, never admits a job twice
and loses nothing: whatever it did not write, the next cycle decides again. A cycle reads at most
PER_OWNER waiting jobs of each user and MAX_CANDIDATES in all, so its work is bounded however long the queue.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

from django.db.models import Count, F, Q, Sum, Window
from django.db.models.functions import RowNumber
from django.utils import timezone
from paddlecloud.contract import quantity
from paddlecloud.contract.units import quantity_bytes

from core.locks import exclusive
from datacenters import quota
from datacenters.capacity import Capacity, capacity
from datacenters.models import Admission, Datacenter, Quota, TeamQuota
from jobs import events
from jobs.models import EventKind, FairShareUsage, Job, JobState, Reason, SchedulingPolicy
from jobs.scheduling import dependencies, elastic, policy, shapes
from jobs.scheduling.ledger import decay
from jobs.scheduling.strategies import DEFAULT, Strategies, StrategyError, build
from jobs.states import transition

log = logging.getLogger(__name__)

PER_OWNER = 50  # waiting jobs of one user a cycle looks at (their first, in their own order)
MAX_CANDIDATES = 5000  # waiting jobs a cycle looks at in all


def unadmitted(datacenter: Datacenter | int) -> Any:
    """The jobs in the queue: queued and not yet admitted (held ones included)."""
    return Job.objects.filter(datacenter=datacenter, state=JobState.QUEUED, admitted_at__isnull=True)


def waiting(datacenter: Datacenter) -> Any:
    """The jobs waiting for admission: in the queue, not held, and not blocked by a dependency (`after`)."""
    return unadmitted(datacenter).filter(held=False, blocked=False)


def preempting(datacenter: Datacenter) -> Any:
    """Preempted jobs whose workers are still being stopped: back in `queued`, still holding their requests."""
    return Job.objects.filter(datacenter=datacenter, state=JobState.QUEUED, preempted_at__isnull=False)


def holding(datacenter: Datacenter) -> Any:
    """The jobs that hold their requests: admitted and not yet released (a killed job holds until it is)."""
    return Job.objects.filter(datacenter=datacenter, admitted_at__isnull=False, released=False)


def _bound(value: Decimal | int | None) -> float | None:
    return None if value is None else float(value)


def _scale(datacenter: Datacenter, room: Capacity) -> shapes.Amount:
    """What "all of it" is per resource, for shares: the capacity; where unbounded, the default quota."""
    defaults = quota.limits(None, datacenter)
    return shapes.Amount(
        float(room.cpu if room.cpu is not None else defaults.cpu),
        float(room.memory if room.memory is not None else defaults.memory),
        float(room.gpu if room.gpu is not None else max(defaults.gpu, 1)),
    )


def _request(row: Mapping[str, Any]) -> shapes.Amount:
    return shapes.Amount(float(row["cpu_request"]), float(row["memory_request"]), float(row["gpu_request"]))


def load(datacenter: Datacenter) -> tuple[list[shapes.Candidate], shapes.World]:
    now = timezone.now()
    room = capacity(datacenter)
    world = shapes.World(
        capacity=shapes.Bound(_bound(room.cpu), _bound(room.memory), _bound(room.gpu)),
        scale=_scale(datacenter, room),
        reserve_after=float(datacenter.reserve_after),
    )
    for row in (
        holding(datacenter)
        .values("owner_id")
        .annotate(cpu=Sum("cpu_request"), memory=Sum("memory_request"), gpu=Sum("gpu_request"), jobs=Count("id"))
    ):
        amount = shapes.Amount(float(row["cpu"] or 0), float(row["memory"] or 0), float(row["gpu"] or 0))
        world.owner_in_use[row["owner_id"]] = amount
        world.owner_jobs[row["owner_id"]] = row["jobs"]
        world.in_use = world.in_use + amount
    _load_teams(datacenter, world)
    ranked = waiting(datacenter).annotate(
        turn=Window(
            RowNumber(),
            partition_by=[F("owner_id")],
            order_by=[F("priority").desc(), F("queue_boost").desc(), "created_at", "id"],
        )
    )
    # Two steps in one statement: the turns from the index alone (Job's job_waiting_turns), then the rows of the
    # first PER_OWNER of each owner; numbering the rows themselves read every waiting row (twice the time at 10,000).
    firsts = ranked.filter(turn__lte=PER_OWNER).values("id")
    rows = (
        Job.objects.filter(id__in=firsts)
        .values(
            "id", "owner_id", "priority", "queue_boost", "created_at", "queued_at", "cpu_request", "memory_request",
            "gpu_request", "team_id", "preemptible", "reason", "message", "min_trainers", "max_trainers",
        )
        .order_by("-priority", "created_at")[:MAX_CANDIDATES]
    )
    candidates = [
        shapes.Candidate(
            job_id=row["id"], owner_id=row["owner_id"], priority=row["priority"], boosted=row["queue_boost"],
            created=row["created_at"].timestamp(),
            waited=(now - (row["queued_at"] or row["created_at"])).total_seconds(),
            request=_request(row), team=row["team_id"], preemptible=row["preemptible"],
            noted=(row["reason"], row["message"]), queued=(row["queued_at"] or row["created_at"]).timestamp(),
            trainers=row["max_trainers"] or 1, min_trainers=row["min_trainers"],
        )
        for row in rows
    ]  # fmt: skip
    owners = {c.owner_id for c in candidates} | set(world.owner_in_use)
    owners_limits_and_shares(datacenter, owners, world, now)
    return candidates, world


def _load_teams(datacenter: Datacenter, world: shapes.World) -> None:
    """The datacenter's teams (datacenters.TeamQuota): their quotas, and what their admitted jobs hold."""
    for team in TeamQuota.objects.filter(datacenter=datacenter):
        cpu = quantity.parse(team.cpu or "0", quantity.CPU, "cpu")
        memory = quantity.parse(team.memory or "0", quantity.MEMORY, "memory")
        world.teams[team.group_id] = shapes.Team(
            shapes.Bound(float(cpu), float(memory), float(team.gpu)), team.may_borrow, float(team.weight)
        )
    rows = holding(datacenter).exclude(team=None).values("team_id", "owner_id")
    for row in rows.annotate(cpu=Sum("cpu_request"), memory=Sum("memory_request"), gpu=Sum("gpu_request")):
        world.team_of[row["owner_id"]] = row["team_id"]
        if row["team_id"] in world.teams:
            held = world.teams[row["team_id"]]
            held.in_use = held.in_use + _request(
                {"cpu_request": row["cpu"], "memory_request": row["memory"], "gpu_request": row["gpu"]}
            )


def owners_limits_and_shares(datacenter: Datacenter, owners: set[int], world: shapes.World, now: Any) -> None:
    overrides = {q.user_id: q for q in Quota.objects.filter(datacenter=datacenter, user_id__in=owners)}
    defaults = quota.limits_of(None, datacenter)  # once a cycle, not once an owner: no query per owner
    for owner in owners:
        limits = quota.limits_of(overrides[owner], datacenter) if owner in overrides else defaults
        world.owner_limits[owner] = shapes.Bound(
            float(limits.cpu), float(limits.memory), float(limits.gpu), limits.jobs
        )
        world.weights[owner] = float(overrides[owner].weight) if owner in overrides else 1.0
    half_life = float(datacenter.fair_share_half_life)
    # A steady hold of all of a resource for one half-life counts as a past share of 1.
    for row in FairShareUsage.objects.filter(datacenter=datacenter, owner_id__in=owners):
        held = {"cpu": row.cpu_seconds, "memory": row.memory_seconds, "gpu": row.gpu_seconds}
        past = [
            decay(held[name], row.as_of, now, half_life) / getattr(world.scale, name)
            for name in shapes.RESOURCES
            if getattr(world.scale, name) > 0  # a datacenter without GPUs: nobody's share counts them
        ]
        world.past_share[row.owner_id] = max(past, default=0.0) / half_life


def strategies_of(datacenter: Datacenter) -> Strategies:
    """The datacenter's scheduling strategies (its SchedulingPolicy row; the defaults without one). A row written
    around the admin's checks (a shell, a bad migration) must not stop the scheduler: it runs on the defaults."""
    chosen = SchedulingPolicy.objects.filter(datacenter=datacenter).first()
    if chosen is None:
        return DEFAULT
    try:
        return build(chosen.order, chosen.backfill, chosen.victims, chosen.settings)
    except StrategyError as exc:
        log.error("datacenter %s: its scheduling policy is refused (%s: %s); the defaults decide", datacenter.name,
                  exc.field, exc.message)  # fmt: skip
        return DEFAULT


def _explain(reason: str, short: list[str]) -> str:
    if reason == shapes.QUOTA_EXHAUSTED:
        return f"waiting for your running jobs to free quota ({', '.join(short)}); it starts as they end"
    return f"waiting for free {', '.join(short)} in the datacenter; it starts as running jobs end"


def schedule(datacenter: Datacenter) -> list[int] | None:
    """Admit what fits now; note why the others wait. The ids admitted (their starts are the caller's to send);
    None when another cycle of this datacenter holds its lock (it may have looked before the caller's change)."""
    with exclusive(f"schedule-{datacenter.pk}") as held:
        if not held:
            return None
        dependencies.settle_blocked(datacenter.pk)  # the safety net: jobs whose dependencies ended meanwhile
        candidates, world = load(datacenter)
        if datacenter.admission == Admission.KUEUE:
            # Kueue queues, shares and gangs them in the cluster (each job a suspended JobSet): the portal's
            # gate lets every waiting job through to it, in the order the policy would have taken them, an
            # elastic one with as many trainers as fit now (jobs.scheduling.elastic).
            result = shapes.Plan(admit=[c.job_id for c in candidates], sizes=elastic.kueue_sizes(candidates, world))
            admitted = [job_id for job_id in result.admit if _admit(datacenter, job_id, result)]
            if not candidates:
                elastic.grow_on_kueue(datacenter, world)
            return admitted
        if not candidates:
            elastic.grow(datacenter, shapes.Plan(), world)  # nothing waits: an elastic job may take the room
            return []
        strategies = strategies_of(datacenter)
        result = policy.plan(candidates, world, strategies=strategies)
        admitted = [job_id for job_id in result.admit if _admit(datacenter, job_id, result)]
        preempt(datacenter, candidates, result, world, strategies)
        elastic.grow(datacenter, result, world)
        noted = {c.job_id: c.noted for c in candidates}
        notice = _preemption_notice(datacenter, candidates, result, world, strategies)
        for job_id, (reason, short) in result.waiting.items():
            message = _explain(reason, short) + notice.get(job_id, "")
            if noted[job_id] == (reason, message):
                continue  # most waiting jobs wait as they did: no write, no query
            # A conditional UPDATE per job: an event only for the cycle that changed its reason.
            changed = waiting(datacenter).filter(pk=job_id).exclude(reason=reason, message=message)
            if changed.update(reason=reason, message=message):
                events.record(job_id, EventKind.QUEUED, f"{reason}: {message}")
        return admitted


def _admit(datacenter: Datacenter, job_id: int, result: shapes.Plan) -> bool:
    """Admit one waiting job (a conditional UPDATE: never twice); False if it no longer waits. An elastic job
    admitted with fewer trainers than its most holds only theirs (jobs.scheduling.elastic)."""
    size = elastic.admitted_size(job_id, result.sizes[job_id]) if job_id in result.sizes else {}
    fields = {"admitted_at": timezone.now(), "reason": Reason.NONE, "message": "", **size}
    admitted = bool(waiting(datacenter).filter(pk=job_id).update(borrowing=job_id in result.borrowing, **fields))
    if admitted:
        said = ["borrowing idle quota"] if job_id in result.borrowing else []
        said += [f"with {result.sizes[job_id]} trainers (elastic: as many as fit)"] if job_id in result.sizes else []
        events.record(job_id, EventKind.ADMITTED, "; ".join(said))
    return admitted


def preempt(
    datacenter: Datacenter,
    candidates: list[shapes.Candidate],
    result: shapes.Plan,
    world: shapes.World,
    strategies: Strategies = DEFAULT,
) -> None:
    """The first job waiting for capacity past the preemption delay stops the fewest lower-priority jobs needed.

    One preemption at a time per datacenter: while one's victims are stopping (jobs/follow/reconcile.py requeues
    them once nothing of them runs), no other is started, so a waiting job never stops more than it needs.
    """
    if preempting(datacenter).exclude(reason=Reason.RESTARTING).exists():
        return  # (a job restarting after a failure is not a preemption: its backoff holds no other one up)
    candidate = _first_for_capacity(candidates, result)
    if candidate is None or candidate.waited < float(datacenter.preemption_delay):
        return
    running = _running(datacenter, candidate)
    now = time.time()
    by_running = {job.job_id: job for job in running}
    for victim in policy.victims(candidate, running, world, strategies=strategies, now=now):
        mark_preempted(victim, _preempted_message(datacenter, candidate, by_running[victim], now))


def _first_for_capacity(candidates: list[shapes.Candidate], result: shapes.Plan) -> shapes.Candidate | None:
    """The first waiting job in the plan's order that waits for capacity: the one a preemption is for."""
    by_id = {c.job_id: c for c in candidates}
    for job_id in result.order:
        if result.waiting.get(job_id, ("", []))[0] == shapes.WAITING_FOR_CAPACITY:
            return by_id[job_id]
    return None


def _running(datacenter: Datacenter, candidate: shapes.Candidate) -> list[shapes.Running]:
    """The admitted jobs that run (or start) that `candidate` could stop, as preemption sees them: of lower
    priority, or borrowing (a team taking its quota back); none else is ever a victim, so none else is read."""
    stoppable = holding(datacenter).filter(
        Q(priority__lt=candidate.priority) | Q(borrowing=True), state__in=[JobState.PENDING, JobState.RUNNING]
    )
    return [
        shapes.Running(row["id"], row["priority"], row["admitted_at"].timestamp(), _request(row), row["preemptible"],
                       row["team_id"], row["borrowing"],
                       row["checkpointed_at"].timestamp() if row["checkpointed_at"] else None)
        for row in stoppable.values(
            "id", "priority", "admitted_at", "cpu_request", "memory_request", "gpu_request", "preemptible", "team_id",
            "borrowing", "checkpointed_at")
    ]  # fmt: skip


def _preemption_notice(
    datacenter: Datacenter, candidates: list[shapes.Candidate], result: shapes.Plan, world: shapes.World,
    strategies: Strategies,
) -> dict[int, str]:
    """The job a preemption will be for, while its preemption delay runs: what its message adds (how many running
    jobs of lower priority it stops, and when, unless room frees first). Said as a time, not a countdown, so the
    message (and its event) changes once, not every cycle."""
    candidate = _first_for_capacity(candidates, result)
    delay = float(datacenter.preemption_delay)
    if candidate is None or candidate.waited >= delay:
        return {}
    stopped = policy.victims(candidate, _running(datacenter, candidate), world, strategies=strategies)
    if not stopped:
        return {}
    when = datetime.fromtimestamp(candidate.queued + delay, tz=UTC)  # the same in every cycle
    count = f"{len(stopped)} running job{'s' if len(stopped) > 1 else ''}"
    return {candidate.job_id: f"; unless room frees first, it preempts {count} of lower priority at "
                              f"{when:%H:%M:%S} UTC"}  # fmt: skip


def _preempted_message(datacenter: Datacenter, candidate: shapes.Candidate, victim: shapes.Running, now: float) -> str:
    """What a victim is told: for whom (the waiting job's priority, or its team's quota; never its name or owner:
    another user's), what it loses, and its grace."""
    why = (
        f"a waiting job of priority {candidate.priority}" if candidate.priority > victim.priority
        else "a team taking back its quota"
    )  # fmt: skip
    since = "its newest checkpoint" if victim.saved and victim.saved >= victim.admitted else "it started"
    return (
        f"preempted for {why}, chosen among the jobs that make room by the lowest priority, then the least work "
        f"lost ({victim.at_risk(now):.0f} s since {since}); its workers got SIGTERM and have "
        f"{datacenter.preemption_grace} s to save a checkpoint before SIGKILL, then it waits to run again"
    )


def mark_preempted(job_id: int, message: str) -> None:
    """Back to `queued` as Preempted: the reconciler's requeue_preempted then stops its workers with their
    grace, writes the ledger and counts the next attempt. By this scheduler, or by Kueue (kubernetes engine)."""
    transition(job_id, JobState.QUEUED, from_states=[JobState.PENDING, JobState.RUNNING],
               reason=Reason.PREEMPTED, message=message, preempted_at=timezone.now())  # fmt: skip


def positions(datacenter: Datacenter) -> list[int]:
    """Every waiting job looked at, in the order the scheduler would admit them were there room for all."""
    candidates, world = load(datacenter)
    return policy.plan(candidates, world, dry=True, strategies=strategies_of(datacenter)).order


def never_fits(datacenter: Datacenter, request: tuple[Decimal, int, int]) -> list[str]:
    """What a job of this request could never get here, however long it waited: capacity problems, by field."""
    room = capacity(datacenter)
    cpu, memory, gpu = request
    problems = []
    if room.cpu is not None and cpu > room.cpu:
        problems.append(
            f"cpu: the job needs {cpu.normalize():f} cores but {datacenter.name} has {room.cpu.normalize():f}"
        )
    if room.memory is not None and memory > room.memory:
        problems.append(
            f"memory: the job needs {quantity_bytes(memory)} but {datacenter.name} has {quantity_bytes(room.memory)}"
        )
    if room.gpu is not None and gpu > room.gpu:
        problems.append(f"gpu: the job needs {gpu} but {datacenter.name} has {room.gpu}")
    return problems
