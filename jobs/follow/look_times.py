"""When each job was last looked at, per process: the one rate limit of the periodic per-job looks (stall checks,
usage samples, progress reads), bounded so thousands of jobs that came and went are not remembered forever."""

from __future__ import annotations

import time

FORGET_AFTER = 10_000  # past this many remembered jobs, the ones not looked at lately are forgotten


class LookTimes:
    """Job id -> monotonic time of its last look."""

    def __init__(self) -> None:
        self._at: dict[int, float] = {}

    def waited(self, job_id: int, interval: float) -> bool:
        """Whether the job was not looked at in the last `interval` seconds (noting nothing)."""
        return time.monotonic() - self._at.get(job_id, 0.0) >= interval

    def due(self, job_id: int, interval: float) -> bool:
        """True (and noted as looked at now) when the job was not looked at in the last `interval` seconds."""
        if not self.waited(job_id, interval):
            return False
        now = time.monotonic()
        if len(self._at) >= FORGET_AFTER:
            for stale in [key for key, at in self._at.items() if now - at > 2 * interval]:
                del self._at[stale]
        self._at[job_id] = now
        return True

    def last(self, job_id: int) -> float:
        """When the job was last looked at (monotonic seconds; 0 never)."""
        return self._at.get(job_id, 0.0)

    def mark(self, job_id: int, at: float | None = None) -> None:
        self._at[job_id] = time.monotonic() if at is None else at

    def forget(self, job_id: int | None = None) -> None:
        """Forget one job (it was released), or every job."""
        if job_id is None:
            self._at.clear()
        else:
            self._at.pop(job_id, None)
