"""`kill -rm`'s "remove when released" becomes a field of the job: moved out of engine_data (and back on reverse)."""

from typing import Any

from django.db import migrations, models

REMOVE_KEY = "remove"  # where the flag lived in engine_data before


def flag_to_field(apps: Any, schema_editor: Any) -> None:
    Job = apps.get_model("jobs", "Job")
    for job in Job.objects.filter(engine_data__has_key=REMOVE_KEY).only("pk", "engine_data").iterator():
        data = dict(job.engine_data)
        wanted = bool(data.pop(REMOVE_KEY))
        Job.objects.filter(pk=job.pk).update(engine_data=data, remove_when_released=wanted)


def field_to_flag(apps: Any, schema_editor: Any) -> None:
    Job = apps.get_model("jobs", "Job")
    for job in Job.objects.filter(remove_when_released=True).only("pk", "engine_data").iterator():
        Job.objects.filter(pk=job.pk).update(engine_data={**(job.engine_data or {}), REMOVE_KEY: True})


class Migration(migrations.Migration):
    dependencies = [("jobs", "0005_alter_job_reason")]

    operations = [
        migrations.AddField(
            model_name="job",
            name="remove_when_released",
            field=models.BooleanField(default=False),
        ),
        migrations.RunPython(flag_to_field, field_to_flag),
    ]
