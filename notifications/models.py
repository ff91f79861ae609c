"""A user's default for job-end notifications, and one row per notification sent (or being sent) for a job."""

from __future__ import annotations

from django.conf import settings
from django.db import models


class NotifyPreference(models.Model):
    """What a user's jobs do when they end, unless the job's spec says otherwise (`notify`)."""

    user = models.OneToOneField(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="notify_preference")
    email = models.BooleanField(default=False, help_text="Email the account's address when a job ends.")
    webhook = models.CharField(max_length=2000, blank=True, default="", help_text="POST a JSON body to this URL.")
    updated_at = models.DateTimeField(auto_now=True)

    def __str__(self) -> str:
        return f"notifications of {self.user}"


class Channel(models.TextChoices):
    EMAIL = "email"
    WEBHOOK = "webhook"


class DeliveryState(models.TextChoices):
    PENDING = "pending"  # created; being sent or waiting for a retry
    SENT = "sent"
    FAILED = "failed"  # refused (a private address, a 4xx) or out of retries; `error` says why


class Delivery(models.Model):
    """One notification of one job on one channel: the unique pair is what makes it exactly once."""

    job = models.ForeignKey("jobs.Job", on_delete=models.CASCADE, related_name="notifications")
    channel = models.CharField(max_length=10, choices=Channel.choices)
    target = models.CharField(max_length=2000, help_text="The address or URL, as it was when the job ended.")
    state = models.CharField(max_length=10, choices=DeliveryState.choices, default=DeliveryState.PENDING)
    attempts = models.PositiveIntegerField(default=0)
    # While set and in the future, one task is sending it; others leave it alone.
    claimed_until = models.DateTimeField(null=True, blank=True)
    error = models.CharField(max_length=500, blank=True, default="")
    created_at = models.DateTimeField(auto_now_add=True)
    sent_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        verbose_name_plural = "deliveries"
        constraints = [models.UniqueConstraint(fields=["job", "channel"], name="one_notification_per_job_channel")]

    def __str__(self) -> str:
        return f"{self.channel} for job {self.job_id}: {self.state}"
