"""A NUL byte in a query parameter is a 400 before any view (PostgreSQL's text refuses it: it was a 500)."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from django.test import Client
from rest_framework.test import APIClient

from datacenters.models import Datacenter

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize("query", ["datacenter=%00", "datacenter=loc%00al", "x%00=1", "datacenter=local&owner=%00"])
def test_an_api_query_with_a_nul_byte_is_a_400_in_the_error_shape(
    alice_api: APIClient, local_dc: Datacenter, query: str
) -> None:
    for path in ("/api/v1/queue", "/api/v1/quota", "/api/v1/jobs", "/api/v1/usage"):
        answer = alice_api.get(f"{path}?{query}")
        assert answer.status_code == 400, (path, query, answer.content[:300])
        error = answer.json()["errors"][0]
        assert error["code"] == "invalid" and "NUL bytes" in error["message"], answer.json()


def test_a_page_with_a_nul_byte_in_its_query_is_a_400_page(alice: User, local_dc: Datacenter) -> None:
    client = Client()
    client.force_login(alice)
    answer = client.get("/queue/?datacenter=%00")
    assert answer.status_code == 400 and answer["Content-Type"].startswith("text/html")


@pytest.mark.parametrize("path", ["/api/v1/datacenters/loc%00al", "/api/v1/jobs/a%00b", "/api/v1/jobs/a%00/hold"])
def test_a_path_with_a_nul_byte_is_a_400(carol_api: APIClient, local_dc: Datacenter, path: str) -> None:
    answer = carol_api.get(path) if "hold" not in path else carol_api.post(path)
    assert answer.status_code == 400, answer.content[:300]
    assert answer.json()["errors"][0]["field"] == "path" and "NUL bytes" in answer.json()["detail"]


def test_a_query_without_one_passes(alice_api: APIClient, local_dc: Datacenter) -> None:
    assert alice_api.get("/api/v1/quota?datacenter=local").status_code == 200
