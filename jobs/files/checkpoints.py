"""A run's checkpoints on the PFS (what paddlecloud.checkpoint saved in `<output>/checkpoints/step-<n>`): listed with
their step, time, size and the metric `save` was given, read beneath the owner's home with no link followed and
bounded (a job writes this folder: it may hold anything), and one chosen to resume another run from."""

from __future__ import annotations

import json
import math
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from paddlecloud.contract.layout import CHECKPOINT_META, CHECKPOINTS_NAME, output_parts
from paddlecloud.contract.spec import parse_resume_from

from core.errors import Invalid
from jobs.files.layout import logical
from jobs.lookup import job_named
from jobs.models import Job, JobState
from storage.backends import StorageUnavailable, storage_for

MAX_LISTED = 200  # checkpoints of one run listed (the newest)
MAX_FILES = 10_000  # entries counted for one checkpoint's size; past it the size says "at least"
MAX_META = 4096  # bytes of a checkpoint's meta file read
_NAME = re.compile(r"step-(\d{1,12})")


@dataclass(frozen=True)
class Found:
    step: int
    path: str  # as the user and the job name it: /pfs/<dc>/home/<user>/jobs/<name>/output/<uid>/checkpoints/...
    time: float  # when it was saved (its meta), else the folder's mtime
    size: int  # bytes of its files
    complete_size: bool  # False: more than MAX_FILES entries, `size` counts the first ones
    metric: float | None


def _folder(job: Job) -> str:
    """The run's checkpoints folder, relative to the storage root."""
    return "/".join(["home", job.owner.get_username(), *output_parts(job.name, job.uid), CHECKPOINTS_NAME])


def _meta(storage: Any, name: str) -> dict[str, Any]:
    try:
        fd = storage.open_fd(f"{name}/{CHECKPOINT_META}", os.O_RDONLY)
    except OSError:
        return {}
    with os.fdopen(fd, "rb") as file:
        try:
            found = json.loads(file.read(MAX_META))
        except ValueError:
            return {}
    return found if isinstance(found, dict) else {}


def _number(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        return None
    return float(value)


def listed(job: Job) -> list[Found]:
    """The run's complete checkpoints by step (the newest MAX_LISTED); none where it has none or storage is away."""
    storage = storage_for(job.datacenter)
    folder = _folder(job)
    try:
        entries = storage.scandir(folder)
    except (OSError, StorageUnavailable):
        return []
    steps = sorted((int(m.group(1)), e) for e in entries if e.kind == "dir" and (m := _NAME.fullmatch(e.name)))
    found = []
    for step, entry in steps[-MAX_LISTED:]:
        name = f"{folder}/{entry.name}"
        size = count = 0
        try:
            for item in storage.walk(name):
                count += 1
                if count > MAX_FILES:
                    break
                size += item.size
        except OSError:
            continue
        meta = _meta(storage, name)
        when = _number(meta.get("time")) or entry.mtime
        path = logical(job.datacenter, Path(job.datacenter.storage_root) / name)
        found.append(Found(step, path, when, size, count <= MAX_FILES, _number(meta.get("metric"))))
    return found


def chosen(job: Job, step: int | None) -> Found | None:
    """Checkpoint `step` of the run (its latest when None), or None where it has no such one."""
    found = listed(job)
    if step is None:
        return found[-1] if found else None
    return next((c for c in found if c.step == step), None)


def resume_point(user: Any, spec: dict[str, Any], automatic: bool) -> Found | None:
    """The checkpoint a new job starts from: `resume_from`'s (JOB[:STEP], the user's own runs only; Invalid naming
    `resume_from` where there is none), or, with `resume_from` absent and `automatic`, the latest of the newest
    earlier run of the same name where that run failed (a rerun of a failed job goes on where it stopped)."""
    text = spec.get("resume_from")
    mine = Job.objects.filter(owner=user).select_related("owner", "datacenter")
    if text:
        name, step = parse_resume_from(text)
        job = job_named(mine, name, user)
        if job is None:
            raise Invalid(f"you have no job {name!r} to resume from", "resume_from")
        found = chosen(job, step)
        if found is None:
            at = f" at step {step}" if step is not None else ""
            raise Invalid(f"job {job.name} ({job.uid}) has no checkpoint{at} to resume from", "resume_from")
        return found
    if text is not None or not automatic:
        return None
    previous = mine.filter(name=spec["jobname"]).order_by("-created_at", "-id").first()
    return chosen(previous, None) if previous is not None and previous.state == JobState.FAILED else None
