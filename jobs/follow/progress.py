"""Progress and ETA of a job whose trainers log a total: ``paddlecloud.metrics.log(step=i, total_steps=n)``.

The beat's sampling task (jobs/follow/looks.py) looks at a running job at most every CHECK_SECONDS (FIRST_CHECK_SECONDS
until its first progress in its first minute), the reconciler once
more as the job is released, and stores the answer on the Job row (`progress`), so the job list and the API never
read files. A look reads the
last TAIL_BYTES of each of the first MAX_TRAINERS trainers' metrics.jsonl (jobs.follow.metrics.last_points: the job
writes that file, so it is parsed with the client's rules, a line with a total <= 0 refused). The job's progress
is its slowest trainer's (the least fraction): the job ends when its last trainer does, and in PS mode trainers
run at their own pace. Trainers that log no total are left out (many scripts log on trainer 0 only).
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime, timedelta
from typing import Any

from django.utils import timezone
from paddlecloud.contract.states import worker_name

from core.errors import DomainError
from jobs import events
from jobs.files import checkpoints
from jobs.follow import metrics
from jobs.follow.look_times import LookTimes
from jobs.models import EventKind, Job, JobState, Role, Worker
from storage.backends import StorageUnavailable

log = logging.getLogger(__name__)

CHECK_SECONDS = 10.0  # a running job's metrics are read no more often than this...
FIRST_CHECK_SECONDS = 2.0  # ...except in its first minute running while it has shown no progress yet: the first
FIRST_MINUTE = timedelta(seconds=60)  # percentage shows at once, not up to 10 s after the first line (a short job's
# whole run), and a job that never logs a total is read this often only for a minute
MAX_TRAINERS = 8  # trainers read per look: a bounded cost for a job of 1000 trainers (7 ms a look here)
TAIL_BYTES = 8 * 1024  # of each file: about a hundred points, seconds to minutes of a run
TAIL_POINTS = 500
RATE_WINDOW = 300.0  # the rate is measured over the last points within this many seconds: it follows a change
# of pace (a slower phase, a resumed run) without being thrown by one slow step
checked = LookTimes()  # per sampling process
INCOMPLETE = "IncompleteTraining"  # a trainer's note where it exited 0 short of its declared total


def _recent_run(points: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The last points with a time, back to RATE_WINDOW before the last or to where the step went back (a resume).

    One point before the window is kept, so a job that logs once every ten minutes still has a rate."""
    timed = [p for p in points if p["time"] is not None]
    if not timed:
        return []
    run = [timed[-1]]
    for point in reversed(timed[:-1]):
        if point["step"] > run[-1]["step"] or point["time"] > run[-1]["time"]:
            break  # the step or the clock went back: an earlier run of the job
        run.append(point)
        if timed[-1]["time"] - point["time"] > RATE_WINDOW:
            break
    return run[::-1]


def rate_of(points: list[dict[str, Any]]) -> float | None:
    """Steps per second over the recent points; None while there are too few or the step does not move."""
    run = _recent_run(points)
    if len(run) < 2:
        return None
    steps, seconds = run[-1]["step"] - run[0]["step"], run[-1]["time"] - run[0]["time"]
    if steps <= 0 or seconds <= 0:
        return None
    return float(steps / seconds)


def of_points(points: list[dict[str, Any]]) -> dict[str, Any] | None:
    """One trainer's progress from its points (in file order): its last total and step, the rate and the ETA."""
    with_total = [p for p in points if p.get("total_steps")]
    if not with_total:
        return None
    last = with_total[-1]
    total, step = int(last["total_steps"]), int(last["step"])
    fraction = min(1.0, max(0.0, step / total))  # a step past the total is done, not 120 %
    rate = rate_of(points)
    remaining = max(0, total - step)
    eta = None if rate is None else round(remaining / rate)
    return {
        "step": step,
        "total_steps": total,
        "fraction": round(fraction, 4),
        "eta_seconds": eta,
        "rate_steps_per_s": None if rate is None else round(rate, 4),
    }


def combine(trainers: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The job's progress: its slowest trainer's; the ETA is the latest of theirs, unknown if any is unknown."""
    if not trainers:
        return None
    slowest = dict(min(trainers, key=lambda p: p["fraction"]))
    etas = [p["eta_seconds"] for p in trainers]
    slowest["eta_seconds"] = None if None in etas else max(etas)
    return slowest


def read(job: Job) -> dict[str, Any] | None:
    """The job's progress now, from its trainers' metrics files (None when none logged a total)."""
    return combine(list(_by_trainer(job).values()))


def _by_trainer(job: Job) -> dict[int, dict[str, Any]]:
    """Each trainer's progress (of the first MAX_TRAINERS) that logged a total, by index."""
    found = {}
    for index in range(min(job.trainers, MAX_TRAINERS)):
        try:
            points = metrics.last_points(job, f"trainer-{index}", TAIL_POINTS, TAIL_BYTES)
        except (OSError, DomainError, StorageUnavailable) as exc:
            # Storage not mounted here, or refused: no progress from this one, and the reconciler goes on.
            log.debug("job %s trainer-%d: metrics not read: %s", job.uid, index, exc)
            continue
        if (progress := of_points(points)) is not None:
            found[index] = progress
    return found


def _store(job: Job, progress: dict[str, Any] | None) -> None:
    if progress is not None and job.stalled_at is not None:
        # Its points stopped, so a rate from them would give an ETA frozen at the moment it hung: none, and
        # the pages say "stalled" (the job's Stalled warning) until a sign of life clears it.
        progress = {**progress, "eta_seconds": None}
    if progress is not None and progress != job.progress:
        Job.objects.filter(pk=job.pk).update(progress=progress)
        job.progress = progress


def interval(job: Job) -> float:
    """Seconds between two looks at a running job's progress."""
    young = job.started_at is not None and timezone.now() - job.started_at < FIRST_MINUTE
    return FIRST_CHECK_SECONDS if young and job.progress is None else CHECK_SECONDS


def check(job: Job) -> None:
    """Look at a running job's progress if due (interval), and store it."""
    if job.state != JobState.RUNNING or not checked.due(job.pk, interval(job)):
        return
    _store(job, read(job))
    _note_checkpoint(job)


def _note_checkpoint(job: Job) -> None:
    """When its newest checkpoint was saved (jobs.files.checkpoints.latest_saved: one listing and one meta file),
    kept on the row for the scheduler, which stops the job that loses the least work since its checkpoint."""
    try:
        found = checkpoints.latest_saved(job)
    except (OSError, StorageUnavailable):
        return
    when = datetime.fromtimestamp(found[1], tz=UTC) if found is not None else None
    if when is not None and when != job.checkpointed_at:
        Job.objects.filter(pk=job.pk).update(checkpointed_at=when)
        job.checkpointed_at = when


def finish(job: Job) -> None:
    """The last look, as a finished job is released: it keeps its last progress, with no ETA left to give. A
    trainer of a job that succeeded whose last step fell short of the total it declared is said on its worker
    (IncompleteTraining) and in an event: the job still succeeded (every trainer exited 0, the success rule), but
    its user should know it stopped early."""
    checked.forget(job.pk)
    trainers = _by_trainer(job)
    progress = combine(list(trainers.values()))
    if progress is not None:
        progress["eta_seconds"] = None
    _store(job, progress)
    if job.state != JobState.SUCCEEDED:
        return
    for index, own in sorted(trainers.items()):
        if own["step"] + 1 < own["total_steps"]:  # steps count from 0: the last of n is n - 1
            said = (f"{INCOMPLETE}: exited 0 at step {own['step']} of the {own['total_steps']} it declared "
                    f"(metrics.log(total_steps=))")  # fmt: skip
            if Worker.objects.filter(job=job, role=Role.TRAINER, index=index).exclude(message=said).update(
                message=said
            ):
                events.record(job.pk, EventKind.WORKER_EXITED, said, worker_name(Role.TRAINER, index))
