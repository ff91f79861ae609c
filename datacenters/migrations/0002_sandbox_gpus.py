from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("datacenters", "0001_initial")]

    operations = [
        migrations.AddField(
            model_name="datacenter",
            name="run_without_sandbox",
            field=models.BooleanField(
                default=False,
                help_text="Local engine only: run jobs without the bubblewrap sandbox where the host cannot create "
                "one. Jobs then run as the worker's OS user and see its files: trusted users only.",
            ),
        ),
        migrations.AddField(
            model_name="datacenter",
            name="gpus",
            field=models.JSONField(
                blank=True,
                default=list,
                help_text='Local engine only: the host GPUs jobs may be given, as a JSON list of indexes such as '
                '["0", "1"]. Filled from `nvidia-smi -L` when the datacenter is created.',
            ),
        ),
    ]
