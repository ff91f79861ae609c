"""When a job ends: decide who is told how, create one Delivery per channel (exactly once), and send it."""

from __future__ import annotations

import logging
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.core.cache import cache
from django.core.mail import send_mail
from django.db import IntegrityError, transaction
from django.db.models import F
from django.urls import reverse
from django.utils import timezone

from jobs.models import TERMINAL_STATES, Job
from notifications import webhook
from notifications.models import Channel, Delivery, DeliveryState, NotifyPreference

log = logging.getLogger(__name__)

MAX_ATTEMPTS = 6
CLAIM_SECONDS = 120  # longer than one send can take (its timeout twice over)


def wanted(job: Job) -> dict[str, str]:
    """{channel: target} for `job`: its spec's notify if it has one, else its owner's default."""
    notify = job.spec.get("notify")
    if notify is None:
        pref = NotifyPreference.objects.filter(user_id=job.owner_id).first()
        notify = {"email": pref.email, "webhook": pref.webhook} if pref else {}
    targets = {}
    if notify.get("email") and job.owner.email:
        targets[Channel.EMAIL.value] = job.owner.email
    if notify.get("webhook"):
        targets[Channel.WEBHOOK.value] = notify["webhook"]
    return targets


def job_ended(job_id: int) -> list[int]:
    """Create the job's deliveries (a second call creates none); the ids of those created now."""
    job = Job.objects.select_related("owner").filter(pk=job_id).first()
    if job is None or job.state not in TERMINAL_STATES:
        return []
    created = []
    for channel, target in wanted(job).items():
        try:
            with transaction.atomic():
                created.append(Delivery.objects.create(job=job, channel=channel, target=target).pk)
        except IntegrityError:
            continue  # another run of this task got there first: it sends that one
    return created


def body(job: Job) -> dict[str, Any]:
    """What a webhook receives (and what the email says)."""
    duration = None
    if job.started_at and job.finished_at:
        duration = round((job.finished_at - job.started_at).total_seconds(), 1)
    return {
        "job": job.name,
        "uid": job.uid,
        "state": job.state,
        "reason": job.reason,
        "message": job.message[:500],
        "exit_code": job.exit_code,
        "duration_seconds": duration,
        "finished_at": job.finished_at.isoformat() if job.finished_at else None,
        "url": settings.PADDLECLOUD_PUBLIC_URL.rstrip("/") + reverse("job-detail", args=[job.uid]),
    }


def claim(delivery_id: int) -> Delivery | None:
    """Take the delivery for one send (a conditional UPDATE: two tasks never send it at once); None if taken."""
    now = timezone.now()
    claimed = (
        Delivery.objects.filter(pk=delivery_id, state=DeliveryState.PENDING)
        .exclude(claimed_until__gt=now)
        .update(claimed_until=now + timedelta(seconds=CLAIM_SECONDS), attempts=F("attempts") + 1)
    )
    if not claimed:
        return None
    return Delivery.objects.select_related("job", "job__owner").get(pk=delivery_id)


def _finish(delivery: Delivery, state: DeliveryState, error: str = "") -> None:
    sent_at = timezone.now() if state == DeliveryState.SENT else None
    Delivery.objects.filter(pk=delivery.pk).update(state=state, error=error[:500], sent_at=sent_at, claimed_until=None)


def send(delivery_id: int) -> None:
    """Send one delivery; raises webhook.WebhookTransient when a retry may succeed (the task retries)."""
    delivery = claim(delivery_id)
    if delivery is None:
        return
    job = delivery.job
    payload = body(job)
    try:
        if delivery.channel == Channel.EMAIL:
            duration = f" after {payload['duration_seconds']} s" if payload["duration_seconds"] is not None else ""
            send_mail(
                subject=f"[PaddleCloud] job {job.name} {job.state}",
                message=f"Job {job.name} ({job.uid}) ended: {job.state}"
                f"{' (' + job.reason + ')' if job.reason else ''}{duration}.\n\n{payload['url']}\n",
                from_email=None,
                recipient_list=[delivery.target],
            )
        else:
            webhook.post_json(
                delivery.target, payload, timeout=settings.PADDLECLOUD_WEBHOOK_TIMEOUT,
                allow_private=settings.PADDLECLOUD_WEBHOOK_ALLOW_PRIVATE,
            )
    except webhook.WebhookRefused as exc:
        _finish(delivery, DeliveryState.FAILED, str(exc))
        log.warning("notification %s of job %s refused: %s", delivery.channel, job.uid, exc)
    except (webhook.WebhookTransient, OSError) as exc:
        if delivery.attempts >= MAX_ATTEMPTS:
            _finish(delivery, DeliveryState.FAILED, f"gave up after {delivery.attempts} attempts: {exc}")
            return
        Delivery.objects.filter(pk=delivery.pk).update(claimed_until=None, error=str(exc)[:500])
        raise webhook.WebhookTransient(str(exc)) from None
    else:
        _finish(delivery, DeliveryState.SENT)


TEST_EVERY_SECONDS = 10  # one test a user at most this often: the button cannot make the portal a POST cannon
TEST_KEPT_SECONDS = 3600  # how long the page shows a test's outcome


def test_key(user_id: int) -> str:
    """The cache entry of the user's last test: {"state": "sending" | "done", "at": ISO time, "outcomes": [...]}."""
    return f"notify-test-result:{int(user_id)}"


def has_something_to_test(user: Any) -> bool:
    return NotifyPreference.objects.filter(user_id=user.pk).exclude(email=False, webhook="").exists()


def test_sending(user: Any) -> None:
    """Note that a test is on its way (the page shows it so until the notify lane records the outcome)."""
    cache.set(test_key(user.pk), {"state": "sending", "at": timezone.now().isoformat()}, TEST_KEPT_SECONDS)


def send_test_now(user: Any) -> None:
    """Send the user's test (in the notify lane's worker) and keep the outcome for the page."""
    outcomes = [list(outcome) for outcome in send_test(user)]
    done = {"state": "done", "at": timezone.now().isoformat(), "outcomes": outcomes}
    cache.set(test_key(user.pk), done, TEST_KEPT_SECONDS)


def send_test(user: Any) -> list[tuple[str, bool, str]]:
    """Send a test now to each channel of `user`'s saved default: (channel, sent, what happened) for each.

    The webhook goes through the same sender as a job's (public addresses only, no redirects, one deadline);
    nothing is retried and no Delivery is recorded. The page's button runs this in the notify lane
    (send_test_now), never in the web request: a receiver that drips its answer holds a notify slot only.
    """
    pref = NotifyPreference.objects.filter(user_id=user.pk).first()
    outcomes: list[tuple[str, bool, str]] = []
    if pref is None:
        return outcomes
    if pref.email:
        outcomes.append(_test_email(user))
    if pref.webhook:
        outcomes.append(_test_webhook(user, pref.webhook))
    return outcomes


def _test_email(user: Any) -> tuple[str, bool, str]:
    if not user.email:
        return Channel.EMAIL.value, False, "your account has no email address"
    try:
        send_mail(subject="[PaddleCloud] test notification", from_email=None, recipient_list=[user.email],
                  message="This is a test: PaddleCloud will email this address when your jobs end.\n")
    except OSError as exc:
        return Channel.EMAIL.value, False, f"the mail server refused it: {type(exc).__name__}"
    return Channel.EMAIL.value, True, f"sent to {user.email}"


def _test_webhook(user: Any, url: str) -> tuple[str, bool, str]:
    payload = {"test": True, "job": None, "state": None, "user": user.get_username(),
               "message": "a test from PaddleCloud: this URL will receive a JSON body like this when a job ends"}
    try:
        status = webhook.post_json(url, payload, timeout=settings.PADDLECLOUD_WEBHOOK_TIMEOUT,
                                   allow_private=settings.PADDLECLOUD_WEBHOOK_ALLOW_PRIVATE)
    except (webhook.WebhookRefused, webhook.WebhookTransient) as exc:
        return Channel.WEBHOOK.value, False, str(exc)[:300]
    return Channel.WEBHOOK.value, True, f"the receiver answered HTTP {status}"
