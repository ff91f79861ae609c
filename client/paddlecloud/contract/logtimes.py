"""When each part of a job's log arrived: fixed-size (byte offset, unix time) records in a side file.

``log.txt`` stays a plain log; ``log.times`` next to it holds one 16-byte record (little-endian
uint64 offset into ``log.txt``, float64 unix seconds) for the bytes written from that offset on,
at most one every ``MIN_GAP`` seconds, so the file grows with time, never with the number of
lines, and the launcher keeps no more than the last record's time in memory. A record is written
before the bytes it stamps: a reader never sees a line without its time. A line's time is that of
its first byte, i.e. of the last record at or before the line's start. Records ascend by offset,
so a reader finds a chunk's first and last records by binary search and reads just those.
"""

from __future__ import annotations

import array
import bisect
import contextlib
import itertools
import math
import os
import struct
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import IO, BinaryIO

TIMES_NAME = "log.times"
RECORD = struct.Struct("<Qd")
MIN_GAP = 0.01  # seconds: lines that arrive closer together share a time
LATEST = 7258118400.0  # 2200-01-01: a later "arrival time" is a forged record, not a time


class Recorder:
    """Stamps the bytes about to be appended to the log: call `note(size)` just before writing them."""

    def __init__(
        self, index: BinaryIO | None, offset: int, clock: Callable[[], float] = time.time, min_gap: float = MIN_GAP
    ) -> None:
        self._index = index
        self.offset = offset
        self._clock = clock
        self._min_gap = min_gap
        self._last: float | None = None

    def note(self, size: int) -> None:
        if size <= 0:
            return
        now = round(self._clock(), 3)  # ms: what readers show, and no rounding left for them
        if self._index is not None and (self._last is None or now - self._last >= self._min_gap or now < self._last):
            try:
                self._index.write(RECORD.pack(self.offset, now))
                self._last = now
            except OSError:
                self._index = None  # disk full: the log goes on without times, never the other way round
        self.offset += size

    def splice(self, cut: int, source: int, target: int, end: int) -> None:
        """The log dropped its bytes from `cut` to `source` and moved the rest down to `target` (see logcap).

        Records before `cut` stay; the marker line written at `cut` is stamped now; the byte that was at
        `source` keeps its time at `target`, and every later record moves down with its bytes.
        """
        index = self._index
        self.offset = end
        if index is None:
            return
        try:
            count = index.seek(0, os.SEEK_END) // RECORD.size
            kept = _first_record(index, count, cut - 1) + 1
            covering = _first_record(index, count, source)
            moved: list[tuple[int, float]] = [(cut, round(self._clock(), 3))]
            if covering >= 0:
                moved.append((target, _record(index, covering)[1]))
            index.seek((covering + 1) * RECORD.size)
            offsets, times = _columns(index.read())
            moved += [(offset - source + target, when) for offset, when in zip(offsets, times, strict=True)]
            index.truncate(kept * RECORD.size)
            index.seek(0, os.SEEK_END)
            index.write(b"".join(RECORD.pack(offset, when) for offset, when in moved))
        except OSError:
            self.stop()

    def stop(self) -> None:
        """Stop stamping (the log could not be written, or is done with): close the side file."""
        if self._index is not None:
            with contextlib.suppress(OSError):
                self._index.close()
        self._index = None


def open_recorder(log: BinaryIO, folder: Path) -> Recorder:
    """A recorder for `log` (opened for appending): its times go to `folder`/log.times; none if that fails."""
    offset = os.fstat(log.fileno()).st_size
    try:
        # Stays open as long as the log does (the launcher's whole life), hence no `with`.
        # Read too: a capped log splices its records when it drops bytes (Recorder.splice).
        index: BinaryIO | None = (folder / TIMES_NAME).open("a+b", buffering=0)
    except OSError:
        index = None
    return Recorder(index, offset)


def line_starts(data: bytes, start: int) -> list[int]:
    """The offset of every line that begins in `data` (read from `start`): its first byte and each after a newline."""
    if not data:
        return []
    # C-level all the way (split, len, add, accumulate): a 256 KiB chunk may hold thousands of lines.
    starts = list(itertools.accumulate(map((1).__add__, map(len, data.split(b"\n")[:-1])), initial=start))
    if starts[-1] == start + len(data):
        starts.pop()  # the text ends with a newline: no line begins after it
    return starts


def _record(index: IO[bytes], number: int) -> tuple[int, float]:
    index.seek(number * RECORD.size)
    offset, when = RECORD.unpack(index.read(RECORD.size))
    return int(offset), float(when)


def _first_record(index: IO[bytes], count: int, offset: int) -> int:
    """The number of the last record at or before `offset` (-1 if every record comes after it)."""
    low, high = 0, count  # the answer lies in [low - 1, high - 1]
    while low < high:
        middle = (low + high) // 2
        if _record(index, middle)[0] <= offset:
            low = middle + 1
        else:
            high = middle
    return low - 1


def _columns(block: bytes) -> tuple[list[int], list[float]]:
    """The offsets and the times of whole records in `block`."""
    block = block[: len(block) - len(block) % RECORD.size]
    offsets, times = array.array("Q", block), array.array("d", block)
    if sys.byteorder != "little":
        offsets.byteswap()
        times.byteswap()
    return offsets[0::2].tolist(), times[1::2].tolist()


def times_at(index: IO[bytes] | None, starts: Sequence[int]) -> list[float | None]:
    """Arrival time (unix seconds) of the byte at each of the ascending `starts`; None if unknown."""
    if index is None or not starts:
        return [None] * len(starts)
    count = index.seek(0, os.SEEK_END) // RECORD.size  # a torn last record (disk full) is ignored
    first = max(_first_record(index, count, starts[0]), 0)
    last = _first_record(index, count, starts[-1])
    # The job writes this file, so it may be anything: offsets out of order must not make one request
    # read more records than there are bytes in between (what a true record file holds at most).
    last = min(last, first + starts[-1] - starts[0] + 1)
    if last < first:
        return [None] * len(starts)
    index.seek(first * RECORD.size)
    offsets, times = _columns(index.read((last - first + 1) * RECORD.size))
    after = map(bisect.bisect_right, itertools.repeat(offsets), starts)  # the record after each start's own
    return [_plausible(times[at - 1]) if at else None for at in after]


def _plausible(when: float) -> float | None:
    """A time JSON and browsers can carry (finite, 1970..2200), else unknown: the job may write anything."""
    return when if math.isfinite(when) and 0 <= when < LATEST else None
