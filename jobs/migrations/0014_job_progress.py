from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('jobs', '0013_worker_usage'),
    ]

    operations = [
        migrations.AddField(
            model_name='job',
            name='progress',
            field=models.JSONField(blank=True, help_text="Its slowest trainer's logged step of total_steps and the ETA (jobs.progress).", null=True),
        ),
    ]
