"""Storage work in the background: upload verification, and periodic expiry and recounts (beat).

The upload lifecycle (storage.uploads) says what must happen next; this module only queues it.
"""

from __future__ import annotations

import uuid

from celery import shared_task
from django.contrib.auth import get_user_model
from django.db import transaction
from django.utils import timezone

from datacenters.models import Datacenter
from storage import uploads
from storage.models import StorageSample, StorageUsage
from storage.usage import recompute_user


@shared_task(name="storage.cleanup_uploads", ignore_result=True)
def cleanup_uploads() -> int:
    """Expire abandoned uploads (temp file removed, reservation released); idempotent.

    Verifications whose worker died are claimed by the sweep and queued again here.
    """
    sweep = uploads.cleanup()
    for upload_id in sweep.to_verify:
        verify_upload.delay(str(upload_id))
    return sweep.expired


@shared_task(name="storage.verify_upload", ignore_result=True, acks_late=True)
def verify_upload(upload_id: str) -> None:
    """Verify a large upload after `complete` answered 202; a worker that dies leaves it to the next one."""
    uploads.verify(upload_id)


def verify_after_commit(upload_id: uuid.UUID) -> None:
    """Queue the verification of an upload `complete` claimed, once its claim is committed."""
    transaction.on_commit(lambda: verify_upload.delay(str(upload_id)))


@shared_task(name="storage.recompute_usage", ignore_result=True)
def recompute_usage(user_id: int, datacenter_id: int) -> None:
    """Recount a home after a job wrote to it directly (its output and logs bypass the API)."""
    user = get_user_model().objects.filter(pk=user_id).first()
    datacenter = Datacenter.objects.filter(pk=datacenter_id).first()
    if user is not None and datacenter is not None:
        recompute_user(user, datacenter)


@shared_task(name="storage.sample_usage", ignore_result=True)
def sample_usage() -> int:
    """Write one StorageSample per user and datacenter with anything stored (hourly, from beat); how many."""
    now = timezone.now()
    rows = [
        StorageSample(user_id=user, datacenter_id=datacenter, used_bytes=used, taken_at=now)
        for user, datacenter, used in StorageUsage.objects.filter(used_bytes__gt=0).values_list(
            "user_id", "datacenter_id", "used_bytes"
        )
    ]
    StorageSample.objects.bulk_create(rows, batch_size=1000)
    return len(rows)
