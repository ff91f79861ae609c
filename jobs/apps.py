"""Jobs: the training job, its state machine, engines, tasks, API and pages."""

from django.apps import AppConfig


class JobsConfig(AppConfig):
    name = "jobs"
    verbose_name = "Training jobs"

    def ready(self) -> None:
        # In ready(), not at the top: these import models, which Django allows only once its app registry is ready.
        # checks registers the system checks, registry_logins connects its signal.
        from datacenters.quota import register_usage_provider  # noqa: PLC0415
        from jobs import checks  # noqa: F401, PLC0415
        from jobs.follow import quota_sync, registry_logins  # noqa: F401, PLC0415
        from jobs.scheduling.usage import compute_in_use  # noqa: PLC0415

        register_usage_provider(compute_in_use)
        from celery.signals import worker_ready, worker_shutdown  # noqa: PLC0415

        from jobs.follow import listener  # noqa: PLC0415

        worker_ready.connect(listener.start_if_control, weak=False)
        from jobs import signals  # noqa: PLC0415
        from jobs.follow import tasks  # noqa: PLC0415

        # The way back of the release -> schedule -> start cycle (jobs/signals.py says why it is a signal).
        signals.job_released.connect(tasks.wake_scheduler, weak=False)
        signals.job_released.connect(tasks.prune_when_released, weak=False)  # a job's `keep` policy, once it ended
        from jobs.scheduling import dependencies  # noqa: PLC0415

        signals.job_ended.connect(dependencies.on_job_ended, weak=False)  # a job's end may unblock its dependents
        worker_shutdown.connect(listener.stop, weak=False)
