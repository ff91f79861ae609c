"""Datacenter settings for what jobs may use of what is shared: egress, processes, log size."""

import django.core.validators
from django.db import migrations, models

import core.validators


class Migration(migrations.Migration):
    dependencies = [
        ("datacenters", "0003_builder"),
    ]

    operations = [
        migrations.AddField(
            model_name="datacenter",
            name="job_egress",
            field=models.BooleanField(
                default=True,
                help_text="Jobs may open connections to the outside world (pip, datasets). Never to the host's own "
                "services, the portal's, or other jobs: each job has a network of its own either way.",
            ),
        ),
        migrations.AddField(
            model_name="datacenter",
            name="job_pids_limit",
            field=models.PositiveIntegerField(
                default=1024,
                help_text="Processes and threads one worker (pserver or trainer) may hold at once.",
                validators=[
                    django.core.validators.MinValueValidator(16),
                    django.core.validators.MaxValueValidator(1000000),
                ],
            ),
        ),
        migrations.AddField(
            model_name="datacenter",
            name="job_log_limit",
            field=models.CharField(
                default="256Mi",
                help_text="Bytes of one worker's log kept on disk; past it the head and the end are kept and the "
                "log says how much was dropped between them.",
                max_length=20,
                validators=[core.validators.validate_storage_quantity],
            ),
        ),
    ]
