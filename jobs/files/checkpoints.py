"""A run's checkpoints on the PFS (what paddlecloud.checkpoint saved in `<output>/checkpoints/step-<n>`): listed with
their step, time, size and the metric `save` was given, read beneath the owner's home with no link followed and
bounded (a job writes this folder: it may hold anything), one chosen to resume another run from, and those a keep
policy does not keep removed once the run ended."""

from __future__ import annotations

import json
import logging
import math
import os
import re
import stat
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from paddlecloud.contract.keeping import kept_steps
from paddlecloud.contract.layout import CHECKPOINT_META, CHECKPOINTS_NAME, output_parts
from paddlecloud.contract.predecessors import parse_resume_from

from core.errors import DomainError, Invalid, NotFound
from jobs.files.layout import logical
from jobs.lookup import job_named
from jobs.models import Job, JobState
from storage import files
from storage.backends import StorageUnavailable, storage_for

log = logging.getLogger(__name__)

MAX_LISTED = 200  # checkpoints of one run listed (the newest)
MAX_NAMES = 10_000  # entries of the checkpoints folder read to find them (a job may fill it with anything)
SIZE_BUDGET = 20_000  # entries looked at to size the listed checkpoints, all together (the newest first)
MAX_META = 4096  # bytes of a checkpoint's meta file read
FUTURE = 86_400  # seconds: a saved time further ahead than this is not believed (the folder's mtime is shown)
_NAME = re.compile(r"step-(\d{1,12})")


@dataclass(frozen=True)
class Found:
    step: int
    path: str  # as the user and the job name it: /pfs/<dc>/home/<user>/jobs/<name>/output/<uid>/checkpoints/...
    time: float  # when it was saved (its meta), else the folder's mtime
    size: int  # bytes of its files (what was counted: see complete_size)
    complete_size: bool  # False: the size budget ran out first, `size` counts part of it
    metric: float | None


def _folder(job: Job) -> str:
    """The run's checkpoints folder, relative to the storage root."""
    return "/".join(["home", job.owner.get_username(), *output_parts(job.name, job.uid), CHECKPOINTS_NAME])


def _logical(job: Job, step_name: str) -> str:
    """Checkpoint `step_name` of the run as the user names it (/pfs/<dc>/home/...)."""
    return logical(job.datacenter, Path(job.datacenter.storage_root) / _folder(job) / step_name)


def _meta(storage: Any, job: Job, step_name: str) -> dict[str, Any]:
    """The checkpoint's meta file as save wrote it: opened beneath the home like a log (no link followed, a FIFO,
    socket, device or folder refused, never blocking), at most MAX_META bytes; {} where it is not one."""
    parts = [*output_parts(job.name, job.uid), CHECKPOINTS_NAME, step_name, CHECKPOINT_META]
    try:
        fd = storage.open_file(f"home/{job.owner.get_username()}", parts, os.O_RDONLY | os.O_NONBLOCK)
    except OSError:
        return {}
    try:
        with os.fdopen(fd, "rb") as file:
            found = json.loads(file.read(MAX_META))
    except (OSError, ValueError):
        return {}
    return found if isinstance(found, dict) else {}


def _number(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        return None
    return float(value)


def _steps(job: Job) -> list[tuple[int, str]]:
    """(step, folder name) of the run's checkpoints, by step: the names alone, read lazily and bounded."""
    try:
        names = storage_for(job.datacenter).names(_folder(job), MAX_NAMES)
    except (OSError, StorageUnavailable):
        return []
    return sorted((int(m.group(1)), name) for name in names if (m := _NAME.fullmatch(name)))


def _found(job: Job, step: int, name: str, budget: int) -> tuple[Found | None, int]:
    """One checkpoint sized within `budget` entries, and the budget left; None where it is not a folder (a job's
    file or link)."""
    storage = storage_for(job.datacenter)
    folder = f"{_folder(job)}/{name}"
    try:
        entry = storage.lstat(folder)
    except (OSError, StorageUnavailable):
        return None, budget
    if not stat.S_ISDIR(entry.st_mode):
        return None, budget
    size, seen, complete = storage.bounded_usage(folder, budget) if budget > 0 else (0, 0, False)
    meta = _meta(storage, job, name)
    saved = _number(meta.get("time"))
    when = saved if saved is not None and 0 <= saved <= time.time() + FUTURE else entry.st_mtime
    return Found(step, _logical(job, name), when, size, complete, _number(meta.get("metric"))), budget - seen


def latest_saved(job: Job) -> tuple[int, float] | None:
    """(step, when it was saved) of the run's newest checkpoint, unsized (its meta's time, else its folder's): what
    the scheduler weighs as the work a preemption would lose. None where it has none."""
    storage = storage_for(job.datacenter)
    for step, name in reversed(_steps(job)):
        try:
            entry = storage.lstat(f"{_folder(job)}/{name}")
        except (OSError, StorageUnavailable):
            continue
        if stat.S_ISDIR(entry.st_mode):
            saved = _number(_meta(storage, job, name).get("time"))
            return step, saved if saved is not None and 0 <= saved <= time.time() + FUTURE else entry.st_mtime
    return None


def listed(job: Job, most: int = MAX_LISTED) -> list[Found]:
    """The run's newest `most` checkpoints by step; none where it has none or its storage is away. The newest are
    sized first, from one budget of SIZE_BUDGET entries (an older one past it shows a partial size)."""
    found: list[Found] = []
    budget = SIZE_BUDGET
    for step, name in reversed(_steps(job)[-most:]):
        checkpoint, budget = _found(job, step, name, budget)
        if checkpoint is not None:
            found.append(checkpoint)
    return found[::-1]


def steps_and_metrics(job: Job, most: int = MAX_LISTED) -> list[tuple[int, str, float | None]]:
    """(step, path as the user names it, the metric `save` was given) of the run's newest `most` checkpoints by
    step, unsized: what a keep policy decides by."""
    storage = storage_for(job.datacenter)
    return [
        (step, _logical(job, name), _number(_meta(storage, job, name).get("metric")))
        for step, name in _steps(job)[-most:]
    ]


def prune(job: Job, best: int, latest: int, goal: str) -> int:
    """Remove the run's checkpoints the policy (paddlecloud.contract.keeping) does not keep, as `paddlectl file rm -r`
    would: beneath its owner's home with the owner's rights, their space back to the quota. Only for a run that
    ended and was released (nothing writes there any more); only its newest MAX_LISTED are looked at. How many were
    removed; one that cannot be (the PFS away) is logged and left."""
    found = steps_and_metrics(job)
    keep = kept_steps(((step, metric) for step, _, metric in found), best, latest, goal)
    removed = 0
    for step, path, _ in found:
        if step in keep:
            continue
        try:
            files.remove(job.owner, path, recursive=True)
            removed += 1
        except NotFound:
            pass  # gone already: a pass before this one
        except DomainError as exc:
            log.warning("job %s: checkpoint %s was not removed: %s", job.uid, path, exc)
    return removed


def chosen(job: Job, step: int | None) -> Found | None:
    """Checkpoint `step` of the run (its latest when None), or None where it has no such one: by name, then that
    one folder looked at (never the others)."""
    for found_step, name in reversed(_steps(job)):
        if step is None or found_step == step:
            checkpoint, _ = _found(job, found_step, name, SIZE_BUDGET)
            if checkpoint is not None or step is not None:
                return checkpoint
    return None


def resume_point(user: Any, datacenter: Any, spec: dict[str, Any], automatic: bool) -> Found | None:
    """The checkpoint a new job on `datacenter` starts from: `resume_from`'s (JOB[:STEP], the user's own runs on
    that datacenter only; Invalid naming `resume_from` where there is none), or, with `resume_from` absent and
    `automatic`, the latest of the newest earlier run of the same name there where that run failed (a rerun of a
    failed job goes on where it stopped)."""
    text = spec.get("resume_from")
    mine = Job.objects.filter(owner=user).select_related("owner", "datacenter")
    if text:
        name, step = parse_resume_from(text)
        job = job_named(mine, name, user)
        if job is None:
            raise Invalid(f"you have no job {name!r} to resume from", "resume_from")
        if job.datacenter_id != datacenter.pk:
            raise Invalid(f"job {job.name} ran on {job.datacenter.name}, not {datacenter.name}", "resume_from")
        found = chosen(job, step)
        if found is None:
            at = f" at step {step}" if step is not None else ""
            raise Invalid(f"job {job.name} ({job.uid}) has no checkpoint{at} to resume from", "resume_from")
        return found
    if text is not None or not automatic:
        return None
    previous = mine.filter(name=spec["jobname"], datacenter=datacenter).order_by("-created_at", "-id").first()
    return chosen(previous, None) if previous is not None and previous.state == JobState.FAILED else None
