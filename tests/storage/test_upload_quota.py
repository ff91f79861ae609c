"""What an upload holds against the quota (storage.upload_quota): reserved at start, charged at completion."""

from __future__ import annotations

import os
from pathlib import Path

from django.contrib.auth.models import User
from rest_framework.test import APIClient

from datacenters.models import Datacenter, Quota
from storage.models import Upload
from tests.storage.conftest import CHUNK, HOME, put_chunk, recorded, start, temp_files, upload_file


def _set_quota(alice: User, local_dc: Datacenter, storage: str = "", files: int | None = None) -> None:
    Quota.objects.update_or_create(
        user=alice, datacenter=local_dc, defaults={"storage": storage, "storage_files": files}
    )


def test_a_start_over_the_quota_is_refused_before_any_byte_lands(
    alice_api: APIClient, alice: User, local_dc: Datacenter, home: Path
) -> None:
    _set_quota(alice, local_dc, storage="256Ki")
    upload_file(alice_api, f"{HOME}/kept", os.urandom(3 * CHUNK))
    before = recorded(alice, local_dc)
    refused = start(alice_api, f"{HOME}/new/too-big", os.urandom(2 * CHUNK))
    assert refused.status_code == 413 and refused.json()["code"] == "quota_exceeded"
    assert "storage quota exceeded" in refused.json()["detail"] and "64.0 KiB" in refused.json()["detail"]
    assert not (home / "new").exists() and temp_files(home) == []
    assert recorded(alice, local_dc) == before
    assert Upload.objects.filter(path=f"{HOME}/new/too-big").count() == 0


def test_open_uploads_reserve_their_size_so_two_cannot_both_fit(
    alice_api: APIClient, alice: User, local_dc: Datacenter, home: Path
) -> None:
    _set_quota(alice, local_dc, storage="256Ki")
    data = os.urandom(3 * CHUNK)
    assert start(alice_api, f"{HOME}/one", data).status_code == 201
    assert recorded(alice, local_dc) == (0, 0, 3 * CHUNK, 1)
    usage = alice_api.get("/api/v1/quota").json()["results"][0]["usage"]
    assert usage["storage"] == 3 * CHUNK  # reservations count as used
    assert start(alice_api, f"{HOME}/two", data).status_code == 413


def test_the_file_count_quota_counts_new_directories(
    alice_api: APIClient, alice: User, local_dc: Datacenter, home: Path
) -> None:
    _set_quota(alice, local_dc, files=2)
    refused = start(alice_api, f"{HOME}/a/b/c", b"x")
    assert refused.status_code == 413 and "file count quota" in refused.json()["detail"]
    assert not (home / "a").exists()
    assert upload_file(alice_api, f"{HOME}/a/c", b"x").status_code == 200
    assert recorded(alice, local_dc) == (1, 2, 0, 0)


def test_a_quota_lowered_during_an_upload_refuses_it_at_completion(
    alice_api: APIClient, alice: User, local_dc: Datacenter, home: Path
) -> None:
    upload_file(alice_api, f"{HOME}/kept", os.urandom(CHUNK))
    before = recorded(alice, local_dc)
    data = os.urandom(3 * CHUNK)
    upload = start(alice_api, f"{HOME}/late", data).json()
    for index in range(3):
        put_chunk(alice_api, upload, index, data)
    _set_quota(alice, local_dc, storage="128Ki")  # an operator lowers it meanwhile
    refused = alice_api.post(f"/api/v1/files/uploads/{upload['id']}/complete")
    assert refused.status_code == 413 and refused.json()["code"] == "quota_exceeded"
    assert not (home / "late").exists() and temp_files(home) == []
    assert recorded(alice, local_dc) == before
    assert alice_api.get(f"/api/v1/files/uploads/{upload['id']}").json()["state"] == "failed"


def test_replacing_a_file_with_a_smaller_one_is_allowed_over_quota(
    alice_api: APIClient, alice: User, local_dc: Datacenter, home: Path
) -> None:
    upload_file(alice_api, f"{HOME}/f", os.urandom(3 * CHUNK))
    _set_quota(alice, local_dc, storage="64Ki")
    # At start the reservation must fit; over quota already, even a smaller file is refused there...
    assert start(alice_api, f"{HOME}/f", os.urandom(CHUNK)).status_code == 413
    _set_quota(alice, local_dc, storage="256Ki")
    data = os.urandom(CHUNK)
    upload = start(alice_api, f"{HOME}/f", data).json()
    put_chunk(alice_api, upload, 0, data)
    _set_quota(alice, local_dc, storage="64Ki")
    # ...but completing one that shrinks usage is never refused.
    assert alice_api.post(f"/api/v1/files/uploads/{upload['id']}/complete").status_code == 200
    assert recorded(alice, local_dc) == (CHUNK, 1, 0, 0)


def test_overwriting_a_file_charges_only_the_difference(
    alice_api: APIClient, alice: User, local_dc: Datacenter, home: Path
) -> None:
    upload_file(alice_api, f"{HOME}/f", os.urandom(3 * CHUNK))
    assert recorded(alice, local_dc) == (3 * CHUNK, 1, 0, 0)
    upload_file(alice_api, f"{HOME}/f", os.urandom(CHUNK))
    assert recorded(alice, local_dc) == (CHUNK, 1, 0, 0)
    assert (home / "f").stat().st_size == CHUNK


def test_operators_upload_to_public_without_quota(
    carol_api: APIClient, carol: User, local_dc: Datacenter, root: Path
) -> None:
    data = os.urandom(CHUNK)
    assert upload_file(carol_api, "/pfs/local/public/datasets/mnist.bin", data).status_code == 200
    assert (root / "public" / "datasets" / "mnist.bin").read_bytes() == data
    assert recorded(carol, local_dc) == (0, 0, 0, 0)
