"""The upload lifecycle (storage.uploads) through the API: start, resume, complete, verify, abort, expiry."""

from __future__ import annotations

import os
from datetime import timedelta
from pathlib import Path

import pytest
from django.contrib.auth.models import User
from django.utils import timezone
from pytest_django.fixtures import Settings
from rest_framework.test import APIClient

from datacenters.models import Datacenter
from storage import uploads
from storage.models import Upload
from storage.tasks import cleanup_uploads
from tests.storage.conftest import CHUNK, HOME, checksum, put_chunk, recorded, start, temp_files, upload_file


def test_an_upload_lands_byte_identical_and_is_charged_exactly(
    alice_api: APIClient, alice: User, local_dc: Datacenter, home: Path
) -> None:
    data = os.urandom(3 * CHUNK + 123)
    response = upload_file(alice_api, f"{HOME}/data/train.bin", data)
    assert response.status_code == 200, response.json()
    assert response.json()["state"] == "completed"
    assert (home / "data" / "train.bin").read_bytes() == data
    # The new directory counts as one entry, the file as another; reservations are released.
    assert recorded(alice, local_dc) == (len(data), 2, 0, 0)
    assert temp_files(home) == []
    usage = alice_api.get("/api/v1/quota").json()["results"][0]["usage"]
    assert (usage["storage"], usage["storage_files"]) == (len(data), 2)


def test_start_reports_the_chunk_plan(alice_api: APIClient, home: Path) -> None:
    data = b"x" * (2 * CHUNK + 1)
    body = start(alice_api, f"{HOME}/a.bin", data).json()
    assert body["chunks"] == 3 and body["chunk_size"] == CHUNK and body["state"] == "open"
    assert body["missing"] == [[0, 3]] and body["present"] == [] and body["received"] == 0
    assert body["checksum"] == checksum(data)
    assert body["expires_at"]


def test_the_default_chunk_size_is_used_when_none_is_given(alice_api: APIClient, home: Path) -> None:
    response = alice_api.post(
        "/api/v1/files/uploads", {"path": f"{HOME}/a", "size": 10, "checksum": checksum(b"0123456789")}, format="json"
    )
    assert response.json()["chunk_size"] == 8 * 1024 * 1024 and response.json()["chunks"] == 1


def test_an_upload_cut_at_half_resumes_with_only_the_missing_chunks(
    alice_api: APIClient, alice: User, local_dc: Datacenter, home: Path
) -> None:
    data = os.urandom(8 * CHUNK)
    upload = start(alice_api, f"{HOME}/big.bin", data).json()
    for index in range(4):
        assert put_chunk(alice_api, upload, index, data).status_code == 200
    # The client's connection dropped: it asks what is missing and sends only that.
    status = alice_api.get(f"/api/v1/files/uploads/{upload['id']}").json()
    assert status["present"] == [[0, 4]] and status["missing"] == [[4, 8]] and status["received"] == 4
    for index in [i for a, b in status["missing"] for i in range(a, b)]:
        assert put_chunk(alice_api, upload, index, data).status_code == 200
    assert alice_api.post(f"/api/v1/files/uploads/{upload['id']}/complete").status_code == 200
    assert checksum((home / "big.bin").read_bytes()) == checksum(data)
    assert recorded(alice, local_dc) == (len(data), 1, 0, 0)


def test_a_whole_file_checksum_mismatch_fails_and_leaves_nothing(
    alice_api: APIClient, alice: User, local_dc: Datacenter, home: Path
) -> None:
    data = os.urandom(2 * CHUNK)
    upload = start(alice_api, f"{HOME}/f", data).json()
    Upload.objects.filter(pk=upload["id"]).update(checksum="0" * 32)  # the client declared the wrong one
    for index in range(2):
        put_chunk(alice_api, upload, index, data)
    failed = alice_api.post(f"/api/v1/files/uploads/{upload['id']}/complete")
    assert failed.status_code == 400 and failed.json()["code"] == "checksum_mismatch"
    assert not (home / "f").exists() and temp_files(home) == []
    assert recorded(alice, local_dc) == (0, 0, 0, 0)
    after = alice_api.get(f"/api/v1/files/uploads/{upload['id']}").json()
    assert after["state"] == "failed" and "checksum" in after["error"]
    again = alice_api.post(f"/api/v1/files/uploads/{upload['id']}/complete")
    assert again.status_code == 409 and again.json()["code"] == "upload_failed"


def test_a_final_size_other_than_declared_is_refused_at_completion(
    alice_api: APIClient, alice: User, local_dc: Datacenter, home: Path
) -> None:
    data = os.urandom(2 * CHUNK)
    upload = start(alice_api, f"{HOME}/f", data).json()
    for index in range(2):
        put_chunk(alice_api, upload, index, data)
    with temp_files(home)[0].open("ab") as handle:  # grown behind the portal's back
        handle.write(b"extra")
    failed = alice_api.post(f"/api/v1/files/uploads/{upload['id']}/complete")
    assert failed.status_code == 400 and failed.json()["code"] == "size_mismatch"
    assert not (home / "f").exists() and temp_files(home) == []
    assert recorded(alice, local_dc) == (0, 0, 0, 0)


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("chunk_size", 1000, "multiple of 65536"),
        ("chunk_size", 128 * 1024 * 1024, "multiple of 65536"),
        ("checksum", "md5:abc", "XXH3-128"),
        ("size", -1, "greater than or equal to 0"),
        ("colour", "red", "unknown field"),
    ],
)
def test_a_bad_start_names_its_field(alice_api: APIClient, home: Path, field: str, value: object, message: str) -> None:
    body = {"path": f"{HOME}/f", "size": 10, "checksum": checksum(b"0123456789"), field: value}
    response = alice_api.post("/api/v1/files/uploads", body, format="json")
    assert response.status_code == 400
    assert response.json()["errors"][0]["field"] == field and message in response.json()["detail"]


def test_the_max_chunk_size_is_configurable(alice_api: APIClient, home: Path, settings: Settings) -> None:
    settings.PADDLECLOUD_UPLOAD_MAX_CHUNK = 128 * 1024
    assert start(alice_api, f"{HOME}/f", b"x", chunk_size=256 * 1024).status_code == 400
    assert start(alice_api, f"{HOME}/f", b"x", chunk_size=128 * 1024).status_code == 201


def test_an_empty_file_uploads_with_no_chunks(
    alice_api: APIClient, alice: User, local_dc: Datacenter, home: Path
) -> None:
    response = upload_file(alice_api, f"{HOME}/empty", b"")
    assert response.status_code == 200
    assert (home / "empty").read_bytes() == b""
    assert recorded(alice, local_dc) == (0, 1, 0, 0)


def test_completing_twice_returns_the_completed_upload(alice_api: APIClient, home: Path) -> None:
    data = os.urandom(CHUNK)
    upload = start(alice_api, f"{HOME}/f", data).json()
    put_chunk(alice_api, upload, 0, data)
    first = alice_api.post(f"/api/v1/files/uploads/{upload['id']}/complete")
    second = alice_api.post(f"/api/v1/files/uploads/{upload['id']}/complete")
    assert first.status_code == second.status_code == 200 and second.json()["state"] == "completed"
    late = put_chunk(alice_api, upload, 0, data)
    assert late.status_code == 409 and late.json()["code"] == "upload_completed"


def test_abort_removes_the_temp_file_and_releases_the_reservation(
    alice_api: APIClient, alice: User, local_dc: Datacenter, home: Path
) -> None:
    data = os.urandom(2 * CHUNK)
    upload = start(alice_api, f"{HOME}/f", data).json()
    put_chunk(alice_api, upload, 0, data)
    assert alice_api.delete(f"/api/v1/files/uploads/{upload['id']}").status_code == 204
    assert temp_files(home) == [] and recorded(alice, local_dc) == (0, 0, 0, 0)
    assert alice_api.delete(f"/api/v1/files/uploads/{upload['id']}").status_code == 204  # idempotent
    late = put_chunk(alice_api, upload, 1, data)
    assert late.status_code == 409 and late.json()["code"] == "upload_aborted"


def test_abandoned_uploads_are_cleaned_after_the_configured_time(
    alice_api: APIClient, alice: User, local_dc: Datacenter, home: Path, settings: Settings
) -> None:
    settings.PADDLECLOUD_UPLOAD_EXPIRE_SECONDS = 3600
    data = os.urandom(2 * CHUNK)
    old = start(alice_api, f"{HOME}/old", data).json()
    put_chunk(alice_api, old, 0, data)
    fresh = start(alice_api, f"{HOME}/fresh", data).json()
    Upload.objects.filter(pk=old["id"]).update(updated_at=timezone.now() - timedelta(seconds=3601))
    assert cleanup_uploads() == 1
    assert alice_api.get(f"/api/v1/files/uploads/{old['id']}").json()["state"] == "expired"
    assert alice_api.get(f"/api/v1/files/uploads/{fresh['id']}").json()["state"] == "open"
    assert len(temp_files(home)) == 1
    assert recorded(alice, local_dc) == (0, 0, 2 * CHUNK, 1)  # only the fresh one's reservation
    assert cleanup_uploads() == 0  # idempotent
    # Finished uploads are forgotten once as old as the expiry.
    Upload.objects.filter(pk=old["id"]).update(updated_at=timezone.now() - timedelta(seconds=3601))
    uploads.cleanup()
    assert not Upload.objects.filter(pk=old["id"]).exists()


def test_uploads_are_listed_for_their_owner_only(
    alice_api: APIClient, bob_api: APIClient, bob: User, home: Path
) -> None:
    data = os.urandom(CHUNK)
    upload = start(alice_api, f"{HOME}/f", data).json()
    put_chunk(alice_api, upload, 0, data)
    mine = alice_api.get(f"/api/v1/files/uploads?path={HOME}//f/&state=open").json()
    assert mine["count"] == 1 and mine["results"][0]["id"] == upload["id"] and mine["results"][0]["received"] == 1
    assert bob_api.get("/api/v1/files/uploads").json()["count"] == 0
    assert bob_api.get(f"/api/v1/files/uploads/{upload['id']}").status_code == 404
    assert put_chunk(bob_api, upload, 0, data).status_code == 404
    assert bob_api.post(f"/api/v1/files/uploads/{upload['id']}/complete").status_code == 404
    assert bob_api.delete(f"/api/v1/files/uploads/{upload['id']}").status_code == 404
    assert alice_api.get("/api/v1/files/uploads/not-a-uuid").status_code == 404


def test_a_verification_whose_process_died_is_taken_over_by_the_next_complete(
    alice_api: APIClient, alice: User, local_dc: Datacenter, home: Path
) -> None:
    data = os.urandom(CHUNK)
    upload = start(alice_api, f"{HOME}/f", data).json()
    put_chunk(alice_api, upload, 0, data)
    # A worker claimed it and died mid-hash (the row says verifying, nobody beats).
    Upload.objects.filter(pk=upload["id"]).update(state="verifying")
    busy = alice_api.post(f"/api/v1/files/uploads/{upload['id']}/complete")
    assert busy.status_code == 202 and busy.json()["state"] == "verifying"
    Upload.objects.filter(pk=upload["id"]).update(updated_at=timezone.now() - uploads.VERIFY_STALE)
    done = alice_api.post(f"/api/v1/files/uploads/{upload['id']}/complete")
    assert done.status_code == 200 and done.json()["state"] == "completed"
    assert (home / "f").read_bytes() == data and recorded(alice, local_dc) == (CHUNK, 1, 0, 0)
