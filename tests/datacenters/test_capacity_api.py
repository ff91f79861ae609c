"""Capacity by API: staff set a datacenter's capacity with PATCH; everyone reads it as the scheduler resolves it."""

from __future__ import annotations

import os

from rest_framework.test import APIClient

from datacenters.models import Datacenter

GI = 1024**3


def test_staff_set_the_capacity_and_the_answer_is_what_the_scheduler_reads(
    local_dc: Datacenter, carol_api: APIClient
) -> None:
    answer = carol_api.patch(
        "/api/v1/datacenters/local", {"capacity": {"cpu": "2", "memory": "8Gi", "gpu": 0}}, format="json"
    )
    assert answer.status_code == 200, answer.json()
    assert answer.json()["capacity"] == {"cpu": 2.0, "memory": 8 * GI, "gpu": 0}
    local_dc.refresh_from_db()
    assert (local_dc.capacity_cpu, local_dc.capacity_memory, local_dc.capacity_gpu) == ("2", "8Gi", 0)


def test_a_field_left_out_is_kept_and_null_gives_it_back_to_the_host(
    local_dc: Datacenter, carol_api: APIClient, alice_api: APIClient
) -> None:
    assert carol_api.patch("/api/v1/datacenters/local", {"capacity": {"cpu": "500m"}}, format="json").status_code == 200
    local_dc.refresh_from_db()
    assert (local_dc.capacity_cpu, local_dc.capacity_memory) == ("500m", "1Ti")
    cleared = carol_api.patch("/api/v1/datacenters/local", {"capacity": {"cpu": None}}, format="json").json()
    host_cores = len(os.sched_getaffinity(0))  # the local engine's default: the cores this host lets it use
    assert cleared["capacity"]["cpu"] == float(host_cores)
    # Users read it too, in the list and one by one.
    listed = alice_api.get("/api/v1/datacenters").json()["results"]
    assert listed[0]["capacity"] == cleared["capacity"] == alice_api.get("/api/v1/datacenters/local").json()["capacity"]


def test_bad_capacities_are_a_400_naming_the_field(local_dc: Datacenter, carol_api: APIClient) -> None:
    for body, field in (
        ({"capacity": {"cpu": "2 cores"}}, "capacity.cpu"),
        ({"capacity": {"cpu": "-1"}}, "capacity.cpu"),
        ({"capacity": {"memory": "8GB"}}, "capacity.memory"),
        ({"capacity": {"memory": "x" * 30}}, "capacity.memory"),
        ({"capacity": {"cpu": "0" * 24 + "1"}}, "capacity.cpu"),  # a valid quantity longer than its column
        ({"capacity": {"gpu": -1}}, "capacity.gpu"),
        ({"capacity": {"gpu": 10**9}}, "capacity.gpu"),
        ({"capacity": {"disk": "1Ti"}}, "capacity.disk"),
        ({"capacity": "2"}, "capacity"),
        ({"capacityy": {}}, "capacityy"),
        ({}, "capacity"),
    ):
        answer = carol_api.patch("/api/v1/datacenters/local", body, format="json")
        assert answer.status_code == 400, (body, answer.json())
        assert field in {e["field"] for e in answer.json()["errors"]}, (body, answer.json())
    local_dc.refresh_from_db()
    assert (local_dc.capacity_cpu, local_dc.capacity_memory, local_dc.capacity_gpu) == ("256", "1Ti", None)


def test_users_may_not_set_it_and_unknown_datacenters_are_not_found(
    local_dc: Datacenter, alice_api: APIClient, carol_api: APIClient
) -> None:
    refused = alice_api.patch("/api/v1/datacenters/local", {"capacity": {"cpu": "1"}}, format="json")
    assert refused.status_code == 403
    assert carol_api.patch("/api/v1/datacenters/nope", {"capacity": {"cpu": "1"}}, format="json").status_code == 404
    private = Datacenter.objects.create(name="private", storage_root="/srv/private", all_users=False)
    assert alice_api.get(f"/api/v1/datacenters/{private.name}").status_code == 404
    local_dc.refresh_from_db()
    assert local_dc.capacity_cpu == "256"
