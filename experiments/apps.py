"""Experiments: many runs of one job template over a search of params (grid or random), followed as one."""

from django.apps import AppConfig


class ExperimentsConfig(AppConfig):
    name = "experiments"
    verbose_name = "Experiments"

    def ready(self) -> None:
        # jobs never imports experiments: it says when a job ends, and this listens (the next trials start).
        from experiments.tasks import on_trial_job_changed  # noqa: PLC0415 - importable once the registry is ready
        from jobs.signals import job_ended, job_released  # noqa: PLC0415

        job_ended.connect(on_trial_job_changed, dispatch_uid="experiments.job_ended")
        job_released.connect(on_trial_job_changed, dispatch_uid="experiments.job_released")
