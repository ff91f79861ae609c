"""jobs.follow.settled: which running jobs a full reconcile cycle passes over, and each rule that makes one due."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from django.contrib.auth.models import User

from jobs.engines.base import Observation, WorkerStatus
from jobs.follow import settled, stalls
from jobs.models import JobState, Role, WorkerState
from registry.models import RegistrySecret

DC = 1
WRITTEN = ("", 0, 2, 0, 0, 0, 1, 0)  # reason, then the counts in reconcile.COUNT_FIELDS order
WAITING = WorkerStatus(Role.PSERVER, 1, WorkerState.PENDING)
RUNNING = Observation(
    JobState.RUNNING,
    workers=[
        WorkerStatus(Role.TRAINER, 0, WorkerState.RUNNING),
        WorkerStatus(Role.TRAINER, 1, WorkerState.SUCCEEDED),
        WorkerStatus(Role.PSERVER, 0, WorkerState.RUNNING),
    ],
)


@pytest.fixture(autouse=True)
def _nothing_settled() -> Iterator[None]:
    settled.forget()
    stalls.forget(7)
    yield
    settled.forget()
    stalls.forget(7)


def row(pk: int = 7, state: str = JobState.RUNNING, **changes: object) -> settled.Row:
    values: dict[str, object] = {
        "pk": pk, "uid": f"job-{pk}", "state": state, "owner_id": 1, "stall_timeout": 0,
        "registry": "", "registry_revoked": False, "written": WRITTEN,
    }  # fmt: skip
    values.update(changes)
    return settled.Row(**values)  # type: ignore[arg-type]


def settle(pk: int = 7, version: object = (1, 3), seen: Observation = RUNNING, state: str = JobState.RUNNING) -> None:
    settled.note(DC, pk, version, state, seen, WRITTEN)


def test_a_running_job_nothing_happened_to_is_passed_over() -> None:
    settle()
    assert settled.due(DC, [row()], {"job-7": (1, 3)}) == []


def test_a_job_never_looked_at_is_looked_at() -> None:
    assert settled.due(DC, [row()], {"job-7": (1, 3)}) == [7]


def test_a_change_of_its_objects_makes_it_due() -> None:
    settle()
    assert settled.due(DC, [row()], {"job-7": (1, 4)}) == [7]
    assert settled.due(DC, [row()], {"job-7": (2, 3)}) == [7]  # another mirror (a restarted watch) counts afresh


def test_a_row_changed_since_the_look_makes_it_due() -> None:
    settle()
    assert settled.due(DC, [row(written=("", 0, 1, 0, 0, 0, 1, 0))], {"job-7": (1, 3)}) == [7]
    assert settled.due(DC, [row(written=("Stalled", *WRITTEN[1:]))], {"job-7": (1, 3)}) == [7]


def test_a_job_no_longer_running_is_due() -> None:
    settle()
    assert settled.due(DC, [row(state=JobState.PENDING)], {"job-7": (1, 3)}) == [7]


@pytest.mark.parametrize(
    ("state", "seen"),
    [
        (JobState.PENDING, RUNNING),  # it started in this very look: the next one settles it
        (JobState.RUNNING, Observation(JobState.PENDING)),
        (JobState.RUNNING, Observation(JobState.FAILED, workers=RUNNING.workers)),
        (
            JobState.RUNNING,  # a worker waits for its pod again (a restart): time rules may apply to it
            Observation(JobState.RUNNING, workers=[*RUNNING.workers, WAITING]),
        ),
    ],
)
def test_only_a_running_look_with_no_waiting_worker_settles(state: str, seen: Observation) -> None:
    settle(seen=seen, state=state)
    assert settled.due(DC, [row()], {"job-7": (1, 3)}) == [7]


def test_without_versions_nothing_settles() -> None:
    settle(version=None)
    assert settled.due(DC, [row()], {}) == [7]


def test_a_settled_job_is_resynced_within_the_period(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(settled, "RESYNC_SECONDS", 0.0)
    settle()
    assert settled.due(DC, [row()], {"job-7": (1, 3)}) == [7]


def test_resyncs_spread_over_half_a_period() -> None:
    spreads = [settled._spread(pk) for pk in range(1, 1001)]
    assert all(0.5 <= s < 1.0 for s in spreads)
    tenths = {int((s - 0.5) * 20) for s in spreads}
    assert tenths == set(range(10))  # every tenth of the half period gets some: no cycle takes them all


def test_a_due_stall_check_makes_it_due() -> None:
    settle()
    assert settled.due(DC, [row(stall_timeout=600)], {"job-7": (1, 3)}) == [7]  # never checked: due now
    stalls._checked.mark(7)  # checked just now: next due in 60 s
    assert settled.due(DC, [row(stall_timeout=600)], {"job-7": (1, 3)}) == []
    stalls._checked.mark(7, at=stalls._checked.last(7) - 61)
    assert settled.due(DC, [row(stall_timeout=600)], {"job-7": (1, 3)}) == [7]


@pytest.mark.django_db
def test_a_deleted_registry_secret_not_yet_blanked_makes_it_due(alice: User) -> None:
    settle()
    named = row(owner_id=alice.pk, registry="hub")
    assert settled.due(DC, [named], {"job-7": (1, 3)}) == [7]  # the user deleted "hub": blank the namespace's copy
    assert settled.due(DC, [row(owner_id=alice.pk, registry="hub", registry_revoked=True)], {"job-7": (1, 3)}) == []
    RegistrySecret.objects.create(owner=alice, name="hub", server="reg.example", username="a", password="p")
    assert settled.due(DC, [named], {"job-7": (1, 3)}) == []


def test_jobs_no_longer_started_are_forgotten() -> None:
    settle(pk=7)
    settle(pk=8)
    assert settled.due(DC, [row(pk=8)], {"job-8": (1, 3)}) == []
    assert set(settled._settled[DC]) == {8}  # 7 went from the started rows: its entry with it


def test_another_datacenters_cycle_keeps_this_ones_jobs() -> None:
    settle(pk=7)
    assert settled.due(2, [row(pk=9)], {"job-9": (1, 3)}) == [9]
    assert settled.due(DC, [row(pk=7)], {"job-7": (1, 3)}) == []


def test_a_released_job_is_forgotten() -> None:
    settle(pk=7)
    settled.forget(7)
    assert settled.due(DC, [row(pk=7)], {"job-7": (1, 3)}) == [7]


def test_the_choices_are_counted() -> None:
    settle(pk=7)
    settled.CHOICES.clear()
    settled.due(DC, [row(pk=7), row(pk=8)], {"job-7": (1, 3), "job-8": (1, 3)})
    assert settled.CHOICES == {"looked at": 1, "passed over": 1}
