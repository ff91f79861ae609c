"""The scheduling policy, pure: the order waiting jobs go in, and which of them fit now.

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
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field

QUOTA_EXHAUSTED = "QuotaExhausted"
WAITING_FOR_CAPACITY = "WaitingForCapacity"
RESOURCES = ("cpu", "memory", "gpu")


@dataclass(frozen=True)
class Amount:
    """cpu in cores, memory in bytes, gpu in devices; floats: the policy compares, it never bills."""

    cpu: float = 0.0
    memory: float = 0.0
    gpu: float = 0.0

    def __add__(self, other: Amount) -> Amount:
        return Amount(self.cpu + other.cpu, self.memory + other.memory, self.gpu + other.gpu)


@dataclass(frozen=True)
class Bound:
    """An upper bound per resource; None: unbounded."""

    cpu: float | None = None
    memory: float | None = None
    gpu: float | None = None
    jobs: int | None = None

    def over(self, amount: Amount, jobs: int = 0) -> list[str]:
        """The resources `amount` (and `jobs` running jobs) would exceed, by name."""
        names = [r for r in RESOURCES if getattr(self, r) is not None and getattr(amount, r) > getattr(self, r) + 1e-9]
        if self.jobs is not None and jobs > self.jobs:
            names.append("jobs")
        return names


@dataclass(frozen=True)
class Candidate:
    job_id: int
    owner_id: int
    priority: int
    created: float  # epoch seconds: the older first, among equals
    request: Amount
    waited: float = 0.0  # seconds in the queue
    boosted: bool = False  # an operator moved it to the front of its priority
    team: int | None = None
    preemptible: bool = True  # a job that may not be preempted may not borrow either


@dataclass(frozen=True)
class Running:
    """An admitted job that holds its requests, as preemption sees it."""

    job_id: int
    priority: int
    admitted: float  # epoch seconds
    request: Amount
    preemptible: bool
    team: int | None = None
    borrowing: bool = False


@dataclass
class Team:
    quota: Bound  # what the team is guaranteed
    may_borrow: bool = True
    weight: float = 1.0
    in_use: Amount = Amount()


@dataclass
class World:
    """What the cycle knows of the datacenter: capacity, what admitted jobs hold, the owners' quotas and shares."""

    capacity: Bound
    in_use: Amount = Amount()
    owner_in_use: dict[int, Amount] = field(default_factory=dict)
    owner_jobs: dict[int, int] = field(default_factory=dict)
    owner_limits: dict[int, Bound] = field(default_factory=dict)
    past_share: dict[int, float] = field(default_factory=dict)  # decayed past usage, as a dominant share
    weights: dict[int, float] = field(default_factory=dict)
    scale: Amount = Amount(1.0, 1.0, 1.0)  # what "all of it" is, per resource, for shares
    reserve_after: float = float("inf")
    teams: dict[int, Team] = field(default_factory=dict)
    team_of: dict[int, int] = field(default_factory=dict)  # owner -> team (of the jobs looked at)

    def dominant(self, held: Amount) -> float:
        return max(
            (getattr(held, r) / getattr(self.scale, r) for r in RESOURCES if getattr(self.scale, r) > 0), default=0.0
        )

    def share(self, owner: int) -> float:
        now = self.dominant(self.owner_in_use.get(owner, Amount()))
        return (now + self.past_share.get(owner, 0.0)) / max(self.weights.get(owner, 1.0), 1e-6)

    def team_share(self, team: int | None) -> float:
        if team is None or team not in self.teams:
            return 0.0
        members = [owner for owner, of in self.team_of.items() if of == team]
        past = sum(self.past_share.get(owner, 0.0) for owner in members)
        return (self.dominant(self.teams[team].in_use) + past) / max(self.teams[team].weight, 1e-6)

    def within_team(self, candidate: Candidate) -> bool:
        """The job fits its team's own quota (no team: nothing to borrow)."""
        team = self.teams.get(candidate.team) if candidate.team is not None else None
        return team is None or not team.quota.over(team.in_use + candidate.request)


@dataclass
class Plan:
    admit: list[int] = field(default_factory=list)
    waiting: dict[int, tuple[str, list[str]]] = field(default_factory=dict)  # job -> (reason, resources short)
    order: list[int] = field(default_factory=list)  # every candidate, in the order it was considered
    borrowing: set[int] = field(default_factory=set)  # admitted past their team's quota


def _own_order(candidate: Candidate) -> tuple[int, int, float, int]:
    return (-candidate.priority, 0 if candidate.boosted else 1, candidate.created, candidate.job_id)


Key = tuple[int, int, float, float, float, int]


class _Turns:
    """Whose turn it is: a heap of owners keyed by their first job's priority, then their team's and their own
    share, then age. A team's share rises with any member's admission, so a key is checked again when it comes
    up (shares only rise within a cycle: a stale key is too low, never too high)."""

    def __init__(self, candidates: Iterable[Candidate], world: World) -> None:
        self.world = world
        self.queues: dict[int, list[Candidate]] = defaultdict(list)
        for candidate in candidates:
            self.queues[candidate.owner_id].append(candidate)
            if candidate.team is not None:
                world.team_of.setdefault(candidate.owner_id, candidate.team)
        for queue in self.queues.values():
            queue.sort(key=_own_order, reverse=True)  # the first job at the end: pop() is O(1)
        self.heap: list[tuple[Key, int]] = []
        for owner in self.queues:
            self.push(owner)

    def key(self, owner: int) -> Key | None:
        queue = self.queues[owner]
        if not queue:
            return None
        head = queue[-1]
        priority, boost, created, job_id = _own_order(head)
        return (priority, boost, self.world.team_share(head.team), self.world.share(owner), created, job_id)

    def push(self, owner: int) -> None:
        key = self.key(owner)
        if key is not None:
            heapq.heappush(self.heap, (key, owner))

    def pop(self) -> Candidate | None:
        while self.heap:
            key, owner = heapq.heappop(self.heap)
            current = self.key(owner)
            if current is not None and current > key:
                heapq.heappush(self.heap, (current, owner))  # a teammate's admission moved it back
                continue
            return self.queues[owner].pop()
        return None


class _Holds:
    """What waiting jobs hold against those after them: capacity-blocked jobs against lower priorities, and the
    first job blocked past reserve_after against everyone."""

    def __init__(self, world: World) -> None:
        self.world = world
        self.for_higher: list[tuple[int, Amount]] = []
        self.for_aged = Amount()
        self.aged_found = False

    def against(self, candidate: Candidate) -> Amount:
        reserved = self.for_aged
        for priority, amount in self.for_higher:
            if priority > candidate.priority:
                reserved = reserved + amount
        return reserved

    def blocked(self, candidate: Candidate) -> None:
        if self.world.capacity.over(candidate.request):
            return  # one that could never fit holds nothing
        self.for_higher.append((candidate.priority, candidate.request))
        if candidate.waited >= self.world.reserve_after and not self.aged_found:
            self.for_aged, self.aged_found = candidate.request, True


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
    world.in_use = world.in_use + request
    world.owner_in_use[owner] = world.owner_in_use.get(owner, Amount()) + request
    world.owner_jobs[owner] = world.owner_jobs.get(owner, 0) + 1
    if candidate.team is not None and candidate.team in world.teams:
        world.teams[candidate.team].in_use = world.teams[candidate.team].in_use + request


def plan(candidates: Iterable[Candidate], world: World, *, dry: bool = False) -> Plan:
    """Walk the waiting jobs in order and admit each that fits; `dry` admits every one (for the queue's order)."""
    result = Plan()
    turns = _Turns(candidates, world)
    holds = _Holds(world)
    while (candidate := turns.pop()) is not None:
        result.order.append(candidate.job_id)
        if not dry:
            short = _quota_short(candidate, world)
            if short:
                result.waiting[candidate.job_id] = (QUOTA_EXHAUSTED, short)
                turns.push(candidate.owner_id)
                continue
            short = world.capacity.over(world.in_use + holds.against(candidate) + candidate.request)
            if short:
                result.waiting[candidate.job_id] = (WAITING_FOR_CAPACITY, short)
                holds.blocked(candidate)
                turns.push(candidate.owner_id)
                continue
        _admit(candidate, world, result)
        turns.push(candidate.owner_id)
    return result


def victims(candidate: Candidate, running: Iterable[Running], world: World) -> list[int]:
    """The fewest running jobs to stop so `candidate` fits: those borrowing from its team's quota when it waits
    within that quota (reclaim), then lower priorities; within each, the lowest priority and the most recently
    admitted first (it has lost the least). Empty when stopping all of them would not be enough."""
    reclaim = candidate.team is not None and candidate.team in world.teams and world.within_team(candidate)

    def stoppable(job: Running) -> bool:
        reclaimable = reclaim and job.borrowing and job.team != candidate.team
        return job.preemptible and (job.priority < candidate.priority or reclaimable)

    chosen: list[int] = []
    freed = Amount()
    ordered = sorted(
        filter(stoppable, running),
        key=lambda r: (0 if r.borrowing and reclaim else 1, r.priority, -r.admitted, r.job_id),
    )
    for job in ordered:
        if not world.capacity.over(world.in_use + candidate.request + Amount(-freed.cpu, -freed.memory, -freed.gpu)):
            return chosen
        chosen.append(job.job_id)
        freed = freed + job.request
    fits = not world.capacity.over(world.in_use + candidate.request + Amount(-freed.cpu, -freed.memory, -freed.gpu))
    return chosen if fits else []
