"""Notifications: tell a user when a job ends, by email and/or a webhook."""

from __future__ import annotations

from django.apps import AppConfig


class NotificationsConfig(AppConfig):
    name = "notifications"
    label = "notifications"
    verbose_name = "Notifications"

    def ready(self) -> None:
        # Jobs sits below this app and never imports it: it says when a job ends, and this listens.
        from jobs.signals import job_ended  # noqa: PLC0415 - apps are importable only once the registry is ready
        from notifications.tasks import on_job_ended  # noqa: PLC0415

        job_ended.connect(on_job_ended, dispatch_uid="notifications.job_ended")
