"""Forecasts from the plan: replay admission over time to give every waiting job its place, start and end.

Pure, like the policy it replays (jobs.scheduling.policy.plan, with the datacenter's own strategies): from what
the scheduler sees now, the jobs that hold room end at their expected ends (jobs.scheduling.durations says how
each is known), each end frees its room and adds its run to its owner's past usage (as the ledger does at
release), and the policy admits again, exactly as the next cycle would. The order in which the replay admits the
waiting jobs is their position; the time is their estimated start; start + expected duration their end.

What it does not model, on purpose: jobs submitted later (a forecast is of the queue as it is), preemption (a
job of higher priority waiting past the delay starts earlier than its forecast, and its victims later), and the
seconds a cycle and a start take. A job behind an end nobody can estimate has no estimate (None), never a guess.
Bounded: at most MAX_STEPS moments are replayed; the caller passes a bounded number of candidates.
"""

from __future__ import annotations

import heapq
import itertools
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace

from jobs.scheduling import policy
from jobs.scheduling.shapes import Amount, Candidate, World
from jobs.scheduling.strategies import DEFAULT, Strategies

MAX_STEPS = 400  # moments (a set of jobs ending together) a forecast replays; the jobs past them have none

# How an estimate is known, the surest first; an estimate is as sure as the least sure figure it rests on.
NOW, PROGRESS, HISTORY, AVERAGE = "now", "progress", "history", "average"
BASES = (NOW, PROGRESS, HISTORY, AVERAGE)


def weakest(*bases: str | None) -> str | None:
    """The least sure of the bases (None: unknown, the least sure of all)."""
    if any(basis is None for basis in bases):
        return None
    return max(bases, key=lambda basis: BASES.index(basis or NOW), default=NOW)


@dataclass(frozen=True)
class Expected:
    """How long a job runs (seconds; None: unknown), and how that is known (BASES)."""

    seconds: float | None
    basis: str | None


@dataclass(frozen=True)
class Holder:
    """A job that holds room now: admitted, not yet released; `end` (epoch seconds) None where unknown."""

    job_id: int
    owner_id: int
    request: Amount
    started: float
    end: float | None
    basis: str | None
    team: int | None = None


@dataclass(frozen=True)
class Forecast:
    position: int
    start: float
    end: float | None
    basis: str | None  # the weakest of what the start and end rest on


def _release(world: World, holder: Holder, at: float, half_life: float) -> None:
    """`holder` ends at `at`: its room is free again, and its run counts in its owner's past share."""
    owner = holder.owner_id
    world.in_use = world.in_use - holder.request
    world.owner_in_use[owner] = world.owner_in_use.get(owner, Amount()) - holder.request
    world.owner_jobs[owner] = max(world.owner_jobs.get(owner, 0) - 1, 0)
    if holder.team is not None and holder.team in world.teams:
        world.teams[holder.team].in_use = world.teams[holder.team].in_use - holder.request
    ran = max(at - holder.started, 0.0)  # the ledger's steady hold of a share for one half-life counts as 1
    world.past_share[owner] = world.past_share.get(owner, 0.0) + world.dominant(holder.request) * ran / half_life


def _decay(world: World, seconds: float, half_life: float) -> None:
    factor = math.pow(0.5, seconds / half_life)
    for owner in world.past_share:
        world.past_share[owner] *= factor


def _any_fits(waiting: Iterable[Candidate], world: World) -> bool:
    """Some waiting job fits the free capacity (an elastic one with its fewest trainers): the policy's first
    condition, so none does where this is False."""
    return any(not world.capacity.over(world.in_use + c.sizes()[-1].request) for c in waiting)


def _age(waiting: dict[int, Candidate], elapsed: float, reserve_after: float) -> None:
    """The jobs that have now waited the datacenter's `reserve_after`, as so (the only use the policy makes of how
    long a job waited: its reservation); the others are left as they are, unchanged objects."""
    for job_id, candidate in waiting.items():
        if candidate.waited < reserve_after <= candidate.waited + elapsed:
            waiting[job_id] = replace(candidate, waited=candidate.waited + elapsed)


def replay(
    candidates: Iterable[Candidate],
    world: World,
    holders: Iterable[Holder],
    durations: Mapping[int, Expected],
    *,
    now: float,
    half_life: float,
    strategies: Strategies = DEFAULT,
) -> dict[int, Forecast]:
    """Each waiting job's forecast, by job id; a job missing from the answer has none (it waits past an end that
    is unknown, past MAX_STEPS, or could never fit). `world` is the cycle's, and is changed."""
    half_life = max(half_life, 1.0)
    waiting = {c.job_id: c for c in candidates}
    ends: list[tuple[float, int, Holder]] = []  # a heap of the known ends; `order` keeps its entries apart
    order = itertools.count()
    for holder in holders:  # a job admitted between the caller's two reads is a candidate here, not a holder
        if holder.end is not None and holder.job_id not in waiting:
            heapq.heappush(ends, (max(holder.end, now), next(order), holder))
    found: dict[int, Forecast] = {}
    moment, sure = now, NOW
    for _ in range(MAX_STEPS):
        if _any_fits(waiting.values(), world):  # else the policy would admit none: no walk
            _age(waiting, moment - now, world.reserve_after)
            for job_id in policy.plan(waiting.values(), world, strategies=strategies).admit:
                expected = durations.get(job_id, Expected(None, None))
                end = None if expected.seconds is None else moment + expected.seconds
                found[job_id] = Forecast(len(found) + 1, moment, end, weakest(sure, expected.basis))
                candidate = waiting.pop(job_id)
                if end is not None:
                    holder = Holder(job_id, candidate.owner_id, candidate.request, moment, end, expected.basis,
                                    candidate.team)  # fmt: skip
                    heapq.heappush(ends, (end, next(order), holder))
        if not waiting or not ends:
            break
        upcoming = ends[0][0]
        _decay(world, upcoming - moment, half_life)
        moment = upcoming
        while ends and ends[0][0] <= moment:
            _, _, holder = heapq.heappop(ends)
            _release(world, holder, moment, half_life)
            sure = weakest(sure, holder.basis) or sure
    return found
