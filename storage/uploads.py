"""Chunked, resumable uploads: start, put chunks in any order, ask what is missing, complete, abort.

Life of an upload (`Upload.state`):
  start     -> open: the declared size is reserved against the quota, an empty temp file is created
               next to the target (`.paddlecloud-upload-<id>`, same directory so the rename is atomic).
  chunk i   -> written at i * chunk_size straight from the request stream in 1 MiB pieces (never a whole
               chunk in memory) under a shared flock on the temp file; recorded ok or wrong by checksum.
  complete  -> verifying: takes the exclusive flock (waits for chunk writes in flight), checks every
               chunk is ok and the size, hashes the temp file by streaming it, then in one transaction
               with the usage row locked: re-checks the quota, renames the temp file onto the target,
               charges the real size (minus the file it replaced) and releases the reservation.
               Missing or wrong chunks send it back to open (resumable); anything else fails it.
  abort / expiry / failure -> the temp file is removed and the reservation released, exactly once:
               whoever moves the row out of a live state with a conditional UPDATE does it.

This module is the lifecycle: it decides each step and moves the row with conditional UPDATEs. The
files on disk are storage.upload_files, what the upload holds against the quota storage.upload_quota.
It queues nothing itself: `complete` and `cleanup` return what must happen next in the background,
and storage.tasks queues exactly that. The checksum format lives in storage.checksums.
"""

from __future__ import annotations

import logging
import os
import uuid
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from django.utils import timezone

from core.errors import Conflict, DomainError, Invalid, LengthRequired, NotFound
from storage import conf, descriptors, paths, upload_chunks, upload_files, upload_quota
from storage.backends import PfsStorage, storage_for
from storage.checksums import format_checksum, parse_checksum
from storage.descriptors import hash_fd
from storage.errors import raise_os_error
from storage.models import LIVE_STATES, Upload, UploadState
from storage.upload_files import TempGone

log = logging.getLogger(__name__)

VERIFY_STALE = timedelta(minutes=5)  # a verifying upload silent this long is taken over by the next complete


# --- start ------------------------------------------------------------------------------------


def start(user: Any, path: str, size: int, checksum: str, chunk_size: int | None = None) -> Upload:
    """Open an upload to `path`: check access and quota, reserve `size`, create the temp file."""
    digest = parse_checksum(checksum, "checksum")
    chunk = _chunk_size(chunk_size)
    if size < 0:
        raise Invalid("must not be negative", "size")
    target = paths.resolve(user, path, write=True, follow_last=False)
    if target.is_area_root:
        raise Conflict(f"{target.logical} is a directory", code="is_a_directory")
    storage = target.storage
    parent = os.path.dirname(target.name)  # noqa: PTH120 - a storage name's top is "" (Path.parent says ".")
    missing = upload_files.missing_dirs(target, parent)

    upload = Upload(
        id=uuid.uuid4(),
        owner=user,
        datacenter=target.datacenter,
        path=target.logical,
        target_name=target.name,
        size=size,
        checksum=digest,
        chunk_size=chunk,
        counts_quota=target.area == paths.HOME,
    )
    upload.temp_name = upload_files.temp_name(parent, upload)
    created_temp = False
    try:
        with upload_quota.ledger_of(upload) as book:
            upload_quota.check_reservation(book, size, len(missing))
            created_dirs = upload_files.create_temp(storage, upload, parent)
            created_temp = True
            upload_quota.reserve(book, size, created_dirs)
            upload.save(force_insert=True)
    except OSError as exc:
        if created_temp:
            upload_files.remove_temp(upload, storage)
        raise_os_error(exc, target.logical)
    except BaseException:
        if created_temp:
            upload_files.remove_temp(upload, storage)
        raise
    return upload


def _chunk_size(asked: int | None) -> int:
    """The chunk size asked for, or the default; 400 unless 64 KiB-aligned and within the limit."""
    chunk = asked or conf.default_chunk_size()
    maximum = conf.max_chunk_size()
    if chunk % conf.CHUNK_ALIGN or not conf.CHUNK_ALIGN <= chunk <= maximum:
        raise Invalid(
            f"must be a multiple of {conf.CHUNK_ALIGN} (64 KiB) between {conf.CHUNK_ALIGN} and {maximum}", "chunk_size"
        )
    return chunk


# --- access -----------------------------------------------------------------------------------


def get_upload(user: Any, upload_id: str) -> Upload:
    """The user's upload with this id; anyone else's is 404, as if it did not exist."""
    try:
        key = uuid.UUID(str(upload_id))
    except ValueError:
        raise NotFound(f"upload {str(upload_id)[:60]!r} not found") from None
    upload = Upload.objects.select_related("datacenter", "owner").filter(pk=key, owner=user).first()
    if upload is None:
        raise NotFound(f"upload {key} not found")
    return upload


def expires_at(upload: Upload) -> datetime | None:
    """When a live upload left untouched is abandoned (None once it has ended)."""
    if upload.state not in LIVE_STATES:
        return None
    return upload.updated_at + timedelta(seconds=conf.upload_expire_seconds())


def _refuse_unless_open(upload: Upload) -> None:
    if upload.state == UploadState.OPEN:
        return
    if upload.state == UploadState.VERIFYING:
        raise Conflict(f"upload {upload.id} is being verified; wait for it to finish", code="upload_verifying")
    reason = f": {upload.error}" if upload.error else ""
    raise Conflict(f"upload {upload.id} is {upload.state}{reason}", code=f"upload_{upload.state}")


# --- chunks -----------------------------------------------------------------------------------


def put_chunk(
    user: Any, upload_id: str, index: int, body: descriptors.Readable, length: int | None, checksum: Any
) -> Upload:
    """Write chunk `index` from `body` (exactly `length` bytes) at its offset; 400 if its checksum differs."""
    upload = get_upload(user, upload_id)
    _refuse_unless_open(upload)
    expected = _chunk_length(upload, index, length)
    want = parse_checksum(checksum, "X-Chunk-Checksum")
    try:
        with upload_files.locked_temp(upload, write=True) as fd:
            upload.refresh_from_db(fields=["state", "error"])
            _refuse_unless_open(upload)
            upload_chunks.forget(upload, index)
            digest = upload_files.write_chunk(fd, upload, index, body, expected)
            ok = digest == want
            upload_chunks.record(upload, index, digest, ok)
    except TempGone:
        raise _temp_gone(upload) from None
    if not ok:
        raise Invalid(
            f"chunk {index} arrived as {format_checksum(digest)}, not {format_checksum(want)}; send it again",
            "X-Chunk-Checksum",
            code="checksum_mismatch",
        )
    return upload


def _chunk_length(upload: Upload, index: int, length: int | None) -> int:
    """The length chunk `index` must have; 400 (411 without a length) unless the request says exactly that."""
    count = upload.chunk_count
    if not 0 <= index < count:
        raise Invalid(f"chunk index must be between 0 and {count - 1} (got {index})", "index")
    expected = upload.chunk_length(index)
    if length is None:
        raise LengthRequired()
    if length != expected:
        raise Invalid(f"chunk {index} must be exactly {expected} bytes (Content-Length was {length})", "Content-Length")
    return expected


def _temp_gone(upload: Upload) -> Conflict:
    fail(upload, "its temporary file was removed (was the directory deleted?); start the upload again")
    return Conflict(f"upload {upload.id} failed: its temporary file was removed; start again", code="upload_failed")


def _beat(upload: Upload) -> None:
    Upload.objects.filter(pk=upload.pk, state=UploadState.VERIFYING).update(updated_at=timezone.now())


# --- completion -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Completion:
    """What `complete` did, and whether the upload must now be verified in the background."""

    upload: Upload
    verify_in_background: bool = False


def complete(user: Any, upload_id: str) -> Completion:
    """Verify and put the file in place; the upload completed, or verifying in the background.

    Idempotent: completing a completed upload returns it again (a client whose connection dropped
    retries safely). Missing or wrong chunks: 409 and the upload stays open to be resumed.
    """
    upload = get_upload(user, upload_id)
    now = timezone.now()
    if upload.state == UploadState.COMPLETED:
        return Completion(upload)
    if upload.state == UploadState.VERIFYING:
        # A verifier beats every VERIFY_BEAT; one silent for VERIFY_STALE died with its process: take over.
        stale = Upload.objects.filter(pk=upload.pk, state=UploadState.VERIFYING, updated_at__lt=now - VERIFY_STALE)
        claimed = stale.update(updated_at=now)
        if not claimed:
            return Completion(upload)
    else:
        _refuse_unless_open(upload)
        claimed = Upload.objects.filter(pk=upload.pk, state=UploadState.OPEN).update(
            state=UploadState.VERIFYING, error="", updated_at=now
        )
    if not claimed:
        return complete(user, upload_id)  # someone else moved it: answer from its new state
    upload.state = UploadState.VERIFYING
    if upload.size > conf.verify_inline_bytes():
        # Hashing a very large file can outlast proxies' timeouts (the old system's 504s): a Celery
        # task does it after we answer 202; the client polls GET /uploads/<id> until completed or failed.
        return Completion(upload, verify_in_background=True)
    finish(upload)
    return Completion(upload)


def verify(upload_id: str) -> None:
    """The background verification of an upload in state verifying; what happened is recorded on the row."""
    upload = Upload.objects.select_related("datacenter", "owner").filter(pk=upload_id).first()
    if upload is None or upload.state != UploadState.VERIFYING:
        return  # finished meanwhile (completed, failed, aborted, expired): nothing left to verify
    try:
        finish(upload)
    except DomainError:
        pass  # recorded on the upload (failed, or back to open with the reason)
    except Exception:
        log.exception("verifying upload %s failed", upload_id)
        fail(upload, "internal error while verifying; the operators have the details in the portal log")


def take_over_stale_verifications(now: datetime) -> list[uuid.UUID]:
    """Claim each verification whose verifier went silent (its process died): the ones to verify again."""
    stale = Upload.objects.filter(state=UploadState.VERIFYING, updated_at__lt=now - VERIFY_STALE)
    taken: list[uuid.UUID] = []
    for upload_id in stale.values_list("pk", flat=True):
        # The conditional update is the claim: of two sweeps at once, only one queues it again.
        if Upload.objects.filter(pk=upload_id, state=UploadState.VERIFYING, updated_at__lt=now - VERIFY_STALE).update(
            updated_at=now
        ):
            taken.append(upload_id)
    return taken


def finish(upload: Upload) -> None:
    """The verifying step of `complete`; the upload must be in state verifying."""
    try:
        # Exclusive: waits for chunk writes in flight; later ones see the state.
        with upload_files.locked_temp(upload, write=False) as fd:
            _refuse_unless_whole(upload)
            _check_bytes(upload, fd)
            os.fsync(fd)
            _commit(storage_for(upload.datacenter), upload)
    except TempGone:
        raise _temp_gone(upload) from None


def _refuse_unless_whole(upload: Upload) -> None:
    """Missing or wrong chunks send the upload back to open (resumable) with a 409 naming them."""
    lacking = upload_chunks.lacking(upload_chunks.report(upload))
    if not lacking:
        return
    message = f"upload {upload.id} is incomplete: {lacking}; send them and complete again"
    Upload.objects.filter(pk=upload.pk, state=UploadState.VERIFYING).update(
        state=UploadState.OPEN, error=message, updated_at=timezone.now()
    )
    upload.state = UploadState.OPEN
    raise Conflict(message, code="incomplete")


def _check_bytes(upload: Upload, fd: int) -> None:
    """The temp file's size and whole-file checksum are the declared ones, or the upload fails (400)."""
    actual = os.fstat(fd).st_size
    if actual != upload.size:
        message = f"the file is {actual} bytes, not the {upload.size} declared"
        fail(upload, message)
        raise Invalid(f"upload {upload.id} failed: {message}", "size", code="size_mismatch")
    digest = hash_fd(fd, actual, beat=lambda: _beat(upload))
    if digest != upload.checksum:
        message = (
            f"the file's checksum is {format_checksum(digest)}, not the declared {format_checksum(upload.checksum)}"
        )
        fail(upload, message)
        raise Invalid(f"upload {upload.id} failed: {message}", "checksum", code="checksum_mismatch")


def _commit(storage: PfsStorage, upload: Upload) -> None:
    """Rename onto the target and settle usage in one transaction with the usage row locked."""
    error: DomainError | None = None
    with upload_quota.ledger_of(upload) as book:
        if not Upload.objects.filter(pk=upload.pk, state=UploadState.VERIFYING).exists():
            upload.refresh_from_db(fields=["state", "error"])
            _refuse_unless_open(upload)  # aborted or expired meanwhile: says so
        try:
            replaced = upload_files.file_replaced(storage, upload)
            upload_quota.check_landing(book, upload, replaced)
            upload_files.move_into_place(storage, upload)
            upload_quota.charge(book, upload, replaced)
        except DomainError as exc:  # the ledger commits nothing of ours; the upload fails below
            error = exc
        else:
            now = timezone.now()
            Upload.objects.filter(pk=upload.pk).update(state=UploadState.COMPLETED, finished_at=now, updated_at=now)
            upload.state = UploadState.COMPLETED
    if error is not None:
        fail(upload, error.message)
        raise error


# --- endings ----------------------------------------------------------------------------------


def fail(upload: Upload, message: str, state: str = UploadState.FAILED, idle_before: datetime | None = None) -> bool:
    """End a live upload: state, reservation released and temp file removed, exactly once.

    idle_before: only if untouched since then (expiry must not end an upload a chunk just touched).
    """
    with upload_quota.ledger_of(upload) as book:
        now = timezone.now()
        live = Upload.objects.filter(pk=upload.pk, state__in=LIVE_STATES)
        if idle_before is not None:
            live = live.filter(updated_at__lt=idle_before)
        claimed = live.update(state=state, error=message, finished_at=now, updated_at=now)
        if claimed:
            upload_quota.release(book, upload)
    if claimed:
        upload.state, upload.error = state, message
        upload_files.remove_temp(upload)
    return bool(claimed)


def abort(user: Any, upload_id: str) -> None:
    upload = get_upload(user, upload_id)
    if upload.state in (UploadState.ABORTED, UploadState.EXPIRED, UploadState.FAILED):
        return
    _refuse_unless_open(upload)
    if not fail(upload, "aborted by its owner", UploadState.ABORTED):
        upload.refresh_from_db()
        if upload.state != UploadState.ABORTED:
            _refuse_unless_open(upload)


@dataclass(frozen=True)
class Sweep:
    """What `cleanup` did: how many uploads expired, and the verifications to queue again."""

    expired: int = 0
    to_verify: list[uuid.UUID] = field(default_factory=list)


def cleanup(now: datetime | None = None) -> Sweep:
    """Expire uploads untouched for the configured time, forget finished ones as old, and claim the
    verifications whose verifier died (the caller queues them again)."""
    now = now or timezone.now()
    to_verify = take_over_stale_verifications(now)
    cutoff = now - timedelta(seconds=conf.upload_expire_seconds())
    expired = 0
    for upload in Upload.objects.select_related("datacenter", "owner").filter(
        state__in=LIVE_STATES, updated_at__lt=cutoff
    ):
        # fail()'s conditional update makes this safe against a chunk or a completion racing it.
        if fail(upload, "abandoned: no activity for too long", UploadState.EXPIRED, idle_before=cutoff):
            expired += 1
    Upload.objects.exclude(state__in=LIVE_STATES).filter(updated_at__lt=cutoff).delete()
    return Sweep(expired, to_verify)
