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

The checksum format lives in storage.checksums, the streaming reads and writes in storage.descriptors.
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import stat
import uuid
from collections.abc import Iterable
from datetime import datetime, timedelta
from typing import Any

from django.db import transaction
from django.utils import timezone

from core.errors import Conflict, DomainError, Invalid, LengthRequired, NotFound
from storage import conf, descriptors, paths, usage
from storage.backends import TEMP_PREFIX, PfsStorage, storage_for
from storage.checksums import format_checksum, parse_checksum
from storage.descriptors import hash_fd, hash_range, write_at
from storage.errors import raise_os_error
from storage.models import LIVE_STATES, Upload, UploadChunk, UploadState

log = logging.getLogger(__name__)

ACTIVITY_PRECISION = timedelta(minutes=1)  # an upload's updated_at is refreshed by chunks at most this often
VERIFY_STALE = timedelta(minutes=5)  # a verifying upload silent this long is taken over by the next complete


def ranges(indexes: Iterable[int]) -> list[list[int]]:
    """Sorted chunk indexes as half-open [start, stop) ranges: [0, 1, 2, 7] -> [[0, 3], [7, 8]]."""
    out: list[list[int]] = []
    for index in sorted(indexes):
        if out and out[-1][1] == index:
            out[-1][1] = index + 1
        else:
            out.append([index, index + 1])
    return out


def describe(spans: list[list[int]], limit: int = 8) -> str:
    text = ", ".join(str(a) if b == a + 1 else f"{a}-{b - 1}" for a, b in spans[:limit])
    return text + (", ..." if len(spans) > limit else "")


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
    missing = _missing_dirs(target, parent)

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
    upload.temp_name = f"{parent}/{TEMP_PREFIX}{upload.id}" if parent else f"{TEMP_PREFIX}{upload.id}"
    created_temp = False
    try:
        with usage.ledger(user, target.datacenter, counts=upload.counts_quota) as book:
            # Checked before any byte lands: the declared size, the new file, the directories to create.
            book.check(add_bytes=size, add_files=1 + len(missing))
            created_dirs = storage.makedirs(parent)
            os.close(storage.open_fd(upload.temp_name, os.O_WRONLY | os.O_CREAT | os.O_EXCL))
            created_temp = True
            book.apply(used_files=created_dirs, reserved_bytes=size, reserved_files=1)
            upload.save(force_insert=True)
    except OSError as exc:
        if created_temp:
            _remove_temp(storage, upload)
        raise_os_error(exc, target.logical)
    except BaseException:
        if created_temp:
            _remove_temp(storage, upload)
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


def _missing_dirs(target: paths.ResolvedPath, parent: str) -> list[str]:
    """The directories an upload to `target` must create; 409 if a directory is there or a name clashes."""
    storage = target.storage
    try:
        try:
            existing = storage.lstat(target.name)
        except FileNotFoundError:
            existing = None
        if existing is not None and _is_dir(existing):
            raise Conflict(f"{target.logical} is a directory", code="is_a_directory")
        missing = storage.missing_dirs(parent)
        _refuse_normalization_clash(storage, target.logical, target.name, missing, existing is None)
    except OSError as exc:
        raise_os_error(exc, target.logical)
    return missing


def _is_dir(st: os.stat_result) -> bool:
    return stat.S_ISDIR(st.st_mode)


def _refuse_normalization_clash(
    storage: PfsStorage, logical: str, name: str, missing_dirs: list[str], target_is_new: bool
) -> None:
    """Refuse creating a name that differs from an existing sibling only by Unicode normalization."""
    parent = os.path.dirname(name)  # noqa: PTH120 - a storage name's top is "" (Path.parent says ".")
    candidates: list[str] = []
    if missing_dirs:
        # Only the first missing directory has an existing parent to clash in.
        existing_part = parent.split("/")[: len(parent.split("/")) - len(missing_dirs)]
        candidates.append("/".join([*existing_part, missing_dirs[0]]))
    elif target_is_new:
        candidates.append(name)
    for candidate in candidates:
        clash = storage.normalization_clash(candidate)
        if clash is not None:
            wanted = candidate.rsplit("/", 1)[-1]
            raise Conflict(
                f"{logical}: {wanted!r} differs only by Unicode normalization from the existing {clash!r}; "
                "rename one of them",
                code="normalization_clash",
            )


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
    storage = storage_for(upload.datacenter)
    try:
        fd = storage.open_fd(upload.temp_name, os.O_WRONLY)
    except FileNotFoundError:
        raise _temp_gone(upload) from None
    except OSError as exc:
        raise_os_error(exc, upload.path)
    try:
        # Shared: chunks write in parallel; `complete` takes it exclusively before it verifies.
        fcntl.flock(fd, fcntl.LOCK_SH)
        upload.refresh_from_db(fields=["state", "error"])
        _refuse_unless_open(upload)
        # A chunk sent again is missing until fully written and checked, whatever it was before.
        resent = UploadChunk.objects.filter(upload=upload, index=index)
        if resent.exists():  # a read first: most chunks arrive once, and a write costs a commit
            resent.delete()
        try:
            digest, written = write_at(fd, index * upload.chunk_size, body, expected)
        except OSError as exc:
            raise_os_error(exc, upload.path)
        if written != expected:
            raise Invalid(f"chunk {index} ended after {written} of {expected} bytes; send it again", "body")
        ok = digest == want
        now = timezone.now()
        with transaction.atomic():
            # One statement (INSERT ... ON CONFLICT UPDATE): per-chunk commits are what a busy disk makes slow.
            UploadChunk.objects.bulk_create(
                [UploadChunk(upload=upload, index=index, checksum=digest, ok=ok, received_at=now)],
                update_conflicts=True,
                unique_fields=["upload", "index"],
                update_fields=["checksum", "ok", "received_at"],
            )
            if now - upload.updated_at > ACTIVITY_PRECISION:  # keeps it from expiring; a minute is precise enough
                Upload.objects.filter(pk=upload.pk).update(updated_at=now)
    finally:
        os.close(fd)
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


# --- status -----------------------------------------------------------------------------------


def chunk_report(upload: Upload, verify: bool = False) -> dict[str, Any]:
    """Which chunks are present (ok), wrong (checksum differed) and missing, as [start, stop) ranges.

    verify: re-read every ok chunk from the temp file and mark the ones whose bytes changed as wrong.
    """
    rows = list(upload.chunks.values_list("index", "ok", "checksum"))
    if verify and upload.state == UploadState.OPEN and rows:
        rows = _verify_chunks(upload, rows)
    present = [index for index, ok, _ in rows if ok]
    wrong = [index for index, ok, _ in rows if not ok]
    seen = set(present) | set(wrong)
    missing_spans: list[list[int]] = []
    previous = 0
    for index in [*sorted(seen), upload.chunk_count]:
        if index > previous:
            missing_spans.append([previous, index])
        previous = index + 1
    return {"received": len(present), "present": ranges(present), "wrong": ranges(wrong), "missing": missing_spans}


def _verify_chunks(upload: Upload, rows: list[tuple[int, bool, str]]) -> list[tuple[int, bool, str]]:
    storage = storage_for(upload.datacenter)
    try:
        fd = storage.open_fd(upload.temp_name, os.O_RDONLY)
    except OSError:
        return rows
    checked: list[tuple[int, bool, str]] = []
    try:
        fcntl.flock(fd, fcntl.LOCK_SH)
        for index, ok, digest in rows:
            if ok and hash_range(fd, index * upload.chunk_size, upload.chunk_length(index)) != digest:
                ok = False
                UploadChunk.objects.filter(upload=upload, index=index).update(ok=False)
            checked.append((index, ok, digest))
    finally:
        os.close(fd)
    return checked


# --- completion -------------------------------------------------------------------------------


def complete(user: Any, upload_id: str) -> Upload:
    """Verify and put the file in place; returns the upload (completed, or verifying in the background).

    Idempotent: completing a completed upload returns it again (a client whose connection dropped
    retries safely). Missing or wrong chunks: 409 and the upload stays open to be resumed.
    """
    upload = get_upload(user, upload_id)
    now = timezone.now()
    if upload.state == UploadState.COMPLETED:
        return upload
    if upload.state == UploadState.VERIFYING:
        # A verifier beats every VERIFY_BEAT; one silent for VERIFY_STALE died with its process: take over.
        stale = Upload.objects.filter(pk=upload.pk, state=UploadState.VERIFYING, updated_at__lt=now - VERIFY_STALE)
        claimed = stale.update(updated_at=now)
        if not claimed:
            return upload
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
        transaction.on_commit(lambda: verify_later(upload.pk))
        return upload
    finish(upload)
    return upload


def verify_later(upload_id: uuid.UUID) -> None:
    """Have any Celery worker verify a claimed upload (storage.tasks.verify_upload)."""
    from storage.tasks import verify_upload  # noqa: PLC0415 - here: the tasks module imports this one

    verify_upload.delay(str(upload_id))


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


def take_over_stale_verifications(now: datetime) -> int:
    """Queue again each verification whose verifier went silent (its process died); how many."""
    stale = Upload.objects.filter(state=UploadState.VERIFYING, updated_at__lt=now - VERIFY_STALE)
    taken = 0
    for upload_id in stale.values_list("pk", flat=True):
        # The conditional update is the claim: of two sweeps at once, only one queues it again.
        if Upload.objects.filter(pk=upload_id, state=UploadState.VERIFYING, updated_at__lt=now - VERIFY_STALE).update(
            updated_at=now
        ):
            verify_later(upload_id)
            taken += 1
    return taken


def finish(upload: Upload) -> None:
    """The verifying step of `complete`; the upload must be in state verifying."""
    storage = storage_for(upload.datacenter)
    try:
        fd = storage.open_fd(upload.temp_name, os.O_RDONLY)
    except OSError:
        raise _temp_gone(upload) from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)  # waits for chunk writes in flight; later ones see the state
        report = chunk_report(upload)
        if report["missing"] or report["wrong"]:
            parts = []
            if report["missing"]:
                parts.append(f"missing chunks {describe(report['missing'])}")
            if report["wrong"]:
                parts.append(f"wrong chunks {describe(report['wrong'])}")
            message = f"upload {upload.id} is incomplete: {'; '.join(parts)}; send them and complete again"
            Upload.objects.filter(pk=upload.pk, state=UploadState.VERIFYING).update(
                state=UploadState.OPEN, error=message, updated_at=timezone.now()
            )
            upload.state = UploadState.OPEN
            raise Conflict(message, code="incomplete")
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
        os.fsync(fd)
        _commit(storage, upload)
    finally:
        os.close(fd)


def _commit(storage: PfsStorage, upload: Upload) -> None:
    """Rename onto the target and settle usage in one transaction with the usage row locked."""
    error: DomainError | None = None
    with usage.ledger(upload.owner, upload.datacenter, counts=upload.counts_quota) as book:
        if not Upload.objects.filter(pk=upload.pk, state=UploadState.VERIFYING).exists():
            upload.refresh_from_db(fields=["state", "error"])
            _refuse_unless_open(upload)  # aborted or expired meanwhile: says so
        try:
            _put_in_place(storage, upload, book)
        except DomainError as exc:  # the ledger commits nothing of ours; the upload fails below
            error = exc
    if error is not None:
        fail(upload, error.message)
        raise error


def _put_in_place(storage: PfsStorage, upload: Upload, book: usage.Ledger) -> None:
    """Check the quota for the file it replaces, rename the temp file onto the target, charge it."""
    try:
        old: os.stat_result | None = storage.lstat(upload.target_name)
    except FileNotFoundError:
        old = None
    except OSError as exc:
        raise_os_error(exc, upload.path)
    if old is not None and _is_dir(old):
        raise Conflict(f"{upload.path} is a directory now; the upload was not kept", code="is_a_directory")
    old_bytes = old.st_size if old is not None else 0
    book.check(
        add_bytes=upload.size - old_bytes,
        add_files=0 if old is not None else 1,
        release_bytes=upload.size,
        release_files=1,
    )
    try:
        storage.replace(upload.temp_name, upload.target_name)
    except OSError as exc:
        raise_os_error(exc, upload.path)
    book.apply(
        used_bytes=upload.size - old_bytes,
        used_files=0 if old is not None else 1,
        reserved_bytes=-upload.size,
        reserved_files=-1,
    )
    now = timezone.now()
    Upload.objects.filter(pk=upload.pk).update(state=UploadState.COMPLETED, finished_at=now, updated_at=now)
    upload.state = UploadState.COMPLETED


# --- endings ----------------------------------------------------------------------------------


def fail(upload: Upload, message: str, state: str = UploadState.FAILED, idle_before: datetime | None = None) -> bool:
    """End a live upload: state, reservation released and temp file removed, exactly once.

    idle_before: only if untouched since then (expiry must not end an upload a chunk just touched).
    """
    with usage.ledger(upload.owner, upload.datacenter, counts=upload.counts_quota) as book:
        now = timezone.now()
        live = Upload.objects.filter(pk=upload.pk, state__in=LIVE_STATES)
        if idle_before is not None:
            live = live.filter(updated_at__lt=idle_before)
        claimed = live.update(state=state, error=message, finished_at=now, updated_at=now)
        if claimed:
            book.apply(reserved_bytes=-upload.size, reserved_files=-1)
    if claimed:
        upload.state, upload.error = state, message
        _remove_temp(storage_for(upload.datacenter), upload)
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


def _remove_temp(storage: PfsStorage, upload: Upload) -> None:
    # Gone already (its directory was removed), or the storage is away: nothing of ours to keep.
    with contextlib.suppress(OSError):
        storage.remove(upload.temp_name)


def cleanup(now: datetime | None = None) -> int:
    """Expire uploads untouched for the configured time and forget finished ones as old; returns expired."""
    now = now or timezone.now()
    take_over_stale_verifications(now)
    cutoff = now - timedelta(seconds=conf.upload_expire_seconds())
    expired = 0
    for upload in Upload.objects.select_related("datacenter", "owner").filter(
        state__in=LIVE_STATES, updated_at__lt=cutoff
    ):
        # fail()'s conditional update makes this safe against a chunk or a completion racing it.
        if fail(upload, "abandoned: no activity for too long", UploadState.EXPIRED, idle_before=cutoff):
            expired += 1
    Upload.objects.exclude(state__in=LIVE_STATES).filter(updated_at__lt=cutoff).delete()
    return expired
