"""File operations on logical paths: stat, list, mkdir, remove, open for download (quota kept exact)."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from dataclasses import dataclass
from itertools import islice
from typing import IO, Any

from core.errors import Conflict, Forbidden, NotFound
from storage import paths, uploads, usage
from storage.entries import Entry, entry_of
from storage.errors import raise_os_error
from storage.models import LIVE_STATES, Upload
from storage.paths import ResolvedPath


def entry_json(logical: str, entry: Entry) -> dict[str, Any]:
    # A name a job wrote in bytes that are not UTF-8 is shown with U+FFFD in their place (JSON cannot
    # carry it otherwise); paths.parse then refuses that name with a 400 saying why.
    logical = logical.encode("utf-8", "surrogateescape").decode("utf-8", "replace")
    return {
        "path": logical,
        "name": logical.rsplit("/", 1)[-1],
        "kind": entry.kind,
        "size": entry.size,
        "mtime": entry.modified.isoformat().replace("+00:00", "Z"),
    }


def _lstat(target: ResolvedPath) -> os.stat_result:
    try:
        return target.storage.lstat(target.name)
    except OSError as exc:
        raise_os_error(exc, target.logical)


def stat_path(user: Any, path: str) -> dict[str, Any]:
    target = paths.resolve(user, path)
    return entry_json(target.logical, entry_of(target.name, _lstat(target)))


class Listing:
    """A directory listing for the paginator: counted and sliced by walking again, never held whole."""

    def __init__(self, target: ResolvedPath, recursive: bool) -> None:
        self.target = target
        self.recursive = recursive

    def _entries(self) -> Iterator[Entry]:
        storage, name = self.target.storage, self.target.name
        try:
            st = storage.lstat(name)
            if not stat.S_ISDIR(st.st_mode):
                yield entry_of("", st)
                return
            yield from storage.walk(name) if self.recursive else storage.scandir(name)
        except OSError as exc:
            raise_os_error(exc, self.target.logical)

    def count(self) -> int:
        return sum(1 for _ in self._entries())

    def __len__(self) -> int:
        return self.count()

    def __getitem__(self, index: slice) -> list[dict[str, Any]]:
        if not isinstance(index, slice):
            raise TypeError("listings are sliced, not indexed")
        return [
            entry_json(self.target.child(entry.name), entry)
            for entry in islice(self._entries(), index.start, index.stop)
        ]


def listing(user: Any, path: str, recursive: bool) -> Listing:
    target = paths.resolve(user, path)
    _lstat(target)  # a missing path is a 404 before pagination starts
    return Listing(target, recursive)


def mkdir(user: Any, path: str, parents: bool) -> tuple[dict[str, Any], bool]:
    """Create a directory (and its parents with parents=True); returns (entry, created)."""
    target = paths.resolve(user, path, write=True, follow_last=False)
    storage = target.storage
    try:
        st = storage.lstat_or_none(target.name)
        if st is not None:
            if parents and stat.S_ISDIR(st.st_mode):
                return entry_json(target.logical, entry_of(target.name, st)), False
            raise Conflict(f"{target.logical} already exists", code="exists")
        missing = storage.missing_dirs(target.name)
        if len(missing) > 1 and not parents:
            parent = target.logical.rsplit("/", 1)[0]
            raise NotFound(f"{parent} does not exist; pass parents to create it too")
        paths.refuse_normalization_clash(target, len(missing))
        with usage.ledger(user, target.datacenter, counts=target.area == paths.HOME) as book:
            book.check(add_files=len(missing))
            created = storage.makedirs(target.name)
            book.apply(used_files=created)
        return entry_json(target.logical, entry_of(target.name, storage.lstat(target.name))), True
    except OSError as exc:
        raise_os_error(exc, target.logical)


@dataclass(frozen=True)
class Removed:
    path: str
    bytes: int
    entries: int


def remove(user: Any, path: str, recursive: bool) -> Removed:
    """Remove a file or symlink, or a directory tree with recursive=True; usage drops by what went."""
    target = paths.resolve(user, path, write=True, follow_last=False)
    if target.is_area_root:
        raise Forbidden(f"{target.logical} is {target.area_label} itself; it cannot be removed")
    st = _lstat(target)
    if stat.S_ISDIR(st.st_mode) and not recursive:
        raise Conflict(
            f"{target.logical} is a directory; pass recursive to remove it and everything in it", code="is_a_directory"
        )
    storage = target.storage
    freed: tuple[int, int] = (0, 0)
    try:
        # Outside the usage lock: a large tree takes long, and freeing space needs no check.
        freed = storage.rmtree(target.name) if stat.S_ISDIR(st.st_mode) else storage.remove(target.name)
    except OSError as exc:
        freed = getattr(exc, "freed", (0, 0))
        raise_os_error(exc, target.logical)
    finally:
        with usage.ledger(user, target.datacenter, counts=target.area == paths.HOME) as book:
            book.apply(used_bytes=-freed[0], used_files=-freed[1])
        if stat.S_ISDIR(st.st_mode):
            _end_uploads_below(target)
    return Removed(target.logical, freed[0], freed[1])


def _end_uploads_below(target: ResolvedPath) -> None:
    """Uploads whose temp file was in a removed tree fail now, releasing their reservations."""
    below = Upload.objects.select_related("datacenter", "owner").filter(
        datacenter=target.datacenter, state__in=LIVE_STATES, temp_name__startswith=target.name + "/"
    )
    for upload in below:
        if not target.storage.exists(upload.temp_name):
            uploads.fail(upload, f"its directory was removed ({target.logical}); start the upload again")


@dataclass
class Download:
    handle: IO[bytes]
    size: int
    mtime_ns: int
    name: str


def open_download(user: Any, path: str) -> Download:
    """Open a file for reading through the storage API (a 409 for directories)."""
    target = paths.resolve(user, path)
    try:
        opened = target.storage.open(target.name, "rb")
    except IsADirectoryError:
        raise Conflict(
            f"{target.logical} is not a regular file; list directories instead", code="is_a_directory"
        ) from None
    except OSError as exc:
        raise_os_error(exc, target.logical)
    handle: IO[bytes] = opened.file  # type: ignore[assignment]
    st = os.fstat(handle.fileno())
    return Download(handle=handle, size=st.st_size, mtime_ns=st.st_mtime_ns, name=target.logical.rsplit("/", 1)[-1])
