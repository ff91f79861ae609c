"""A datacenter's PFS behind Django's storage API, with every access made beneath its root.

`PfsStorage` is a `FileSystemStorage` whose names are relative to the datacenter's storage root and
already resolved by `storage.paths` (symlinks inside the user's area replaced by their targets). At
use time each name is opened one component at a time with O_NOFOLLOW from a descriptor of the root,
so a symlink swapped in after the check (by a job writing to the same filesystem) is refused, never
followed. Beyond Django's `Storage` API (open, exists, delete, listdir, size, get_modified_time) it
offers what the PFS needs: directory walks, mkdir/rmtree with counts for quota, temp files written
at offsets and an atomic rename. Another backend (an S3 bucket through django-storages) would
subclass `PfsStorage` and override these; `storage_for` is the one place that picks the backend.
"""

from __future__ import annotations

import errno
import os
import stat
import unicodedata
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime
from typing import IO, Any

from django.core.files import File
from django.core.files.storage import FileSystemStorage

from storage import beneath
from storage.beneath import open_dir
from storage.entries import Entry, entry_of
from storage.measure import Tally, measure_tree

# Upload temp files live next to their target under this prefix; the API refuses names with it, never
# lists them, and quota counts them through the upload's reservation instead of as files.
TEMP_PREFIX = ".paddlecloud-upload-"

_REALPATH_TRIES = 5


class StorageUnavailable(Exception):
    """The storage root is missing or not a directory: the filesystem is not mounted."""


class SymlinkEscape(Exception):
    """Component `index` of the requested parts is a symlink leading outside the area."""

    def __init__(self, index: int) -> None:
        super().__init__(index)
        self.index = index


def split(name: str) -> list[str]:
    return [part for part in name.split("/") if part and part != "."]


class PfsStorage(FileSystemStorage):
    """The filesystem backend: the one pods share, and the default for every datacenter."""

    def __init__(self, location: str) -> None:
        super().__init__(location=location, base_url=None)

    # --- resolution ---------------------------------------------------------------------------

    def root_real(self) -> str:
        root = os.path.realpath(self.location)
        if not os.path.isdir(root):
            raise StorageUnavailable(root)
        return root

    def ensure_area(self, area: str) -> None:
        """Create the area directory (a user's home on first use); refuse one that is a symlink."""
        self.makedirs(area)

    def resolve(self, area: str, parts: Sequence[str], follow_last: bool = True) -> str:
        """The storage name of area/parts with symlinks resolved, refusing any that lead out of the area.

        With follow_last False the last part is kept as is (rm and rename act on a link, not its target).
        """
        area_real = os.path.join(self.root_real(), *split(area))
        head = list(parts) if follow_last else list(parts[:-1])
        real = _realpath(os.path.join(area_real, *head)) if head else area_real
        if not _inside(real, area_real):
            for index in range(len(head)):
                if not _inside(_realpath(os.path.join(area_real, *head[: index + 1])), area_real):
                    raise SymlinkEscape(index)
            raise SymlinkEscape(len(head) - 1)
        if not follow_last and parts:
            real = os.path.join(real, parts[-1])
        rel = os.path.relpath(real, self.root_real())
        return "" if rel == "." else rel

    # --- descriptors beneath the root ---------------------------------------------------------

    @contextmanager
    def _dir_fd(self, name: str) -> Iterator[int]:
        """A descriptor of directory `name`, opened component by component without following symlinks."""
        fd = os.open(self.root_real(), os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            for part in split(name):
                child = open_dir(part, fd)
                os.close(fd)
                fd = child
            yield fd
        finally:
            os.close(fd)

    @contextmanager
    def _parent_fd(self, name: str) -> Iterator[tuple[int, str]]:
        parts = split(name)
        if not parts:
            raise IsADirectoryError(errno.EISDIR, "the storage root", name)
        with self._dir_fd("/".join(parts[:-1])) as fd:
            yield fd, parts[-1]

    def open_fd(self, name: str, flags: int, mode: int = 0o666) -> int:
        """os.open of `name` beneath the root; the last component is never followed either."""
        with self._parent_fd(name) as (parent, base):
            return os.open(base, flags | os.O_NOFOLLOW | os.O_CLOEXEC, mode, dir_fd=parent)

    def open_file(self, area: str, parts: Sequence[str], flags: int = os.O_RDONLY, mode: int = 0o666) -> int:
        """A regular file area/parts opened with no link followed at any step (RESOLVE_NO_SYMLINKS by fd walk).

        For files a job writes and the portal opens by a known path (its logs): unlike `resolve`, even a
        link that stays inside the area is refused (ELOOP), and a FIFO, socket or device is NotRegularFile.
        """
        with self._dir_fd(area) as top:
            return beneath.open_file_beneath(top, parts, flags, mode)

    # --- Django's Storage API -----------------------------------------------------------------

    def _open(self, name: str, mode: str = "rb") -> File[Any]:
        if any(flag in mode for flag in "wax+"):
            raise ValueError("the PFS is written through uploads; open() is read-only")
        # A FIFO, socket or device a job left behind is refused without being opened (NotRegularFile).
        with self._parent_fd(name) as (parent, base):
            fd = beneath.open_regular(parent, base)
        handle: IO[bytes] = os.fdopen(fd, "rb")
        return File(handle, name)

    def _save(self, name: str, content: File[Any]) -> str:
        fd = self.open_fd(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL)
        with os.fdopen(fd, "wb") as handle:
            for piece in content.chunks():
                handle.write(piece)
        return name

    def lstat(self, name: str) -> os.stat_result:
        parts = split(name)
        if not parts:
            return os.stat(self.root_real())
        with self._parent_fd(name) as (parent, base):
            return os.stat(base, dir_fd=parent, follow_symlinks=False)

    def lstat_or_none(self, name: str) -> os.stat_result | None:
        """`lstat`, or None when nothing is there (other errors raise)."""
        try:
            return self.lstat(name)
        except FileNotFoundError:
            return None

    def exists(self, name: str) -> bool:
        return self.lstat_or_none(name) is not None

    def delete(self, name: str) -> None:
        self.remove(name)

    def listdir(self, path: str) -> tuple[list[str], list[str]]:
        entries = self.scandir(path)
        return [e.name for e in entries if e.kind == "dir"], [e.name for e in entries if e.kind != "dir"]

    def size(self, name: str) -> int:
        return self.lstat(name).st_size

    def get_modified_time(self, name: str) -> datetime:
        return entry_of(name, self.lstat(name)).modified

    # --- directories --------------------------------------------------------------------------

    def scandir(self, name: str) -> list[Entry]:
        """The entries of a directory sorted by name, upload temp files left out."""
        with self._dir_fd(name) as fd:
            return _scan(fd)

    def measure(self, name: str, max_entries: int, seconds: float) -> Tally:
        """What a directory holds, for the quota (storage/measure.py): sums only, fast, bounded."""
        with self._dir_fd(name) as top:
            return measure_tree(top, TEMP_PREFIX, max_entries, seconds)

    def walk(self, name: str) -> Iterator[Entry]:
        """Every entry below a directory, depth first in name order, entry names relative to it.

        Symlinked directories are listed, never entered. Memory holds one directory per level; at most
        beneath.OPEN_WINDOW descriptors are open however deep the tree (no recursion either).
        """
        with self._dir_fd(name) as top:
            descent = beneath.Descent(top)
            stack: list[tuple[str, Iterator[Entry]]] = [("", iter(_scan(top)))]
            try:
                while stack:
                    prefix, entries = stack[-1]
                    entry = next(entries, None)
                    if entry is None:
                        stack.pop()
                        if descent.depth:
                            descent.leave()
                        continue
                    path = prefix + entry.name
                    yield Entry(path, entry.kind, entry.size, entry.mtime, entry.preallocated)
                    if entry.kind == "dir":
                        children = _entered_scan(descent, entry.name)
                        if children is not None:
                            stack.append((path + "/", iter(children)))
            finally:
                descent.close()

    def names(self, name: str, limit: int) -> list[str]:
        """The names in a directory, read lazily and at most `limit` of them (no stat): a folder a job filled with
        a million entries costs no more than `limit`."""
        found: list[str] = []
        with self._dir_fd(name) as fd, os.scandir(fd) as entries:
            for item in entries:
                if len(found) >= limit:
                    break
                found.append(item.name)
        return found

    def bounded_usage(self, name: str, budget: int) -> tuple[int, int, bool]:
        """(bytes in regular files below a directory, entries looked at, complete): `budget` entries at most,
        lazily, links never followed; complete is False where it stopped at the budget."""
        total, seen, pending = 0, 0, [""]
        while pending:
            relative = pending.pop()
            try:
                with self._dir_fd(f"{name}/{relative}" if relative else name) as fd, os.scandir(fd) as entries:
                    for item in entries:
                        seen += 1
                        if seen > budget:
                            return total, budget, False
                        if item.is_dir(follow_symlinks=False):
                            pending.append(f"{relative}/{item.name}" if relative else item.name)
                        elif item.is_file(follow_symlinks=False):
                            total += item.stat(follow_symlinks=False).st_size
            except OSError:  # gone meanwhile, or swapped for a link: not counted
                continue
        return total, seen, True

    def usage(self, name: str) -> tuple[int, int]:
        """(bytes in regular files, entries) below a directory, as quota counts them."""
        total = count = 0
        for entry in self.walk(name):
            total += entry.size
            count += 1
        return total, count

    def missing_dirs(self, name: str) -> list[str]:
        """The components of directory `name` that do not exist yet (to check the file quota first)."""
        parts = split(name)
        for index in range(len(parts), 0, -1):
            try:
                st = self.lstat("/".join(parts[:index]))
            except FileNotFoundError:
                continue
            if not stat.S_ISDIR(st.st_mode):
                raise NotADirectoryError(errno.ENOTDIR, "not a directory", "/".join(parts[:index]))
            return parts[index:]
        return parts

    def makedirs(self, name: str) -> int:
        """mkdir -p beneath the root; returns how many directories it created."""
        created = 0
        fd = os.open(self.root_real(), os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            for part in split(name):
                try:
                    os.mkdir(part, dir_fd=fd)
                    created += 1
                except FileExistsError:
                    pass
                child = open_dir(part, fd)
                os.close(fd)
                fd = child
        finally:
            os.close(fd)
        return created

    def mkdir(self, name: str) -> None:
        with self._parent_fd(name) as (parent, base):
            os.mkdir(base, dir_fd=parent)

    def normalization_clash(self, name: str) -> str | None:
        """An existing sibling whose name differs from name's only by Unicode normalization."""
        parts = split(name)
        wanted = unicodedata.normalize("NFC", parts[-1])
        try:
            with self._parent_fd(name) as (parent, base), os.scandir(parent) as entries:
                for entry in entries:
                    if entry.name != base and unicodedata.normalize("NFC", entry.name) == wanted:
                        return entry.name
        except (FileNotFoundError, NotADirectoryError):
            return None
        return None

    # --- removal ------------------------------------------------------------------------------

    def remove(self, name: str) -> tuple[int, int]:
        """Unlink a file or symlink; returns the (bytes, entries) it freed."""
        with self._parent_fd(name) as (parent, base):
            st = os.stat(base, dir_fd=parent, follow_symlinks=False)
            if stat.S_ISDIR(st.st_mode):
                raise IsADirectoryError(errno.EISDIR, "is a directory", name)
            os.unlink(base, dir_fd=parent)
        return (st.st_size if stat.S_ISREG(st.st_mode) else 0), 1

    def rmtree(self, name: str) -> tuple[int, int]:
        """Remove a directory and everything below it; returns the (bytes, entries) freed.

        Upload temp files are removed too but not counted: quota holds them as reservations. On an
        error the exception carries what was freed before it as `exc.freed`.
        """
        freed = [0, 0]
        try:
            with self._parent_fd(name) as (parent, base):
                beneath.remove_tree(parent, base, lambda entry, st: _count_freed(entry, st, freed))
        except OSError as exc:
            exc.freed = (freed[0], freed[1])  # type: ignore[attr-defined]
            raise
        return freed[0], freed[1]

    # --- uploads ------------------------------------------------------------------------------

    def replace(self, source: str, target: str) -> None:
        """Atomically rename source onto target; both in the same directory."""
        src_parts, dst_parts = split(source), split(target)
        if src_parts[:-1] != dst_parts[:-1]:
            raise ValueError("replace() renames within one directory")
        with self._parent_fd(target) as (parent, base):
            os.rename(src_parts[-1], base, src_dir_fd=parent, dst_dir_fd=parent)


def _realpath(path: str) -> str:
    """os.path.realpath, tried again when a component changes kind under it (a job swapping link and file).

    realpath lstat()s a link and then readlink()s it: a file swapped in between is EINVAL. Past a few
    tries the path is reported as changing (EAGAIN), a 409 the client may retry.
    """
    for _ in range(_REALPATH_TRIES):
        try:
            return os.path.realpath(path)
        except OSError as exc:
            if exc.errno != errno.EINVAL:
                raise
    raise OSError(errno.EAGAIN, "it keeps changing while it is looked up", path)


def _inside(path: str, area: str) -> bool:
    return path == area or path.startswith(area.rstrip(os.sep) + os.sep)


def _scan(fd: int) -> list[Entry]:
    entries: list[Entry] = []
    with os.scandir(fd) as found:
        for item in found:
            if item.name.startswith(TEMP_PREFIX):
                continue
            try:
                entries.append(entry_of(item.name, item.stat(follow_symlinks=False)))
            except FileNotFoundError:
                continue
    entries.sort(key=lambda e: e.name)
    return entries


def _entered_scan(descent: beneath.Descent, name: str) -> list[Entry] | None:
    """Enter directory `name` and scan it; None (and not entered) when it is gone or no longer a directory."""
    try:
        descent.enter(name)
    except OSError:
        return None  # removed or replaced by a link or file while we walked
    try:
        return _scan(descent.current())
    except OSError:
        descent.leave()
        return None


def _count_freed(name: str, st: os.stat_result, freed: list[int]) -> None:
    if not name.startswith(TEMP_PREFIX):
        freed[0] += st.st_size if stat.S_ISREG(st.st_mode) else 0
        freed[1] += 1


def storage_for(datacenter: Any) -> PfsStorage:
    """The storage backend of a datacenter: its mounted filesystem."""
    return PfsStorage(datacenter.storage_root)
