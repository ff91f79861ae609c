"""Token and signup services: every write to accounts goes through here."""

from __future__ import annotations

from django.contrib.auth import get_user_model
from django.contrib.auth.models import User
from django.core.exceptions import PermissionDenied
from django.db import transaction
from django.utils import timezone

from accounts.models import ApiToken, issue_token


@transaction.atomic
def current_token(user: User) -> ApiToken:
    """Return the user's newest valid token, issuing one if none is left (what paddlectl login gets).

    `user` is as its password was checked: if the password changed since (a change revokes every
    token), no token is handed out, or a login with the old password could race the change.
    """
    # Lock the user's row so two logins at once do not both issue a token, nor one and a password change.
    stored = get_user_model().objects.select_for_update().filter(pk=user.pk).values_list("password", flat=True)
    if stored.first() != user.password:
        raise PermissionDenied("the password changed while this login was checked; log in again")
    token = ApiToken.objects.valid().filter(user=user).first()
    return token or issue_token(user)


@transaction.atomic
def regenerate_token(user: User) -> ApiToken:
    """Revoke every token of the user and issue a fresh one."""
    revoke_all_tokens(user)
    return issue_token(user)


def revoke_all_tokens(user: User) -> int:
    return ApiToken.objects.filter(user=user, revoked_at__isnull=True).update(revoked_at=timezone.now())


def revoke_token(token: ApiToken) -> None:
    ApiToken.objects.filter(pk=token.pk, revoked_at__isnull=True).update(revoked_at=timezone.now())


@transaction.atomic
def deactivate(user: User) -> None:
    """The account can no longer log in or call the API: inactive (Django's ModelBackend then refuses its
    sessions at their next request) and every token revoked (they would be refused too: belt and braces)."""
    get_user_model().objects.filter(pk=user.pk).update(is_active=False)
    revoke_all_tokens(user)
