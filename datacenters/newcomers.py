"""Accounts made by signup start small: a Quota row in every datacenter from its `new_user_*` fields.

Open signup lets strangers make accounts, and every per-user bound (quota, pids, downloads, waiting jobs) is
multiplied by the accounts one person makes; so an account made by signup (accounts.views.signup) joins the group
NEWCOMERS and gets, in every datacenter, a Quota row holding that datacenter's `new_user_*` values (a blank one
leaves that resource at the datacenter's default). A datacenter made later gives the group's members theirs too.
Operators trust a user by raising their Quota row (the admin); accounts operators make are not newcomers.
"""

from __future__ import annotations

from typing import Any

from django.contrib.auth.models import Group
from django.db import transaction

from datacenters.models import Datacenter, Quota

NEWCOMERS = "signed up"  # the group of accounts made by signup


def _row_values(datacenter: Datacenter) -> dict[str, Any]:
    values: dict[str, Any] = {
        "cpu": datacenter.new_user_cpu, "memory": datacenter.new_user_memory, "gpu": datacenter.new_user_gpu,
        "jobs": datacenter.new_user_jobs, "storage": datacenter.new_user_storage,
    }  # fmt: skip
    return values


def welcome(user: Any) -> None:
    """A new account made by signup: into NEWCOMERS, with its quota row in every datacenter (one there already,
    an operator's, is kept)."""
    with transaction.atomic():
        group, _ = Group.objects.get_or_create(name=NEWCOMERS)
        user.groups.add(group)
        for datacenter in Datacenter.objects.all():
            Quota.objects.get_or_create(user=user, datacenter=datacenter, defaults=_row_values(datacenter))


def datacenter_made(sender: Any, instance: Datacenter, created: bool, raw: bool = False, **kwargs: Any) -> None:
    """post_save of a Datacenter: a new one gives each newcomer their quota row there too."""
    if not created or raw:
        return
    for user_id in Group.objects.filter(name=NEWCOMERS).values_list("user", flat=True):
        if user_id is not None:
            Quota.objects.get_or_create(user_id=user_id, datacenter=instance, defaults=_row_values(instance))
