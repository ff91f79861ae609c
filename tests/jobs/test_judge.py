"""The local engine's verdict on a failed job (jobs/engines/local/judge.py): a worker a limit killed is the cause,
whichever trainer the look found failed first."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from django.contrib.auth.models import User
from pytest_django.fixtures import Settings as SettingsWrapper

from datacenters.models import Datacenter
from jobs.engines.base import WorkerStatus
from jobs.engines.local.judge import ENDS_CLOSE, Judge, Tally
from jobs.engines.local.supervisor import Supervisor
from jobs.models import JobState, Reason, Role, WorkerState
from tests.jobs.test_queue_api import make_job

pytestmark = pytest.mark.django_db


def test_a_trainer_oom_killed_is_the_cause_though_another_failed_before_it_in_the_look(
    local_dc: Datacenter, alice: User, tmp_path: Path, settings: SettingsWrapper
) -> None:
    """Trainer 1 went over its memory; trainer 0, waiting on it in an all-reduce, died of gloo's timeout. A look
    that finds both ended names the OOM kill, not trainer 0's exit (as a look between the two would have)."""
    settings.VAR_DIR = tmp_path  # the supervisor's state folders (exit_status.json) are this test's own
    job = make_job(local_dc, alice, "leaky", state=JobState.RUNNING)
    job.spec = {**job.spec, "parallelism": 2, "memory": "1Gi"}
    supervisor = Supervisor(local_dc)
    status = supervisor.status_path(job, Role.TRAINER, 1)
    status.parent.mkdir(parents=True)
    status.write_text(json.dumps({"code": 137, "oom_killed": True}))
    tally = Tally(all_running=False, trainer_failed=(0, 134, 0, "trainer 0 exited with code 134: gloo TIMEOUT"),
                  failed_trainers=[(0, 134), (1, 137)])  # fmt: skip
    seen = Judge(supervisor).verdict(job, tally, [], max_retries=0)
    assert (seen.state, seen.reason) == (JobState.FAILED, Reason.OOM_KILLED)
    assert seen.message == "trainer 1 went over its memory limit (1Gi) and was killed" and seen.exit_code == 137


def test_of_two_failed_trainers_the_one_that_ended_first_is_named_whatever_its_index(
    local_dc: Datacenter, alice: User, tmp_path: Path, settings: SettingsWrapper
) -> None:
    """Trainer 1 was killed; trainer 0, waiting on it in an all-reduce, aborted at gloo's time-out later. A look
    that finds both ended names trainer 1, the first to end, not the lower index (CI, 2026-11-30)."""
    settings.VAR_DIR = tmp_path
    job = make_job(local_dc, alice, "lost-rank", state=JobState.RUNNING)
    judge = Judge(Supervisor(local_dc))
    failures = {0: (0, 134, 0, "trainer 0 exited with code 134: gloo TIMEOUT"), 1: (1, 137, 0, "trainer 1 killed")}
    for index, ended_at in ((0, 1_000_060.0), (1, 1_000_000.0)):
        status = judge.supervisor.status_path(job, Role.TRAINER, index)
        status.parent.mkdir(parents=True)
        status.write_text(json.dumps({"exit_code": failures[index][1]}))
        os.utime(status, (ended_at, ended_at))
    assert judge.first_to_end(job, failures[0], failures[1]) == failures[1]  # the look's order: 0, then 1
    assert judge.first_to_end(job, failures[1], failures[0]) == failures[1]
    assert judge.first_to_end(job, None, failures[0]) == failures[0]
    judge.supervisor.status_path(job, Role.TRAINER, 1).unlink()  # no status: never taken for the first
    assert judge.first_to_end(job, failures[0], failures[1]) == failures[0]


def test_a_trainer_that_failed_of_itself_is_named_before_one_that_died_of_a_collectives_error(
    local_dc: Datacenter, alice: User, tmp_path: Path, settings: SettingsWrapper
) -> None:
    """Trainer 1's entry exited 3, and its launcher waited for what the entry left; trainer 0's gloo connection to
    it was refused and its exit status was written first. The job names trainer 1's exit (CI, 2026-11-30), unless
    trainer 1 ended more than ENDS_CLOSE after trainer 0."""
    settings.VAR_DIR = tmp_path
    job = make_job(local_dc, alice, "crashed", state=JobState.RUNNING)
    judge = Judge(Supervisor(local_dc))
    refused = "RuntimeError: [/paddle/third_party/gloo/gloo/transport/tcp/pair.cc:784] connect [127.0.0.1]:11141: "
    failures = {
        0: (0, 1, 0, f"trainer 0 exited with code 1: {refused}Connection refused"),
        1: (1, 3, 0, "trainer 1 exited with code 3: FatalError: `Termination signal` is detected"),
        2: (2, 1, 0, "trainer 2 exited with code 1: RuntimeError: NCCL error in: unhandled system error"),
    }
    for index, ended_at in ((0, 1_000_000.0), (1, 1_000_002.5), (2, 1_000_001.0)):
        status = judge.supervisor.status_path(job, Role.TRAINER, index)
        status.parent.mkdir(parents=True)
        status.write_text(json.dumps({"exit_code": failures[index][1]}))
        os.utime(status, (ended_at, ended_at))
    assert judge.first_to_end(job, failures[0], failures[1]) == failures[1]
    assert judge.first_to_end(job, failures[1], failures[0]) == failures[1]
    assert judge.first_to_end(job, failures[2], failures[0]) == failures[0]  # both a collective's: the first to end
    later = 1_000_000.0 + ENDS_CLOSE + 1  # trainer 1's own failure long after trainer 0's: not what killed trainer 0
    os.utime(judge.supervisor.status_path(job, Role.TRAINER, 1), (later, later))
    assert judge.first_to_end(job, failures[1], failures[0]) == failures[0]


def test_a_trainer_dead_of_a_lost_peer_waits_for_the_peer_still_running_then_is_named(
    local_dc: Datacenter, alice: User, tmp_path: Path, settings: SettingsWrapper
) -> None:
    """Trainer 0 died of gloo's TIMEOUT while trainer 1, OOM-killed, was still ending (its launcher had not yet
    written its status). The look waits, up to ENDS_CLOSE after trainer 0 ended, for the peer (CI, 2026-12-01);
    then, or with no peer still running, it names trainer 0 as before."""
    settings.VAR_DIR = tmp_path
    job = make_job(local_dc, alice, "leaky", state=JobState.RUNNING)
    judge = Judge(Supervisor(local_dc))
    status = judge.supervisor.status_path(job, Role.TRAINER, 0)
    status.parent.mkdir(parents=True)
    status.write_text(json.dumps({"exit_code": 134}))
    failed = (
        0,
        134,
        0,
        "trainer 0 exited with code 134: "
        "RuntimeError: [/paddle/third_party/gloo/gloo/transport/tcp/pair.cc:584] TIMEOUT self_rank = 0 pair_rank = 1",
    )
    workers = [WorkerStatus(Role.TRAINER, 0, WorkerState.FAILED), WorkerStatus(Role.TRAINER, 1, WorkerState.RUNNING)]
    tally = Tally(all_running=False, trainer_failed=failed, failed_trainers=[(0, 134)])
    assert judge.verdict(job, tally, workers, max_retries=0).state == JobState.RUNNING  # the peer may yet explain it
    alone = [workers[0], WorkerStatus(Role.TRAINER, 1, WorkerState.FAILED)]
    assert judge.verdict(job, tally, alone, max_retries=0).reason == Reason.TRAINER_FAILED
    long_ago = status.stat().st_mtime - ENDS_CLOSE - 1
    os.utime(status, (long_ago, long_ago))
    assert judge.verdict(job, tally, workers, max_retries=0).reason == Reason.TRAINER_FAILED
    itself = (0, 3, 0, "trainer 0 exited with code 3: ValueError: bad input")  # not a peer's: named at once
    assert (
        judge.verdict(job, Tally(False, trainer_failed=itself), workers, max_retries=0).reason == Reason.TRAINER_FAILED
    )
