"""Priority classes: which one a submit names, and whether its user may use it (staff may use every class)."""

from __future__ import annotations

from typing import Any

from django.db.models import Q

from core.errors import Invalid
from jobs.models import PriorityClass

DEFAULT = "normal"


def usable_by(user: Any) -> Any:
    if getattr(user, "is_staff", False):
        return PriorityClass.objects.all()
    return PriorityClass.objects.filter(Q(open_to_all=True) | Q(users=user) | Q(groups__user=user)).distinct()


def resolve(user: Any, name: str | None) -> PriorityClass:
    """The class `name` (the default when empty) if `user` may use it; else Invalid naming `priority`."""
    name = name or DEFAULT
    chosen: PriorityClass | None = usable_by(user).filter(name=name).first()
    if chosen is None:
        names = ", ".join(usable_by(user).order_by("-value").values_list("name", flat=True)) or "none"
        exists = PriorityClass.objects.filter(name=name).exists()
        rule = "you may not use it" if exists else "no such class"
        raise Invalid(f"{name!r}: {rule}; you may use: {names}", "priority")
    return chosen
