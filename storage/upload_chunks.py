"""An upload's chunk records: each chunk noted as it lands, and which are present, wrong or missing.

A chunk row says what was written at its offset and whether its checksum matched; the report reads
them back as [start, stop) ranges, and on request re-reads the temp file to find chunks whose bytes
changed since (storage.upload_files does the reading).
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import timedelta
from typing import Any

from django.db import transaction
from django.utils import timezone

from storage import upload_files
from storage.models import Upload, UploadChunk, UploadState

ACTIVITY_PRECISION = timedelta(minutes=1)  # an upload's updated_at is refreshed by chunks at most this often


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


def lacking(report: dict[str, Any]) -> str:
    """What a report says is missing or wrong, in words ("missing chunks 0, 2-5; wrong chunks 7"); "" if nothing."""
    parts = []
    if report["missing"]:
        parts.append(f"missing chunks {describe(report['missing'])}")
    if report["wrong"]:
        parts.append(f"wrong chunks {describe(report['wrong'])}")
    return "; ".join(parts)


def forget(upload: Upload, index: int) -> None:
    """A chunk sent again is missing until fully written and checked, whatever it was before."""
    resent = UploadChunk.objects.filter(upload=upload, index=index)
    if resent.exists():  # a read first: most chunks arrive once, and a write costs a commit
        resent.delete()


def record(upload: Upload, index: int, digest: str, ok: bool) -> None:
    """Record chunk `index` as written with this digest (ok: it matched the one the client sent)."""
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


def report(upload: Upload, verify: bool = False) -> dict[str, Any]:
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
    changed = upload_files.changed_chunks(upload, [(index, digest) for index, ok, digest in rows if ok])
    if changed:
        UploadChunk.objects.filter(upload=upload, index__in=changed).update(ok=False)
    return [(index, ok and index not in changed, digest) for index, ok, digest in rows]
