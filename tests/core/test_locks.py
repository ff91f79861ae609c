"""The try-locks of core/locks.py: one holder at a time, and no lock file left behind (one per job ever run)."""

from __future__ import annotations

import threading
import uuid
from pathlib import Path

import pytest
from django.conf import settings
from django.db import connection

from core.locks import exclusive, job_lock

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _file_locks() -> None:
    if connection.vendor == "postgresql":
        pytest.skip("PostgreSQL locks are advisory locks: no files")


def lock_files(prefix: str) -> list[Path]:
    folder = Path(settings.PADDLECLOUD_LOCK_DIR)  # type: ignore[misc]  # tests/settings.py's, one per run
    return sorted(folder.glob(f"{prefix}*.lock"))


def test_no_lock_file_is_left_once_a_lock_is_let_go() -> None:
    prefix = f"test-{uuid.uuid4().hex[:8]}-"
    for job_id in range(50):
        with exclusive(f"{prefix}{job_lock(job_id)}") as held:
            assert held and len(lock_files(prefix)) == 1
    assert lock_files(prefix) == []


def test_one_holder_at_a_time_also_across_threads() -> None:
    name = f"test-{uuid.uuid4().hex[:8]}"
    answers: list[bool] = []
    with exclusive(name) as held:
        assert held
        thread = threading.Thread(target=lambda: answers.append(exclusive(name).__enter__()))
        thread.start()
        thread.join()
    assert answers == [False]
    with exclusive(name) as again:
        assert again

