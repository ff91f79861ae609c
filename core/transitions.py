"""The one state-machine rule of every stateful row (a job, an image build): a conditional UPDATE.

A move is allowed only from the states the machine lists for its target; whoever moves the row first
wins, and a repeat (or a move that lost the race) changes nothing and answers False.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from django.db.models import Model
from django.utils import timezone

Machine = Mapping[Any, tuple[Any, ...]]  # state -> the states it may be entered from


def move(
    model: type[Model], pk: int, to: Any, machine: Machine, *, from_states: Iterable[Any] | None = None, **fields: Any
) -> bool:
    """Set the row's `state` to `to` (and `fields`, and `updated_at`) if its state allows it; True if moved.

    `from_states` narrows the machine's sources for this one move; it never widens them.
    """
    allowed = tuple(s for s in (machine[to] if from_states is None else from_states) if s in machine[to])
    updated = model._default_manager.filter(pk=pk, state__in=allowed).update(
        state=to, updated_at=timezone.now(), **fields
    )
    return bool(updated)
