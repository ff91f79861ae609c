"""Teams as Kueue cohorts on an `admission: kueue` datacenter (the real control plane running Kueue; kwok plays the
kubelet): a team borrows what another team leaves idle and gives it back by preemption when that team's job waits
within its quota; users of one cohort get admitted by their fair-sharing weights."""

from __future__ import annotations

import functools
import time
from collections.abc import Iterator
from decimal import Decimal
from typing import Any

import pytest
from django.contrib.auth.models import Group, User
from kubernetes import client as k8s
from kubernetes.client.exceptions import ApiException

from datacenters.models import Datacenter, Quota, TeamQuota
from jobs.engines.kubernetes import kueue, names
from jobs.follow.reconcile import reconcile_datacenter
from jobs.models import Job, JobState, Reason
from portal.celery import app as celery_app
from tests.k8s.engine_helpers import DELAY, FATE, drive, job_in, kill, new_job, start

pytestmark = [pytest.mark.django_db, pytest.mark.kueue]

KUEUE = ("kueue.x-k8s.io", "v1beta2")
HANG = {FATE: "hang"}
EIGHT_CORES = {"parallelism": 2, "pservers": 2, "cpu": "2", "memory": "1Gi", "pscpu": "2", "psmemory": "1Gi"}


def in_team(dc: Datacenter, user: User, team: str, cpu: str, may_borrow: bool = True) -> None:
    """`user` alone in `team`, guaranteed `cpu` cores in dc; their own quota 8 cores (a whole job of EIGHT_CORES)."""
    group, _ = Group.objects.get_or_create(name=team)
    group.user_set.add(user)
    TeamQuota.objects.create(group=group, datacenter=dc, cpu=cpu, memory="64Gi", may_borrow=may_borrow)
    Quota.objects.create(user=user, datacenter=dc, cpu="8", memory="32Gi")


def eight_cores(dc: Datacenter, user: User, name: str) -> Job:
    return start(new_job(dc, user, {"jobname": name, **EIGHT_CORES}, trainer_annotations={FATE: "hang", DELAY: "3s"},
                         pserver_annotations=HANG))  # fmt: skip


def admitted(job: Job) -> Job | None:
    found = job_in(job, JobState.RUNNING)
    return found if found and found.pservers_running == 2 and found.trainers_running == 2 else None


def test_a_team_borrows_another_teams_idle_quota_and_gives_it_back_when_that_team_needs_it(
    kueue_dc: Datacenter, alice: User, bob: User, kueue_api: k8s.ApiClient
) -> None:
    in_team(kueue_dc, alice, "team-a", "4")
    in_team(kueue_dc, bob, "team-b", "8")
    borrower = eight_cores(kueue_dc, alice, "borrower")  # twice team A's quota: runs on team B's idle cores
    drive(kueue_dc, lambda: admitted(borrower), "team A's job running on borrowed quota")
    custom = k8s.CustomObjectsApi(kueue_api)
    cohort = custom.get_cluster_custom_object(*KUEUE, "cohorts", kueue.team_cohort_name(kueue_dc.name, "team-a"))
    assert cohort["spec"]["parentName"] == kueue.cohort_name(kueue_dc.name)
    queue = custom.get_cluster_custom_object(
        *KUEUE, "clusterqueues", names.namespace_name(kueue_dc.namespace_prefix, "alice")
    )
    assert queue["spec"]["cohortName"] == cohort["metadata"]["name"]

    owner = eight_cores(kueue_dc, bob, "owner")  # within team B's quota: Kueue takes its cores back
    borrower = drive(kueue_dc, lambda: job_in(borrower, JobState.QUEUED), "the borrowing job preempted by Kueue")
    print("reclaimed:", borrower.reason, borrower.message)
    assert borrower.reason == Reason.PREEMPTED and "preempted by Kueue" in borrower.message
    drive(kueue_dc, lambda: admitted(owner), "team B's job running on its own quota")
    for job in (owner, borrower):
        kill(job)


def test_a_team_that_may_not_borrow_waits_within_its_quota(kueue_dc: Datacenter, alice: User, bob: User) -> None:
    in_team(kueue_dc, alice, "team-a", "4", may_borrow=False)
    in_team(kueue_dc, bob, "team-b", "8")
    waiting = eight_cores(kueue_dc, alice, "waiting")
    waiting = drive(kueue_dc, lambda: waiting if job_in(waiting, JobState.PENDING) and "insufficient" in waiting.message
                    else None, "Kueue's reason for the job")  # fmt: skip
    print("waiting:", waiting.message)
    assert waiting.reason == Reason.QUOTA_EXHAUSTED and "insufficient quota" in waiting.message
    kill(waiting)


@pytest.fixture
def eager() -> Iterator[None]:
    """Tasks run in this process: the signal -> task -> engine path runs whole."""
    before = celery_app.conf.task_always_eager, celery_app.conf.task_eager_propagates
    celery_app.conf.task_always_eager = celery_app.conf.task_eager_propagates = True
    yield
    celery_app.conf.task_always_eager, celery_app.conf.task_eager_propagates = before


def nominal_cpu(body: dict[str, Any]) -> str:
    groups = body["spec"]["resourceGroups"]
    resources = [r for group in groups for flavor in group["flavors"] for r in flavor["resources"]]
    return str(next(r["nominalQuota"] for r in resources if r["name"] == "cpu"))


def test_an_operators_change_to_a_team_reaches_its_cohort_and_its_members_queue(
    kueue_dc: Datacenter, alice: User, kueue_api: k8s.ApiClient, eager: None,
    django_capture_on_commit_callbacks: Any,
) -> None:  # fmt: skip
    in_team(kueue_dc, alice, "team-a", "4")
    job = eight_cores(kueue_dc, alice, "job")  # its start makes alice's queue and the team's cohort
    custom = k8s.CustomObjectsApi(kueue_api)
    cohort_name = kueue.team_cohort_name(kueue_dc.name, "team-a")
    queue_name = names.namespace_name(kueue_dc.namespace_prefix, "alice")
    team = TeamQuota.objects.get(datacenter=kueue_dc)

    team.cpu, team.weight = "6", Decimal(2)
    with django_capture_on_commit_callbacks(execute=True):
        team.save()
    cohort = custom.get_cluster_custom_object(*KUEUE, "cohorts", cohort_name)
    assert (nominal_cpu(cohort), cohort["spec"]["fairSharing"]["weight"]) == ("6", "2")

    with django_capture_on_commit_callbacks(execute=True):
        team.delete()
    with pytest.raises(ApiException) as gone:
        custom.get_cluster_custom_object(*KUEUE, "cohorts", cohort_name)
    assert gone.value.status == 404
    queue = custom.get_cluster_custom_object(*KUEUE, "clusterqueues", queue_name)
    assert queue["spec"]["cohortName"] == kueue.cohort_name(kueue_dc.name)  # no team: her own quota, nominal
    assert nominal_cpu(queue) == "8"
    kill(job)


FOUR_CORES = {"parallelism": 2, "pservers": 2, "cpu": "1", "memory": "1Gi", "pscpu": "1", "psmemory": "1Gi"}


def test_two_members_of_a_team_share_its_quota_by_their_weights(kueue_dc: Datacenter, alice: User, bob: User) -> None:
    """Team quota 16 cores, jobs of 4: alice (weight 3) fills it first, then bob's burst arrives. Kueue's fair
    sharing (dominant share / weight) gives bob one job's room back, preempting one of alice's: 3 to 1 (equal
    weights would end 2 to 2)."""
    in_team(kueue_dc, alice, "team", "16")
    group = Group.objects.get(name="team")
    group.user_set.add(bob)
    Quota.objects.filter(user=alice).update(cpu="16", weight=3)
    Quota.objects.create(user=bob, datacenter=kueue_dc, cpu="16", memory="32Gi")
    start_job = functools.partial(new_job, trainer_annotations=HANG, pserver_annotations=HANG)
    alices = [start(start_job(kueue_dc, alice, {"jobname": f"a{i}", **FOUR_CORES})) for i in range(4)]
    drive(kueue_dc, lambda: all(admitted(job) for job in alices), "alice's four jobs filling the team's quota")
    bobs = [start(start_job(kueue_dc, bob, {"jobname": f"b{i}", **FOUR_CORES})) for i in range(4)]

    def settled() -> tuple[int, int] | None:
        running = [sum(bool(admitted(job)) for job in jobs) for jobs in (alices, bobs)]
        queued = sum(bool(job_in(job, JobState.QUEUED)) for job in alices)
        return (running[0], running[1]) if sum(running) == 4 and queued >= 1 else None

    assert drive(kueue_dc, settled, "bob's share given back by preemption") == (3, 1)
    # And it stays so (equal weights would go on to preempt a second job of alice's): Kueue's cycles are
    # sub-second, so 10 s of reconciling would see a second preemption.
    end = time.monotonic() + 10
    while time.monotonic() < end:
        assert settled() == (3, 1)
        reconcile_datacenter(kueue_dc)
    for job in alices + bobs:
        kill(job)
