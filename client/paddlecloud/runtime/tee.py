"""The launcher's one writer of a job's output: the log file (arrival times, a size cap) and stdout, line by line."""

from __future__ import annotations

import sys
import threading
from typing import BinaryIO

from paddlecloud.contract import logcap, logtimes


class Tee:
    """Writes to the job's log file (stamping arrival times, see logtimes; kept under `limit` bytes, see
    logcap) and to stdout; one lock so lines never interleave."""

    def __init__(self, log: BinaryIO | None, times: logtimes.Recorder | None = None, limit: int | None = None) -> None:
        self._log = logcap.CappedLog(log, times, limit) if log is not None else None
        self._lock = threading.Lock()

    def write(self, data: bytes) -> None:
        with self._lock:
            if self._log is not None:
                try:
                    self._log.write(data)
                except OSError as e:
                    # Disk full or storage gone: stop logging, never stop draining the pipe
                    # (a blocked pipe would hang the entry).
                    self._log.stop_times()
                    self._log = None
                    data += f"[paddlecloud-launch] log file write failed, stdout only from now: {e}\n".encode()
            try:
                sys.stdout.buffer.write(data)
                sys.stdout.buffer.flush()
            except (OSError, ValueError):
                pass  # a closed stdout must not kill the job: the log file is what counts

    def line(self, message: str) -> None:
        self.write(f"[paddlecloud-launch] {message}\n".encode())
