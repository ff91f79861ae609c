"""Restart from the checkpoint on failure: a job whose spec asks `max_restarts: N` and fails (a process exits
non-zero, is OOM-killed or lost, a rendezvous or a stall times out) runs again, whole, as attempt + 1.

The failed job goes back to `queued` with reason Restarting and keeps its admission while its workers are
stopped (jobs.follow.reconcile.requeue_preempted, the path a preemption takes: its run is charged in the ledger,
its output folder stays), then after a backoff (none after the first failure at a checkpoint; BACKOFF_FIRST seconds
after the second in a row at the same checkpoint, doubling, at most BACKOFF_MOST) it waits in
the queue again. The next attempt finds its latest checkpoint where it left it (`paddlecloud.checkpoint.latest()`)
and reads why it restarted in PADDLECLOUD_RESTART_REASON (Job.restarted_after). Each failure is kept on the job
(`failures`, the newest MAX_KEPT), so the last one's message stays visible.

A job that cannot get further is not restarted for ever: when CRASH_LOOP failures in a row left its latest
checkpoint where it was (or it never saved one), it fails with reason CrashLoop. Failures that a restart cannot
mend (a quota, an image that cannot be pulled, a kill) are never restarted.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.db.models import F
from django.utils import timezone

from jobs.files import checkpoints
from jobs.models import Job, JobState, Reason
from jobs.states import transition

CRASH_LOOP = 3  # failures in a row without a new checkpoint that end the restarts
MAX_KEPT = 10  # failures kept on the job
BACKOFF_FIRST, BACKOFF_MOST = 5.0, 60.0  # seconds before a restart waits again: 0, 5, 10, 20, 40, 60, ... (`streak`)
RESTART_GRACE = 5  # seconds the survivors of a failure get between SIGTERM and SIGKILL (`stop_grace`)
MAX_MESSAGE = 300  # characters of a failure's message kept (and given to the next attempt)
RESTARTABLE = frozenset({
    Reason.NONE, Reason.TRAINER_FAILED, Reason.BACKOFF_LIMIT, Reason.PSERVER_LOST, Reason.OOM_KILLED,
    Reason.LAUNCH_FAILED, Reason.RENDEZVOUS_TIMEOUT, Reason.PIDS_LIMIT, Reason.STALLED,
})  # fmt: skip


def backoff(streak: int) -> timedelta:
    """How long a job's workers stay stopped before it waits in the queue again, after the `streak`-th failure in a
    row at the same checkpoint: a run that got further since its last failure waits again at once (a rank lost once
    an hour must not wait longer each time), one that fails again where it was backs off."""
    if streak <= 1:
        return timedelta(0)
    return timedelta(seconds=min(BACKOFF_FIRST * 2 ** (streak - 2), BACKOFF_MOST))


def stop_grace(job: Job) -> int:
    """The seconds between SIGTERM and SIGKILL for the workers of a job that is stopped to run again: a preemption's
    or a growth's grace is the datacenter's (to save a checkpoint); after a failure at most RESTART_GRACE, since the
    survivors of a collective job wait in an all-reduce with a rank that is gone and save nothing."""
    grace = int(job.datacenter.preemption_grace)
    return min(grace, RESTART_GRACE) if job.reason == Reason.RESTARTING else grace


def streak(failures: list[dict[str, Any]]) -> int:
    """The failures in a row, the newest last, at the newest one's checkpoint step."""
    count = 0
    for entry in reversed(failures):
        if entry.get("checkpoint_step") != failures[-1].get("checkpoint_step"):
            break
        count += 1
    return count


def failed(job: Job, reason: str, message: str, exit_code: int | None = None) -> tuple[str, str] | None:
    """The job's engine saw it fail: None where it restarts (it was moved back to the queue, Restarting), else the
    reason and message it fails with (CrashLoop where its restarts got it no further)."""
    limit = int(job.spec.get("max_restarts") or 0)
    if reason not in RESTARTABLE or job.restarts >= limit or job.state not in (JobState.PENDING, JobState.RUNNING):
        return reason, message
    latest = checkpoints.latest_saved(job)  # (step, time), unsized: one listing and one meta file
    step = latest[0] if latest is not None else None
    failure = {
        "attempt": job.attempt, "reason": reason, "message": message[:MAX_MESSAGE], "exit_code": exit_code,
        "checkpoint_step": step, "at": timezone.now().isoformat(),
    }  # fmt: skip
    history: list[dict[str, Any]] = [*(job.failures or []), failure][-MAX_KEPT:]
    last = history[-CRASH_LOOP:]
    if len(last) == CRASH_LOOP and len({entry.get("checkpoint_step") for entry in last}) == 1:
        where = f"at step {step}" if step is not None else "without a checkpoint"
        return Reason.CRASH_LOOP, f"{message}; the last {CRASH_LOOP} attempts each failed {where}: not restarted"
    at = f"its checkpoint of step {step}" if step is not None else "the start (no checkpoint yet)"
    wait = backoff(streak(history)).total_seconds()
    told = (
        f"{message}; restarting from {at} as attempt {job.attempt + 1} "
        f"(restart {job.restarts + 1} of {limit}){f' in {wait:.0f} s' if wait else ''}"
    )
    moved = transition(
        job.pk, JobState.QUEUED, from_states=[JobState.PENDING, JobState.RUNNING], reason=Reason.RESTARTING,
        message=told, preempted_at=timezone.now(), restarts=F("restarts") + 1, failures=history,
    )  # fmt: skip
    return None if moved else (reason, message)


def waited(job: Job) -> bool:
    """A restarting job's backoff is over (its stopped workers may give way to the queue); any other job: True."""
    if job.reason != Reason.RESTARTING or job.preempted_at is None:
        return True
    return timezone.now() >= job.preempted_at + backoff(streak(job.failures or []))
