"""The worker opens a job's log from the home's descriptor: no planted or swapped-in link is ever followed."""

from __future__ import annotations

import contextlib
import errno
import os
import threading
import time
from pathlib import Path

import pytest
from django.contrib.auth.models import User

from datacenters.models import Datacenter
from jobs.engines.local.engine import LocalEngine
from jobs.files.logfiles import open_log, open_log_fd, write_archive
from jobs.models import Job, JobState, Worker
from storage.beneath import NotRegularFile
from tests.jobs.test_log_links import SECRET, log_dir, make_job

APPEND = os.O_WRONLY | os.O_APPEND


@pytest.fixture
def job(alice: User, local_dc: Datacenter) -> Job:
    return make_job(local_dc, alice, JobState.RUNNING)


@pytest.fixture
def worker(job: Job) -> Worker:
    return Worker.objects.get(job=job)


@pytest.fixture
def portal_file(tmp_path: Path) -> Path:
    secret = tmp_path / "portal" / "settings.txt"
    secret.parent.mkdir()
    secret.write_text(SECRET + "\n")
    return secret


def test_a_link_at_the_log_is_refused_for_reading_and_writing(
    job: Job, worker: Worker, local_dc: Datacenter, portal_file: Path
) -> None:
    (log_dir(local_dc, job) / "log.txt").symlink_to(portal_file)
    for flags in (os.O_RDONLY, APPEND):
        with pytest.raises(OSError) as refused:
            open_log_fd(job, worker.name, flags)
        assert refused.value.errno == errno.ELOOP
    assert portal_file.read_text() == SECRET + "\n"


@pytest.mark.parametrize("inside", [False, True], ids=["leading-out", "inside-the-home"])
def test_a_link_at_a_folder_on_the_way_is_refused(
    job: Job, worker: Worker, local_dc: Datacenter, portal_file: Path, inside: bool
) -> None:
    folder = log_dir(local_dc, job)
    folder.rmdir()
    if inside:
        target = folder.parent / "elsewhere"
        target.mkdir()
        (target / "log.txt").symlink_to(portal_file)
    else:
        target = portal_file.parent
        portal_file.rename(target / "log.txt")
    folder.symlink_to(target)
    with pytest.raises(OSError) as refused:
        open_log_fd(job, "trainer-0", APPEND)
    assert refused.value.errno == errno.ELOOP and refused.value.filename == "trainer_0"


def test_a_link_higher_up_the_output_path_is_refused(job: Job, local_dc: Datacenter, tmp_path: Path) -> None:
    jobs_dir = Path(local_dc.storage_root, "home", "alice", "jobs")
    log_dir(local_dc, job).joinpath("log.txt").write_text("real\n")
    jobs_dir.rename(tmp_path / "moved-jobs")
    jobs_dir.symlink_to(tmp_path / "moved-jobs")
    with pytest.raises(OSError) as refused:
        open_log_fd(job, "trainer-0", os.O_RDONLY)
    assert refused.value.filename == "jobs"


def test_a_fifo_at_the_log_does_not_block_the_worker(job: Job, worker: Worker, local_dc: Datacenter) -> None:
    os.mkfifo(log_dir(local_dc, job) / "log.txt")
    began = time.monotonic()
    for flags in (os.O_RDONLY, APPEND):
        with pytest.raises(NotRegularFile) as refused:
            open_log_fd(job, worker.name, flags)
        assert "FIFO" in refused.value.what
    assert LocalEngine(local_dc).judge.log_reason(job, worker) == ""
    assert time.monotonic() - began < 5


def test_a_log_swapped_between_file_and_link_is_never_written_through(
    job: Job, worker: Worker, local_dc: Datacenter, portal_file: Path
) -> None:
    log = log_dir(local_dc, job) / "log.txt"
    spare = log.with_name("spare")
    stop = threading.Event()

    def swap() -> None:
        while not stop.is_set():
            with contextlib.suppress(FileNotFoundError):
                spare.unlink()
            spare.write_text("mine\n")
            spare.replace(log)
            spare.symlink_to(portal_file)
            spare.replace(log)

    swapper = threading.Thread(target=swap, daemon=True)
    swapper.start()
    opened = refused = 0
    try:
        deadline = time.monotonic() + 2
        while time.monotonic() < deadline:
            try:
                fd = open_log_fd(job, worker.name, APPEND)
            except OSError:
                refused += 1
                continue
            os.write(fd, b"[paddlecloud] appended\n")
            os.close(fd)
            opened += 1
    finally:
        stop.set()
        swapper.join(5)
    assert opened and refused, (opened, refused)
    assert portal_file.read_text() == SECRET + "\n"


def test_a_plain_log_opens_and_a_missing_one_is_none(job: Job, local_dc: Datacenter) -> None:
    assert open_log(job, "trainer-0") is None
    (log_dir(local_dc, job) / "log.txt").write_text("step 1\n")
    handle = open_log(job, "trainer-0")
    assert handle is not None
    with handle:
        assert handle.read() == b"step 1\n"


def test_an_archived_pod_log_is_capped_like_the_launchers_copy(job: Job, local_dc: Datacenter) -> None:
    Datacenter.objects.filter(pk=local_dc.pk).update(job_log_limit="1Mi")
    job.refresh_from_db()
    pod_log = b"".join(b"pod line %08d\n" % number for number in range(200_000))  # 4.4 MB
    assert write_archive(job, "trainer-0", pod_log).written
    kept = (log_dir(local_dc, job) / "log.txt").read_bytes()
    assert len(kept) <= 1024 * 1024 + 120 and kept.startswith(b"pod line 00000000\n")
    assert kept.endswith(b"pod line 00199999\n") and b"bytes of output here (log limit 1.0 MiB)" in kept
    assert not write_archive(job, "trainer-0", pod_log).written  # a copy as long as the limit keeps is whole
