"""Jobs: the training job, its state machine, engines, tasks, API and pages."""

from django.apps import AppConfig


class JobsConfig(AppConfig):
    name = "jobs"
    verbose_name = "Training jobs"
