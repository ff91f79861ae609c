"""Which running jobs the beat's full reconcile cycle may pass over: those nothing has happened to since a look.

A watched datacenter (jobs/engines/kubernetes/watch.py) hands each job's change to a cycle over that job at once,
so the beat's full cycle is a safety net, and looking at every running job each time made it grow with the
datacenter (2.35 s at 5,000 jobs, bench/reconcile_scale.py). Here a job is *settled* when a look found it running
with every worker running or done, and the engine's version of its objects (capabilities.ChangeVersions: the last
change the mirror saw of the job's objects) is the one read before that look. A full cycle passes over a settled job
unless one of its rules is due:
- its objects changed since (the version differs): an event the prompt cycle missed is caught here;
- its row no longer holds what that look wrote (its reason and worker counts): whatever changed it, a look puts
  it right;
- its stall check is due (jobs.follow.stalls.due);
- it names a registry secret the user deleted that its namespace still has a copy of (revoked.py blanks it);
- its resync is due: a settled job is looked at again after RESYNC_SECONDS all the same (spread over
  [RESYNC_SECONDS / 2, RESYNC_SECONDS) by job, so the jobs settled together do not all fall due in one cycle), the way
  an informer's resync period backs a controller's events.
Pending jobs never settle: their rules are timed (the quota grace, the pending timeout, a vanished JobSet).
Without versions (the local engine; a mirror not current) every job is looked at, as before.

Per process, like the mirror it trusts: the control worker's. Entries of jobs that are no longer running go at
the next full cycle, so it holds at most the running jobs.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Hashable, Iterable
from dataclasses import dataclass
from typing import Any

from jobs.engines.base import Observation
from jobs.follow import stalls
from jobs.models import JobState, WorkerState
from registry.models import RegistrySecret

RESYNC_SECONDS = 60.0


@dataclass(frozen=True)
class Row:
    """What the full cycle reads of every started job to choose which to look at (a few columns, not the row)."""

    pk: int
    uid: str
    state: str
    owner_id: int
    stall_timeout: int  # its own or its datacenter's, seconds; 0 off
    registry: str  # the registry secret its spec names, "" none
    registry_revoked: bool  # the namespace's copy of it was already blanked
    written: tuple[Any, ...]  # its reason and worker counts as the row holds them


@dataclass(frozen=True)
class _Settled:
    version: Hashable  # of its objects, read before the look
    written: tuple[Any, ...]  # what the look left in its row
    resync_at: float  # monotonic


_settled: dict[int, dict[int, _Settled]] = {}  # datacenter pk -> job pk -> how its last look left it
CHOICES: Counter[str] = Counter()  # "looked at" / "passed over", summed over full cycles (bench/reconcile_scale.py)


def note(
    datacenter_id: int,
    job_id: int,
    version: Hashable | None,
    job_state: str,
    seen: Observation,
    written: tuple[Any, ...],
) -> None:
    """After a look at a job (which wrote `written` into its row): remember it settled, or forget it (it needs
    its next look)."""
    quiet = (
        version is not None
        and job_state == JobState.RUNNING
        and seen.state == JobState.RUNNING
        and all(worker.state != WorkerState.PENDING for worker in seen.workers)
    )
    its = _settled.setdefault(datacenter_id, {})
    if quiet:
        its[job_id] = _Settled(version, written, time.monotonic() + RESYNC_SECONDS * _spread(job_id))
    else:
        its.pop(job_id, None)


def _spread(job_id: int) -> float:
    """A fraction in [0.5, 1), even over consecutive ids (the golden ratio's steps): jobs settled in one cycle
    fall due over half a resync period, not in one cycle."""
    return 0.5 + ((job_id * 0.6180339887) % 1.0) / 2


def due(datacenter_id: int, rows: list[Row], versions: dict[str, Hashable]) -> list[int]:
    """The rows (every started job of the datacenter) a full cycle must look at; forgets the datacenter's settled
    jobs that are not among them (no longer started)."""
    now = time.monotonic()
    its = _settled.setdefault(datacenter_id, {})
    for gone in its.keys() - {row.pk for row in rows}:
        del its[gone]
    revoked = _revoked_registry(rows)
    looks = []
    for row in rows:
        settled = its.get(row.pk)
        quiet = (
            settled is not None
            and row.state == JobState.RUNNING
            and settled.version == versions.get(row.uid)
            and settled.written == row.written
            and now < settled.resync_at
            and not stalls.due(row.pk, row.stall_timeout)
            and row.pk not in revoked
        )
        if not quiet:
            looks.append(row.pk)
    CHOICES["looked at"] += len(looks)
    CHOICES["passed over"] += len(rows) - len(looks)
    return looks


def _revoked_registry(rows: Iterable[Row]) -> set[int]:
    """Jobs whose registry secret is gone and whose namespace copy is not blanked yet: one query for all."""
    named = [row for row in rows if row.registry and not row.registry_revoked]
    if not named:
        return set()
    existing = set(
        RegistrySecret.objects.filter(
            owner_id__in={row.owner_id for row in named}, name__in={row.registry for row in named}
        ).values_list("owner_id", "name")
    )
    return {row.pk for row in named if (row.owner_id, row.registry) not in existing}


def forget(job_id: int | None = None) -> None:
    """Forget one job (released), or all (tests)."""
    if job_id is None:
        _settled.clear()
        return
    for its in _settled.values():
        its.pop(job_id, None)
