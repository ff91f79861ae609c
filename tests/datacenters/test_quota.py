"""Quota: datacenter defaults, per-user overrides set by operators, usage from providers."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from django.contrib.auth.models import User
from rest_framework.test import APIClient

from datacenters import quota
from datacenters.models import Datacenter


def test_alice_sees_the_datacenter_defaults(alice_api: APIClient, local_dc: Datacenter) -> None:
    body = alice_api.get("/api/v1/quota").json()
    assert body["results"] == [
        {
            "datacenter": "local",
            "limits": {
                "cpu": 16.0,
                "memory": 64 * 2**30,
                "gpu": 0,
                "jobs": 10,
                "storage": 100 * 2**30,
                "storage_files": 1_000_000,
            },
            "usage": {"cpu": 0.0, "memory": 0, "gpu": 0, "jobs": 0, "storage": 0, "storage_files": 0},
        }
    ]


def test_an_operator_override_changes_only_that_user(
    carol_api: APIClient, alice_api: APIClient, bob_api: APIClient, alice: User, bob: User, local_dc: Datacenter
) -> None:
    response = carol_api.put("/api/v1/quota/local/alice", {"cpu": "500m", "gpu": 2, "memory": "8Gi"}, format="json")
    assert response.status_code == 200, response.json()
    limits = alice_api.get("/api/v1/quota?datacenter=local").json()["results"][0]["limits"]
    assert (limits["cpu"], limits["gpu"], limits["memory"], limits["jobs"]) == (0.5, 2, 8 * 2**30, 10)
    assert bob_api.get("/api/v1/quota").json()["results"][0]["limits"]["gpu"] == 0
    # A blank value returns the field to the datacenter default.
    carol_api.put("/api/v1/quota/local/alice", {"cpu": ""}, format="json")
    assert alice_api.get("/api/v1/quota").json()["results"][0]["limits"]["cpu"] == 16.0


def test_only_operators_set_quotas(alice_api: APIClient, alice: User, local_dc: Datacenter) -> None:
    assert alice_api.put("/api/v1/quota/local/alice", {"gpu": 8}, format="json").status_code == 403
    assert alice_api.get("/api/v1/quota/local/alice").status_code == 403


@pytest.fixture
def fake_usage() -> Iterator[None]:
    def two_jobs(user: object, datacenter: Datacenter) -> quota.Amounts:
        return quota.Amounts(jobs=2, gpu=1)

    quota.register_usage_provider(two_jobs)
    yield
    quota._providers.remove(two_jobs)


def test_usage_is_summed_from_registered_providers(
    alice_api: APIClient, local_dc: Datacenter, fake_usage: None
) -> None:
    usage = alice_api.get("/api/v1/quota").json()["results"][0]["usage"]
    assert (usage["jobs"], usage["gpu"]) == (2, 1)


def test_a_restricted_datacenter_is_visible_only_to_listed_users(
    alice_api: APIClient, bob_api: APIClient, carol_api: APIClient, alice: User, local_dc: Datacenter
) -> None:
    local_dc.all_users = False
    local_dc.save()
    local_dc.allowed_users.add(alice)
    assert [d["name"] for d in alice_api.get("/api/v1/datacenters").json()["results"]] == ["local"]
    assert bob_api.get("/api/v1/datacenters").json()["results"] == []
    assert bob_api.get("/api/v1/quota").json()["results"] == []
    assert [d["name"] for d in carol_api.get("/api/v1/datacenters").json()["results"]] == ["local"]


def test_datacenter_list_never_shows_credentials(alice_api: APIClient, local_dc: Datacenter) -> None:
    local_dc.kubeconfig = "apiVersion: v1\nusers: [{name: x, user: {token: supersecret}}]"
    local_dc.save()
    text = alice_api.get("/api/v1/datacenters").content.decode()
    assert "supersecret" not in text and "kubeconfig" not in text and "storage_root" not in text
