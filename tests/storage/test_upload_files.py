"""An upload's files (storage.upload_files): the target checked, the temp file removed behind the portal's back."""

from __future__ import annotations

import io
import os
from pathlib import Path

import pytest
import xxhash
from django.contrib.auth.models import User
from rest_framework.test import APIClient

from datacenters.models import Datacenter
from storage import descriptors
from tests.storage.conftest import CHUNK, HOME, put_chunk, recorded, start, temp_files

MIB = 1024 * 1024


def test_uploading_onto_a_directory_is_refused(alice_api: APIClient, home: Path) -> None:
    (home / "d").mkdir()
    response = start(alice_api, f"{HOME}/d", b"x")
    assert response.status_code == 409 and response.json()["code"] == "is_a_directory"
    assert start(alice_api, HOME, b"x").status_code == 409


def test_a_parent_that_is_a_file_is_refused(alice_api: APIClient, home: Path) -> None:
    (home / "f").write_bytes(b"x")
    response = start(alice_api, f"{HOME}/f/g", b"x")
    assert response.status_code == 409 and response.json()["code"] == "not_a_directory"


def test_removing_the_directory_of_an_upload_ends_it_and_its_reservation(
    alice_api: APIClient, alice: User, local_dc: Datacenter, home: Path
) -> None:
    data = os.urandom(2 * CHUNK)
    upload = start(alice_api, f"{HOME}/dir/f", data).json()
    assert recorded(alice, local_dc) == (0, 1, 2 * CHUNK, 1)
    removed = alice_api.post("/api/v1/files/rm", {"path": f"{HOME}/dir", "recursive": True}, format="json")
    assert removed.status_code == 200 and removed.json()["removed_entries"] == 1  # the temp file is not counted
    # The reservation goes with the directory, not a day later when the upload would expire.
    assert recorded(alice, local_dc) == (0, 0, 0, 0)
    assert alice_api.get(f"/api/v1/files/uploads/{upload['id']}").json()["state"] == "failed"
    gone = put_chunk(alice_api, upload, 0, data)
    assert gone.status_code == 409 and gone.json()["code"] == "upload_failed"


def test_a_temp_file_deleted_behind_the_portals_back_fails_the_upload_cleanly(
    alice_api: APIClient, alice: User, local_dc: Datacenter, home: Path
) -> None:
    data = os.urandom(2 * CHUNK)
    upload = start(alice_api, f"{HOME}/f", data).json()
    temp_files(home)[0].unlink()  # e.g. by a job cleaning up
    gone = put_chunk(alice_api, upload, 0, data)
    assert gone.status_code == 409 and gone.json()["code"] == "upload_failed"
    assert recorded(alice, local_dc) == (0, 0, 0, 0)


def test_chunk_bytes_are_handed_to_the_disk_as_they_land(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """write_at starts the writeback of each 8 MiB it wrote (sync_file_range), so `complete`'s fsync
    does not wait for the whole file and the kernel never throttles a writer sitting on dirty pages."""
    real = descriptors._sync_file_range()
    if real is None:
        pytest.skip("no sync_file_range here (not Linux)")
    handed: list[tuple[int, int]] = []

    def recording(fd: int, offset: int, length: int, flags: int) -> int:
        handed.append((offset, length))
        return int(real(fd, offset, length, flags))  # and the kernel really does it

    monkeypatch.setattr(descriptors, "_sync_file_range", lambda: recording)
    data = os.urandom(20 * 1024 * 1024 + 5)
    target = tmp_path / "temp"
    fd = os.open(target, os.O_RDWR | os.O_CREAT)
    try:
        digest, written = descriptors.write_at(fd, 4096, io.BytesIO(data), len(data))
    finally:
        os.close(fd)
    assert written == len(data) and target.read_bytes()[4096:] == data
    assert digest == xxhash.xxh3_128_hexdigest(data)
    assert handed == [(4096, 8 * MIB), (4096 + 8 * MIB, 8 * MIB), (4096 + 16 * MIB, 4 * MIB + 5)]


def test_handing_bytes_to_the_disk_is_harmless_where_it_cannot_be_done() -> None:
    reader, writer = os.pipe()
    try:
        descriptors.start_writeback(writer, 0, 1024)  # ESPIPE from the kernel: nothing raised
    finally:
        os.close(reader)
        os.close(writer)
