"""What a job can leave in a home (sockets, FIFOs, 1,500 nested folders, a path it swaps) gets named answers."""

from __future__ import annotations

import contextlib
import os
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from rest_framework.test import APIClient

from tests.storage.conftest import HOME, start, upload_file

OPERATIONS = ("stat", "ls", "download", "rm")


def _ask(api: APIClient, operation: str, path: str) -> int:
    if operation == "rm":
        return int(api.post("/api/v1/files/rm", {"path": path}, format="json").status_code)
    return int(api.get(f"/api/v1/files/{operation}", {"path": path}).status_code)


@pytest.fixture
def unix_socket(home: Path) -> Iterator[Path]:
    path = home / "server.sock"
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as bound:
        bound.bind(str(path))
        bound.listen(1)
        yield path


def test_a_unix_socket_is_listed_as_other_and_refused_for_download(alice_api: APIClient, unix_socket: Path) -> None:
    entry = alice_api.get("/api/v1/files/stat", {"path": f"{HOME}/server.sock"}).json()
    assert entry["kind"] == "other" and entry["size"] == 0
    assert [e["kind"] for e in alice_api.get("/api/v1/files/ls", {"path": HOME}).json()["results"]] == ["other"]
    refused = alice_api.get("/api/v1/files/download", {"path": f"{HOME}/server.sock"})
    assert refused.status_code == 409 and refused.json()["code"] == "not_a_regular_file"
    assert "socket" in refused.json()["detail"]
    removed = alice_api.post("/api/v1/files/rm", {"path": f"{HOME}/server.sock"}, format="json")
    assert removed.status_code == 200 and not unix_socket.exists()


def test_a_fifo_is_refused_for_download_at_once_and_removed_by_rm(alice_api: APIClient, home: Path) -> None:
    os.mkfifo(home / "pipe")
    began = time.monotonic()
    refused = alice_api.get("/api/v1/files/download", {"path": f"{HOME}/pipe"})
    assert time.monotonic() - began < 5  # no writer ever comes: opening it must not wait for one
    assert refused.status_code == 409 and refused.json()["code"] == "not_a_regular_file"
    assert "FIFO" in refused.json()["detail"]
    assert alice_api.get("/api/v1/files/stat", {"path": f"{HOME}/pipe"}).json()["kind"] == "other"
    assert alice_api.post("/api/v1/files/rm", {"path": f"{HOME}/pipe"}, format="json").status_code == 200


@pytest.mark.skipif(os.geteuid() != 0, reason="making a device node needs root")
def test_a_device_file_is_refused_for_download(alice_api: APIClient, home: Path) -> None:
    os.mknod(home / "null", 0o666 | 0o020000, os.makedev(1, 3))  # a character device: /dev/null
    refused = alice_api.get("/api/v1/files/download", {"path": f"{HOME}/null"})
    assert refused.status_code == 409 and "device" in refused.json()["detail"]
    assert alice_api.post("/api/v1/files/rm", {"path": f"{HOME}/null"}, format="json").status_code == 200


def test_a_tree_of_odd_files_is_removed_whole(alice_api: APIClient, home: Path, unix_socket: Path) -> None:
    (home / "odd").mkdir()
    os.mkfifo(home / "odd" / "pipe")
    (home / "odd" / "link").symlink_to("/etc/passwd")
    with socket.socket(socket.AF_UNIX) as other:
        other.bind(str(home / "odd" / "s"))
        removed = alice_api.post("/api/v1/files/rm", {"path": f"{HOME}/odd", "recursive": True}, format="json")
    assert removed.status_code == 200 and removed.json()["removed_entries"] == 4
    assert not (home / "odd").exists() and Path("/etc/passwd").exists()


def _nest(top: Path, depth: int) -> Path:
    """depth nested folders below top, made by descriptors (the path itself is too long for one syscall)."""
    top.mkdir()
    fd = os.open(top, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for _ in range(depth):
            os.mkdir("d", dir_fd=fd)
            child = os.open("d", os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
            os.close(fd)
            fd = child
        leaf = os.open("leaf.txt", os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=fd)
        os.write(leaf, b"12345")
        os.close(leaf)
    finally:
        os.close(fd)
    return top


def test_a_tree_of_1500_nested_folders_is_removed(alice_api: APIClient, home: Path) -> None:
    _nest(home / "deep", 1500)
    removed = alice_api.post("/api/v1/files/rm", {"path": f"{HOME}/deep", "recursive": True}, format="json")
    assert removed.status_code == 200, removed.json()
    assert removed.json()["removed_entries"] == 1502 and removed.json()["removed_bytes"] == 5
    assert not (home / "deep").exists()
    listed = alice_api.get("/api/v1/files/ls", {"path": HOME, "recursive": "true"}).json()
    assert listed["count"] == 0


def test_a_deep_tree_is_listed_recursively(alice_api: APIClient, home: Path) -> None:
    _nest(home / "deep", 300)  # the listing's paths stay within the 4 KiB a path may have
    listed = alice_api.get("/api/v1/files/ls", {"path": f"{HOME}/deep", "recursive": "true"})
    assert listed.status_code == 200 and listed.json()["count"] == 301


@contextlib.contextmanager
def _swapping(path: Path, outside: Path) -> Iterator[None]:
    """A thread that keeps turning `path` into a file and into a link to `outside`, as a job could."""
    stop = threading.Event()

    def swap() -> None:
        spare = path.with_name(path.name + ".next")
        while not stop.is_set():
            with contextlib.suppress(FileNotFoundError):
                spare.unlink()
            spare.write_bytes(b"inside")
            spare.replace(path)
            with contextlib.suppress(FileNotFoundError):
                spare.unlink()
            spare.symlink_to(outside)
            spare.replace(path)

    thread = threading.Thread(target=swap, daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join(5)


@pytest.mark.parametrize("operation", OPERATIONS)
def test_a_path_swapped_between_file_and_link_is_answered_and_never_followed(
    alice_api: APIClient, home: Path, tmp_path: Path, operation: str
) -> None:
    secret = tmp_path / "portal-secret"
    secret.write_bytes(b"portal secret")
    answers: set[int] = set()
    with _swapping(home / "flip", secret):
        deadline = time.monotonic() + 2
        while time.monotonic() < deadline:
            response_code = _ask(alice_api, operation, f"{HOME}/flip")
            answers.add(response_code)
            if operation == "download" and response_code == 200:
                body = alice_api.get("/api/v1/files/download", {"path": f"{HOME}/flip"})
                assert body.status_code != 200 or body.getvalue() == b"inside"
    assert answers and all(code < 500 for code in answers), answers
    assert answers <= {200, 403, 404, 409}, answers
    assert secret.read_bytes() == b"portal secret"


def test_a_folder_swapped_with_a_link_is_not_entered(alice_api: APIClient, home: Path, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "keep.txt").write_bytes(b"keep")
    stop = threading.Event()

    def swap() -> None:
        while not stop.is_set():
            with contextlib.suppress(OSError):
                (home / "box").mkdir()
                (home / "box" / "keep.txt").write_bytes(b"mine")
            with contextlib.suppress(OSError):
                (home / "box.link").symlink_to(outside)
                (home / "box").rename(home / "box.old")
                (home / "box.link").replace(home / "box")
                (home / "box").unlink()
            with contextlib.suppress(OSError):
                (home / "box.old").rename(home / "box")

    thread = threading.Thread(target=swap, daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + 2
        codes = set()
        while time.monotonic() < deadline:
            removed = alice_api.post("/api/v1/files/rm", {"path": f"{HOME}/box", "recursive": True}, format="json")
            codes.add(removed.status_code)
            codes.add(alice_api.get("/api/v1/files/ls", {"path": f"{HOME}/box"}).status_code)
    finally:
        stop.set()
        thread.join(5)
    assert all(code < 500 for code in codes), codes
    assert (outside / "keep.txt").read_bytes() == b"keep"


def test_an_upload_onto_a_socket_or_below_a_fifo_gets_a_named_answer(
    alice_api: APIClient, home: Path, unix_socket: Path
) -> None:
    os.mkfifo(home / "pipe")
    below = start(alice_api, f"{HOME}/pipe/file.txt", b"data")
    assert below.status_code == 409 and below.json()["code"] == "not_a_directory", below.json()
    replaced = upload_file(alice_api, f"{HOME}/server.sock", b"data")
    assert replaced.status_code in (200, 409), replaced.json()
    if replaced.status_code == 200:
        assert (home / "server.sock").read_bytes() == b"data"
