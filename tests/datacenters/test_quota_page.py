"""The quota page: the user's limits with separators and binary units, their team's guarantee and the capacity."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Group, User
from django.test import Client

from datacenters.models import Datacenter, TeamQuota
from portal.templatetags.numbers import binary_size, thousands

pytestmark = pytest.mark.django_db


def page(user: User) -> str:
    client = Client()
    client.force_login(user)
    return client.get("/quota/").content.decode()


def test_the_page_shows_the_team_guarantee_and_the_capacity_that_also_bound(
    alice: User, bob: User, local_dc: Datacenter
) -> None:
    Datacenter.objects.filter(pk=local_dc.pk).update(capacity_cpu="64", capacity_memory="256Gi", capacity_gpu=8)
    vision = Group.objects.create(name="vision")
    alice.groups.add(vision)
    TeamQuota.objects.create(group=vision, datacenter=local_dc, cpu="16", memory="64Gi", gpu=2, may_borrow=False)
    mine = page(alice)
    assert "Team vision (guaranteed)" in mine and "<td>64Gi</td>" in mine
    assert 'data-testid="capacity-cpu">64<' in mine and "256.0 GiB" in mine
    assert 'data-testid="files-limit">1,000,000<' in mine  # the default files limit, grouped
    theirs = page(bob)
    assert 'data-testid="team-head"' not in theirs and "vision" not in theirs  # bob is in no team


@pytest.mark.parametrize(("value", "shown"), [(1_000_000, "1,000,000"), ("2.50", "2.5"), (0, "0"), (None, ""),
                                              ("n/a", "n/a")])  # fmt: skip
def test_thousands(value: object, shown: str) -> None:
    assert thousands(value) == shown  # type: ignore[arg-type]


@pytest.mark.parametrize(("value", "shown"), [(900, "900 B"), (536_870_912, "512.0 MiB"), (3 << 30, "3.0 GiB")])
def test_binary_size(value: int, shown: str) -> None:
    assert binary_size(value) == shown
