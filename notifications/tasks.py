"""Celery tasks: create a finished job's deliveries, then send each one, retrying with backoff.

They run on a queue of their own (the `notify` lane, core/lanes.py), consumed by a worker process of
its own, so a slow receiver holds only notification slots, never the ones that start and follow jobs.
"""

from __future__ import annotations

from functools import partial
from typing import Any

from celery import shared_task
from django.contrib.auth import get_user_model
from django.db import transaction

from notifications import services
from notifications.webhook import WebhookTransient


@shared_task(name="notifications.job_ended", acks_late=True, ignore_result=True)
def job_ended(job_id: int) -> None:
    for delivery_id in services.job_ended(job_id):
        transaction.on_commit(partial(send_delivery.delay, delivery_id))


@shared_task(
    name="notifications.send",
    acks_late=True,
    ignore_result=True,
    autoretry_for=(WebhookTransient,),
    retry_backoff=5,  # 5 s, 10 s, 20 s, ... (jittered), at most services.MAX_ATTEMPTS sends
    retry_backoff_max=600,
    retry_jitter=True,
    max_retries=services.MAX_ATTEMPTS,
)
def send_delivery(delivery_id: int) -> None:
    services.send(delivery_id)


@shared_task(name="notifications.send_test", ignore_result=True)
def send_test(user_id: int) -> None:
    """The notifications page's "Send a test": sent here, in the notify lane; the page shows the outcome."""
    user = get_user_model().objects.filter(pk=user_id).first()
    if user is not None:
        services.send_test_now(user)


def on_job_ended(sender: Any, job_id: int, **kwargs: Any) -> None:
    """Receives jobs.signals.job_ended: the notification is sent once the final state has committed."""
    transaction.on_commit(lambda: job_ended.delay(job_id))
