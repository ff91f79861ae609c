"""Kueue's side of the victim choice: each running job's priority boost, so Kueue stops the job that loses least.

Where the cluster's own admission chooses victims (an `admission: kueue` datacenter; the engine's capability
PreemptionCosts), the portal cannot pick them: it tells Kueue what a stop would cost instead. Kueue stops the
lowest effective priority (priority + the Workload's `kueue.x-k8s.io/priority-boost`) first, then the most
recently admitted; the datacenter's victim strategy turns each running job into a boost (VictimChoice.boost):
the rank of the work it would lose since its newest checkpoint (or its start), kept below the gap between any
two priority classes so classes never swap, or a shield for a job that may not be stopped (`-no-preempt`, its
minimum runtime, the `never` strategy). Written every INTERVAL seconds of the reconcile at most, and only where a
job's boost changed: a rank moves when the lost work doubles, so a job's Workload is patched a few times between
two checkpoints, not every cycle.
"""

from __future__ import annotations

import itertools
import logging
import time
from collections.abc import Iterable

from datacenters.models import Admission, Datacenter
from jobs.engines import engine_for
from jobs.engines.base import EngineError, TransientEngineError
from jobs.engines.capabilities import PreemptionCosts
from jobs.models import Job, JobState, PriorityClass
from jobs.scheduling import cycle, shapes
from jobs.scheduling.strategies.victims import VictimChoice

log = logging.getLogger(__name__)

INTERVAL = 10.0  # seconds: what the boost follows (checkpoints, seen every 10 s; ranks in minutes) moves no faster
MAX_RANK = 20  # a boost's most where classes are far apart (a rank of 20 is two years of lost work)
QUIET_SECONDS = 600.0  # a refusal (e.g. RBAC) is logged this often per datacenter, not every INTERVAL
_last: dict[int, float] = {}  # datacenter id -> when its boosts were last written (monotonic)
_told: dict[int, float] = {}


def room(priorities: Iterable[int]) -> int:
    """The largest boost that keeps every two of these priorities in their order: one less than their smallest
    gap, at most MAX_RANK (0 where two are 1 apart: then the boost only shields)."""
    values = sorted(set(priorities))
    gaps = [b - a for a, b in itertools.pairwise(values)]
    return max(0, min([MAX_RANK, *(gap - 1 for gap in gaps)]))


def costs(datacenter: Datacenter, victims: VictimChoice, now: float) -> dict[str, int]:
    """Job uid -> boost for each pending or running job of the datacenter (the engine writes those Kueue admitted:
    a pending one may be admitted, its pods starting, and is already shielded where it may not be stopped)."""
    rows = list(
        Job.objects.filter(datacenter=datacenter, state__in=[JobState.PENDING, JobState.RUNNING], released=False)
        .values("uid", "priority", "started_at", "preemptible", "checkpointed_at")
    )
    classes = PriorityClass.objects.values_list("value", flat=True)
    # Both: a running job keeps the value its class had at submit, which an operator may have changed since.
    between = room([*classes, *(row["priority"] for row in rows)])
    result = {}
    for row in rows:
        # Its start, not the gate's admission: Kueue may hold a job long after the portal let it through; one not
        # started yet has lost nothing so far.
        began = row["started_at"].timestamp() if row["started_at"] else now
        saved = row["checkpointed_at"].timestamp() if row["checkpointed_at"] else None
        job = shapes.Running(0, row["priority"], began, shapes.Amount(), row["preemptible"], saved=saved)
        result[row["uid"]] = victims.boost(job, now, between)
    return result


def update(datacenter: Datacenter, force: bool = False) -> int | None:
    """Write the datacenter's boosts if due (every INTERVAL s; `force`: now); how many Workloads were written, None
    where it was not due or the datacenter's admission does not choose victims. Never raises: a refusal is logged."""
    if datacenter.admission != Admission.KUEUE:
        return None
    engine, clock = engine_for(datacenter), time.monotonic()
    due = force or clock - _last.get(datacenter.pk, -INTERVAL) >= INTERVAL
    if not due or not isinstance(engine, PreemptionCosts):
        return None
    _last[datacenter.pk] = clock
    try:
        return engine.set_preemption_costs(costs(datacenter, cycle.strategies_of(datacenter).victims, time.time()))
    except (EngineError, TransientEngineError) as exc:
        if clock - _told.get(datacenter.pk, -QUIET_SECONDS) >= QUIET_SECONDS:
            _told[datacenter.pk] = clock
            log.warning("datacenter %s: cannot tell Kueue what preempting its jobs costs: %s", datacenter.name, exc)
        return None
