"""A deleted registry secret takes its login out of every cluster it was copied to (API, admin, a user's
deletion alike): after the delete commits, the task `jobs.revoke_registry_login` blanks the copies."""

from __future__ import annotations

from typing import Any

from django.db import transaction
from django.db.models.signals import post_delete
from django.dispatch import receiver

from jobs.follow.tasks import revoke_registry_login
from registry.models import RegistrySecret


@receiver(post_delete, sender=RegistrySecret, dispatch_uid="jobs.revoke_registry_login")
def registry_secret_deleted(sender: type[RegistrySecret], instance: RegistrySecret, **kwargs: Any) -> None:
    username, name = instance.owner.get_username(), instance.name
    transaction.on_commit(lambda: revoke_registry_login.delay(username, name))
