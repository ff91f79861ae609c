"""Priority classes: which one a submit names, and whether its user may use it (staff may use every class).

A class's value is read once, at submit, and kept on the job (`Job.priority`): an operator who changes a class
changes the jobs submitted after, never the order of those already waiting. Both admissions rank by the kept
value: the portal's scheduler orders by it, and the Kubernetes engine gives Kueue's WorkloadPriorityClass the
job's kept value as it makes the job's Workload.
"""

from __future__ import annotations

from typing import Any

from django.db.models import Q

from core.errors import Invalid
from jobs.models import PriorityClass

DEFAULT = "normal"
# The classes a datacenter starts with (name, value, open to all, description); operators change them in the admin.
# (name, value, open to all, its jobs may opt out of preemption, description)
STARTING_CLASSES = (
    ("low", 0, True, False, "Runs on what is left; the first to be preempted, and it cannot opt out."),
    ("normal", 100, True, True, "The default."),
    ("high", 1000, False, True, "Deadlines: staff, and users an operator lists. May preempt lower classes."),
)


def ensure_classes() -> None:
    """With no class at all (a fresh database, or an operator deleted every one), the starting ones exist again."""
    if not PriorityClass.objects.exists():
        for name, value, open_to_all, may_opt_out, description in STARTING_CLASSES:
            PriorityClass.objects.get_or_create(
                name=name,
                defaults={"value": value, "open_to_all": open_to_all, "may_opt_out": may_opt_out,
                          "description": description},
            )  # fmt: skip


def check_opt_out(user: Any, chosen: PriorityClass, no_preempt: bool) -> None:
    """`-no-preempt` only where the class allows it (staff always may)."""
    if no_preempt and not chosen.may_opt_out and not getattr(user, "is_staff", False):
        raise Invalid(f"jobs of class {chosen.name!r} may be preempted; choose a class that allows opting out",
                      "no_preempt")  # fmt: skip


def usable_by(user: Any) -> Any:
    ensure_classes()
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
