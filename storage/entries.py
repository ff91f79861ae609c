"""What a listing says of one file: its kind, size and time, and the space it holds on disk past its end."""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from datetime import UTC, datetime


@dataclass(frozen=True)
class Entry:
    name: str  # path relative to the directory listed (a base name unless walking)
    kind: str  # file, dir, symlink or other
    size: int  # bytes for files, 0 otherwise
    mtime: float
    preallocated: int = 0  # bytes a file holds on disk past its end (fallocate --keep-size), beyond one block

    @property
    def modified(self) -> datetime:
        return datetime.fromtimestamp(self.mtime, tz=UTC)


def kind_of(mode: int) -> str:
    if stat.S_ISREG(mode):
        return "file"
    if stat.S_ISDIR(mode):
        return "dir"
    if stat.S_ISLNK(mode):
        return "symlink"
    return "other"


def entry_of(name: str, st: os.stat_result) -> Entry:
    kind = kind_of(st.st_mode)
    if kind != "file":
        return Entry(name=name, kind=kind, size=0, mtime=st.st_mtime)
    # Space allocated past the length is invisible in st_size (a job can fallocate the disk full at
    # size 0); the last block's rounding is not counted, so a dense file has none.
    past_end = st.st_blocks * 512 - -(-st.st_size // st.st_blksize) * st.st_blksize
    return Entry(name=name, kind=kind, size=st.st_size, mtime=st.st_mtime, preallocated=max(past_end, 0))
