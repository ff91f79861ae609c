"""Which job a name means: one rule for the API (`/api/v1/jobs/<name>`, paddlectl) and the pages (`/jobs/<ref>/`).

A uid pins one run. A name means one of the runs of that name the asker sees: the asker's own runs
first (an operator who sees everyone's means their own `fit`, if they have one), and among them the
active run (a name is unique among an owner's active jobs), else the newest. Removing a job is for
good, so a removal by a name that several runs share picks none (refuse_to_guess_which_run).
"""

from __future__ import annotations

from typing import Any

from django.db.models import QuerySet
from paddlecloud.contract.quantity import quote

from core.errors import Conflict
from jobs.models import ACTIVE_STATES, Job

RUNS_LISTED = 10  # uids a refused removal by a shared name lists


def _run_named(jobs: QuerySet[Job], name: str) -> Job | None:
    """The active run of that name, else the newest."""
    runs = jobs.filter(name=name).order_by("-created_at")
    return runs.filter(state__in=ACTIVE_STATES).first() or runs.first()


def refuse_to_guess_which_run(jobs: QuerySet[Job], ref: str, job: Job) -> None:
    """Removing is for good: where `ref` is a name that several of `job`'s owner's runs share (job_named had
    to choose), none is picked; a 409 naming `name` lists their uids. A kill alone still means the active run."""
    if ref == job.uid:
        return
    runs = list(
        jobs.filter(owner_id=job.owner_id, name=ref).order_by("-created_at").values_list("uid", flat=True)[
            : RUNS_LISTED + 1
        ]
    )
    if len(runs) > 1:
        listed = ", ".join(runs[:RUNS_LISTED]) + (", ..." if len(runs) > RUNS_LISTED else "")
        raise Conflict(f"job {quote(ref)} has several runs ({listed}); remove one by its uid, or each of them", "name")


def job_named(jobs: QuerySet[Job], ref: str, asker: Any) -> Job | None:
    """The job `ref` (a uid or a name) means among `jobs` (those `asker` sees); None if none."""
    return jobs.filter(uid=ref).first() or _run_named(jobs.filter(owner_id=asker.pk), ref) or _run_named(jobs, ref)
