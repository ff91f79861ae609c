"""A trial's metric as its job reports it: read on from where the last look stopped (trainer 0's metrics.jsonl, what
paddlecloud.metrics.log wrote), keeping the best and last value of the experiment's metric, the last step, and the
value at each ASHA rung the trial passed. Bounded per look: a long file is read over several passes."""

from __future__ import annotations

from dataclasses import dataclass, field

from core.errors import DomainError
from experiments.search import Metric
from jobs.follow import metrics
from jobs.models import Job
from storage.backends import StorageUnavailable

READS_WHILE_RUNNING = 8  # chunks of the file one pass reads of a running trial; the next pass reads on
READS_AT_END = 64  # chunks read once its job ended: a bigger file is summarized by what was read


@dataclass
class Progress:
    """What was read of one trial so far; `cursor` is where the next read starts."""

    best: float | None = None
    last: float | None = None
    steps: int | None = None
    cursor: str = ""
    rungs: dict[str, float] = field(default_factory=dict)  # rung index (as text, JSON's keys) -> the value there
    complete: bool = False  # its job ended and every line was read


def read_on(job: Job, metric: Metric, progress: Progress, rungs: list[int], reads: int) -> list[int]:
    """Read the points after `progress.cursor` into `progress`; the indexes of the rungs it passed meanwhile."""
    passed: list[int] = []
    for _ in range(reads):
        try:
            answer = metrics.read_points(job, "trainer-0", progress.cursor)
        except (DomainError, StorageUnavailable, OSError):  # refused or out of reach: nothing more is known now
            return passed
        for point in answer["points"]:
            value = point["values"].get(metric.name)
            if not isinstance(value, int | float) or isinstance(value, bool):
                continue
            progress.last, progress.steps = float(value), int(point["step"])
            if progress.best is None or metric.better(progress.last, progress.best):
                progress.best = progress.last
            for index, steps in enumerate(rungs):
                if progress.steps >= steps and str(index) not in progress.rungs:
                    progress.rungs[str(index)] = progress.last  # the value as it crossed the rung
                    passed.append(index)
        progress.complete = answer["complete"]
        if answer["complete"] or answer["cursor"] == progress.cursor:
            break
        progress.cursor = answer["cursor"]
    return passed
