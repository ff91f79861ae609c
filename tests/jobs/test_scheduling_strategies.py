"""Scheduling strategies (jobs/scheduling/strategies/): each order, backfill and victim rule on the pure policy, the
settings each takes and refuses, and a datacenter's choice read by the cycle and checked in the admin."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.utils import timezone

from datacenters.models import Datacenter
from jobs.models import Job, SchedulingPolicy
from jobs.scheduling import cycle
from jobs.scheduling.policy import plan, victims
from jobs.scheduling.shapes import Amount, Bound, Candidate, Running, World
from jobs.scheduling.strategies import DEFAULT, StrategyError, build


def world(cpu: float, **kw: object) -> World:
    return World(capacity=Bound(cpu, None, None), scale=Amount(cpu, 1, 1), **kw)  # type: ignore[arg-type]


def test_fifo_admits_the_oldest_whoever_used_more_and_fair_share_the_lighter_user() -> None:
    heavy_old = Candidate(1, owner_id=1, priority=0, created=1.0, request=Amount(1, 0, 0))
    light_new = Candidate(2, owner_id=2, priority=0, created=2.0, request=Amount(1, 0, 0))
    shares = {"past_share": {1: 5.0}}
    assert plan([heavy_old, light_new], world(1.0, **shares)).admit == [2]
    fifo = build("fifo", "reserve", "least-loss")
    assert plan([heavy_old, light_new], world(1.0, **shares), strategies=fifo).admit == [1]


def test_priority_comes_first_in_every_order() -> None:
    low_old = Candidate(1, owner_id=1, priority=0, created=1.0, request=Amount(1, 0, 0))
    high_new = Candidate(2, owner_id=2, priority=10, created=2.0, request=Amount(1, 0, 0))
    for order in ("fair-share", "fifo"):
        assert plan([low_old, high_new], world(1.0), strategies=build(order, "reserve", "least-loss")).admit == [2]


@pytest.mark.parametrize(
    ("backfill", "admitted"),
    [("reserve", [2]), ("conservative", []), ("greedy", [2])],
)
def test_what_a_blocked_job_of_the_same_priority_holds(backfill: str, admitted: list[int]) -> None:
    """2 of 4 cores run; a 4-core job waits; a 1-core job after it starts unless the blocked one holds the room."""
    big = Candidate(1, owner_id=1, priority=0, created=1.0, request=Amount(4, 0, 0))
    small = Candidate(2, owner_id=2, priority=0, created=2.0, request=Amount(1, 0, 0))
    chosen = build("fifo", backfill, "least-loss")
    result = plan([big, small], world(4.0, in_use=Amount(2, 0, 0)), strategies=chosen)
    assert result.admit == admitted
    assert result.waiting[1][0] == "WaitingForCapacity"


@pytest.mark.parametrize(("backfill", "admitted"), [("reserve", []), ("conservative", []), ("greedy", [2])])
def test_what_a_blocked_job_of_higher_priority_holds(backfill: str, admitted: list[int]) -> None:
    big = Candidate(1, owner_id=1, priority=10, created=1.0, request=Amount(4, 0, 0))
    small = Candidate(2, owner_id=2, priority=0, created=2.0, request=Amount(1, 0, 0))
    result = plan([big, small], world(4.0, in_use=Amount(2, 0, 0)), strategies=build("fifo", backfill, "least-loss"))
    assert result.admit == admitted


def test_least_loss_spares_a_job_younger_than_min_runtime_and_never_stops_none() -> None:
    now = 1000.0
    running = [
        Running(1, priority=0, admitted=now - 300, request=Amount(2, 0, 0), preemptible=True),
        Running(2, priority=0, admitted=now - 10, request=Amount(2, 0, 0), preemptible=True),
    ]
    waiting = Candidate(9, owner_id=3, priority=10, created=1.0, request=Amount(2, 0, 0))
    full = world(4.0, in_use=Amount(4, 0, 0))
    assert victims(waiting, running, full, now=now) == [2]  # the newest first: it lost the least
    patient = build("fair-share", "reserve", "least-loss", {"min_runtime": 60})
    assert victims(waiting, running, full, strategies=patient, now=now) == [1]
    assert victims(waiting, running, full, strategies=build("fair-share", "reserve", "never"), now=now) == []


@pytest.mark.parametrize(
    ("names", "settings", "field", "words"),
    [
        (("lottery", "reserve", "least-loss"), {}, "order", "choose one of fair-share, fifo"),
        (("fifo", "eager", "least-loss"), {}, "backfill", "choose one of conservative, greedy, reserve"),
        (("fifo", "reserve", "random"), {}, "victims", "choose one of least-loss, never"),
        (("fifo", "reserve", "least-loss"), {"min_runtime": -1}, "settings", "settings.min_runtime: must be"),
        (("fifo", "reserve", "least-loss"), {"min_runtime": "1h"}, "settings", "settings.min_runtime: must be"),
        (("fifo", "reserve", "least-loss"), {"min_runtim": 5}, "settings", "they take: min_runtime"),
        (("fifo", "reserve", "never"), {"min_runtime": 5}, "settings", "no chosen strategy takes it"),
        (("fifo", "reserve", "never"), [1, 2], "settings", "must be an object"),
    ],
)
def test_a_wrong_name_or_setting_is_refused_naming_the_field(
    names: tuple[str, str, str], settings: object, field: str, words: str
) -> None:
    with pytest.raises(StrategyError) as refused:
        build(*names, settings)  # type: ignore[arg-type]
    assert refused.value.field == field
    assert words in refused.value.message


def test_the_cycle_reads_the_datacenter_s_choice_and_runs_on_the_defaults_without_a_valid_one(
    local_dc: Datacenter, alice: User, bob: User
) -> None:
    assert cycle.strategies_of(local_dc) is DEFAULT
    policy = SchedulingPolicy.objects.create(datacenter=local_dc, order="fifo")
    assert cycle.strategies_of(local_dc) == build("fifo", "reserve", "least-loss")
    # alice used the datacenter a lot (her running job); bob's job came later: fifo puts hers first, fair share his.
    local_dc.capacity_cpu = "2"
    local_dc.save()
    now = timezone.now()
    Job.objects.create(owner=alice, datacenter=local_dc, name="running", uid="running-1", spec={}, cpu_request=1,
                       admitted_at=now)  # fmt: skip
    hers = Job.objects.create(owner=alice, datacenter=local_dc, name="a", uid="a-1", spec={}, cpu_request=1)
    his = Job.objects.create(owner=bob, datacenter=local_dc, name="b", uid="b-1", spec={}, cpu_request=1)
    Job.objects.filter(pk=his.pk).update(created_at=now + timedelta(seconds=1))
    assert cycle.positions(local_dc) == [hers.pk, his.pk]
    policy.order = "fair-share"
    policy.save()
    assert cycle.positions(local_dc) == [his.pk, hers.pk]
    SchedulingPolicy.objects.filter(pk=policy.pk).update(victims="nobody")  # around the admin's checks
    assert cycle.strategies_of(local_dc) is DEFAULT


def test_the_admin_refuses_a_setting_no_chosen_strategy_takes(local_dc: Datacenter) -> None:
    staff = User.objects.create_superuser("operator", password="pw-for-tests-only")
    browser = Client()
    browser.force_login(staff)
    form = {"datacenter": local_dc.pk, "order": "fifo", "backfill": "greedy", "victims": "never"}
    page = browser.post("/admin/jobs/schedulingpolicy/add/", {**form, "settings": '{"min_runtime": 60}'})
    assert page.status_code == 200  # the form again, with the error
    assert "no chosen strategy takes it" in page.content.decode()
    assert not SchedulingPolicy.objects.exists()
    form["victims"] = "least-loss"
    page = browser.post("/admin/jobs/schedulingpolicy/add/", {**form, "settings": '{"min_runtime": 60}'})
    assert page.status_code == 302
    assert cycle.strategies_of(local_dc) == build("fifo", "greedy", "least-loss", {"min_runtime": 60})
