"""ls, stat, mkdir, rm and download (with Range) on the user's home; usage follows every change."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from django.contrib.auth.models import User
from rest_framework.test import APIClient

from datacenters.models import Datacenter
from tests.storage.conftest import HOME, recorded, start, upload_file


def _tree(home: Path) -> None:
    (home / "b-dir" / "sub").mkdir(parents=True)
    (home / "b-dir" / "sub" / "deep.txt").write_bytes(b"12345")
    (home / "a.txt").write_bytes(b"abc")
    (home / "c-link").symlink_to("a.txt")


def test_ls_lists_a_directory_sorted_with_kind_size_and_mtime(alice_api: APIClient, home: Path) -> None:
    _tree(home)
    body = alice_api.get("/api/v1/files/ls", {"path": HOME}).json()
    assert body["count"] == 3
    assert [(e["name"], e["kind"], e["size"]) for e in body["results"]] == [
        ("a.txt", "file", 3),
        ("b-dir", "dir", 0),
        ("c-link", "symlink", 0),
    ]
    first = body["results"][0]
    assert first["path"] == f"{HOME}/a.txt" and first["mtime"].endswith("Z")


def test_ls_recursive_walks_depth_first_without_entering_symlinks(alice_api: APIClient, home: Path) -> None:
    _tree(home)
    (home / "loop").symlink_to(".")
    body = alice_api.get("/api/v1/files/ls", {"path": HOME, "recursive": "true"}).json()
    assert [e["path"].removeprefix(HOME + "/") for e in body["results"]] == [
        "a.txt",
        "b-dir",
        "b-dir/sub",
        "b-dir/sub/deep.txt",
        "c-link",
        "loop",
    ]


def test_ls_is_paginated(alice_api: APIClient, home: Path) -> None:
    for index in range(5):
        (home / f"f{index}").write_bytes(b"x")
    page = alice_api.get("/api/v1/files/ls", {"path": HOME, "page_size": "2", "page": "2"}).json()
    assert page["count"] == 5 and [e["name"] for e in page["results"]] == ["f2", "f3"]
    assert page["next"] and page["previous"]
    assert alice_api.get("/api/v1/files/ls", {"path": HOME, "page": "9"}).status_code == 404


def test_ls_of_a_file_lists_just_it_and_hides_uploads_in_progress(alice_api: APIClient, home: Path) -> None:
    (home / "one").write_bytes(b"1")
    start(alice_api, f"{HOME}/coming", b"soon")
    assert [e["name"] for e in alice_api.get("/api/v1/files/ls", {"path": HOME}).json()["results"]] == ["one"]
    single = alice_api.get("/api/v1/files/ls", {"path": f"{HOME}/one"}).json()
    assert single["count"] == 1 and single["results"][0]["path"] == f"{HOME}/one"


def test_ls_of_a_missing_path_is_404(alice_api: APIClient, home: Path) -> None:
    response = alice_api.get("/api/v1/files/ls", {"path": f"{HOME}/nope"})
    assert response.status_code == 404 and response.json()["detail"] == f"{HOME}/nope: no such file or directory"


def test_ls_of_a_fresh_home_creates_it_empty(alice_api: APIClient, root: Path, alice: User) -> None:
    assert alice_api.get("/api/v1/files/ls", {"path": HOME}).json()["count"] == 0
    assert (root / "home" / "alice").is_dir()


def test_unknown_query_parameters_are_refused(alice_api: APIClient, home: Path) -> None:
    response = alice_api.get("/api/v1/files/ls", {"path": HOME, "recursve": "1"})
    assert response.status_code == 400 and response.json()["errors"][0]["field"] == "recursve"
    assert alice_api.get("/api/v1/files/stat").json()["errors"][0]["field"] == "path"


def test_stat_describes_files_and_directories(alice_api: APIClient, home: Path) -> None:
    _tree(home)
    assert alice_api.get("/api/v1/files/stat", {"path": f"{HOME}/a.txt"}).json()["kind"] == "file"
    assert alice_api.get("/api/v1/files/stat", {"path": f"{HOME}/b-dir"}).json()["kind"] == "dir"
    home_entry = alice_api.get("/api/v1/files/stat", {"path": HOME}).json()
    assert home_entry["kind"] == "dir" and home_entry["path"] == HOME


def test_mkdir_creates_counts_and_refuses_what_exists(
    alice_api: APIClient, alice: User, local_dc: Datacenter, home: Path
) -> None:
    made = alice_api.post("/api/v1/files/mkdir", {"path": f"{HOME}/runs"}, format="json")
    assert made.status_code == 201 and made.json()["kind"] == "dir"
    again = alice_api.post("/api/v1/files/mkdir", {"path": f"{HOME}/runs"}, format="json")
    assert again.status_code == 409 and again.json()["code"] == "exists"
    assert (
        alice_api.post("/api/v1/files/mkdir", {"path": f"{HOME}/runs", "parents": True}, format="json").status_code
        == 200
    )
    orphan = alice_api.post("/api/v1/files/mkdir", {"path": f"{HOME}/a/b/c"}, format="json")
    assert orphan.status_code == 404 and "pass parents" in orphan.json()["detail"]
    deep = alice_api.post("/api/v1/files/mkdir", {"path": f"{HOME}/a/b/c", "parents": True}, format="json")
    assert deep.status_code == 201 and (home / "a" / "b" / "c").is_dir()
    assert recorded(alice, local_dc) == (0, 4, 0, 0)


def test_rm_removes_files_and_directories_only_with_recursive(
    alice_api: APIClient, alice: User, local_dc: Datacenter, home: Path
) -> None:
    upload_file(alice_api, f"{HOME}/d/x.bin", os.urandom(1000))
    upload_file(alice_api, f"{HOME}/d/e/y.bin", os.urandom(500))
    upload_file(alice_api, f"{HOME}/z.bin", os.urandom(10))
    assert recorded(alice, local_dc) == (1510, 5, 0, 0)
    removed = alice_api.post("/api/v1/files/rm", {"path": f"{HOME}/z.bin"}, format="json")
    assert removed.json() == {"path": f"{HOME}/z.bin", "removed_bytes": 10, "removed_entries": 1}
    refused = alice_api.post("/api/v1/files/rm", {"path": f"{HOME}/d"}, format="json")
    assert refused.status_code == 409 and "pass recursive" in refused.json()["detail"]
    tree = alice_api.post("/api/v1/files/rm", {"path": f"{HOME}/d", "recursive": True}, format="json").json()
    assert (tree["removed_bytes"], tree["removed_entries"]) == (1500, 4)
    assert recorded(alice, local_dc) == (0, 0, 0, 0) and list(home.iterdir()) == []
    missing = alice_api.post("/api/v1/files/rm", {"path": f"{HOME}/d"}, format="json")
    assert missing.status_code == 404


def test_the_home_itself_cannot_be_removed(alice_api: APIClient, home: Path) -> None:
    response = alice_api.post("/api/v1/files/rm", {"path": HOME, "recursive": True}, format="json")
    assert response.status_code == 403 and "your home itself" in response.json()["detail"]
    assert home.is_dir()


def test_usage_never_goes_below_zero_for_files_the_portal_did_not_see(
    alice_api: APIClient, alice: User, local_dc: Datacenter, home: Path
) -> None:
    (home / "from-a-job.log").write_bytes(b"x" * 100)
    alice_api.post("/api/v1/files/rm", {"path": f"{HOME}/from-a-job.log"}, format="json")
    assert recorded(alice, local_dc) == (0, 0, 0, 0)


# --- download ----------------------------------------------------------------------------------


def _download(api: APIClient, path: str, **headers: Any) -> tuple[int, bytes, dict[str, str]]:
    response = api.get("/api/v1/files/download", {"path": path}, **headers)
    body = response.getvalue()  # streaming_content joined, or the content of a plain response
    return response.status_code, body, {k: v for k, v in response.items()}


def test_download_streams_the_whole_file(alice_api: APIClient, home: Path) -> None:
    data = os.urandom(3 * 1024 * 1024 + 17)
    (home / "model.bin").write_bytes(data)
    response = alice_api.get("/api/v1/files/download", {"path": f"{HOME}/model.bin"})
    assert response.status_code == 200 and response.streaming
    assert response.getvalue() == data
    assert response["Content-Length"] == str(len(data)) and response["Accept-Ranges"] == "bytes"
    assert response["Content-Type"] == "application/octet-stream"
    assert response["Content-Disposition"] == 'attachment; filename="model.bin"'
    assert response["ETag"] and response["Last-Modified"]


def test_download_of_html_is_never_served_as_html(alice_api: APIClient, home: Path) -> None:
    (home / "page.html").write_text("<script>alert(1)</script>")
    response = alice_api.get("/api/v1/files/download", {"path": f"{HOME}/page.html"})
    assert response["Content-Type"] == "application/octet-stream"
    assert response["X-Content-Type-Options"] == "nosniff"


def test_download_ranges(alice_api: APIClient, home: Path) -> None:
    data = bytes(range(256)) * 4
    (home / "f").write_bytes(data)
    path = f"{HOME}/f"
    status, body, headers = _download(alice_api, path, HTTP_RANGE="bytes=10-19")
    assert (status, body, headers["Content-Range"], headers["Content-Length"]) == (
        206,
        data[10:20],
        "bytes 10-19/1024",
        "10",
    )
    status, body, headers = _download(alice_api, path, HTTP_RANGE="bytes=1000-")
    assert (status, body, headers["Content-Range"]) == (206, data[1000:], "bytes 1000-1023/1024")
    status, body, _ = _download(alice_api, path, HTTP_RANGE="bytes=-24")
    assert (status, body) == (206, data[-24:])
    status, body, _ = _download(alice_api, path, HTTP_RANGE="bytes=1000-5000")
    assert (status, body) == (206, data[1000:])
    status, _, headers = _download(alice_api, path, HTTP_RANGE="bytes=1024-")
    assert (status, headers["Content-Range"]) == (416, "bytes */1024")
    status, body, _ = _download(alice_api, path, HTTP_RANGE="bytes=0-1,5-6")
    assert (status, body) == (200, data)  # several ranges: the whole file
    status, body, _ = _download(alice_api, path, HTTP_RANGE="bytes=0-9", HTTP_IF_RANGE='"stale"')
    assert (status, body) == (200, data)
    etag = _download(alice_api, path)[2]["ETag"]
    status, body, _ = _download(alice_api, path, HTTP_RANGE="bytes=0-9", HTTP_IF_RANGE=etag)
    assert (status, body) == (206, data[:10])


def test_download_of_an_empty_file_and_of_a_directory(alice_api: APIClient, home: Path) -> None:
    (home / "empty").write_bytes(b"")
    (home / "dir").mkdir()
    assert _download(alice_api, f"{HOME}/empty")[:2] == (200, b"")
    assert _download(alice_api, f"{HOME}/empty", HTTP_RANGE="bytes=0-")[0] == 416
    refused = alice_api.get("/api/v1/files/download", {"path": f"{HOME}/dir"})
    assert refused.status_code == 409 and "not a regular file" in refused.json()["detail"]
    assert alice_api.get("/api/v1/files/download", {"path": f"{HOME}/none"}).status_code == 404


def test_files_in_the_schema(anon_api: APIClient, db: None) -> None:
    text = anon_api.get("/api/schema/", HTTP_ACCEPT="application/vnd.oai.openapi+json").content.decode()
    for route in ("/api/v1/files/ls", "/api/v1/files/uploads/{upload_id}/chunks/{index}", "/api/v1/files/download"):
        assert route in text
