"""The forecast of one datacenter's queue, from the database: every waiting job's position, estimated start and
end, and how sure they are, by the replayed plan (jobs.scheduling.replay) over the jobs' expected durations
(jobs.scheduling.durations).

The portal's gate: the replay runs over the first FORECAST_JOBS waiting jobs in the scheduler's order with the
datacenter's own strategies; their positions are the replay's start order, and the jobs past them (or behind an
end nobody can estimate) follow in the scheduler's order, without an estimate. Kueue (`admission: kueue`): Kueue
holds the jobs (`pending`), so positions are its own (the visibility API, per ClusterQueue) and the replay runs in
that order over what runs. An answer is computed when asked, and kept briefly (`places`).
"""

from __future__ import annotations

import copy
import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from django.core.cache import cache
from django.db.models import Count, Max, Q, Sum
from django.db.models.functions import Length
from django.utils import timezone

from datacenters.models import Datacenter
from jobs.models import ACTIVE_STATES, Job, JobState
from jobs.scheduling import cycle, durations, policy, replay
from jobs.scheduling.shapes import Amount, Candidate, World
from jobs.scheduling.strategies import Strategies
from jobs.scheduling.strategies.order import Turn

CACHE_SECONDS = 10  # a forecast is kept this long while nothing in the queue changes (its ETAs move meanwhile)
FORECAST_JOBS = 100  # waiting jobs one forecast replays, the first in the scheduler's order
MAX_HOLDERS = 5000  # jobs that hold room one forecast reads (a datacenter runs fewer; the rest are not waited on)
HOLDER_FIELDS = (*durations.FIELDS, "state", "preempted_at", "team_id", "admitted_at", "cpu_request", "memory_request",
                 "gpu_request")  # fmt: skip


@dataclass(frozen=True)
class Place:
    """A waiting job's place: 1-based position (None: held, or past what a cycle looks at), its estimated start
    and end (None: unknown), and what they rest on (replay.BASES; None: no estimate)."""

    position: int | None
    estimated_start: datetime | None
    estimated_end: datetime | None = None
    basis: str | None = None


NOWHERE = Place(None, None)


def _when(epoch: float | None) -> datetime | None:
    return None if epoch is None else datetime.fromtimestamp(epoch, tz=UTC)


def _epoch(when: datetime | None) -> float | None:
    return None if when is None else when.timestamp()


def _request(row: Mapping[str, Any]) -> Amount:
    return Amount(float(row["cpu_request"]), float(row["memory_request"]), float(row["gpu_request"]))


def _of(job: Job) -> Amount:
    return Amount(float(job.cpu_request), float(job.memory_request), float(job.gpu_request))


def _holders(rows: list[dict[str, Any]], known: durations.Durations, now: datetime) -> list[replay.Holder]:
    """What holds room now, with expected ends: a job being stopped (preempted, restarting) frees it now; one
    admitted and not yet started is expected to run its whole duration from now."""
    holders = []
    for row in rows:
        started = (row["started_at"] or row["admitted_at"] or now).timestamp()
        end: float | None = now.timestamp()
        basis: str | None = replay.NOW
        if row["state"] != JobState.QUEUED or row["preempted_at"] is None:
            end, basis = known.end(row, now)
        holders.append(replay.Holder(row["id"], row["owner_id"], _request(row), started, end, basis, row["team_id"]))
    return holders


def _replay(
    datacenter: Datacenter, candidates: list[Candidate], world: World, held: list[dict[str, Any]],
    strategies: Strategies,
) -> dict[int, replay.Forecast]:  # fmt: skip
    now = timezone.now()
    rows = Job.objects.filter(pk__in=[c.job_id for c in candidates]).values(*durations.FIELDS)
    waiting = {row["id"]: row for row in rows}
    known = durations.Durations(datacenter, [*held, *waiting.values()])
    expected = {job_id: known.whole(row) for job_id, row in waiting.items()}
    return replay.replay(
        candidates, world, _holders(held, known, now), expected, now=now.timestamp(),
        half_life=float(datacenter.fair_share_half_life), strategies=strategies,
    )  # fmt: skip


def _place(position: int | None, found: replay.Forecast | None) -> Place:
    if found is None:
        return Place(position, None)
    return Place(position, _when(found.start), _when(found.end), found.basis)


def _fingerprint(datacenter: Datacenter) -> str:
    """What the forecast depends on, but for time and progress: one aggregate over the datacenter's active jobs
    that any submit, admission, end, hold, release, "front", block, preemption or restart changes."""
    active = Job.objects.filter(datacenter=datacenter, state__in=ACTIVE_STATES)
    seen = active.aggregate(
        jobs=Count("id"), ids=Sum("id"), newest=Max("created_at"), admitted=Count("admitted_at"),
        started=Count("started_at"), released=Count("id", filter=Q(released=True)),
        held=Count("id", filter=Q(held=True)), front=Count("id", filter=Q(queue_boost=True)),
        blocked=Count("id", filter=Q(blocked=True)), preempted=Count("preempted_at"), states=Sum(Length("state")),
    )  # fmt: skip
    return hashlib.sha256(repr(sorted(seen.items())).encode()).hexdigest()[:32]


def places(datacenter: Datacenter) -> dict[int, Place]:
    """The waiting jobs a cycle looks at (the portal's gate), by id: in the replay's start order, then the rest in
    the scheduler's order. Kept CACHE_SECONDS for every web worker (the cache), and computed again at once after
    any change of the queue (its fingerprint): a page of a waiting job polls it every 5 s."""
    key = f"forecast:{datacenter.pk}:{_fingerprint(datacenter)}"
    kept = cache.get(key)  # the cache holds JSON (core.cache): [job id, position, start, end, basis] rows
    if kept is None:
        found = _places(datacenter)
        kept = [[job_id, p.position, _epoch(p.estimated_start), _epoch(p.estimated_end), p.basis]
                for job_id, p in found.items()]  # fmt: skip
        cache.set(key, kept, CACHE_SECONDS)
    return {job_id: Place(position, _when(start), _when(end), basis) for job_id, position, start, end, basis in kept}


def _places(datacenter: Datacenter) -> dict[int, Place]:
    candidates, world = cycle.load(datacenter)
    if not candidates:
        return {}
    strategies = cycle.strategies_of(datacenter)
    order = policy.plan(candidates, copy.deepcopy(world), dry=True, strategies=strategies).order
    first = set(order[:FORECAST_JOBS])
    held = list(cycle.holding(datacenter).values(*HOLDER_FIELDS)[:MAX_HOLDERS])
    found = _replay(datacenter, [c for c in candidates if c.job_id in first], world, held, strategies)
    ranked = sorted(found, key=lambda job_id: found[job_id].position) + [j for j in order if j not in found]
    return {job_id: _place(index + 1, found.get(job_id)) for index, job_id in enumerate(ranked)}


@dataclass(frozen=True)
class _ByRank:
    """Kueue's order: its place in the owner's ClusterQueue (a replayed candidate's `created`), then the job id."""

    def turn(self, head: Candidate, world: World) -> Turn:
        return (-head.priority, head.created, head.job_id)


def kueue_places(datacenter: Datacenter, pending: list[Job], positions: Mapping[str, int]) -> dict[int, Place]:
    """The jobs Kueue holds (`pending`, each with its place in its ClusterQueue, by uid), by id: the replay in
    Kueue's order over what runs (the jobs the gate let through to Kueue hold no room until Kueue admits them)."""
    held_by_kueue = [job for job in pending if job.uid in positions][:FORECAST_JOBS]
    if not held_by_kueue:
        return {}
    _, world = cycle.load(datacenter)
    cycle.owners_limits_and_shares(datacenter, {job.owner_id for job in held_by_kueue}, world, timezone.now())
    for job in held_by_kueue:  # the gate counted them as holding: they do not, yet
        request = _of(job)
        world.in_use = world.in_use - request
        world.owner_in_use[job.owner_id] = world.owner_in_use.get(job.owner_id, Amount()) - request
        world.owner_jobs[job.owner_id] = max(world.owner_jobs.get(job.owner_id, 0) - 1, 0)
    now = timezone.now().timestamp()
    # `created` is the place in Kueue's queue: an owner's own jobs go in that order (policy's `own`), not by age.
    candidates = [
        Candidate(job.pk, job.owner_id, job.priority, float(positions[job.uid]), _of(job),
                  waited=now - job.created_at.timestamp(), team=job.team_id, preemptible=job.preemptible)
        for job in held_by_kueue
    ]  # fmt: skip
    chosen = cycle.strategies_of(datacenter)
    strategies = Strategies(_ByRank(), chosen.backfill, chosen.victims)
    running = cycle.holding(datacenter).exclude(pk__in=[job.pk for job in held_by_kueue])
    found = _replay(datacenter, candidates, world, list(running.values(*HOLDER_FIELDS)[:MAX_HOLDERS]), strategies)
    return {job.pk: _place(positions[job.uid], found.get(job.pk)) for job in held_by_kueue}


def running_end(job: Job) -> Place:
    """A running job's expected end and its basis (no position: it waits for nothing)."""
    now = timezone.now()
    row = {name: getattr(job, name) for name in durations.FIELDS}
    end, basis = durations.Durations(job.datacenter, [row]).end(row, now)
    return Place(None, None, _when(end), basis) if end is not None else NOWHERE
