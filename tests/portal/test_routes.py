"""Pages need a login; the version, schema and docs are public; lists are paginated."""

from __future__ import annotations

import pytest
from django.test import Client
from rest_framework.test import APIClient

# Every API operation with every persona: tests/adversarial/test_personas.py, from the generated schema.


@pytest.mark.parametrize("path", ["/", "/profile/", "/admin/"])
def test_anonymous_pages_redirect_to_login(db: None, path: str) -> None:
    response = Client().get(path)
    assert response.status_code == 302
    assert "login" in response["Location"]


def test_version_is_public(anon_api: APIClient) -> None:
    body = anon_api.get("/api/v1/version").json()
    assert body["api"] == "v1" and body["version"]


def test_openapi_schema_and_docs_are_served(anon_api: APIClient, db: None) -> None:
    schema = anon_api.get("/api/schema/", HTTP_ACCEPT="application/vnd.oai.openapi+json")
    assert schema.status_code == 200
    text = schema.content.decode()
    for path in ("/api/v1/registry", "/api/v1/quota", "/api/v1/auth/token", "/api/v1/datacenters"):
        assert path in text
    docs = anon_api.get("/api/docs/")
    assert docs.status_code == 200 and b"swagger" in docs.content.lower()


def test_lists_are_paginated(alice_api: APIClient) -> None:
    for index in range(3):
        alice_api.post(
            "/api/v1/registry",
            {"name": f"r{index}", "server": "h.example", "username": "u", "password": "p"},
            format="json",
        )
    page = alice_api.get("/api/v1/registry?page_size=2").json()
    assert page["count"] == 3 and len(page["results"]) == 2 and page["next"]
    bad = alice_api.get("/api/v1/registry?page=9")
    assert bad.status_code in (400, 404) and "page" in bad.json()["detail"].lower()
