"""Registry secrets: owners only, password write-only and encrypted at rest."""

from __future__ import annotations

import logging

import pytest
from django.db import connection
from rest_framework.test import APIClient

from registry.models import RegistrySecret

SECRET = {"name": "harbor", "server": "harbor.example.com:5000", "username": "robot", "password": "s3cr3t-Pa55"}


def test_alice_creates_lists_and_deletes_her_secret(alice_api: APIClient) -> None:
    created = alice_api.post("/api/v1/registry", SECRET, format="json")
    assert created.status_code == 201
    assert "password" not in created.json()
    listed = alice_api.get("/api/v1/registry").json()
    assert listed["count"] == 1
    assert listed["results"][0]["name"] == "harbor"
    assert "password" not in listed["results"][0]
    one = alice_api.get("/api/v1/registry/harbor").json()
    assert one["server"] == "harbor.example.com:5000" and "password" not in one
    assert alice_api.delete("/api/v1/registry/harbor").status_code == 204
    assert alice_api.get("/api/v1/registry").json()["count"] == 0


def test_bob_never_sees_or_deletes_alice_secret(alice_api: APIClient, bob_api: APIClient) -> None:
    alice_api.post("/api/v1/registry", SECRET, format="json")
    assert bob_api.get("/api/v1/registry").json()["count"] == 0
    assert bob_api.get("/api/v1/registry/harbor").status_code == 404
    assert bob_api.delete("/api/v1/registry/harbor").status_code == 404
    assert RegistrySecret.objects.filter(name="harbor").count() == 1


def test_two_users_may_use_the_same_name(alice_api: APIClient, bob_api: APIClient) -> None:
    assert alice_api.post("/api/v1/registry", SECRET, format="json").status_code == 201
    assert bob_api.post("/api/v1/registry", SECRET, format="json").status_code == 201


def test_password_is_not_stored_in_clear(alice_api: APIClient) -> None:
    alice_api.post("/api/v1/registry", SECRET, format="json")
    with connection.cursor() as cursor:
        cursor.execute("SELECT password FROM registry_registrysecret")
        (stored,) = cursor.fetchone()
    assert SECRET["password"] not in stored
    assert stored.startswith("gAAAA")  # a Fernet token
    assert RegistrySecret.objects.get().password == SECRET["password"]


def test_debug_logging_never_prints_the_password(alice_api: APIClient, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.DEBUG):
        alice_api.post("/api/v1/registry", SECRET, format="json")
        alice_api.get("/api/v1/registry")
        secret = RegistrySecret.objects.get()
        logging.getLogger("tests").debug("saved %r", secret)
        alice_api.post("/api/v1/registry", {**SECRET, "name": "bad_name"}, format="json")
    assert caplog.records, "expected DEBUG records to be captured"
    assert SECRET["password"] not in caplog.text
