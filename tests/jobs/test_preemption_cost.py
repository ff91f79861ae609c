"""What preempting each running job costs, as Kueue is told it (jobs.scheduling.preemption_cost): the victim
strategy's boost, kept between the priority classes, and the Workloads whose boost is written. The same choice on
the real Kueue: tests/k8s/test_kueue_priorities.py."""

from __future__ import annotations

from typing import Any

import pytest

from jobs.engines.kubernetes import kueue, names
from jobs.scheduling.preemption_cost import MAX_RANK, room
from jobs.scheduling.shapes import Amount, Running
from jobs.scheduling.strategies.victims import SHIELD, LeastLoss, Never, loss_rank

NOW = 2_000_000_000.0
MINUTE = 60.0


def running(started_ago: float, saved_ago: float | None = None, preemptible: bool = True) -> Running:
    saved = None if saved_ago is None else NOW - saved_ago
    return Running(1, 0, NOW - started_ago, Amount(), preemptible, saved=saved)


@pytest.mark.parametrize(
    ("seconds", "rank"), [(0, 0), (59, 0), (60, 1), (179, 1), (180, 2), (7 * 60, 3), (61 * 60, 5), (-5, 0)]
)
def test_lost_work_is_ranked_by_its_doublings(seconds: float, rank: int) -> None:
    assert loss_rank(seconds) == rank


def test_the_job_that_saved_last_gets_the_lowest_boost_and_classes_never_swap() -> None:
    strategy = LeastLoss()
    saved_now = strategy.boost(running(3600, saved_ago=1), NOW, room=99)
    never_saved = strategy.boost(running(3600), NOW, room=99)
    assert (saved_now, never_saved) == (0, 5)  # Kueue stops the lower effective priority first
    # The boost stays below the gap between two classes: a low job (0) never passes a normal one (100).
    assert strategy.boost(running(10**9), NOW, room=99) == 23 and strategy.boost(running(10**9), NOW, room=3) == 3
    assert room([0, 100, 1000]) == MAX_RANK and room([0, 4, 1000]) == 3 and room([5, 6]) == 0 and room([]) == MAX_RANK


def test_a_job_that_may_not_be_stopped_is_shielded() -> None:
    assert LeastLoss().boost(running(3600, preemptible=False), NOW, room=20) == SHIELD  # -no-preempt
    young = LeastLoss(min_runtime=600)
    assert young.boost(running(599), NOW, room=20) == SHIELD
    assert young.boost(running(601), NOW, room=20) == 3
    assert Never().boost(running(3600), NOW, room=20) == SHIELD


def workload(jobset_uid: str, admitted: bool = True, boost: str | None = None, **extra: Any) -> dict[str, Any]:
    conditions = [{"type": "Admitted", "status": "True" if admitted else "False"}]
    meta: dict[str, Any] = {"name": f"jobset-{jobset_uid}", "namespace": "ns", "ownerReferences": [
        {"kind": "JobSet", "uid": jobset_uid}]}  # fmt: skip
    if boost is not None:
        meta["annotations"] = {kueue.BOOST: boost}
    return {"metadata": {**meta, **extra}, "status": {"conditions": conditions}}


def jobset(job_uid: str) -> dict[str, Any]:
    return {"metadata": {"uid": f"js-{job_uid}", "labels": {names.JOB_LABEL: job_uid}}}


def test_only_admitted_workloads_whose_boost_changed_are_written() -> None:
    jobsets = [jobset(uid) for uid in ("a", "b", "c", "d", "e", "f")]
    workloads = [
        workload("js-a"),  # no annotation: 0
        workload("js-b", boost="3"),
        workload("js-c", admitted=False),  # waiting in Kueue's queue: a boost would reorder it
        workload("js-d", boost="2"),
        workload("js-e", boost="x"),  # not a number: written again
        workload("js-f", deletionTimestamp="2026-11-29T00:00:00Z"),
    ]
    costs = {"a": 0, "b": 4, "c": 5, "d": 2, "e": 1, "f": 7, "gone": 3}
    assert kueue.boost_writes(costs, jobsets, workloads) == [
        ("ns", "jobset-js-b", "4"), ("ns", "jobset-js-e", "1")
    ]  # fmt: skip
