"""What the scheduling policy reasons about, pure: amounts and bounds, the waiting candidates, the running jobs,
teams, the world a cycle sees, and the plan it makes (jobs.scheduling.policy walks them; the strategies decide)."""

from __future__ import annotations

from dataclasses import dataclass, field, replace

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

    def __sub__(self, other: Amount) -> Amount:
        return Amount(self.cpu - other.cpu, self.memory - other.memory, self.gpu - other.gpu)

    def times(self, factor: float) -> Amount:
        return Amount(self.cpu * factor, self.memory * factor, self.gpu * factor)


@dataclass(frozen=True)
class Bound:
    """An upper bound per resource; None: unbounded."""

    cpu: float | None = None
    memory: float | None = None
    gpu: float | None = None
    jobs: int | None = None

    def over(self, amount: Amount, jobs: int = 0) -> list[str]:
        """The resources `amount` (and `jobs` running jobs) would exceed, by name."""
        names = []  # spelled out, not a loop over RESOURCES: the cycle asks this a few times per waiting job
        if self.cpu is not None and amount.cpu > self.cpu + 1e-9:
            names.append("cpu")
        if self.memory is not None and amount.memory > self.memory + 1e-9:
            names.append("memory")
        if self.gpu is not None and amount.gpu > self.gpu + 1e-9:
            names.append("gpu")
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
    noted: tuple[str, str] = ("", "")  # its reason and message as stored: the cycle writes only a change
    queued: float = 0.0  # epoch seconds it (last) began to wait: `waited` counts from it
    trainers: int = 1  # an elastic job's most trainers (its `request` is theirs: collective, no pservers)
    min_trainers: int = 0  # an elastic job's fewest trainers; 0: a fixed size

    def sizes(self) -> list[Candidate]:
        """The sizes it may start with, the largest first: itself, then (elastic) one trainer fewer each."""
        if not 0 < self.min_trainers < self.trainers:
            return [self]
        each = self.request.times(1 / self.trainers)
        fewer = range(self.trainers - 1, self.min_trainers - 1, -1)
        return [self] + [replace(self, request=each.times(n), trainers=n) for n in fewer]


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
    saved: float | None = None  # epoch seconds its newest checkpoint was saved, as last seen; None: none seen

    def at_risk(self, now: float) -> float:
        """Seconds of its work a stop now would lose: since its newest checkpoint, or since its admission if that
        is later (a checkpoint of an earlier attempt was resumed from) or it has none."""
        return now - max(self.admitted, self.saved or 0.0)


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

    admissions: int = 0  # admitted in this cycle so far: a turn computed before the last one may be stale

    def dominant(self, held: Amount) -> float:
        scale, largest = self.scale, 0.0  # a resource the datacenter lacks (scale 0) counts for nobody
        if scale.cpu > 0:
            largest = max(largest, held.cpu / scale.cpu)
        if scale.memory > 0:
            largest = max(largest, held.memory / scale.memory)
        if scale.gpu > 0:
            largest = max(largest, held.gpu / scale.gpu)
        return largest

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
    sizes: dict[int, int] = field(default_factory=dict)  # elastic jobs admitted with fewer trainers: how many
