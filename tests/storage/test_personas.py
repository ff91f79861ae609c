"""Who may do what: homes are their owner's alone, public is read-only for users, anonymous gets 401."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from django.contrib.auth.models import User
from rest_framework.test import APIClient

from datacenters.models import Datacenter
from tests.adversarial.conftest import operations
from tests.storage.conftest import CHUNK, put_chunk, start, upload_file

BOB = "/pfs/local/home/bob"


@pytest.fixture
def bobs_files(root: Path, bob: User) -> Path:
    home = root / "home" / "bob"
    (home / "work").mkdir(parents=True)
    (home / "work" / "model.bin").write_bytes(b"bob's model")
    return home


def test_alice_cannot_list_read_write_or_delete_in_bobs_home(
    alice_api: APIClient, alice: User, bobs_files: Path
) -> None:
    refused = {
        "ls": alice_api.get("/api/v1/files/ls", {"path": f"{BOB}/work"}),
        "ls home": alice_api.get("/api/v1/files/ls", {"path": BOB}),
        "stat": alice_api.get("/api/v1/files/stat", {"path": f"{BOB}/work/model.bin"}),
        "download": alice_api.get("/api/v1/files/download", {"path": f"{BOB}/work/model.bin"}),
        "mkdir": alice_api.post("/api/v1/files/mkdir", {"path": f"{BOB}/alice-was-here"}, format="json"),
        "upload": start(alice_api, f"{BOB}/work/model.bin", b"overwritten"),
        "rm": alice_api.post("/api/v1/files/rm", {"path": f"{BOB}/work/model.bin"}, format="json"),
        "rm -r": alice_api.post("/api/v1/files/rm", {"path": f"{BOB}/work", "recursive": True}, format="json"),
    }
    for operation, response in refused.items():
        assert response.status_code == 403, operation
        assert "another user's home" in response.json()["detail"], operation
    assert (bobs_files / "work" / "model.bin").read_bytes() == b"bob's model"
    assert sorted(p.name for p in bobs_files.iterdir()) == ["work"]


def test_bob_reaches_his_own_files(bob_api: APIClient, bobs_files: Path) -> None:
    assert bob_api.get("/api/v1/files/ls", {"path": f"{BOB}/work"}).json()["count"] == 1
    download = bob_api.get("/api/v1/files/download", {"path": f"{BOB}/work/model.bin"})
    assert download.getvalue() == b"bob's model"


def test_users_read_public_but_nobody_but_operators_writes_it(
    alice_api: APIClient, bob_api: APIClient, carol_api: APIClient, root: Path
) -> None:
    (root / "public" / "mnist").mkdir()
    (root / "public" / "mnist" / "train.recordio").write_bytes(b"digits")
    for api in (alice_api, bob_api):
        assert api.get("/api/v1/files/ls", {"path": "/pfs/local/public/mnist"}).status_code == 200
        download = api.get("/api/v1/files/download", {"path": "/pfs/local/public/mnist/train.recordio"})
        assert download.getvalue() == b"digits"
        writes = [
            api.post("/api/v1/files/mkdir", {"path": "/pfs/local/public/mine"}, format="json"),
            start(api, "/pfs/local/public/mnist/train.recordio", b"replaced"),
            start(api, "/pfs/local/public/new.bin", b"new"),
            api.post("/api/v1/files/rm", {"path": "/pfs/local/public/mnist/train.recordio"}, format="json"),
            api.post("/api/v1/files/rm", {"path": "/pfs/local/public/mnist", "recursive": True}, format="json"),
        ]
        for response in writes:
            assert response.status_code == 403
            assert "/pfs/local/public is read-only; only operators write it" in response.json()["detail"]
    assert (root / "public" / "mnist" / "train.recordio").read_bytes() == b"digits"
    # Operators do write it.
    assert carol_api.post("/api/v1/files/mkdir", {"path": "/pfs/local/public/cifar"}, format="json").status_code == 201
    assert upload_file(carol_api, "/pfs/local/public/cifar/data.bin", b"pixels").status_code == 200
    assert (root / "public" / "cifar" / "data.bin").read_bytes() == b"pixels"


def test_public_itself_cannot_be_removed_even_by_operators(carol_api: APIClient, root: Path) -> None:
    response = carol_api.post("/api/v1/files/rm", {"path": "/pfs/local/public", "recursive": True}, format="json")
    assert response.status_code == 403 and "cannot be removed" in response.json()["detail"]
    assert (root / "public").is_dir()


def test_operators_do_not_get_into_users_homes(carol_api: APIClient, bobs_files: Path) -> None:
    assert carol_api.get("/api/v1/files/ls", {"path": BOB}).status_code == 403


def test_a_datacenter_the_user_may_not_use_is_refused(
    alice_api: APIClient, bob_api: APIClient, alice: User, local_dc: Datacenter, bobs_files: Path
) -> None:
    local_dc.all_users = False
    local_dc.save()
    local_dc.allowed_users.add(alice)
    response = bob_api.get("/api/v1/files/ls", {"path": BOB})
    assert response.status_code == 403 and "you may not use datacenter 'local'" in response.json()["detail"]
    assert alice_api.get("/api/v1/files/ls", {"path": "/pfs/local/home/alice"}).status_code == 200


def test_an_upload_id_is_useless_to_anyone_else(
    alice_api: APIClient, bob_api: APIClient, bob: User, home: Path
) -> None:
    data = b"a" * CHUNK
    upload = start(alice_api, "/pfs/local/home/alice/f", data).json()
    assert put_chunk(bob_api, upload, 0, data).status_code == 404
    assert bob_api.get(f"/api/v1/files/uploads/{upload['id']}").status_code == 404


FILL = {"upload_id": "00000000-0000-0000-0000-000000000000", "index": "0"}


def storage_routes() -> list[tuple[str, str]]:
    """Every storage operation the API serves (from the OpenAPI generator), path parameters filled in."""
    return [
        (method.lower(), re.sub(r"\{(\w+)\}", lambda m: FILL[m[1]], path))
        for method, path in operations()
        if path.startswith("/api/v1/files/")
    ]


ANONYMOUS_ROUTES = storage_routes()


def test_the_storage_route_list_comes_from_the_url_configuration() -> None:
    assert ("put", f"/api/v1/files/uploads/{FILL['upload_id']}/chunks/0") in ANONYMOUS_ROUTES
    assert len(ANONYMOUS_ROUTES) >= 11  # ls, stat, download, mkdir, rm and the six upload operations


@pytest.mark.parametrize(("method", "url"), ANONYMOUS_ROUTES)
def test_anonymous_gets_401_on_every_storage_route(
    anon_api: APIClient, local_dc: Datacenter, method: str, url: str
) -> None:
    response = getattr(anon_api, method)(url, {}, format="json")
    assert response.status_code == 401
    assert response.json()["code"] == "not_authenticated"
