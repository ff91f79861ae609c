"""A changed password revokes the user's API tokens, whichever path changed it (page, admin, command, reset).

Every path ends in saving the user with a new password hash, so the rule lives on the user's save:
pre_save compares the hash with the stored one, post_save revokes in the same transaction. Other
browser sessions end by themselves: Django's session auth hash is derived from the password hash.
"""

from __future__ import annotations

from typing import Any

from django.contrib.auth import get_user_model
from django.contrib.auth.models import AbstractBaseUser
from django.db.models.signals import post_save, pre_save

from accounts.services import revoke_all_tokens

_CHANGED = "_paddlecloud_password_changed"


def _is_rehash(user: AbstractBaseUser, update_fields: frozenset[str] | None) -> bool:
    # check_password() upgrades the hash of a correct password to the current hasher and saves only
    # the password, with the raw password already forgotten: the same password, so nothing to revoke.
    return update_fields == frozenset({"password"}) and getattr(user, "_password", None) is None


def note_password_change(sender: Any, instance: AbstractBaseUser, update_fields: Any = None, **kwargs: Any) -> None:
    fields = frozenset(update_fields) if update_fields is not None else None
    if instance.pk is None or (fields is not None and "password" not in fields) or _is_rehash(instance, fields):
        setattr(instance, _CHANGED, False)
        return
    stored = sender.objects.filter(pk=instance.pk).values_list("password", flat=True).first()
    setattr(instance, _CHANGED, stored is not None and stored != instance.password)


def revoke_on_password_change(sender: Any, instance: AbstractBaseUser, created: bool, **kwargs: Any) -> None:
    if getattr(instance, _CHANGED, False):
        setattr(instance, _CHANGED, False)
        revoke_all_tokens(instance)  # type: ignore[arg-type]


def connect() -> None:
    user_model = get_user_model()
    pre_save.connect(note_password_change, sender=user_model, dispatch_uid="paddlecloud-password-pre")
    post_save.connect(revoke_on_password_change, sender=user_model, dispatch_uid="paddlecloud-password-post")
