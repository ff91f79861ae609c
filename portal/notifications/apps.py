"""Notifications: tell a user when a job ends, by email and/or a webhook."""

from django.apps import AppConfig


class NotificationsConfig(AppConfig):
    name = "portal.notifications"
    label = "notifications"
    verbose_name = "Notifications"
