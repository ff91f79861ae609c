"""Health: Celery workers report in, so operators see in the admin which workers are alive."""

from django.apps import AppConfig


class HealthConfig(AppConfig):
    name = "health"
    label = "health"
    verbose_name = "Worker health"
