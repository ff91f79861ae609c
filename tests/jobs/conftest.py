"""Fixtures for job tests: alice's package on the local datacenter, a real worker with beat."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from django.contrib.auth.models import User

from datacenters.models import Datacenter
from jobs.engines.local import processes, sandbox
from jobs.models import Job
from tests.workers import WorkerProcess, start_worker

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def put_package(datacenter: Datacenter, user: User, jobname: str, source: Path) -> Path:
    target = Path(datacenter.storage_root) / "home" / user.username / "jobs" / jobname
    shutil.copytree(source, target, dirs_exist_ok=True, ignore=shutil.ignore_patterns("data", "__pycache__"))
    return target


def job_pids(job: Job) -> list[tuple[int, int]]:
    """(pid, start time) of every launcher and supervisor the engine recorded for the job."""
    job.refresh_from_db()
    pairs = []
    for record in job.engine_data.values():
        if isinstance(record, dict) and "supervisor" in record:
            pairs += [(record["pid"], record["pid_start"]), (record["supervisor"], record["supervisor_start"])]
    return pairs


def alive(job: Job) -> list[int]:
    return [pid for pid, started in job_pids(job) if processes.is_alive(pid, started)]


@pytest.fixture
def worker(transactional_db: None, tmp_path: Path) -> Iterator[WorkerProcess]:
    process = start_worker(tmp_path, beat=True, concurrency=2)
    yield process
    process.stop()


@pytest.fixture
def fake_package(local_dc: Datacenter, alice: User) -> Path:
    """A package without Paddle: pservers listen, trainers print loss lines and exit as told."""
    source = Path(__file__).parent / "fake_package"
    return put_package(local_dc, alice, "fake", source)


@pytest.fixture
def needs_sandbox() -> None:
    """Skip where this host cannot create the local engine's sandbox (its message says why)."""
    probe = sandbox.probe()
    if not probe.ok:
        pytest.skip(f"no sandbox on this host: {probe.error}")
