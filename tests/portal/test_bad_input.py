"""Bad input: each case is a clear 4xx that names the field and the rule, and creates nothing."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth.models import User
from rest_framework.test import APIClient

from datacenters.models import Datacenter, Quota
from registry.models import RegistrySecret

GOOD = {"name": "harbor", "server": "harbor.example.com", "username": "robot", "password": "pw"}

REGISTRY_CASES: list[tuple[str, dict[str, Any], str, str]] = [
    ("underscore in name", {**GOOD, "name": "my_registry"}, "name", "found '_'"),
    ("uppercase name", {**GOOD, "name": "Harbor"}, "name", "must be lowercase"),
    ("64-char name", {**GOOD, "name": "a" * 64}, "name", "at most 63"),
    ("name ends with dash", {**GOOD, "name": "harbor-"}, "name", "start and end with a letter or digit"),
    ("empty name", {**GOOD, "name": ""}, "name", "may not be blank"),
    ("empty server", {**GOOD, "server": ""}, "server", "may not be blank"),
    ("malformed server", {**GOOD, "server": "http://bad host!"}, "server", "not a registry address"),
    ("server with bad port", {**GOOD, "server": "harbor.example.com:99999"}, "server", "not a registry address"),
    ("missing password", {k: v for k, v in GOOD.items() if k != "password"}, "password", "required"),
    ("missing username", {k: v for k, v in GOOD.items() if k != "username"}, "username", "required"),
    ("typo in a field name", {**GOOD, "pasword": "x"}, "pasword", "unknown field"),
    ("dot in name", {**GOOD, "name": "my.registry"}, "name", "found '.'"),
    ("name is an object", {**GOOD, "name": {"a": 1}}, "name", "not a valid string"),
]


@pytest.mark.parametrize(("case", "body", "field", "rule"), REGISTRY_CASES, ids=[c[0] for c in REGISTRY_CASES])
def test_bad_registry_secret_is_refused_naming_the_field(
    alice_api: APIClient, case: str, body: dict[str, Any], field: str, rule: str
) -> None:
    response = alice_api.post("/api/v1/registry", body, format="json")
    assert response.status_code == 400, response.json()
    payload = response.json()
    assert payload["code"] == "invalid"
    assert any(e["field"] == field and rule.lower() in e["message"].lower() for e in payload["errors"]), payload
    assert field in payload["detail"]
    assert RegistrySecret.objects.count() == 0


def test_duplicate_registry_name_is_a_conflict(alice_api: APIClient) -> None:
    assert alice_api.post("/api/v1/registry", GOOD, format="json").status_code == 201
    response = alice_api.post("/api/v1/registry", {**GOOD, "server": "other.example"}, format="json")
    assert response.status_code == 409
    assert response.json()["errors"][0]["field"] == "name"
    assert RegistrySecret.objects.get().server == "harbor.example.com"


def test_malformed_json_is_a_400(alice_api: APIClient) -> None:
    response = alice_api.generic("POST", "/api/v1/registry", '{"name": "x",', content_type="application/json")
    assert response.status_code == 400
    assert "JSON parse error" in response.json()["detail"]
    assert RegistrySecret.objects.count() == 0


def test_a_json_array_instead_of_an_object_is_a_400(alice_api: APIClient) -> None:
    response = alice_api.generic("POST", "/api/v1/registry", "[1, 2]", content_type="application/json")
    assert response.status_code == 400
    assert "expected a JSON object" in response.json()["detail"]


def test_wrong_content_type_is_a_415(alice_api: APIClient) -> None:
    response = alice_api.generic(
        "POST", "/api/v1/registry", "name=harbor", content_type="application/x-www-form-urlencoded"
    )
    assert response.status_code == 415
    assert "application/x-www-form-urlencoded" in response.json()["detail"]


def test_wrong_password_is_a_401_with_a_message(alice: User, anon_api: APIClient) -> None:
    response = anon_api.post("/api/v1/auth/token", {"username": "alice", "password": "wrong"}, format="json")
    assert response.status_code == 401
    assert response.json()["detail"] == "username or password is incorrect"


def test_login_without_password_names_the_field(alice: User, anon_api: APIClient) -> None:
    response = anon_api.post("/api/v1/auth/token", {"username": "alice"}, format="json")
    assert response.status_code == 400
    assert response.json()["errors"] == [
        {"field": "password", "code": "required", "message": "This field is required."}
    ]


def test_malformed_authorization_header_is_a_401(anon_api: APIClient, db: None) -> None:
    anon_api.credentials(HTTP_AUTHORIZATION="Token a b")
    response = anon_api.get("/api/v1/quota")
    assert response.status_code == 401
    assert "Token <key>" in response.json()["detail"]


def test_unknown_token_is_a_401(anon_api: APIClient, db: None) -> None:
    anon_api.credentials(HTTP_AUTHORIZATION="Token " + "0" * 40)
    response = anon_api.get("/api/v1/quota")
    assert response.status_code == 401
    assert "invalid token" in response.json()["detail"]


def test_quota_for_an_unknown_datacenter_names_the_field(alice_api: APIClient, local_dc: Datacenter) -> None:
    response = alice_api.get("/api/v1/quota?datacenter=mars")
    assert response.status_code == 400
    assert response.json()["errors"][0]["field"] == "datacenter"
    assert "unknown datacenter 'mars'; you may use: local" in response.json()["detail"]


QUOTA_CASES: list[tuple[dict[str, object], str, str]] = [
    ({"gpu": -1}, "gpu", "greater than or equal to 0"),
    ({"jobs": "many"}, "jobs", "valid integer"),
    ({"cpu": "-2"}, "cpu", "must not be negative"),
    ({"memory": "1GB"}, "memory", "memory '1GB' is not a quantity; use 1Gi, 1G or 512Mi"),
    ({"storage": "lots"}, "storage", "is not a quantity"),
    ({"storage_files": -5}, "storage_files", "greater than or equal to 0"),
    ({"gpus": 2}, "gpus", "unknown field"),
]


@pytest.mark.parametrize(
    ("body", "field", "rule"), QUOTA_CASES, ids=[c[1] + "-" + str(c[0][c[1]]) for c in QUOTA_CASES]
)
def test_bad_quota_values_are_refused(
    carol_api: APIClient, alice: User, local_dc: Datacenter, body: dict[str, Any], field: str, rule: str
) -> None:
    response = carol_api.put("/api/v1/quota/local/alice", body, format="json")
    assert response.status_code == 400, response.json()
    errors = response.json()["errors"]
    assert any(e["field"] == field and rule in e["message"] for e in errors), errors
    assert Quota.objects.count() == 0


def test_quota_for_unknown_datacenter_or_user_is_a_404(carol_api: APIClient, alice: User, local_dc: Datacenter) -> None:
    response = carol_api.put("/api/v1/quota/mars/alice", {"gpu": 1}, format="json")
    assert response.status_code == 404
    assert response.json()["detail"] == "datacenter 'mars' not found"
    response = carol_api.put("/api/v1/quota/local/zed", {"gpu": 1}, format="json")
    assert response.json()["detail"] == "user 'zed' not found"
    assert Quota.objects.count() == 0
