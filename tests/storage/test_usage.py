"""Usage recomputed from disk: drift from files jobs wrote directly is reported, and fixed with --fix."""

from __future__ import annotations

import io
import os
from pathlib import Path

import pytest
from django.contrib.auth.models import User
from django.core.management import CommandError, call_command
from rest_framework.test import APIClient

from datacenters.models import Datacenter
from storage import usage
from storage.models import StorageUsage
from tests.storage.conftest import CHUNK, HOME, recorded, start, upload_file


def _run(*args: str) -> str:
    out = io.StringIO()
    call_command("storage_usage", *args, stdout=out, stderr=out)
    return out.getvalue()


def test_files_written_by_a_job_show_as_drift_until_fixed(
    alice_api: APIClient, alice: User, bob: User, local_dc: Datacenter, root: Path, home: Path
) -> None:
    upload_file(alice_api, f"{HOME}/kept.bin", os.urandom(1000))
    # A job writes its output straight onto the shared filesystem.
    (home / "output").mkdir()
    (home / "output" / "log.txt").write_bytes(b"x" * 2048)
    (root / "home" / "bob").mkdir()
    (root / "home" / "bob" / "b.bin").write_bytes(b"y" * 10)

    with pytest.raises(CommandError, match="2 user\\(s\\) checked, 2 with drift; run with --fix"):
        _run()
    assert recorded(alice, local_dc) == (1000, 1, 0, 0)  # a report changes nothing

    fixed = _run("--fix")
    assert "local alice: bytes 1000 B -> 3.0 KiB, files 1 -> 3" in fixed
    assert "local bob: bytes 0 B -> 10 B, files 0 -> 1" in fixed
    assert recorded(alice, local_dc) == (3048, 3, 0, 0) and recorded(bob, local_dc) == (10, 1, 0, 0)
    assert StorageUsage.objects.get(user=alice).recomputed_at is not None
    assert "2 user(s) checked, 0 with drift" in _run("-v", "2")


def test_reservations_of_live_uploads_are_recomputed_too(
    alice_api: APIClient, alice: User, local_dc: Datacenter, home: Path
) -> None:
    start(alice_api, f"{HOME}/a", b"z" * CHUNK)
    StorageUsage.objects.filter(user=alice).update(reserved_bytes=999_999, reserved_files=7)
    assert "reserved 976.6 KiB -> 64.0 KiB, reserved files 7 -> 1" in _run("--fix", "--user", "alice")
    assert recorded(alice, local_dc) == (0, 0, CHUNK, 1)


def test_the_command_refuses_unknown_names(db: None) -> None:
    with pytest.raises(CommandError, match="unknown datacenter"):
        _run("--datacenter", "nowhere")
    with pytest.raises(CommandError, match="unknown user"):
        _run("--user", "nobody")


def test_a_datacenter_whose_storage_is_not_mounted_is_skipped(local_dc: Datacenter, alice: User) -> None:
    local_dc.storage_root = "/nonexistent/pfs"
    local_dc.save()
    assert "0 user(s) checked" in _run()


def test_other_apps_record_and_recompute_usage(alice: User, local_dc: Datacenter, home: Path) -> None:
    usage.record_usage(alice, local_dc, 500, 2)
    assert recorded(alice, local_dc) == (500, 2, 0, 0)
    (home / "out.txt").write_bytes(b"abc")
    drift = usage.recompute_user(alice, local_dc)
    assert drift.drifted and (drift.actual_bytes, drift.actual_files) == (3, 1)
    assert recorded(alice, local_dc) == (3, 1, 0, 0)


def test_the_quota_api_shows_storage_usage_with_the_compute_quota(
    alice_api: APIClient, alice: User, local_dc: Datacenter, home: Path
) -> None:
    upload_file(alice_api, f"{HOME}/f", b"q" * 100)
    report = alice_api.get("/api/v1/quota?datacenter=local").json()["results"][0]
    assert report["usage"]["storage"] == 100 and report["usage"]["storage_files"] == 1
    assert report["limits"]["storage"] == 100 * 2**30 and "cpu" in report["limits"]
