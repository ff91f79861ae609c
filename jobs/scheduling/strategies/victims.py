"""Victim strategies: which running jobs a job that waits for capacity stops (preemption), when the cycle lets it
(the datacenter's preemption delay has passed and no other preemption is under way)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Protocol

from jobs.scheduling.shapes import Amount, Candidate, Running, World
from jobs.scheduling.strategies.settings import Settings

DAY = 86400.0


class VictimChoice(Protocol):
    def victims(self, candidate: Candidate, running: Iterable[Running], world: World, now: float) -> list[int]:
        """The running jobs to stop so `candidate` fits; [] where stopping them all would not be enough."""


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


@dataclass(frozen=True)
class Never:
    """No running job is ever stopped for another: a waiting job waits for running jobs to end."""

    @classmethod
    def of(cls, settings: Settings) -> Never:
        return cls()

    def victims(self, candidate: Candidate, running: Iterable[Running], world: World, now: float) -> list[int]:
        return []
