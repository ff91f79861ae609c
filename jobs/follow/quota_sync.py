"""An operator's change to a Quota, a TeamQuota or a team's members reaches the engine (Kueue's queues and cohorts,
namespace quotas) after it commits, through the task `jobs.apply_quotas`; without it a change waited for the next
job start of each user."""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Any

from django.contrib.auth.models import Group, User
from django.db import transaction
from django.db.models.signals import m2m_changed, post_delete, post_save
from django.dispatch import receiver
from kombu.exceptions import OperationalError as KombuOperationalError

from datacenters.models import Quota, TeamQuota
from jobs.follow.tasks import apply_quotas

log = logging.getLogger(__name__)


def _apply_after_commit(datacenter_id: int, user_ids: list[int] | None) -> None:
    transaction.on_commit(lambda: _send(datacenter_id, user_ids))


def _send(datacenter_id: int, user_ids: list[int] | None) -> None:
    """The operator's change is saved whatever the broker does: if it cannot take the message, each user's next
    job start applies the change instead (objects.py checks their queues then), and the save is no 500."""
    try:
        apply_quotas.delay(datacenter_id, user_ids)
    except (KombuOperationalError, OSError) as exc:
        log.warning("datacenter %s: the broker did not take a quota change (%s); job starts apply it", datacenter_id,
                    exc)  # fmt: skip


@receiver(post_save, sender=Quota, dispatch_uid="jobs.quota_saved")
@receiver(post_delete, sender=Quota, dispatch_uid="jobs.quota_deleted")
def quota_changed(sender: type[Quota], instance: Quota, **kwargs: Any) -> None:
    _apply_after_commit(instance.datacenter_id, [instance.user_id])


@receiver(post_save, sender=TeamQuota, dispatch_uid="jobs.team_quota_saved")
@receiver(post_delete, sender=TeamQuota, dispatch_uid="jobs.team_quota_deleted")
def team_quota_changed(sender: type[TeamQuota], instance: TeamQuota, **kwargs: Any) -> None:
    """Its Cohort, and (moved in or out of it) its members' queues."""
    members = list(User.objects.filter(groups__id=instance.group_id).values_list("pk", flat=True))
    _apply_after_commit(instance.datacenter_id, members)


@receiver(m2m_changed, sender=User.groups.through, dispatch_uid="jobs.team_members_changed")
def team_members_changed(instance: Any, action: str, pk_set: set[int] | None, **kwargs: Any) -> None:
    """Someone joined or left a group: in each datacenter where a group of theirs is a team, their queue's cohort."""
    if action not in ("post_add", "post_remove", "post_clear"):
        return
    if isinstance(instance, Group):
        groups: Iterable[int] | None = [instance.pk]
        users: list[int] | None = sorted(pk_set) if pk_set is not None else None  # cleared: whoever was in it
    else:
        groups, users = pk_set, [instance.pk]  # cleared (pk_set None): any team of any group
    teams = TeamQuota.objects.all() if groups is None else TeamQuota.objects.filter(group_id__in=groups)
    for datacenter_id in sorted(set(teams.values_list("datacenter_id", flat=True))):
        _apply_after_commit(datacenter_id, users)
