"""Which job a name means: one rule for the API (`/api/v1/jobs/<name>`, paddlectl) and the pages (`/jobs/<ref>/`).

A uid pins one run. A name means one of the runs of that name the asker sees: the asker's own runs
first (an operator who sees everyone's means their own `fit`, if they have one), and among them the
active run (a name is unique among an owner's active jobs), else the newest.
"""

from __future__ import annotations

from typing import Any

from django.db.models import QuerySet

from jobs.models import ACTIVE_STATES, Job


def _run_named(jobs: QuerySet[Job], name: str) -> Job | None:
    """The active run of that name, else the newest."""
    runs = jobs.filter(name=name).order_by("-created_at")
    return runs.filter(state__in=ACTIVE_STATES).first() or runs.first()


def job_named(jobs: QuerySet[Job], ref: str, asker: Any) -> Job | None:
    """The job `ref` (a uid or a name) means among `jobs` (those `asker` sees); None if none."""
    return jobs.filter(uid=ref).first() or _run_named(jobs.filter(owner_id=asker.pk), ref) or _run_named(jobs, ref)
