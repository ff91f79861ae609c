"""Path attacks: every one refused with a clear message by every operation, nothing outside the home touched."""

from __future__ import annotations

import errno
import json
import os
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import User
from rest_framework.test import APIClient

from datacenters.models import Datacenter
from storage import paths
from storage.backends import storage_for
from tests.storage.conftest import HOME, checksum, start, upload_file

# (id, path, status): status 400 for a malformed path, 403 for one the user may not touch.
ATTACKS: list[tuple[str, str, int]] = [
    ("dotdot-to-bob", f"{HOME}/../bob/secret.txt", 400),
    ("dotdot-to-etc", f"{HOME}/../../../../../etc/passwd", 400),
    ("dotdot-at-end", f"{HOME}/..", 400),
    ("dot-segment", f"{HOME}/./x", 400),
    ("public-dotdot", "/pfs/local/public/../home/bob/secret.txt", 400),
    ("encoded-slash", f"{HOME}/..%2Fbob%2Fsecret.txt", 400),
    ("encoded-slash-lower", f"{HOME}/a%2fb", 400),
    ("encoded-dots", f"{HOME}/%2e%2e/bob/secret.txt", 400),
    ("encoded-backslash", f"{HOME}/..%5C..%5Cbob", 400),
    ("encoded-nul", f"{HOME}/x%00.txt", 400),
    ("backslashes", f"{HOME}/..\\..\\bob\\secret.txt", 400),
    ("nul-byte", f"{HOME}/x\x00/../../bob", 400),
    ("newline", f"{HOME}/x\n.txt", 400),
    ("escape-char", f"{HOME}/\x1b[31mred", 400),
    ("absolute-outside-pfs", "/etc/passwd", 400),
    ("relative", "pfs/local/home/alice/x", 400),
    ("empty", "", 400),
    ("overlong-name", f"{HOME}/{'a' * 256}", 400),
    ("overlong-multibyte-name", f"{HOME}/{'é' * 128}", 400),
    ("overlong-path", HOME + "/abcdefgh" * 520, 400),
    ("not-nfc", f"{HOME}/cafe\u0301", 400),
    ("kelvin-sign", f"{HOME}/\u212a", 400),
    ("reserved-temp-name", f"{HOME}/.paddlecloud-upload-0000", 400),
    ("lone-surrogate", f"{HOME}/\ud800", 400),
    ("bobs-home", "/pfs/local/home/bob/secret.txt", 403),
    ("double-slash-to-bob", "//pfs//local//home//bob//secret.txt", 403),
    ("homes-root", "/pfs/local/home", 403),
    ("storage-root", "/pfs/local", 400),
    ("other-area", "/pfs/local/secrets/x", 403),
    ("unknown-datacenter", "/pfs/elsewhere/home/alice/x", 403),
    ("symlink-to-etc", f"{HOME}/to-etc/passwd", 403),
    ("symlink-to-bob", f"{HOME}/to-bob/secret.txt", 403),
    ("symlink-to-root", f"{HOME}/to-root/home/bob/secret.txt", 403),
    ("relative-symlink-up", f"{HOME}/up/bob/secret.txt", 403),
    ("symlink-chain", f"{HOME}/inner/hop/secret.txt", 403),
    ("public-symlink-into-a-home", "/pfs/local/public/to-bob/secret.txt", 403),
]


def _operations(api: APIClient, path: str) -> dict[str, Any]:
    def post(url: str, body: dict[str, Any]) -> Any:
        # ensure_ascii: a lone surrogate travels as the JSON escape \ud800, as a hostile client would send it
        return api.generic("POST", url, json.dumps(body, ensure_ascii=True), content_type="application/json")

    done = {
        "mkdir": post("/api/v1/files/mkdir", {"path": path, "parents": True}),
        "rm": post("/api/v1/files/rm", {"path": path, "recursive": True}),
        "upload": post("/api/v1/files/uploads", {"path": path, "size": 5, "checksum": checksum(b"pwned")}),
    }
    try:
        path.encode()
    except UnicodeEncodeError:
        return done  # cannot be put in a URL at all: only JSON bodies can carry it
    for name in ("ls", "stat", "download"):
        done[name] = api.get(f"/api/v1/files/{name}", {"path": path})
    return done


def _snapshot(root: Path) -> dict[str, bytes | None]:
    """Everything under the storage root except alice's home, with file contents."""
    found: dict[str, bytes | None] = {}
    for directory, dirs, names in os.walk(root):
        rel = os.path.relpath(directory, root)
        if rel == "home/alice" or rel.startswith("home/alice/"):
            dirs[:] = []
            continue
        for name in dirs + names:
            path = Path(directory, name)
            found[str(Path(rel, name))] = path.read_bytes() if path.is_file() and not path.is_symlink() else None
    return found


@pytest.fixture
def battlefield(root: Path, home: Path, bob: User, tmp_path: Path) -> Path:
    (root / "home" / "bob").mkdir()
    (root / "home" / "bob" / "secret.txt").write_text("bob's secret")
    (root / "public" / "readme.txt").write_text("public data")
    (home / "to-etc").symlink_to("/etc")
    (home / "to-bob").symlink_to(root / "home" / "bob")
    (home / "to-root").symlink_to(root)
    (home / "up").symlink_to("..")
    (home / "inner").mkdir()
    (home / "inner" / "hop").symlink_to("../to-bob")
    (root / "public" / "to-bob").symlink_to("../home/bob")
    return root


@pytest.mark.parametrize(("path", "expected"), [pytest.param(p, s, id=i) for i, p, s in ATTACKS])
def test_path_attacks_are_refused_by_every_operation(
    alice_api: APIClient, battlefield: Path, local_dc: Datacenter, path: str, expected: int
) -> None:
    before = _snapshot(battlefield)
    for operation, response in _operations(alice_api, path).items():
        assert response.status_code == expected, (operation, response.content[:300])
        body = response.json()
        assert body["detail"] and "internal error" not in body["detail"], (operation, body)
        if expected == 400:
            assert body["errors"][0]["field"] == "path", (operation, body)
    assert _snapshot(battlefield) == before


def test_messages_name_the_rule(alice_api: APIClient, battlefield: Path) -> None:
    def detail(path: str) -> str:
        return str(alice_api.get("/api/v1/files/stat", {"path": path}).json()["detail"])

    assert "'..' segments are not allowed" in detail(f"{HOME}/../bob")
    assert "percent-encoded" in detail(f"{HOME}/a%2Fb")
    assert "null characters" in detail(f"{HOME}/a\x00").lower()
    assert "256 bytes long; the limit is 255" in detail(f"{HOME}/{'a' * 256}")
    assert "NFC" in detail(f"{HOME}/cafe\u0301") and "café" in detail(f"{HOME}/cafe\u0301")
    assert "another user's home; you may use only /pfs/local/home/alice" in detail("/pfs/local/home/bob")
    assert "symlink that leads outside your home" in detail(f"{HOME}/to-bob/secret.txt")
    assert f"{HOME}/to-bob is a symlink" in detail(f"{HOME}/to-bob/secret.txt")
    assert "you may not use datacenter 'elsewhere'; you may use: local" in detail("/pfs/elsewhere/home/alice")
    assert "must start with /pfs/" in detail("/etc/passwd")


def test_symlinks_that_stay_inside_the_home_are_followed(alice_api: APIClient, home: Path) -> None:
    (home / "data").mkdir()
    (home / "data" / "f.txt").write_text("hello")
    (home / "latest").symlink_to("data")
    (home / "abs-latest").symlink_to(home / "data" / "f.txt")
    assert alice_api.get("/api/v1/files/stat", {"path": f"{HOME}/latest/f.txt"}).json()["size"] == 5
    download = alice_api.get("/api/v1/files/download", {"path": f"{HOME}/abs-latest"})
    assert download.getvalue() == b"hello"
    listed = alice_api.get("/api/v1/files/ls", {"path": HOME}).json()["results"]
    assert {e["name"]: e["kind"] for e in listed} == {"abs-latest": "symlink", "data": "dir", "latest": "symlink"}


def test_removing_a_symlink_that_leads_out_removes_the_link_not_its_target(
    alice_api: APIClient, battlefield: Path, home: Path
) -> None:
    response = alice_api.post("/api/v1/files/rm", {"path": f"{HOME}/to-bob"}, format="json")
    assert response.status_code == 200, response.json()
    assert not (home / "to-bob").is_symlink()
    assert (battlefield / "home" / "bob" / "secret.txt").read_text() == "bob's secret"


def test_uploading_onto_a_symlink_replaces_the_link_not_its_target(
    alice_api: APIClient, battlefield: Path, home: Path
) -> None:
    (home / "evil").symlink_to(battlefield / "home" / "bob" / "secret.txt")
    assert upload_file(alice_api, f"{HOME}/evil", b"mine").status_code == 200
    assert (home / "evil").read_bytes() == b"mine" and not (home / "evil").is_symlink()
    assert (battlefield / "home" / "bob" / "secret.txt").read_text() == "bob's secret"


def test_a_symlink_swapped_in_after_the_check_is_not_followed(alice: User, local_dc: Datacenter, home: Path) -> None:
    """The race a job could try: the path is checked, then a directory becomes a symlink before use."""
    (home / "d").mkdir()
    (home / "d" / "f").write_text("mine")
    target = paths.resolve(alice, f"{HOME}/d/f")
    (home / "d" / "f").unlink()
    (home / "d").rmdir()
    (home / "d").symlink_to("/etc")
    storage = storage_for(local_dc)
    with pytest.raises(OSError) as raised:
        storage.open(target.name)
    assert raised.value.errno == errno.ELOOP
    with pytest.raises(OSError):
        storage.remove(target.name)


def test_a_home_that_is_a_symlink_is_refused(alice_api: APIClient, root: Path, alice: User, bob: User) -> None:
    (root / "home" / "bob").mkdir()
    (root / "home" / "alice").symlink_to(root / "home" / "bob")
    response = alice_api.get("/api/v1/files/ls", {"path": HOME})
    assert response.status_code == 403 and "symlink" in response.json()["detail"]


def test_names_differing_only_by_normalization_from_an_existing_one_are_refused(
    alice_api: APIClient, home: Path
) -> None:
    (home / "cafe\u0301").mkdir()  # written in NFD by a job
    upload = start(alice_api, f"{HOME}/café", b"x")
    assert upload.status_code == 409 and upload.json()["code"] == "normalization_clash"
    mkdir = alice_api.post("/api/v1/files/mkdir", {"path": f"{HOME}/café/sub", "parents": True}, format="json")
    assert mkdir.status_code == 409 and "differs only by Unicode normalization" in mkdir.json()["detail"]
    assert sorted(p.name for p in home.iterdir()) == ["cafe\u0301"]


def test_unicode_names_in_nfc_are_fine(alice_api: APIClient, home: Path) -> None:
    assert upload_file(alice_api, f"{HOME}/数据/café.txt", b"ok").status_code == 200
    assert (home / "数据" / "café.txt").read_bytes() == b"ok"


def test_a_user_named_dotdot_gets_no_home(local_dc: Datacenter) -> None:
    user = User.objects.create_user("..", "x@example.com", "pw")
    with pytest.raises(Exception, match="cannot be a home directory"):
        paths.home_dir(user, local_dc)


def test_paths_are_normalized(alice: User, local_dc: Datacenter, home: Path) -> None:
    resolved = paths.resolve(alice, "/pfs//local/home/alice//data/")
    assert resolved.logical == f"{HOME}/data" and resolved.name == "home/alice/data"
    assert resolved.real == Path(local_dc.storage_root).resolve() / "home" / "alice" / "data"
    assert checksum(b"") == "xxh3_128:99aa06d3014798d86001c324468d497f"
