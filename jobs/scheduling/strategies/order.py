"""Order strategies: which waiting job goes next.

Each owner's own jobs go by priority, then an operator's "move to front", then age (`own`). Among owners, the one
whose first job has the lowest `turn` goes next; an order's turn may rise as jobs are admitted within a cycle
(shares do), never fall: the policy checks a turn again when it comes up.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from jobs.scheduling.shapes import Candidate, World
from jobs.scheduling.strategies.settings import Settings

Own = tuple[int, int, float, int]
Turn = tuple[float, ...]


def own(candidate: Candidate) -> Own:
    """An owner's own order: priority (higher first), moved to the front, older, then the lower id."""
    return (-candidate.priority, 0 if candidate.boosted else 1, candidate.created, candidate.job_id)


class Order(Protocol):
    def turn(self, head: Candidate, world: World) -> Turn:
        """The turn of the owner whose first waiting job is `head` (lower goes first)."""


@dataclass(frozen=True)
class FairShare:
    """Priority first (and "move to front"), then the weighted dominant share of the owner's team, then of the owner
    (dominant resource fairness over cpu, memory and gpu: what runs now plus past usage decayed by the datacenter's
    half-life, divided by the weight), then age: one user's burst interleaves with the others'."""

    @classmethod
    def of(cls, settings: Settings) -> FairShare:
        return cls()

    def turn(self, head: Candidate, world: World) -> Turn:
        priority, boost, created, job_id = own(head)
        return (priority, boost, world.team_share(head.team), world.share(head.owner_id), created, job_id)


@dataclass(frozen=True)
class Fifo:
    """Priority first (and "move to front"), then age alone: first submitted, first admitted, whoever submitted."""

    @classmethod
    def of(cls, settings: Settings) -> Fifo:
        return cls()

    def turn(self, head: Candidate, world: World) -> Turn:
        return own(head)
