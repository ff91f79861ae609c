"""The isolation reasons: StorageQuotaExceeded and PidsLimit."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("jobs", "0004_alter_job_reason"),
    ]

    operations = [
        migrations.AlterField(
            model_name="job",
            name="reason",
            field=models.CharField(
                blank=True,
                choices=[
                    ("", "None"),
                    ("Killed", "Killed"),
                    ("PserverLost", "Pserver Lost"),
                    ("TrainerFailed", "Trainer Failed"),
                    ("BackoffLimit", "Backoff Limit"),
                    ("PendingTimeout", "Pending Timeout"),
                    ("Unschedulable", "Unschedulable"),
                    ("ImagePullBackOff", "Image Pull"),
                    ("OOMKilled", "Oom Killed"),
                    ("QuotaExceeded", "Quota Exceeded"),
                    ("SubmitFailed", "Submit Failed"),
                    ("LaunchFailed", "Launch Failed"),
                    ("ImageBuilding", "Image Building"),
                    ("BuildFailed", "Build Failed"),
                    ("StorageQuotaExceeded", "Storage Quota Exceeded"),
                    ("PidsLimit", "Pids Limit"),
                ],
                default="",
                max_length=40,
            ),
        ),
    ]
