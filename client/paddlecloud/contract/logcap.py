"""A worker's log.txt kept under its size limit while it is written: the head, a marker, a rolling tail.

The first half of the limit (the head) is kept as written. Past it, output keeps being appended (the
tail) until the tail outgrows its budget (the rest of the limit); then the oldest half of the tail is
dropped in one step: the newest half is copied down, in 1 MiB pieces, to just after a marker line

    [paddlecloud] dropped N bytes of output here (log limit 256 MiB)

written where the head ends, and the file is truncated after it. N counts every byte dropped so far
(a restarted attempt reads it back from the marker and goes on counting). Each step copies half a tail
budget after at least that much new output, so the cost stays linear; the file is never longer than
the limit plus the marker and one write (64 KiB from the launcher's pump). log.times is spliced in the
same step (``logtimes.Recorder.splice``) so every kept byte keeps its arrival time.

A follower reading with a byte cursor (``jobs.files.logfiles``) that was caught up finds the file shorter
than its cursor after a step: its read comes back empty with the cursor moved to the end, and it goes
on with the new output, missing nothing of it. One that was behind reads on from its old offset in
the rewritten tail: it skips what was dropped (and may start mid-line). Re-reading from the start
shows the head, the marker and the kept end.
"""

from __future__ import annotations

import os
import re
from typing import BinaryIO

from paddlecloud.contract.logtimes import Recorder
from paddlecloud.contract.units import human_bytes

PIECE = 1024 * 1024
_MARKER = re.compile(rb"\[paddlecloud\] dropped ([0-9]{1,20}) bytes of output here \(log limit [^)\n]*\)\n")
_MARKER_MAX = 120  # bytes: the longest marker line, read back when a restarted attempt opens the log


MIN_LIMIT = 64 * 1024  # a smaller limit is raised to this: the kept tail must be longer than a marker


def marker(dropped: int, limit: int) -> bytes:
    return f"[paddlecloud] dropped {dropped} bytes of output here (log limit {human_bytes(limit)})\n".encode()


class CappedLog:
    """Appends to an open log (read-write, not O_APPEND), stamping times, dropping the middle past `limit`."""

    def __init__(self, log: BinaryIO, times: Recorder | None, limit: int | None) -> None:
        self._log = log
        self._fd = log.fileno()
        self._times = times
        self.limit = max(limit, MIN_LIMIT) if limit is not None else None
        self.size = os.fstat(self._fd).st_size
        log.seek(self.size)
        self.head = (self.limit or 0) // 2
        self.dropped, self._marker_len = self._read_marker()

    def write(self, data: bytes) -> None:
        if self._times is not None:
            self._times.note(len(data))
        view = memoryview(data)
        while view:  # an unbuffered write may take less than it was given
            view = view[self._log.write(view) :]
        self.size += len(data)
        if self.limit is not None and self.size > self.limit:
            self._drop_oldest_tail()

    def stop_times(self) -> None:
        if self._times is not None:
            self._times.stop()
            self._times = None

    def _read_marker(self) -> tuple[int, int]:
        """(bytes dropped, marker length) from a marker a previous attempt left at the head's end."""
        if self.limit is None or self.size <= self.head:
            return 0, 0
        found = _MARKER.match(os.pread(self._fd, _MARKER_MAX, self.head))
        return (int(found.group(1)), found.end()) if found else (0, 0)

    def _drop_oldest_tail(self) -> None:
        assert self.limit is not None
        tail_start = self.head + self._marker_len
        keep = max((self.limit - self.head - _MARKER_MAX) // 2, 0)
        source = max(self.size - keep, tail_start)
        self.dropped += source - tail_start
        line = marker(self.dropped, self.limit)
        target = self.head + len(line)
        os.pwrite(self._fd, line, self.head)
        # target <= source: copying ascending pieces down never reads what it already overwrote.
        for offset in range(0, self.size - source, PIECE):
            piece = os.pread(self._fd, min(PIECE, self.size - source - offset), source + offset)
            os.pwrite(self._fd, piece, target + offset)
        end = target + (self.size - source)
        os.ftruncate(self._fd, end)
        self._log.seek(end)
        if self._times is not None:
            self._times.splice(self.head, source, target, end)
        self.size, self._marker_len = end, len(line)
