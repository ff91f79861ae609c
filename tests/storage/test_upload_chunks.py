"""Chunk records and reports (storage.upload_chunks): any order, wrong checksums, missing chunks, bit rot."""

from __future__ import annotations

import os
from pathlib import Path

from rest_framework.test import APIClient

from tests.storage.conftest import CHUNK, HOME, checksum, put_chunk, start, temp_files


def test_chunks_may_arrive_in_any_order(alice_api: APIClient, home: Path) -> None:
    data = os.urandom(5 * CHUNK - 7)
    upload = start(alice_api, f"{HOME}/shuffled", data).json()
    for index in [4, 1, 3, 0, 2]:
        assert put_chunk(alice_api, upload, index, data).status_code == 200
    assert alice_api.post(f"/api/v1/files/uploads/{upload['id']}/complete").status_code == 200
    assert (home / "shuffled").read_bytes() == data


def test_a_chunk_with_a_wrong_checksum_is_reported_wrong_and_can_be_resent(alice_api: APIClient, home: Path) -> None:
    data = os.urandom(2 * CHUNK)
    upload = start(alice_api, f"{HOME}/f", data).json()
    bad = put_chunk(alice_api, upload, 1, data, digest=checksum(b"something else"))
    assert bad.status_code == 400
    assert bad.json()["code"] == "checksum_mismatch" and bad.json()["errors"][0]["field"] == "X-Chunk-Checksum"
    put_chunk(alice_api, upload, 0, data)
    status = alice_api.get(f"/api/v1/files/uploads/{upload['id']}").json()
    assert status["wrong"] == [[1, 2]] and status["missing"] == [] and status["present"] == [[0, 1]]
    refused = alice_api.post(f"/api/v1/files/uploads/{upload['id']}/complete")
    assert refused.status_code == 409 and refused.json()["code"] == "incomplete"
    assert "wrong chunks 1" in refused.json()["detail"]
    assert put_chunk(alice_api, upload, 1, data).status_code == 200
    assert alice_api.post(f"/api/v1/files/uploads/{upload['id']}/complete").status_code == 200
    assert (home / "f").read_bytes() == data


def test_completing_with_missing_chunks_keeps_the_upload_open(alice_api: APIClient, home: Path) -> None:
    data = os.urandom(3 * CHUNK)
    upload = start(alice_api, f"{HOME}/f", data).json()
    put_chunk(alice_api, upload, 1, data)
    refused = alice_api.post(f"/api/v1/files/uploads/{upload['id']}/complete")
    assert refused.status_code == 409 and "missing chunks 0, 2" in refused.json()["detail"]
    assert alice_api.get(f"/api/v1/files/uploads/{upload['id']}").json()["state"] == "open"
    assert not (home / "f").exists()


def test_verify_rereads_chunks_and_reports_those_whose_bytes_changed(alice_api: APIClient, home: Path) -> None:
    data = os.urandom(2 * CHUNK)
    upload = start(alice_api, f"{HOME}/f", data).json()
    put_chunk(alice_api, upload, 0, data)
    put_chunk(alice_api, upload, 1, data)
    temp = temp_files(home)[0]
    with temp.open("r+b") as handle:  # bit rot on the temp file
        handle.seek(CHUNK + 5)
        handle.write(b"\xff\x00")
    status = alice_api.get(f"/api/v1/files/uploads/{upload['id']}?verify=1").json()
    assert status["wrong"] == [[1, 2]] and status["present"] == [[0, 1]]


def test_a_chunk_of_the_wrong_length_or_index_is_refused_before_writing(alice_api: APIClient, home: Path) -> None:
    data = os.urandom(2 * CHUNK)
    upload = start(alice_api, f"{HOME}/f", data).json()
    url = f"/api/v1/files/uploads/{upload['id']}/chunks"
    short = alice_api.put(
        f"{url}/0", data[:100], content_type="application/octet-stream", HTTP_X_CHUNK_CHECKSUM=checksum(data[:100])
    )
    assert short.status_code == 400 and f"exactly {CHUNK} bytes" in short.json()["detail"]
    beyond = alice_api.put(
        f"{url}/2", data[:CHUNK], content_type="application/octet-stream", HTTP_X_CHUNK_CHECKSUM=checksum(data[:CHUNK])
    )
    assert beyond.status_code == 400 and "between 0 and 1" in beyond.json()["detail"]
    no_sum = alice_api.put(f"{url}/0", data[:CHUNK], content_type="application/octet-stream")
    assert no_sum.status_code == 400 and no_sum.json()["errors"][0]["field"] == "X-Chunk-Checksum"
    assert temp_files(home)[0].stat().st_size == 0
