"""Kueue's objects for teams (jobs/engines/kubernetes/kueue.py, pure): a Cohort per team under the datacenter's,
members' queues drawing on it up to their own quota, and the hooks that carry an operator's change to the engine."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest
from django.contrib.auth.models import Group, User

from datacenters.models import Datacenter, Quota, TeamQuota
from datacenters.quota import Amounts
from jobs.engines.kubernetes import kueue

LIMITS = Amounts(cpu=Decimal("8"), memory=32 * 2**30, gpu=2)


def resources(body: dict[str, Any]) -> dict[str, dict[str, str]]:
    """Every resource's quota, across the resource groups (cpu and memory on one flavor, GPUs on another)."""
    result = {}
    for group in body["spec"]["resourceGroups"]:
        (flavor,) = group["flavors"]
        result.update({r.pop("name"): r for r in flavor["resources"]})
    return result


def test_a_team_cohort_holds_the_teams_quota_under_the_datacenter_cohort_with_its_weight() -> None:
    body = kueue.team_cohort("dc", "ML Team", Amounts(cpu=Decimal("4.5"), memory=2**30, gpu=1), True, Decimal("3"))
    assert body["kind"] == "Cohort"
    assert body["metadata"]["name"].startswith("paddlecloud-dc-ml-team-")  # a group name made a DNS label
    assert body["spec"]["parentName"] == "paddlecloud-dc"
    assert body["spec"]["fairSharing"] == {"weight": "3"}
    assert resources(body) == {
        "cpu": {"nominalQuota": "4.5"}, "memory": {"nominalQuota": "1Gi"}, "nvidia.com/gpu": {"nominalQuota": "1"},
    }  # fmt: skip


def test_a_team_that_may_not_borrow_has_a_borrowing_limit_of_zero() -> None:
    body = kueue.team_cohort("dc", "a", LIMITS, False, Decimal(1))
    assert {name: r["borrowingLimit"] for name, r in resources(body).items()} == {
        "cpu": "0", "memory": "0", "nvidia.com/gpu": "0",
    }  # fmt: skip


def test_a_members_queue_draws_up_to_their_own_quota_from_the_teams_cohort() -> None:
    body = kueue.cluster_queue("paddle-alice", "dc", "alice", LIMITS, Decimal(1), team="a")
    assert body["spec"]["cohortName"] == kueue.team_cohort_name("dc", "a") == "paddlecloud-dc-a"
    assert resources(body) == {
        "cpu": {"nominalQuota": "0", "borrowingLimit": "8"},
        "memory": {"nominalQuota": "0", "borrowingLimit": "32Gi"},
        "nvidia.com/gpu": {"nominalQuota": "0", "borrowingLimit": "2"},
    }


def test_a_user_without_a_team_has_their_own_quota_in_the_datacenter_cohort_and_borrows_nothing() -> None:
    body = kueue.cluster_queue("paddle-bob", "dc", "bob", LIMITS)
    assert body["spec"]["cohortName"] == "paddlecloud-dc"
    assert resources(body)["cpu"] == {"nominalQuota": "8", "borrowingLimit": "0"}


@pytest.fixture
def dc(db: None) -> Datacenter:
    return Datacenter.objects.create(name="dc")


def test_quota_team_and_membership_changes_each_reach_the_engine_after_commit(
    dc: Datacenter, alice: User, django_capture_on_commit_callbacks: Any
) -> None:
    group = Group.objects.create(name="a")
    with django_capture_on_commit_callbacks() as quota_saved:
        Quota.objects.create(user=alice, datacenter=dc, cpu="2")
    with django_capture_on_commit_callbacks() as team_saved:
        TeamQuota.objects.create(group=group, datacenter=dc, cpu="4")
    with django_capture_on_commit_callbacks() as joined:
        alice.groups.add(group)
    with django_capture_on_commit_callbacks() as unrelated:
        alice.groups.add(Group.objects.create(name="not-a-team"))
    assert (len(quota_saved), len(team_saved), len(joined), len(unrelated)) == (1, 1, 1, 0)
