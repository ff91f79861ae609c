"""A user's downloads at once (core/streams.py): the bound holds per user, says why, and frees a slot on close."""

from __future__ import annotations

from pathlib import Path

import pytest
from django.contrib.auth.models import User
from django.test import override_settings
from rest_framework.test import APIClient

from datacenters.models import Datacenter
from jobs.models import Job
from tests.pages.test_pages import make_job, page_client, write_log
from tests.storage.conftest import HOME

pytestmark = pytest.mark.django_db


@override_settings(PADDLECLOUD_DOWNLOADS_PER_USER=2)
def test_files_and_logs_share_the_users_bound_and_close_frees_a_slot(
    alice_api: APIClient, bob_api: APIClient, home: Path, local_dc: Datacenter, alice: User, bob: User
) -> None:
    (home / "model.bin").write_bytes(b"x" * 1000)
    (Path(local_dc.storage_root) / "home" / "bob").mkdir()
    (Path(local_dc.storage_root) / "home" / "bob" / "b.bin").write_bytes(b"b")
    job: Job = make_job(local_dc, alice)
    write_log(local_dc, job, "trainer-0", "hello\n")

    def file_download(api: APIClient, path: str = f"{HOME}/model.bin"):  # type: ignore[no-untyped-def]
        return api.get("/api/v1/files/download", {"path": path})

    held = [file_download(alice_api), page_client(alice).get(f"/jobs/{job.uid}/logs/trainer-0/download")]
    assert [answer.status_code for answer in held] == [200, 200]  # open, not yet read: each holds a slot
    refused = file_download(alice_api)
    assert refused.status_code == 429 and refused["Retry-After"] == "5"
    assert refused.json()["detail"] == (
        "at most 2 downloads at once per user; let one finish (or close it) and try again. "
        "Expected available in 5 seconds."
    )
    log_refused = page_client(alice).get(f"/jobs/{job.uid}/logs/trainer-0/download")
    assert log_refused.status_code == 429 and b"downloads at once" in log_refused.content
    # Another user's downloads are not hers to bound.
    assert file_download(bob_api, "/pfs/local/home/bob/b.bin").status_code == 200
    # Read whole (the server closes it): its slot is hers again.
    assert b"".join(held[0].streaming_content) == b"x" * 1000
    assert file_download(alice_api).status_code == 200
