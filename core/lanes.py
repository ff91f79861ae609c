"""Celery lanes: which queue each task goes to, so control, per-job and side work never wait on each other.

Each lane is a queue with worker slots of its own (the deploy runs one container per lane; `make run`
one worker process per lane, but `side` and `notify` share one on a laptop):

- `jobs` (the default queue, `celery`): per-job work, a message per job: start, kill, image builds, and
  the heartbeat (it proves that this lane's worker runs).
- `control` (`celery-control`): the periodic loops that follow every job (reconcile, storage quota,
  usage samples, cleanup, build polling). A burst of submissions queues hundreds of per-job messages; were the
  reconcile behind them, every job's state would lag by the whole backlog (seen: 95-181 s, and 295
  reconcile runs discarded as expired).
- `side` (`celery-side`): work for users that may take long and never starts or follows a job: upload
  verification (hashing gigabytes), storage usage recounts.
- `notify` (`celery-notify`): job-end emails and webhooks, slow receivers included; in the deploy its
  worker holds no secret and no PFS (deploy/base/worker.yaml).

Queue names derive from the default queue, so a test run's private queue (tests/settings.py) brings
private lanes along.
"""

from __future__ import annotations

from typing import Any

from celery import current_app

JOBS, CONTROL, SIDE, NOTIFY = "jobs", "control", "side", "notify"
LANES = (JOBS, CONTROL, SIDE, NOTIFY)

_LANE_OF_TASK = {
    "jobs.reconcile": CONTROL,
    "jobs.schedule": CONTROL,
    "jobs.storage_quota": CONTROL,
    "jobs.sample_usage": CONTROL,
    "jobs.cleanup": CONTROL,
    "images.poll_builds": CONTROL,
    "experiments.advance_all": CONTROL,
    "storage.cleanup_uploads": CONTROL,
    "storage.verify_upload": SIDE,
    "storage.recompute_usage": SIDE,
    "storage.sample_usage": SIDE,
}


def lane_of(task_name: str) -> str:
    """The lane of a task by its name; anything not named here is per-job work."""
    if task_name.startswith("notifications."):
        return NOTIFY
    return _LANE_OF_TASK.get(task_name, JOBS)


def queue(lane: str) -> str:
    """The queue of a lane: the default queue for jobs, `<default>-<lane>` for the others."""
    default: str = current_app.conf.task_default_queue
    return default if lane == JOBS else f"{default}-{lane}"


def route(name: str, args: Any, kwargs: Any, options: Any, task: Any = None, **extra: Any) -> dict[str, str]:
    """Celery router (settings.CELERY_TASK_ROUTES)."""
    return {"queue": queue(lane_of(name))}
