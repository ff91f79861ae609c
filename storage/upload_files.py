"""An upload's files on the PFS: the target checked, the temp file beside it, chunks written and read back.

The temp file (`.paddlecloud-upload-<id>`) sits in the target's directory, so putting it in place is
one atomic rename. Chunk writes hold a shared flock on it and verification an exclusive one, so a
verifier waits for the writes in flight. Nothing here changes a row: the lifecycle (storage.uploads)
decides, this module only touches the filesystem and says what it found.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import stat
from collections.abc import Iterator

from core.errors import Conflict, Invalid
from storage import descriptors, paths
from storage.backends import TEMP_PREFIX, PfsStorage, storage_for
from storage.descriptors import hash_range, write_at
from storage.errors import raise_os_error
from storage.models import Upload


class TempGone(Exception):
    """The upload's temp file is not there any more (its directory was removed, or a job deleted it)."""


def temp_name(parent: str, upload: Upload) -> str:
    """The temp file's storage name: beside the target, so the final rename stays in one directory."""
    return f"{parent}/{TEMP_PREFIX}{upload.id}" if parent else f"{TEMP_PREFIX}{upload.id}"


def _is_dir(st: os.stat_result) -> bool:
    return stat.S_ISDIR(st.st_mode)


def missing_dirs(target: paths.ResolvedPath, parent: str) -> list[str]:
    """The directories an upload to `target` must create; 409 if a directory is there or a name clashes."""
    storage = target.storage
    try:
        existing = storage.lstat_or_none(target.name)
        if existing is not None and _is_dir(existing):
            raise Conflict(f"{target.logical} is a directory", code="is_a_directory")
        missing = storage.missing_dirs(parent)
        # Every missing directory is new, and so is the file when nothing is there yet.
        paths.refuse_normalization_clash(target, len(missing) + (existing is None))
    except OSError as exc:
        raise_os_error(exc, target.logical)
    return missing


def create_temp(storage: PfsStorage, upload: Upload, parent: str) -> int:
    """Create the target's missing directories and the empty temp file; how many directories it created."""
    created_dirs = storage.makedirs(parent)
    os.close(storage.open_fd(upload.temp_name, os.O_WRONLY | os.O_CREAT | os.O_EXCL))
    return created_dirs


def remove_temp(upload: Upload, storage: PfsStorage | None = None) -> None:
    # Gone already (its directory was removed), or the storage is away: nothing of ours to keep.
    with contextlib.suppress(OSError):
        (storage or storage_for(upload.datacenter)).remove(upload.temp_name)


@contextlib.contextmanager
def locked_temp(upload: Upload, *, write: bool) -> Iterator[int]:
    """The temp file open and flocked: shared to write chunks (in parallel), exclusive to verify it.

    Raises TempGone when it is not there (for verification: when it cannot be opened at all).
    """
    storage = storage_for(upload.datacenter)
    try:
        fd = storage.open_fd(upload.temp_name, os.O_WRONLY if write else os.O_RDONLY)
    except FileNotFoundError:
        raise TempGone() from None
    except OSError as exc:
        if not write:
            raise TempGone() from None
        raise_os_error(exc, upload.path)
    try:
        fcntl.flock(fd, fcntl.LOCK_SH if write else fcntl.LOCK_EX)
        yield fd
    finally:
        os.close(fd)


def write_chunk(fd: int, upload: Upload, index: int, body: descriptors.Readable, length: int) -> str:
    """Write chunk `index` from `body` at its offset, never whole in memory; its digest (400 if cut short)."""
    try:
        digest, written = write_at(fd, index * upload.chunk_size, body, length)
    except OSError as exc:
        raise_os_error(exc, upload.path)
    if written != length:
        raise Invalid(f"chunk {index} ended after {written} of {length} bytes; send it again", "body")
    return digest


def changed_chunks(upload: Upload, recorded: list[tuple[int, str]]) -> set[int]:
    """Of the chunks recorded ok with these digests, those whose bytes on disk differ now (bit rot)."""
    storage = storage_for(upload.datacenter)
    try:
        fd = storage.open_fd(upload.temp_name, os.O_RDONLY)
    except OSError:
        return set()
    try:
        fcntl.flock(fd, fcntl.LOCK_SH)
        return {
            index
            for index, digest in recorded
            if hash_range(fd, index * upload.chunk_size, upload.chunk_length(index)) != digest
        }
    finally:
        os.close(fd)


def file_replaced(storage: PfsStorage, upload: Upload) -> os.stat_result | None:
    """What is at the target now (None: nothing); 409 if a directory appeared there meanwhile."""
    try:
        old = storage.lstat_or_none(upload.target_name)
    except OSError as exc:
        raise_os_error(exc, upload.path)
    if old is not None and _is_dir(old):
        raise Conflict(f"{upload.path} is a directory now; the upload was not kept", code="is_a_directory")
    return old


def move_into_place(storage: PfsStorage, upload: Upload) -> None:
    """Rename the verified temp file onto the target (atomic: same directory)."""
    try:
        storage.replace(upload.temp_name, upload.target_name)
    except OSError as exc:
        raise_os_error(exc, upload.path)
