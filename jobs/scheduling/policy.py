"""The scheduling policy, pure: the order waiting jobs go in, and which of them fit now.

Order: priority first (higher first; an operator's "move to front" next), then the owner's weighted
dominant share (dominant resource fairness over cpu, memory and gpu: the owner's largest fraction of any
resource, counting what runs now plus past usage decayed by the datacenter's half-life, divided by their
weight), then age. Each admission raises its owner's share, so one user's burst interleaves with others'.

Fit: a job starts whole (gang) or not at all: every pserver and trainer's requests together must fit
both the datacenter's free capacity and its owner's free quota. A job that does not fit keeps its place;
jobs behind it may start with what is left (backfill) except what is held for it: a job blocked by
capacity holds its requests against every job of lower priority, and the first job to have waited
`reserve_after` seconds holds them against everyone (no job waits forever behind a stream of small ones).
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


@dataclass(frozen=True)
class Running:
    """An admitted job that holds its requests, as preemption sees it."""

    job_id: int
    priority: int
    admitted: float  # epoch seconds
    request: Amount
    preemptible: bool


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

    def share(self, owner: int) -> float:
        held = self.owner_in_use.get(owner, Amount())
        now = max(
            (getattr(held, r) / getattr(self.scale, r) for r in RESOURCES if getattr(self.scale, r) > 0), default=0.0
        )
        return (now + self.past_share.get(owner, 0.0)) / max(self.weights.get(owner, 1.0), 1e-6)


@dataclass
class Plan:
    admit: list[int] = field(default_factory=list)
    waiting: dict[int, tuple[str, list[str]]] = field(default_factory=dict)  # job -> (reason, resources short)
    order: list[int] = field(default_factory=list)  # every candidate, in the order it was considered


def _own_order(candidate: Candidate) -> tuple[int, int, float, int]:
    return (-candidate.priority, 0 if candidate.boosted else 1, candidate.created, candidate.job_id)


class _Turns:
    """Whose turn it is: a heap of owners keyed by their first job's priority, then their share, then age."""

    def __init__(self, candidates: Iterable[Candidate], world: World) -> None:
        self.world = world
        self.queues: dict[int, list[Candidate]] = defaultdict(list)
        for candidate in candidates:
            self.queues[candidate.owner_id].append(candidate)
        for queue in self.queues.values():
            queue.sort(key=_own_order, reverse=True)  # the first job at the end: pop() is O(1)
        self.heap: list[tuple[tuple[int, int, float, float, int], int]] = []
        for owner in self.queues:
            self.push(owner)

    def push(self, owner: int) -> None:
        queue = self.queues[owner]
        if queue:
            head = queue[-1]
            priority, boost, created, job_id = _own_order(head)
            heapq.heappush(self.heap, ((priority, boost, self.world.share(owner), created, job_id), owner))

    def pop(self) -> Candidate | None:
        if not self.heap:
            return None
        _, owner = heapq.heappop(self.heap)
        return self.queues[owner].pop()


def plan(candidates: Iterable[Candidate], world: World, *, dry: bool = False) -> Plan:
    """Walk the waiting jobs in order and admit each that fits; `dry` admits every one (for the queue's order)."""
    result = Plan()
    turns = _Turns(candidates, world)
    held_for_higher: list[tuple[int, Amount]] = []  # capacity-blocked jobs: they hold against lower priorities
    held_for_aged = Amount()  # the first job blocked past reserve_after: it holds against everyone
    aged_found = False
    while (candidate := turns.pop()) is not None:
        result.order.append(candidate.job_id)
        owner, request = candidate.owner_id, candidate.request
        if not dry:
            owner_after = world.owner_in_use.get(owner, Amount()) + request
            short = world.owner_limits.get(owner, Bound()).over(owner_after, world.owner_jobs.get(owner, 0) + 1)
            if short:
                result.waiting[candidate.job_id] = (QUOTA_EXHAUSTED, short)
                turns.push(owner)
                continue
            reserved = held_for_aged
            for priority, amount in held_for_higher:
                if priority > candidate.priority:
                    reserved = reserved + amount
            short = world.capacity.over(world.in_use + reserved + request)
            if short:
                result.waiting[candidate.job_id] = (WAITING_FOR_CAPACITY, short)
                if not world.capacity.over(request):  # one that could never fit holds nothing
                    held_for_higher.append((candidate.priority, request))
                    if candidate.waited >= world.reserve_after and not aged_found:
                        held_for_aged, aged_found = request, True
                turns.push(owner)
                continue
        result.admit.append(candidate.job_id)
        world.in_use = world.in_use + request
        world.owner_in_use[owner] = world.owner_in_use.get(owner, Amount()) + request
        world.owner_jobs[owner] = world.owner_jobs.get(owner, 0) + 1
        turns.push(owner)
    return result


def victims(candidate: Candidate, running: Iterable[Running], world: World) -> list[int]:
    """The fewest running jobs of lower priority to stop so `candidate` fits: lowest priority first, then the
    most recently admitted (it has lost the least). Empty when stopping every one of them would not be enough."""
    chosen: list[int] = []
    freed = Amount()
    stoppable = sorted(
        (r for r in running if r.preemptible and r.priority < candidate.priority),
        key=lambda r: (r.priority, -r.admitted, r.job_id),
    )
    for job in stoppable:
        if not world.capacity.over(world.in_use + candidate.request + Amount(-freed.cpu, -freed.memory, -freed.gpu)):
            return chosen
        chosen.append(job.job_id)
        freed = freed + job.request
    fits = not world.capacity.over(world.in_use + candidate.request + Amount(-freed.cpu, -freed.memory, -freed.gpu))
    return chosen if fits else []
