"""Query parameters the lists share: yes/no flags and the `?state=` / `?active=` filter, one rule each."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import TypeVar

from django.db.models import Model, QuerySet
from rest_framework import exceptions
from rest_framework.request import Request

M = TypeVar("M", bound=Model)


def flag(request: Request, name: str) -> bool:
    """A yes/no query parameter: absent, 0, false, 1 or true; anything else is a 400 naming it."""
    value = request.query_params.get(name)
    if value is None or value.lower() in ("0", "false"):
        return False
    if value.lower() in ("1", "true"):
        return True
    raise exceptions.ValidationError({name: ["must be 1, true, 0 or false"]})


def by_state(rows: QuerySet[M], request: Request, states: Sequence[str], active: Collection[str]) -> QuerySet[M]:
    """`?state=` (one of `states`, else a 400 naming it) and `?active=1` (a state in `active`)."""
    state = request.query_params.get("state")
    if state:
        if state not in states:
            raise exceptions.ValidationError({"state": [f"must be one of {', '.join(states)}"]})
        rows = rows.filter(state=state)
    if flag(request, "active"):
        rows = rows.filter(state__in=active)
    return rows
