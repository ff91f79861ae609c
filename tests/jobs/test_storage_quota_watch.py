"""The storage quota holds while jobs run: homes of users with started jobs are measured, over quota fails them."""

from __future__ import annotations

import fcntl
import os
import subprocess
from datetime import timedelta
from pathlib import Path

import pytest
from django.contrib.auth.models import User
from django.utils import timezone
from paddlecloud.contract import venvcache
from pytest_django.fixtures import Settings as SettingsWrapper

from datacenters.models import Datacenter, Quota
from jobs.engines.local import held_open, runtimes
from jobs.engines.local import world as local_world
from jobs.follow.storage_quota import enforce_storage_quota
from jobs.models import Job, JobState, Reason
from storage import usage
from storage.models import StorageUsage

MiB = 1024 * 1024


def running_job(owner: User, datacenter: Datacenter, name: str = "fill", state: JobState = JobState.RUNNING) -> Job:
    return Job.objects.create(owner=owner, datacenter=datacenter, name=name, uid=f"{name}-ab12c", spec={}, state=state)


def sparse(path: Path, size: int) -> None:
    """A file of `size` bytes (its length is what quota counts) without writing them."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("wb") as handle:
        handle.truncate(size)


@pytest.fixture
def home(local_dc: Datacenter, alice: User) -> Path:
    Quota.objects.create(user=alice, datacenter=local_dc, storage="20Mi")
    path = Path(local_dc.storage_root, "home", "alice")
    path.mkdir()
    return path


def test_a_user_over_quota_has_their_started_jobs_failed_naming_the_sizes(
    alice: User, bob: User, local_dc: Datacenter, home: Path
) -> None:
    running, pending = running_job(alice, local_dc), running_job(alice, local_dc, "wait", JobState.PENDING)
    queued = running_job(alice, local_dc, "later", JobState.QUEUED)
    bobs = running_job(bob, local_dc, "bobs")
    sparse(home / "jobs" / "fill" / "out.bin", 30 * MiB)
    assert sorted(enforce_storage_quota()) == sorted([running.pk, pending.pk])
    for job in (running, pending):
        job.refresh_from_db()
        assert (job.state, job.reason) == (JobState.FAILED, Reason.STORAGE_QUOTA_EXCEEDED)
        assert "30.0 MiB" in job.message and "quota of 20.0 MiB" in job.message, job.message
    queued.refresh_from_db()
    bobs.refresh_from_db()
    assert queued.state == JobState.QUEUED and bobs.state == JobState.RUNNING
    row = StorageUsage.objects.get(user=alice, datacenter=local_dc)
    assert row.used_bytes == 30 * MiB  # later uploads are checked against what the job wrote


def test_a_user_under_quota_keeps_running_and_is_measured_at_most_every_few_seconds(
    alice: User, local_dc: Datacenter, home: Path
) -> None:
    job = running_job(alice, local_dc)
    sparse(home / "small.bin", 5 * MiB)
    assert enforce_storage_quota() == []
    first = StorageUsage.objects.get(user=alice, datacenter=local_dc).recomputed_at
    sparse(home / "big.bin", 30 * MiB)
    assert enforce_storage_quota() == []  # measured a moment ago: not again yet
    assert StorageUsage.objects.get(user=alice, datacenter=local_dc).recomputed_at == first
    StorageUsage.objects.filter(user=alice).update(recomputed_at=timezone.now() - timedelta(seconds=60))
    assert enforce_storage_quota() == [job.pk]


def test_links_are_not_followed_when_measuring(alice: User, local_dc: Datacenter, home: Path, tmp_path: Path) -> None:
    job = running_job(alice, local_dc)
    sparse(tmp_path / "outside" / "huge.bin", 500 * MiB)
    (home / "huge").symlink_to(tmp_path / "outside" / "huge.bin")
    (home / "dir").symlink_to(tmp_path / "outside")
    os.mkfifo(home / "pipe")
    assert enforce_storage_quota() == []
    job.refresh_from_db()
    assert job.state == JobState.RUNNING
    assert StorageUsage.objects.get(user=alice, datacenter=local_dc).used_files == 3


def test_more_entries_than_the_file_quota_is_over_quota_without_walking_further(
    alice: User, local_dc: Datacenter, home: Path
) -> None:
    Quota.objects.filter(user=alice).update(storage_files=50)
    job = running_job(alice, local_dc)
    for index in range(200):
        (home / f"f{index}").write_bytes(b"")
    measured = usage.measure_home(alice, local_dc, 51, 10.0)
    assert (measured.files, measured.complete) == (51, False)
    assert enforce_storage_quota() == [job.pk]
    job.refresh_from_db()
    assert "file count quota exceeded" in job.message and "at least 51 entries" in job.message


def test_a_storage_the_portal_does_not_mount_is_skipped(alice: User, local_dc: Datacenter, home: Path) -> None:
    running_job(alice, local_dc)
    Datacenter.objects.filter(pk=local_dc.pk).update(storage_root=str(home / "not-mounted"))
    assert enforce_storage_quota() == []


def preallocate(path: Path, size: int) -> None:
    """Space allocated past the file's end: the file stays 0 bytes long (fallocate --keep-size)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.touch()
    done = subprocess.run(["fallocate", "--keep-size", "-l", str(size), str(path)], capture_output=True, check=False)
    if done.returncode != 0:
        pytest.skip(f"this filesystem cannot preallocate: {done.stderr.decode().strip()}")


def test_space_allocated_past_a_files_end_counts_against_the_quota(
    alice: User, local_dc: Datacenter, home: Path
) -> None:
    job = running_job(alice, local_dc)
    preallocate(home / "jobs" / "fill" / "hidden.bin", 30 * MiB)
    (home / "jobs" / "fill" / "dense.bin").write_bytes(b"x" * 5000)  # its last block's rounding is no allocation
    assert enforce_storage_quota() == [job.pk]
    job.refresh_from_db()
    assert (job.state, job.reason) == (JobState.FAILED, Reason.STORAGE_QUOTA_EXCEEDED)
    assert "your files take 4.9 KiB and 30.0 MiB allocated past their ends" in job.message, job.message
    row = StorageUsage.objects.get(user=alice, datacenter=local_dc)
    assert row.used_bytes == 5000  # the recorded usage stays the files' lengths, as uploads and deletes count


@pytest.mark.skipif(os.geteuid() != 0, reason="reads another uid's descriptors, as the root control worker does")
def test_a_deleted_file_a_job_keeps_open_counts_against_the_quota(
    alice: User, bob: User, local_dc: Datacenter, home: Path
) -> None:
    """Issue 34: 300 MiB written, deleted and kept open by a job was invisible to the walk (quota showed 73 KB).
    A real process of alice's job uid holds the deleted file; a process of bob's uid holds his own."""
    job = running_job(alice, local_dc)
    hidden = home / "jobs" / "fill" / "hidden.bin"
    sparse(hidden, 30 * MiB)
    hidden.chmod(0o644)
    holders = []
    with hidden.open("rb") as handle:  # handed to each holder: a process of that uid with the file open
        for user in (alice, bob):
            uid = local_world.job_ids(user.pk)[0]
            holders.append(subprocess.Popen(["sleep", "120"], user=uid, group=uid, pass_fds=(handle.fileno(),)))
    try:
        hidden.unlink()
        assert held_open.held_open_bytes(local_world.job_ids(alice.pk)[0], home) == 30 * MiB
        assert enforce_storage_quota() == [job.pk]
        job.refresh_from_db()
        assert (job.state, job.reason) == (JobState.FAILED, Reason.STORAGE_QUOTA_EXCEEDED)
        assert "your files take 0 B and 30.0 MiB in deleted files a job keeps open" in job.message, job.message
    finally:
        for holder in holders:
            holder.kill()
            holder.wait()


def test_what_jobs_write_into_their_requirement_layers_counts_and_is_tidied_once_they_stop(
    alice: User, local_dc: Datacenter, home: Path, tmp_path: Path, settings: SettingsWrapper
) -> None:
    """The layer cache is writable while a layer is built, outside the home: what a job writes there counts
    against the quota while it runs, and once its processes are gone all that is no layer goes
    (runtimes.tidy_layers); the 5 complete layers last used, a layer another job is building and the launcher's own
    files stay."""
    settings.PADDLECLOUD_VENV_CACHE = str(tmp_path / "venvs")
    cache = runtimes.layer_cache_of(alice.pk)
    sparse(cache / "hidden.bin", 30 * MiB)  # what the job wrote beside its layer
    sparse(cache / "half-built" / "lib" / "big.so", 5 * MiB)  # a build killed midway
    os.utime(cache / "half-built", (1_700_000_000, 1_700_000_000))  # a while ago: just made, it would be kept
    (cache / "just-made").mkdir()  # by the worker for a job whose launcher has not locked it yet (runtime_for)
    for age, name in enumerate(["ready", "a", "b", "c", "d", "old"]):  # "ready" used last, "old" first
        marker = cache / name / venvcache.COMPLETE_MARKER
        marker.parent.mkdir(parents=True)
        marker.write_text("done\n")
        os.utime(marker, (1_700_000_000 - age, 1_700_000_000 - age))
        (cache / f"{name}.lock").touch()
    (cache / "building").mkdir()
    (cache / "soon.lock").touch()  # taken by a job that has not made its layer's folder yet
    sparse(cache / "stuffed.lock", 1 * MiB)  # no launcher writes into a lock
    sparse(cache / "_pythonpath" / "0123" / "blob", 1 * MiB)  # only links belong there
    job = running_job(alice, local_dc)
    with (cache / "building.lock").open("a+b") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # another job installs this one now
        assert enforce_storage_quota() == [job.pk]
        job.refresh_from_db()
        assert (job.state, job.reason) == (JobState.FAILED, Reason.STORAGE_QUOTA_EXCEEDED)
        assert "and 37.0 MiB in your jobs' requirement layers (outside your home)" in job.message, job.message
        assert runtimes.tidy_layers(alice.pk) == 5  # hidden.bin, half-built, stuffed.lock, the blob, old
    layers = sorted(p.name for p in cache.iterdir() if not p.name.endswith(".lock"))
    # The 5 last used, the one building and the one just made for a job about to start.
    assert layers == ["_pythonpath", "a", "b", "building", "c", "d", "just-made", "ready"]
    assert (cache / "soon.lock").exists() and not (cache / "stuffed.lock").exists()
    assert runtimes.layer_bytes(alice.pk, 5.0) < MiB
