"""A run's checkpoints as the portal reads them (jobs/files/checkpoints.py): the folder is the job's to fill, so
the listing is bounded and never blocks, follows no link and believes no absurd value; the page and API show it."""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path

import pytest
from django.contrib.auth.models import User
from rest_framework.test import APIClient

from datacenters.models import Datacenter
from jobs.files import checkpoints
from jobs.models import Job
from tests.jobs.test_queue_api import make_job

pytestmark = pytest.mark.django_db


def folder_of(job: Job) -> Path:
    path = Path(job.datacenter.storage_root, "home", job.owner.username, "jobs", job.name, "output", job.uid)
    return path / "checkpoints"


def save(job: Job, step: int, meta: object = None, files: int = 1) -> Path:
    step_dir = folder_of(job) / f"step-{step}"
    step_dir.mkdir(parents=True)
    for index in range(files):
        (step_dir / f"part-{index}.bin").write_bytes(b"x" * 100)
    if meta is not None:
        (step_dir / ".paddlecloud-checkpoint.json").write_text(json.dumps(meta))
    return step_dir


def test_checkpoints_are_listed_by_step_with_their_meta(local_dc: Datacenter, alice: User) -> None:
    job = make_job(local_dc, alice, "fit")
    save(job, 10, {"step": 10, "time": 1_700_000_000.0, "metric": 0.5}, files=3)
    save(job, 2, {"step": 2, "time": 1_700_000_000.0, "metric": None})
    (folder_of(job) / "step-7").write_text("a file, not a checkpoint")
    (folder_of(job) / "notes").mkdir()
    found = checkpoints.listed(job)
    assert [(c.step, c.metric, c.size, c.complete_size) for c in found] == [(2, None, 100 + len(json.dumps(
        {"step": 2, "time": 1_700_000_000.0, "metric": None})), True), (10, 0.5, 300 + len(json.dumps(
        {"step": 10, "time": 1_700_000_000.0, "metric": 0.5})), True)]  # fmt: skip
    assert found[-1].path == f"/pfs/local/home/alice/jobs/fit/output/{job.uid}/checkpoints/step-10"
    assert checkpoints.chosen(job, None) == found[-1] and checkpoints.chosen(job, 7) is None


def test_a_hostile_checkpoint_folder_neither_blocks_nor_breaks_the_listing(
    local_dc: Datacenter, alice: User, alice_api: APIClient
) -> None:
    job = make_job(local_dc, alice, "fit")
    os.mkfifo(save(job, 1) / ".paddlecloud-checkpoint.json")  # a FIFO: opening it to read would block
    (save(job, 2) / ".paddlecloud-checkpoint.json").mkdir()  # a folder where the meta file goes
    save(job, 3, {"time": 1e300, "metric": "NaN"})  # absurd values: not believed
    (folder_of(job) / "step-4").symlink_to("/etc")  # a link: never followed
    save(job, 5, files=0)
    (folder_of(job) / "step-5" / "deep").mkdir()
    for index in range(3000):
        (folder_of(job) / "step-5" / "deep" / f"f{index}").write_bytes(b"y")
    done: list[list[checkpoints.Found]] = []
    reader = threading.Thread(target=lambda: done.append(checkpoints.listed(job)), daemon=True)
    reader.start()
    reader.join(30)
    assert done, "listing the checkpoints blocked"
    steps = {c.step: c for c in done[0]}
    assert sorted(steps) == [1, 2, 3, 5]  # step-4 is a link
    assert steps[3].time < 1e12 and steps[3].metric is None  # the folder's time, no metric
    assert steps[5].size == 3000 and steps[5].complete_size
    page = alice_api.get(f"/api/v1/jobs/{job.uid}/checkpoints")
    assert page.status_code == 200 and [c["step"] for c in page.json()["checkpoints"]] == [1, 2, 3, 5]


def test_sizing_stops_at_its_budget(local_dc: Datacenter, alice: User, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(checkpoints, "SIZE_BUDGET", 200)
    job = make_job(local_dc, alice, "fit")
    save(job, 1, files=500)
    (only,) = checkpoints.listed(job)
    assert not only.complete_size and only.size == 200 * 100  # the first 200 files of 500 counted
