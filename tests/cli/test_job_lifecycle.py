"""submit -wait / -f, wait and get workers on real local-engine jobs (a stand-in package: no Paddle needed)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.cli.conftest import Portal
from tests.workers import WorkerProcess

pytestmark = [pytest.mark.celery, pytest.mark.django_db(transaction=True), pytest.mark.timeout(300)]
FAKE = Path(__file__).resolve().parents[1] / "jobs" / "fake_package"


def test_submit_f_and_wait_exit_with_the_jobs_fate(portal: Portal, worker: WorkerProcess) -> None:
    ok = portal.run("submit", "-jobname", "ok", "-parallelism", "2", "-pservers", "1", "-entry", "python train.py",
                    "-env", "FAKE_STEPS=3", "-f", str(FAKE))
    assert ok.exit_code == 0, (ok.stderr, worker.log()[-2000:])
    lines = ok.stdout.splitlines()
    assert lines[0].startswith("job ok submitted to local (uid ok-")
    for trainer in (0, 1):
        mine = [line for line in lines if line.startswith(f"[trainer-{trainer}] trainer {trainer} ")]
        assert mine == [
            f"[trainer-{trainer}] trainer {trainer} step {step} loss {10.0 / (step + 1):.4f}" for step in range(3)
        ] + [f"[trainer-{trainer}] trainer {trainer} done"]
    assert "[pserver-0] pserver " in ok.stdout
    assert ok.stderr.rstrip().endswith("job ok succeeded")

    bad = portal.run("submit", "-jobname", "bad", "-entry", "python train.py", "-parallelism", "2",
                     "-env", "FAKE_FAIL_TRAINER=1", "-env", "FAKE_EXIT_CODE=3", "-wait", str(FAKE))
    assert bad.exit_code == 1
    assert bad.stderr.splitlines()[-1] == "error: job bad failed: TrainerFailed: trainer 1 exited with code 3"
    assert "Traceback" not in bad.stderr
    again = portal.run("wait", "bad")
    assert again.exit_code == 1 and "TrainerFailed" in again.stderr
    assert portal.run("wait", "ok").exit_code == 0
    workers = json.loads(portal.run("get", "workers", "bad", "-o", "json").stdout)
    assert [(w["name"], w["state"], w["exit_code"]) for w in workers if w["name"] == "trainer-1"] == [
        ("trainer-1", "failed", 3)]
    table = portal.run("get", "workers", "bad").stdout.splitlines()
    assert table[0].split() == ["NAME", "ROLE", "STATE", "START", "RESTARTS", "EXIT", "CODE", "CPU", "MEM", "MESSAGE"]
    assert table[2].split()[:3] == ["trainer-1", "trainer", "failed"] and " 3 " in table[2]


def test_a_failed_job_names_its_error_in_wait_and_get_jobs(portal: Portal, worker: WorkerProcess) -> None:
    raised = portal.run("submit", "-jobname", "raises", "-entry", "python train.py", "-env", "FAKE_FAIL_TRAINER=0",
                        "-env", "FAKE_RAISE=bad learning rate 7", "-wait", str(FAKE))
    assert raised.exit_code == 1, (raised.stderr, worker.log()[-2000:])
    assert raised.stderr.splitlines()[-1] == (
        "error: job raises failed: TrainerFailed: trainer 0 exited with code 1: ValueError: bad learning rate 7")
    missing = portal.run("submit", "-jobname", "missing", "-entry", "python missing.py", "-wait", str(FAKE))
    assert missing.exit_code == 1 and "can't open file" in missing.stderr.splitlines()[-1], missing.stderr
    table = portal.run("get", "jobs").stdout.splitlines()
    assert table[0].split()[-2:] == ["REASON", "MESSAGE"]
    row = next(line for line in table if line.startswith("raises "))
    assert row.endswith("TrainerFailed   trainer 0 exited with code 1: ValueError: bad learning rate 7"), table
    row = next(line for line in table if line.startswith("missing "))
    assert "trainer 0 exited with code 2: python" in row and "can't open file" in row, table
