"""Backfill strategies: what a job that waits for capacity holds against the jobs the policy looks at after it.

A job starts whole (gang) or not at all. One that does not fit keeps its place; what it holds decides whether
smaller jobs behind it may start with what is left. `start` gives the cycle's `Holds` (fresh each cycle).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

from jobs.scheduling.shapes import Amount, Candidate, World
from jobs.scheduling.strategies.settings import Settings


class Holds(Protocol):
    def against(self, candidate: Candidate) -> Amount:
        """What the jobs blocked so far hold against `candidate`."""

    def blocked(self, candidate: Candidate) -> None:
        """`candidate` did not fit the datacenter's free capacity."""


class Backfill(Protocol):
    def start(self, world: World) -> Holds: ...


@dataclass
class _ReserveHolds:
    world: World
    for_higher: dict[int, Amount] = field(default_factory=dict)  # priority -> what its blocked jobs hold, summed
    for_aged: Amount = field(default_factory=Amount)
    aged_found: bool = False
    against_all: bool = False

    def against(self, candidate: Candidate) -> Amount:
        reserved = self.for_aged  # a walk over the few priorities, not over every blocked job (1,000s a cycle)
        for priority, amount in self.for_higher.items():
            if self.against_all or priority > candidate.priority:
                reserved = reserved + amount
        return reserved

    def blocked(self, candidate: Candidate) -> None:
        if self.world.capacity.over(candidate.request):
            return  # one that could never fit holds nothing
        self.for_higher[candidate.priority] = self.for_higher.get(candidate.priority, Amount()) + candidate.request
        if candidate.waited >= self.world.reserve_after and not self.aged_found and not self.against_all:
            self.for_aged, self.aged_found = candidate.request, True


@dataclass(frozen=True)
class Reserve:
    """A job blocked by capacity holds its requests against every job of lower priority, and the first job to have
    waited the datacenter's `reserve_after` seconds holds them against everyone: smaller jobs start in what is left,
    and no job waits forever behind a stream of small ones."""

    @classmethod
    def of(cls, settings: Settings) -> Reserve:
        return cls()

    def start(self, world: World) -> Holds:
        return _ReserveHolds(world)


@dataclass(frozen=True)
class Conservative:
    """Every job blocked by capacity holds its requests against every job after it: a later job starts only in
    room no earlier job is waiting for (Slurm's conservative backfill). Nothing is ever passed; less is used."""

    @classmethod
    def of(cls, settings: Settings) -> Conservative:
        return cls()

    def start(self, world: World) -> Holds:
        return _ReserveHolds(world, against_all=True)


@dataclass(frozen=True)
class _Nothing:
    def against(self, candidate: Candidate) -> Amount:
        return Amount()

    def blocked(self, candidate: Candidate) -> None:
        return


@dataclass(frozen=True)
class Greedy:
    """Nothing is held: any job that fits starts (the most use now; a large job may wait behind a stream of small
    ones, as long as they keep coming)."""

    @classmethod
    def of(cls, settings: Settings) -> Greedy:
        return cls()

    def start(self, world: World) -> Holds:
        return _Nothing()
