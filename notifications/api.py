"""GET/PUT /api/v1/notifications: the user's default for job-end notifications (a job's `notify` overrides it)."""

from __future__ import annotations

from django.conf import settings
from paddlecloud.contract import spec as rules
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from core import addresses
from core.api.serializers import StrictSerializer
from notifications.models import NotifyPreference


def webhook_problem(url: str) -> str | None:
    """The URL's form (the contract's rule), then where it points (core.addresses): refused when saved, not sent."""
    return rules.webhook_url_problem(url) or addresses.url_problem(url, settings.PADDLECLOUD_WEBHOOK_ALLOW_PRIVATE)


class PreferenceSerializer(StrictSerializer):
    email = serializers.BooleanField(help_text="Email the account's address when a job ends.")
    webhook = serializers.CharField(max_length=rules.MAX_WEBHOOK_URL, allow_blank=True, default="")

    def validate_webhook(self, value: str) -> str:
        problem = webhook_problem(value) if value else None
        if problem:
            raise serializers.ValidationError(problem)
        return value


class NotifyPreferenceView(APIView):
    serializer_class = PreferenceSerializer

    def get(self, request: Request) -> Response:
        pref = NotifyPreference.objects.filter(user_id=request.user.pk or 0).first()
        return Response({"email": pref.email if pref else False, "webhook": pref.webhook if pref else ""})

    def put(self, request: Request) -> Response:
        checked = PreferenceSerializer(data=request.data)
        checked.is_valid(raise_exception=True)
        NotifyPreference.objects.update_or_create(user_id=request.user.pk or 0, defaults=checked.validated_data)
        return Response(checked.validated_data)
