"""The notifications page: the user's default (email, webhook) by the API's rules, a test, the recent deliveries."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.cache import cache
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils import timezone
from django.utils.dateparse import parse_datetime
from django.views.decorators.http import require_POST
from kombu.exceptions import OperationalError as KombuOperationalError

from notifications import services, tasks
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
    context = {
        "values": values, "errors": errors, "deliveries": recent_deliveries(user_id), "last_test": _last_test(user_id),
        "timeout": settings.PADDLECLOUD_WEBHOOK_TIMEOUT,
    }
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
    # One test per user every few seconds; sent by the notify lane, so the request answers at once.
    if not cache.add(f"notify-test:{request.user.pk}", 1, timeout=services.TEST_EVERY_SECONDS):
        messages.error(request, f"A test was sent less than {services.TEST_EVERY_SECONDS} s ago; try again shortly.")
        return redirect("notifications")
    if not services.has_something_to_test(request.user):
        messages.info(request, "Nothing to test: switch on email or set a webhook, save, then send a test.")
        return redirect("notifications")
    services.test_sending(request.user)  # first: a fast worker's outcome must not be overwritten by it
    try:
        tasks.send_test.delay(request.user.pk or 0)
    except (KombuOperationalError, OSError):
        # Nothing was sent: no "sending" shown, and the user may try again at once.
        cache.delete_many([f"notify-test:{request.user.pk}", services.test_key(request.user.pk or 0)])
        messages.error(request, "The test could not be queued: the portal's message broker does not answer.")
        return redirect("notifications")
    return redirect(reverse("notifications") + "#last-test")


@login_required
def last_test(request: HttpRequest) -> HttpResponse:
    """The last test's outcome (the page polls it while the test is on its way)."""
    context = {"last_test": _last_test(request.user.pk or 0), "timeout": settings.PADDLECLOUD_WEBHOOK_TIMEOUT}
    return render(request, "notifications/_last_test.html", context)


STALE_SECONDS = 60  # a test still not sent after this long: no notify worker took it; the page stops asking


def _last_test(user_id: int) -> dict[str, Any] | None:
    found = cache.get(services.test_key(user_id))
    if not isinstance(found, dict) or (at := parse_datetime(str(found.get("at", "")))) is None:
        return None
    found["at"] = at
    found["stale"] = found.get("state") == "sending" and timezone.now() - at > timedelta(seconds=STALE_SECONDS)
    found["outcomes"] = [
        {"channel": channel, "sent": sent, "what": what} for channel, sent, what in found.get("outcomes", [])
    ]
    return found
