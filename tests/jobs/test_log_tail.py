"""A log's tail (jobs.follow.logs.read_tail, the viewer's first read and `?tail=`): the same lines as reading the
whole log would give, read from where they begin (a 40 MiB log is not read through for its last lines)."""

from __future__ import annotations

from pathlib import Path

import pytest
from django.contrib.auth.models import User

from datacenters.models import Datacenter
from jobs.files import logfiles
from jobs.follow import logs
from jobs.models import Job, JobState
from tests.jobs.test_queue_api import make_job

pytestmark = pytest.mark.django_db


def with_log(dc: Datacenter, owner: User, data: bytes) -> Job:
    job = make_job(dc, owner, "tailed", state=JobState.SUCCEEDED, released=True)
    folder = Path(dc.storage_root, "home", owner.username, "jobs", job.name, "output", job.uid, "trainer_0")
    folder.mkdir(parents=True)
    (folder / "log.txt").write_bytes(data)
    return job


@pytest.mark.parametrize("ending", ["\n", "", "\r\n"])
def test_the_tail_is_the_last_lines_whatever_the_count_cursor_or_last_line(
    local_dc: Datacenter, alice: User, ending: str
) -> None:
    lines = [f"line {i} {'x' * (i % 7)}" for i in range(200)]
    text = "\n".join(lines) + ending
    job = with_log(local_dc, alice, text.encode())
    whole = text.split("\n")
    full = len(whole) - 1 if whole[-1] == "" else len(whole)
    for count in (0, 1, 3, 199, 200, 201, 5000):
        tail = logs.read_tail(job, "trainer-0", "", count)
        expected = "\n".join(whole[max(0, full - count):]) if count else ""
        assert tail.text == expected, count
        assert tail.cursor == str(len(text.encode())) and tail.complete
    # From a cursor: never a line before it.
    at = len("\n".join(lines[:190]).encode()) + 1
    assert logs.read_tail(job, "trainer-0", str(at), 50).text == "\n".join(lines[190:]) + ending


def test_a_large_log_s_tail_is_read_from_near_its_end(
    local_dc: Datacenter, alice: User, monkeypatch: pytest.MonkeyPatch
) -> None:
    line = b"step 00000000 loss 0.123456 lr 0.001\n"
    job = with_log(local_dc, alice, line * (40 * 2**20 // len(line)))
    read_from: list[int] = []
    real = logfiles.read_log_file

    def noted(job: Job, worker: str, cursor: str, final: bool) -> logfiles.LogChunk | None:
        read_from.append(logfiles.parse_cursor(cursor))
        return real(job, worker, cursor, final=final)

    monkeypatch.setattr("jobs.engines.local.engine.read_log_file", noted)
    tail = logs.read_tail(job, "trainer-0", "", 1000)
    size = len(line) * (40 * 2**20 // len(line))
    assert tail.text == (line * 1000).decode() and tail.cursor == str(size)
    assert read_from[0] == size - 1000 * len(line), read_from[:3]  # where the last 1,000 lines begin
