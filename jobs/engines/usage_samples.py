"""The shape of one worker's live resource use, shared by every engine's sampler and the portal that records it.

A leaf module (it imports nothing of the portal), so the engines (jobs.engines.*.usage) and the recorder
(jobs.follow.worker_usage) both import it and the shape lives in one place.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

CPU_FLOOR = 0.05  # cores: above this a worker is working (a sign of life for jobs.follow.stalls), below it idles
HISTORY_POINTS = 360  # one hour at full resolution; past that every other point goes, so a long run stays whole


@dataclass(frozen=True)
class WorkerUsage:
    """What one worker uses right now; None where the engine cannot tell (a GPU figure without a GPU)."""

    cpu_cores: float
    memory_bytes: int
    sampled_at: datetime
    gpu_util: float | None = None  # percent, the mean over the worker's GPUs
    gpu_memory_bytes: int | None = None  # the sum over its GPUs

    def to_json(self) -> dict[str, Any]:
        return {
            "cpu_cores": round(self.cpu_cores, 3),
            "memory_bytes": self.memory_bytes,
            "gpu_util": None if self.gpu_util is None else round(self.gpu_util, 1),
            "gpu_memory_bytes": self.gpu_memory_bytes,
            "sampled_at": self.sampled_at.astimezone(UTC).isoformat().replace("+00:00", "Z"),
        }


def with_point(history: list[list[float]], usage: WorkerUsage) -> list[list[float]]:
    """`history` ([unix seconds, cpu cores, memory bytes] each) with `usage` added; thinned to half once full."""
    point = [round(usage.sampled_at.timestamp(), 1), round(usage.cpu_cores, 3), usage.memory_bytes]
    points = [*history, point]
    if len(points) > HISTORY_POINTS:
        points = points[::2] if len(points) % 2 else [*points[:-1:2], point]  # the newest point always stays
    return points
