"""The notifications page: the user's default (email, webhook) by the API's rules, a test, the recent deliveries."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.cache import cache
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_POST

from notifications import services
from notifications.api import PreferenceSerializer
from notifications.models import Delivery, NotifyPreference


@login_required
def settings_page(request: HttpRequest) -> HttpResponse:
    user_id = request.user.pk or 0  # @login_required: always set
    pref = NotifyPreference.objects.filter(user_id=user_id).first()
    values = {"email": pref.email if pref else False, "webhook": pref.webhook if pref else ""}
    errors: dict[str, list[str]] = {}
    status = 200
    if request.method == "POST":
        email, webhook = request.POST.get("email") == "on", request.POST.get("webhook", "").strip()
        # The API's rules and messages (PUT /api/v1/notifications).
        checked = PreferenceSerializer(data={"email": email, "webhook": webhook})
        if checked.is_valid():
            NotifyPreference.objects.update_or_create(user_id=user_id, defaults=checked.validated_data)
            messages.success(request, "Notification settings saved.")
            return redirect("notifications")
        errors = {key: [str(v) for v in value] for key, value in checked.errors.items()}
        values = {"email": email, "webhook": webhook[:2000]}
        status = 400
    context = {"values": values, "errors": errors, "deliveries": recent_deliveries(user_id)}
    return render(request, "notifications/settings.html", context, status=status)


RECENT_DELIVERIES = 10


def recent_deliveries(user_id: int) -> list[Delivery]:
    """The user's newest deliveries (a failed one with its error): what only the admin showed before."""
    mine = Delivery.objects.filter(job__owner_id=user_id).select_related("job").only(
        "channel", "state", "attempts", "error", "created_at", "sent_at", "job__name", "job__uid"
    )
    return list(mine.order_by("-created_at", "-pk")[:RECENT_DELIVERIES])


@login_required
@require_POST
def send_test(request: HttpRequest) -> HttpResponse:
    # One test per user every few seconds: the portal sends it now, in this request.
    if not cache.add(f"notify-test:{request.user.pk}", 1, timeout=services.TEST_EVERY_SECONDS):
        messages.error(request, f"A test was sent less than {services.TEST_EVERY_SECONDS} s ago; try again shortly.")
        return redirect("notifications")
    outcomes = services.send_test(request.user)
    if not outcomes:
        messages.info(request, "Nothing to test: switch on email or set a webhook, save, then send a test.")
    for channel, sent, what in outcomes:
        (messages.success if sent else messages.error)(request, f"Test {channel}: {what}.")
    return redirect("notifications")
