"""file cp / ls / mkdir / rm against the live portal: copy semantics, and transfers that resume."""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from storage.models import Upload, UploadChunk
from tests.cli.conftest import NOW, Portal, config_text, golden, one_line_error, write_config
from tests.cli.proxy import Proxy

pytestmark = pytest.mark.django_db(transaction=True)
HOME = "/pfs/local/home/alice"


def tree(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.fixture
def local_tree(tmp_path: Path) -> Path:
    src = tmp_path / "src"
    (src / "sub" / "deeper").mkdir(parents=True)
    (src / "empty").mkdir()
    (src / "a.txt").write_text("alpha\n")
    (src / "sub" / "b.bin").write_bytes(os.urandom(200_000))
    (src / "sub" / "deeper" / "c.txt").write_text("gamma\n")
    (src / "café.txt").write_text("composed or not\n")
    return src


def test_a_directory_without_slash_is_copied_into_dest(portal: Portal, local_tree: Path) -> None:
    result = portal.run("file", "cp", str(local_tree), f"{HOME}/data")
    assert result.exit_code == 0, result.stderr
    assert result.stdout == f"uploaded 4 files (195.3KiB) to {HOME}/data\n"
    assert tree(portal.pfs_home / "data" / "src") == tree(local_tree)
    assert (portal.pfs_home / "data" / "src" / "empty").is_dir()


def test_a_directory_with_slash_copies_its_contents(portal: Portal, local_tree: Path) -> None:
    assert portal.run("cp", str(local_tree) + "/", f"{HOME}/data").exit_code == 0
    assert tree(portal.pfs_home / "data") == tree(local_tree)


def test_files_go_into_a_directory_or_onto_a_name(portal: Portal, local_tree: Path) -> None:
    portal.run("mkdir", f"{HOME}/dir")
    assert portal.run("cp", str(local_tree / "a.txt"), f"{HOME}/dir").exit_code == 0
    assert (portal.pfs_home / "dir" / "a.txt").read_text() == "alpha\n"
    assert portal.run("cp", str(local_tree / "a.txt"), f"{HOME}/renamed.txt").exit_code == 0
    assert (portal.pfs_home / "renamed.txt").read_text() == "alpha\n"
    assert portal.run("file", "put", str(local_tree / "a.txt"), str(local_tree / "sub" / "deeper" / "c.txt"),
                      f"{HOME}/new/").exit_code == 0
    assert sorted(p.name for p in (portal.pfs_home / "new").iterdir()) == ["a.txt", "c.txt"]


def test_downloads_mirror_the_upload_semantics(portal: Portal, local_tree: Path, tmp_path: Path) -> None:
    portal.run("cp", str(local_tree) + "/", f"{HOME}/data")
    whole = tmp_path / "whole"
    result = portal.run("cp", f"{HOME}/data", str(whole))
    assert result.exit_code == 0, result.stderr
    assert result.stdout == f"downloaded 4 files (195.3KiB) to {whole}\n"
    assert tree(whole / "data") == tree(local_tree) and (whole / "data" / "empty").is_dir()
    contents = tmp_path / "contents"
    assert portal.run("file", "get", f"{HOME}/data/", str(contents)).exit_code == 0
    assert tree(contents) == tree(local_tree)
    one = tmp_path / "one.bin"
    assert portal.run("cp", f"{HOME}/data/sub/b.bin", str(one)).exit_code == 0
    assert one.read_bytes() == (local_tree / "sub" / "b.bin").read_bytes()


def test_ls_mkdir_and_rm(portal: Portal, local_tree: Path, pinned: datetime) -> None:
    portal.run("cp", str(local_tree) + "/", f"{HOME}/data")
    stamp = (NOW - timedelta(hours=5)).timestamp()
    for path in (portal.pfs_home / "data").rglob("*"):
        os.utime(path, (stamp, stamp))
    listed = portal.run("ls", f"{HOME}/data")
    assert listed.exit_code == 0, listed.stderr
    golden("ls.txt", listed.stdout)
    recursive = portal.run("file", "ls", "-r", f"{HOME}/data")
    golden("ls_recursive.txt", recursive.stdout)
    entries = json.loads(portal.run("ls", "-o", "json", f"{HOME}/data/a.txt").stdout)
    assert [(e["path"], e["kind"], e["size"]) for e in entries] == [(f"{HOME}/data/a.txt", "file", 6)]
    assert "data/" in portal.run("ls").stdout  # the home by default

    made = portal.run("mkdir", f"{HOME}/x/y/z", f"{HOME}/data")
    assert made.stdout == f"created {HOME}/x/y/z\nexists {HOME}/data\n"
    assert (portal.pfs_home / "x" / "y" / "z").is_dir()
    removed = portal.run("rm", f"{HOME}/data/a.txt")
    assert removed.stdout == f"removed {HOME}/data/a.txt (1 entry, 6B)\n"
    assert portal.run("file", "rm", "-r", f"{HOME}/data").exit_code == 0
    assert not (portal.pfs_home / "data").exists()


def test_public_data_can_be_read_but_not_written(portal: Portal, tmp_path: Path) -> None:
    (portal.storage / "public" / "mnist").mkdir()
    (portal.storage / "public" / "mnist" / "train.txt").write_text("1 2 3\n")
    assert portal.run("cp", "/pfs/local/public/mnist", str(tmp_path)).exit_code == 0
    assert (tmp_path / "mnist" / "train.txt").read_text() == "1 2 3\n"
    refused = portal.run("cp", str(tmp_path / "mnist" / "train.txt"), "/pfs/local/public/mine.txt")
    assert refused.exit_code == 1
    assert "/pfs/local/public is read-only" in one_line_error(refused)


@pytest.fixture
def proxy(portal: Portal) -> Iterator[Proxy]:
    """The portal behind a proxy the test can cut; the config points at the proxy."""
    front = Proxy(portal.url).start()
    write_config(portal.config, config_text(front.url))
    yield front
    front.stop()


def test_an_upload_cut_half_way_resumes_and_sends_only_the_missing_chunks(
    portal: Portal, proxy: Proxy, tmp_path: Path
) -> None:
    data = os.urandom(3 * 1024 * 1024 + 12345)  # 13 chunks of 256Ki, the last one short
    big = tmp_path / "big.bin"
    big.write_bytes(data)
    target = f"{HOME}/big.bin"
    proxy.cut_after = len(data) // 2
    first = portal.process("cp", "--chunk-size", "256Ki", str(big), target, PADDLECTL_RETRIES="1")
    assert first.returncode == 1, first.stderr
    assert "Traceback" not in first.stderr and len(first.stderr.splitlines()) == 1
    assert "run the same command again to resume it" in first.stderr
    upload = Upload.objects.get(path=target)
    assert upload.state == "open" and upload.chunk_count == 13
    kept = UploadChunk.objects.filter(upload=upload, ok=True).count()
    assert 2 <= kept <= 7, kept
    assert not (portal.pfs_home / "big.bin").exists()

    proxy.reset()
    proxy.start()
    second = portal.process("cp", "--chunk-size", "256Ki", str(big), target)
    assert second.returncode == 0, second.stderr
    assert f"resuming {target}: {kept} of 13 chunks are already on the portal" in second.stderr
    assert second.stdout.endswith(f"; {kept} chunks were already there\n")
    assert proxy.count(b"PUT /api/v1/files/uploads/") == 13 - kept
    assert (portal.pfs_home / "big.bin").read_bytes() == data
    assert Upload.objects.get(path=target).state == "completed"


def test_a_large_file_goes_in_large_chunks(portal: Portal, tmp_path: Path, settings: Any) -> None:
    settings.PADDLECLOUD_UPLOAD_CHUNK = 1024 * 1024  # the portal's default, for clients that choose none
    data = os.urandom(20 * 1024 * 1024 + 7)
    big = tmp_path / "big.bin"
    big.write_bytes(data)
    result = portal.run("cp", str(big), f"{HOME}/big.bin")
    assert result.exit_code == 0, result.stderr
    assert (portal.pfs_home / "big.bin").read_bytes() == data
    upload = Upload.objects.get(path=f"{HOME}/big.bin")
    # paddlectl's choice: a quarter of the file each (one per connection), at least 8 MiB
    assert upload.chunk_size == 8 * 1024 * 1024 and upload.chunk_count == 3


def test_a_portal_with_smaller_chunks_gets_its_default(portal: Portal, tmp_path: Path, settings: Any) -> None:
    settings.PADDLECLOUD_UPLOAD_MAX_CHUNK = 1024 * 1024
    settings.PADDLECLOUD_UPLOAD_CHUNK = 256 * 1024
    data = os.urandom(3 * 1024 * 1024)
    (tmp_path / "f.bin").write_bytes(data)
    result = portal.run("cp", str(tmp_path / "f.bin"), f"{HOME}/f.bin")
    assert result.exit_code == 0, result.stderr
    assert (portal.pfs_home / "f.bin").read_bytes() == data
    assert Upload.objects.get(path=f"{HOME}/f.bin").chunk_size == 256 * 1024


def test_a_download_cut_half_way_resumes_with_a_range(portal: Portal, proxy: Proxy, tmp_path: Path) -> None:
    data = os.urandom(4 * 1024 * 1024)
    (portal.pfs_home).mkdir(parents=True, exist_ok=True)
    (portal.pfs_home / "big.bin").write_bytes(data)
    local = tmp_path / "big.bin"
    proxy.cut_down_after = len(data) // 2
    first = portal.process("cp", f"{HOME}/big.bin", str(local), PADDLECTL_RETRIES="0")
    assert first.returncode == 1 and "run the same command again to resume it" in first.stderr, first.stderr
    part = tmp_path / "big.bin.paddlectl-part"
    assert 0 < part.stat().st_size < len(data) and not local.exists()
    have = part.stat().st_size

    proxy.reset()
    proxy.start()
    second = portal.process("cp", f"{HOME}/big.bin", str(local))
    assert second.returncode == 0, second.stderr
    assert local.read_bytes() == data and not part.exists()
    assert re.search(rb"Range: bytes=%d-" % have, bytes(proxy.sent), re.IGNORECASE)
    assert proxy.received < len(data) - have + 64 * 1024  # only the rest came (plus headers)
