"""A trial's metric once its job ended: the best and last value of the experiment's metric, and the last step it
was logged at, read from trainer 0's metrics.jsonl (what paddlecloud.metrics.log wrote), bounded."""

from __future__ import annotations

from core.errors import DomainError
from experiments.search import Metric
from jobs.follow import metrics
from jobs.models import Job
from storage.backends import StorageUnavailable

MAX_READS = 64  # chunks of the file read at most (64 x the log chunk): a bigger file is summarized by its start


def summarize(job: Job, metric: Metric) -> tuple[float | None, float | None, int | None]:
    best = last = None
    steps = None
    cursor = ""
    for _ in range(MAX_READS):
        try:
            answer = metrics.read_points(job, "trainer-0", cursor)
        except (DomainError, StorageUnavailable, OSError):  # refused or out of reach: the trial has no metric
            return None, None, None
        for point in answer["points"]:
            value = point["values"].get(metric.name)
            if not isinstance(value, int | float):
                continue
            last, steps = float(value), int(point["step"])
            if best is None or metric.better(last, best):
                best = last
        if answer["complete"] or answer["cursor"] == cursor:
            break
        cursor = answer["cursor"]
    return best, last, steps
