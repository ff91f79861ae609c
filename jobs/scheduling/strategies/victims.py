"""Victim strategies: which running jobs a job that waits for capacity stops (preemption), when the cycle lets it
(the datacenter's preemption delay has passed and no other preemption is under way)."""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Protocol

from jobs.scheduling.shapes import Amount, Candidate, Running, World
from jobs.scheduling.strategies.settings import Settings

DAY = 86400.0
# Kueue's priority boost of a running job that must not be stopped for a higher priority: more than any two
# classes differ by (Kubernetes' user priorities are at most 1e9; Kueue adds the boost in 64 bits).
SHIELD = 1_000_000_000


class VictimChoice(Protocol):
    def victims(self, candidate: Candidate, running: Iterable[Running], world: World, now: float) -> list[int]:
        """The running jobs to stop so `candidate` fits; [] where stopping them all would not be enough."""

    def boost(self, job: Running, now: float, room: int) -> int:
        """The same choice as Kueue's priority boost of `job`'s Workload (jobs.scheduling.preemption_cost): Kueue
        stops the lowest effective priority (priority + boost) first, then the most recently admitted. At most
        `room` (less than any two classes differ by, so classes keep their order) or SHIELD (never a victim of a
        higher priority; Kueue's cohort reclaim and fair sharing may still take the room back)."""


def loss_rank(seconds: float) -> int:
    """Work a stop would lose, in steps Kueue's boost can carry without a write every minute: 0 under a minute,
    then one more each time it doubles (1: 1-3 min, 2: 3-7 min, 3: 7-15 min, ... 10: 17 h or more)."""
    return int(math.log2(1 + max(seconds, 0.0) / 60))


def _fits(candidate: Candidate, world: World, freed: Amount) -> bool:
    return not world.capacity.over(world.in_use + candidate.request + Amount(-freed.cpu, -freed.memory, -freed.gpu))


@dataclass(frozen=True)
class LeastLoss:
    """The fewest running jobs to stop: those borrowing from the candidate's team's quota when it waits within that
    quota (reclaim), then lower priorities; within each, the lowest priority first, then the one that loses the
    least work (since its newest checkpoint, or its admission), then the most recently admitted. Priority comes
    before lost work on purpose: an operator's classes say whose work matters more. `min_runtime` (seconds,
    default 0): a job admitted less than that ago is not stopped."""

    min_runtime: float = 0.0

    @classmethod
    def of(cls, settings: Settings) -> LeastLoss:
        return cls(settings.seconds("min_runtime", 0, DAY))

    def victims(self, candidate: Candidate, running: Iterable[Running], world: World, now: float) -> list[int]:
        reclaim = candidate.team is not None and candidate.team in world.teams and world.within_team(candidate)

        def stoppable(job: Running) -> bool:
            reclaimable = reclaim and job.borrowing and job.team != candidate.team
            ran_enough = not self.min_runtime or now - job.admitted >= self.min_runtime  # 0: no clock compared
            return job.preemptible and ran_enough and (job.priority < candidate.priority or reclaimable)

        chosen: list[int] = []
        freed = Amount()
        ordered = sorted(
            filter(stoppable, running),
            key=lambda r: (
                0 if r.borrowing and reclaim else 1, r.priority, round(r.at_risk(now)), -r.admitted, r.job_id
            ),
        )
        for job in ordered:
            if _fits(candidate, world, freed):
                return chosen
            chosen.append(job.job_id)
            freed = freed + job.request
        return chosen if _fits(candidate, world, freed) else []

    def boost(self, job: Running, now: float, room: int) -> int:
        """Kueue's form of this order: priority first (the boost stays within `room`), then less lost work (its
        rank, coarser than the seconds compared here), then the most recently admitted (Kueue's own tie-break)."""
        if not job.preemptible or (self.min_runtime and now - job.admitted < self.min_runtime):
            return SHIELD
        return min(room, loss_rank(job.at_risk(now)))


@dataclass(frozen=True)
class Never:
    """No running job is ever stopped for another: a waiting job waits for running jobs to end."""

    @classmethod
    def of(cls, settings: Settings) -> Never:
        return cls()

    def victims(self, candidate: Candidate, running: Iterable[Running], world: World, now: float) -> list[int]:
        return []

    def boost(self, job: Running, now: float, room: int) -> int:
        return SHIELD
