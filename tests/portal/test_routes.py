"""Every route tried with every persona: anonymous is refused, owners are scoped."""

from __future__ import annotations

import pytest
from django.test import Client
from rest_framework.test import APIClient

from portal.datacenters.models import Datacenter

API_ROUTES = [
    ("get", "/api/v1/datacenters"),
    ("get", "/api/v1/quota"),
    ("get", "/api/v1/registry"),
    ("post", "/api/v1/registry"),
    ("get", "/api/v1/registry/harbor"),
    ("delete", "/api/v1/registry/harbor"),
    ("delete", "/api/v1/auth/token"),
    ("get", "/api/v1/quota/local/alice"),
    ("put", "/api/v1/quota/local/alice"),
]


@pytest.mark.parametrize(("method", "path"), API_ROUTES)
def test_anonymous_gets_401_on_every_api_route(
    anon_api: APIClient, local_dc: Datacenter, method: str, path: str
) -> None:
    response = getattr(anon_api, method)(path, {}, format="json")
    assert response.status_code == 401
    assert response.json()["code"] == "not_authenticated"
    assert response["WWW-Authenticate"] == "Token"


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
    assert bad.status_code == 404
