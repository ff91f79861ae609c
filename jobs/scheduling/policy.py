"""The scheduling policy, pure: the walk over waiting jobs that admits those that fit now, with the datacenter's
strategies (jobs.scheduling.strategies) deciding the order, the backfill and the victims. The defaults:

Order: priority first (higher first; an operator's "move to front" next), then the weighted dominant share
of the owner's team, then of the owner (dominant resource fairness over cpu, memory and gpu: the largest
fraction of any resource, counting what runs now plus past usage decayed by the datacenter's half-life,
divided by the weight), then age. Each admission raises its owner's (and team's) share, so one user's burst
interleaves with others'.

Fit: a job starts whole (gang) or not at all: every pserver and trainer's requests together must fit
both the datacenter's free capacity and its owner's free quota. A job that does not fit keeps its place;
jobs behind it may start with what is left (backfill) except what is held for it: a job blocked by
capacity holds its requests against every job of lower priority, and the first job to have waited
`reserve_after` seconds holds them against everyone (no job waits forever behind a stream of small ones).

Teams: a team's jobs run within its quota (its guarantee) whatever other teams do; past it, a team that
may borrow runs on what others leave idle. Such a job is admitted `borrowing`, and a job of another team
that waits within its own team's quota takes the room back by preempting it (`victims`, reclaim).
"""

from __future__ import annotations

import heapq
import time
from collections import defaultdict
from collections.abc import Iterable

from jobs.scheduling.shapes import (
    QUOTA_EXHAUSTED,
    WAITING_FOR_CAPACITY,
    Amount,
    Bound,
    Candidate,
    Plan,
    Running,
    World,
)
from jobs.scheduling.strategies import DEFAULT, Strategies
from jobs.scheduling.strategies.backfill import Holds
from jobs.scheduling.strategies.order import Order, Turn, own


class _Turns:
    """Whose turn it is: a heap of owners keyed by the order strategy's turn of their first job. A turn may rise with
    any admission (a team's share does), so a key is checked again when it comes up (turns only rise within a
    cycle: a stale key is too low, never too high)."""

    def __init__(self, candidates: Iterable[Candidate], world: World, order: Order) -> None:
        self.world, self.order = world, order
        self.queues: dict[int, list[Candidate]] = defaultdict(list)
        for candidate in candidates:
            self.queues[candidate.owner_id].append(candidate)
            if candidate.team is not None:
                world.team_of.setdefault(candidate.owner_id, candidate.team)
        for queue in self.queues.values():
            queue.sort(key=own, reverse=True)  # the first job at the end: pop() is O(1)
        self.heap: list[tuple[Turn, int, int]] = []  # (turn, owner, the world's admissions when it was computed)
        for owner in self.queues:
            self.push(owner)

    def key(self, owner: int) -> Turn | None:
        queue = self.queues[owner]
        return self.order.turn(queue[-1], self.world) if queue else None

    def push(self, owner: int) -> None:
        key = self.key(owner)
        if key is not None:
            heapq.heappush(self.heap, (key, owner, self.world.admissions))

    def pop(self) -> Candidate | None:
        while self.heap:
            key, owner, as_of = heapq.heappop(self.heap)
            if as_of != self.world.admissions:  # no admission since: the turn stands (most waiting jobs wait)
                current = self.key(owner)
                if current is not None and current > key:
                    heapq.heappush(self.heap, (current, owner, self.world.admissions))  # a teammate's admission
                    continue
            return self.queues[owner].pop()
        return None


def _quota_short(candidate: Candidate, world: World) -> list[str]:
    owner = candidate.owner_id
    owner_after = world.owner_in_use.get(owner, Amount()) + candidate.request
    short = world.owner_limits.get(owner, Bound()).over(owner_after, world.owner_jobs.get(owner, 0) + 1)
    if short or world.within_team(candidate):
        return short
    team = world.teams[candidate.team] if candidate.team is not None else None
    if team is None or (team.may_borrow and candidate.preemptible):
        return []
    return [f"team {name}" for name in team.quota.over(team.in_use + candidate.request)]


def _admit(candidate: Candidate, world: World, result: Plan) -> None:
    owner, request = candidate.owner_id, candidate.request
    if not world.within_team(candidate):
        result.borrowing.add(candidate.job_id)
    result.admit.append(candidate.job_id)
    world.admissions += 1
    world.in_use = world.in_use + request
    world.owner_in_use[owner] = world.owner_in_use.get(owner, Amount()) + request
    world.owner_jobs[owner] = world.owner_jobs.get(owner, 0) + 1
    if candidate.team is not None and candidate.team in world.teams:
        world.teams[candidate.team].in_use = world.teams[candidate.team].in_use + request


def _fit(candidate: Candidate, world: World, holds: Holds) -> tuple[Candidate | None, tuple[str, list[str]]]:
    """The largest size of the job that fits its owner's quota and the free capacity (an elastic job: from its most
    trainers down to its fewest), or None and why the job waits, as its full size is short."""
    why: tuple[str, list[str]] | None = None
    for size in candidate.sizes():
        short = _quota_short(size, world)
        reason = QUOTA_EXHAUSTED
        if not short:
            short = world.capacity.over(world.in_use + holds.against(size) + size.request)
            reason = WAITING_FOR_CAPACITY
        if not short:
            return size, ("", [])
        why = why or (reason, short)
    assert why is not None  # sizes() has the job itself at least
    return None, why


def plan(
    candidates: Iterable[Candidate], world: World, *, dry: bool = False, strategies: Strategies = DEFAULT
) -> Plan:
    """Walk the waiting jobs in order and admit each that fits; `dry` admits every one (for the queue's order)."""
    result = Plan()
    turns = _Turns(candidates, world, strategies.order)
    holds = strategies.backfill.start(world)
    while (candidate := turns.pop()) is not None:
        result.order.append(candidate.job_id)
        if not dry:
            fitted, waits = _fit(candidate, world, holds)
            if fitted is None:
                result.waiting[candidate.job_id] = waits
                if waits[0] == WAITING_FOR_CAPACITY:
                    holds.blocked(candidate.sizes()[-1])  # an elastic job holds what it needs to start: its fewest
                turns.push(candidate.owner_id)
                continue
            if fitted.trainers < candidate.trainers:
                result.sizes[candidate.job_id] = fitted.trainers
            candidate = fitted
        _admit(candidate, world, result)
        turns.push(candidate.owner_id)
    return result


def victims(
    candidate: Candidate,
    running: Iterable[Running],
    world: World,
    *,
    strategies: Strategies = DEFAULT,
    now: float | None = None,
) -> list[int]:
    """The running jobs to stop so `candidate` fits, as the datacenter's victim strategy chooses them."""
    return strategies.victims.victims(candidate, running, world, time.time() if now is None else now)
