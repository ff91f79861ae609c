"""Storage usage per user and datacenter, and chunked uploads in progress."""

from __future__ import annotations

import uuid

from django.conf import settings
from django.db import models

from datacenters.models import Datacenter


class StorageUsage(models.Model):
    """What a user stores in one datacenter's home, kept exact by every write and delete through the portal.

    Files written by jobs directly on the filesystem are picked up by `manage.py storage_usage --fix`
    (and `storage.usage.recompute`). `used_files` counts entries (files, directories, symlinks), as inode
    quotas do. Open uploads hold a reservation of their declared size so concurrent uploads cannot
    together pass the quota check; it is released when they complete, fail, are aborted or expire.
    """

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="storage_usage")
    datacenter = models.ForeignKey(Datacenter, on_delete=models.CASCADE, related_name="storage_usage")
    used_bytes = models.BigIntegerField(default=0)
    used_files = models.BigIntegerField(default=0)
    reserved_bytes = models.BigIntegerField(default=0)
    reserved_files = models.BigIntegerField(default=0)
    updated_at = models.DateTimeField(auto_now=True)
    recomputed_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["user", "datacenter"], name="one_storage_usage_per_user_dc")]
        ordering = ["datacenter__name", "user__username"]
        verbose_name_plural = "storage usage"

    def __str__(self) -> str:
        return f"storage of {self.user} in {self.datacenter}"



SAMPLE_SECONDS = 3600  # storage is sampled hourly (beat: storage.sample_usage); a sample counts this long at most


class StorageSample(models.Model):
    """What a user stored in one datacenter at one time: the accounting's storage GiB-days are made of these."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    datacenter = models.ForeignKey(Datacenter, on_delete=models.CASCADE, related_name="+")
    used_bytes = models.BigIntegerField()
    taken_at = models.DateTimeField(db_index=True)

    class Meta:
        ordering = ["-taken_at"]
        indexes = [models.Index(fields=["datacenter", "user", "taken_at"])]

    def __str__(self) -> str:
        return f"{self.used_bytes} bytes of {self.user_id} in {self.datacenter_id} at {self.taken_at}"

class UploadState(models.TextChoices):
    OPEN = "open", "open: receiving chunks"
    VERIFYING = "verifying", "verifying the whole-file checksum"
    COMPLETED = "completed", "completed: the file is in place"
    FAILED = "failed", "failed at completion (see error); nothing was kept"
    ABORTED = "aborted", "aborted by the user"
    EXPIRED = "expired", "abandoned and cleaned up"


# States in which the upload holds its temp file and its reservation.
LIVE_STATES = (UploadState.OPEN, UploadState.VERIFYING)


class Upload(models.Model):
    """A file arriving in chunks into a temp file next to its target, renamed onto it when complete."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="uploads")
    datacenter = models.ForeignKey(Datacenter, on_delete=models.CASCADE, related_name="uploads")
    path = models.TextField(help_text="Logical target path, /pfs/<dc>/...")
    target_name = models.TextField(help_text="Target, relative to the storage root.")
    temp_name = models.TextField(help_text="Temp file next to the target, relative to the storage root.")
    size = models.BigIntegerField(help_text="Declared total size in bytes.")
    checksum = models.CharField(max_length=64, help_text="Declared whole-file xxh3_128, hex.")
    chunk_size = models.PositiveIntegerField()
    counts_quota = models.BooleanField(default=True, help_text="In the owner's home: reserved and charged.")
    state = models.CharField(max_length=20, choices=UploadState.choices, default=UploadState.OPEN)
    error = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True, db_index=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]
        indexes = [models.Index(fields=["state", "updated_at"], name="upload_state_updated")]

    def __str__(self) -> str:
        return f"upload {self.id} of {self.path}"

    @property
    def chunk_count(self) -> int:
        return -(-self.size // self.chunk_size)

    def chunk_length(self, index: int) -> int:
        return min(self.chunk_size, self.size - index * self.chunk_size)


class UploadChunk(models.Model):
    """One received chunk: ok when its bytes matched the checksum the client sent with it."""

    upload = models.ForeignKey(Upload, on_delete=models.CASCADE, related_name="chunks")
    index = models.PositiveIntegerField()
    checksum = models.CharField(max_length=64)
    ok = models.BooleanField()
    received_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["upload", "index"], name="one_row_per_upload_chunk")]
        ordering = ["upload", "index"]

    def __str__(self) -> str:
        return f"chunk {self.index} of {self.upload_id}"
