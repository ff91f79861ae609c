"""WorkerHeartbeat: the last time each Celery worker host ran the heartbeat task."""

from django.db import models


class WorkerHeartbeat(models.Model):
    hostname = models.CharField(max_length=255, unique=True)
    last_seen = models.DateTimeField()
    beats = models.PositiveBigIntegerField(default=0)

    class Meta:
        ordering = ["-last_seen"]

    def __str__(self) -> str:
        return f"{self.hostname} at {self.last_seen:%Y-%m-%d %H:%M:%S}"
