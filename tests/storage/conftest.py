"""Storage test helpers: checksums, a whole upload through the API, usage as recorded."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
import xxhash
from django.contrib.auth.models import User
from rest_framework.test import APIClient

from datacenters.models import Datacenter
from storage.models import StorageUsage

CHUNK = 64 * 1024  # the smallest chunk size the portal accepts: keeps tests fast and multi-chunk
HOME = "/pfs/local/home/alice"
PUBLIC = "/pfs/local/public"


def checksum(data: bytes) -> str:
    return "xxh3_128:" + xxhash.xxh3_128(data).hexdigest()


def start(api: APIClient, path: str, data: bytes, chunk_size: int = CHUNK, **extra: Any) -> Any:
    body = {"path": path, "size": len(data), "checksum": checksum(data), "chunk_size": chunk_size, **extra}
    return api.post("/api/v1/files/uploads", body, format="json")


def put_chunk(api: APIClient, upload: dict[str, Any], index: int, data: bytes, digest: str | None = None) -> Any:
    size = upload["chunk_size"]
    piece = data[index * size : (index + 1) * size]
    return api.put(
        f"/api/v1/files/uploads/{upload['id']}/chunks/{index}",
        piece,
        content_type="application/octet-stream",
        HTTP_X_CHUNK_CHECKSUM=digest or checksum(piece),
    )


def upload_file(api: APIClient, path: str, data: bytes, chunk_size: int = CHUNK) -> Any:
    """Start, send every chunk, complete; returns the complete response (asserts the steps before)."""
    started = start(api, path, data, chunk_size)
    assert started.status_code == 201, started.json()
    upload = started.json()
    for index in range(upload["chunks"]):
        sent = put_chunk(api, upload, index, data)
        assert sent.status_code == 200, sent.json()
    return api.post(f"/api/v1/files/uploads/{upload['id']}/complete")


def recorded(user: User, datacenter: Datacenter) -> tuple[int, int, int, int]:
    """(used bytes, used files, reserved bytes, reserved files) as the database has them."""
    row = StorageUsage.objects.filter(user=user, datacenter=datacenter).first()
    if row is None:
        return 0, 0, 0, 0
    return row.used_bytes, row.used_files, row.reserved_bytes, row.reserved_files


def temp_files(root: Path) -> list[Path]:
    return [Path(d, f) for d, _, names in os.walk(root) for f in names if f.startswith(".paddlecloud-upload-")]


@pytest.fixture
def root(local_dc: Datacenter) -> Path:
    return Path(local_dc.storage_root)


@pytest.fixture
def home(root: Path, alice: User) -> Path:
    path = root / "home" / "alice"
    path.mkdir(exist_ok=True)
    return path
