"""Jobs: the training job, its state machine, engines, tasks, API and pages."""

from django.apps import AppConfig


class JobsConfig(AppConfig):
    name = "jobs"
    verbose_name = "Training jobs"

    def ready(self) -> None:
        from jobs import checks  # noqa: F401  (registers the system checks)
        from jobs.usage import compute_in_use
        from portal.datacenters.quota import register_usage_provider

        register_usage_provider(compute_in_use)
