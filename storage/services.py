"""What the files API and the file pages both call: open a folder to show, and the upload steps.

Each function checks, then acts, and leaves only presentation to its caller (JSON for the API, a
template for the pages). The work itself is done in storage.files and storage.uploads; this is
where what happens next (a verification in the background) is handed to storage.tasks.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.db.models import Count, Q, QuerySet

from storage import files, paths, tasks, uploads
from storage.models import Upload


@dataclass(frozen=True)
class Folder:
    """A folder (or one file) the user may read, its entries to page through, and whether they may write it."""

    target: paths.ResolvedPath
    listing: files.Listing
    writable: bool


def open_folder(user: Any, path: str, recursive: bool = False) -> Folder:
    """Resolve `path` once (a user's home is made on first use) and list it; a missing path is a 404 here."""
    listing = files.listing(user, path, recursive)
    return Folder(listing.target, listing, paths.may_write(user, listing.target.area))


def uploads_of(user: Any, path: str | None = None, state: str | None = None) -> QuerySet[Upload]:
    """The user's uploads, newest first, each with `received` (chunks ok); `path` is normalized first."""
    found = Upload.objects.filter(owner_id=user.pk).annotate(received=Count("chunks", filter=Q(chunks__ok=True)))
    if path is not None:
        found = found.filter(path="/pfs/" + "/".join(paths.parse(path)))
    if state is not None:
        found = found.filter(state=state)
    return found.order_by("-created_at")


def complete_upload(user: Any, upload_id: str) -> Upload:
    """Complete an upload; a large one is verified in the background, queued once the claim is committed."""
    completion = uploads.complete(user, upload_id)
    if completion.verify_in_background:
        tasks.verify_after_commit(completion.upload.pk)
    return completion.upload
