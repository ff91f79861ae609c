"""A minimal RecordIO file format (length + crc32 framed byte records) with a writer and a reader.

Format, all integers little-endian:

    file   := MAGIC record*
    MAGIC  := b"PCRECIO1"                      (8 bytes)
    record := length:uint32 crc32:uint32 payload[length]

``crc32`` is ``zlib.crc32(payload)``. A reader stops cleanly at end of file and raises
RecordIOError on a truncated record or a checksum mismatch (naming the file and offset).
There is no index: records are read sequentially. The PyPI ``recordio`` packages are
unmaintained, so this stays stdlib-only.
"""

from __future__ import annotations

import os
import struct
import zlib
from collections.abc import Iterator
from pathlib import Path
from types import TracebackType
from typing import BinaryIO

MAGIC = b"PCRECIO1"
_HEADER = struct.Struct("<II")
MAX_RECORD = 1 << 31  # a corrupt length field must not make us allocate gigabytes blindly


class RecordIOError(ValueError):
    """The file is not RecordIO, or a record is truncated or corrupt."""


def is_recordio(path: str | os.PathLike[str]) -> bool:
    with Path(path).open("rb") as f:
        return f.read(len(MAGIC)) == MAGIC


class Writer:
    """Writes records to ``path`` atomically: the file appears under its name only on close()."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        # A dot-prefixed temp name so globs like "prefix-*" never see a half-written shard.
        self._tmp = self.path.with_name(f".{self.path.name}.tmp-{os.getpid()}")
        self._f: BinaryIO = self._tmp.open("wb")  # open until close(), which renames it into place
        self._f.write(MAGIC)
        self.count = 0

    def write(self, payload: bytes) -> None:
        self._f.write(_HEADER.pack(len(payload), zlib.crc32(payload)))
        self._f.write(payload)
        self.count += 1

    def close(self) -> None:
        if self._f.closed:
            return
        self._f.close()
        self._tmp.replace(self.path)

    def abort(self) -> None:
        self._f.close()
        self._tmp.unlink(missing_ok=True)

    def __enter__(self) -> Writer:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if exc_type is None:
            self.close()
        else:
            self.abort()


def read(path: str | os.PathLike[str]) -> Iterator[bytes]:
    """Yield every record's payload in order."""
    with Path(path).open("rb") as f:
        if f.read(len(MAGIC)) != MAGIC:
            raise RecordIOError(f"{path}: not a RecordIO file (bad magic)")
        while True:
            offset = f.tell()
            header = f.read(_HEADER.size)
            if not header:
                return
            if len(header) < _HEADER.size:
                raise RecordIOError(f"{path}: truncated record header at offset {offset}")
            length, crc = _HEADER.unpack(header)
            if length > MAX_RECORD:
                raise RecordIOError(f"{path}: implausible record length {length} at offset {offset}")
            payload = f.read(length)
            if len(payload) < length:
                raise RecordIOError(f"{path}: truncated record at offset {offset}")
            if zlib.crc32(payload) != crc:
                raise RecordIOError(f"{path}: checksum mismatch in record at offset {offset}")
            yield payload
