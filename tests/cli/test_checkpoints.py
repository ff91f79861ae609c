"""Checkpoints as things, with real PaddlePaddle on the local engine: a model and its optimizer saved with the step
and the loss in one call (save_paddle), listed by `paddlectl get checkpoints` and the API (kept: the newest and the
best), a new run started from another's with -resume-from (load_paddle restores the very weights), and a rerun of a
failed job going on where it stopped; another user's run is never a starting point."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from django.test import Client
from rest_framework.test import APIClient

from jobs.models import Job
from tests.cli.conftest import Portal, one_line_error
from tests.jobs.test_local_engine import finished
from tests.workers import WorkerProcess

TRAIN = """\
import os
import paddle
from paddlecloud import checkpoint
paddle.seed(0)
model = paddle.nn.Linear(4, 1)
optimizer = paddle.optimizer.Adam(learning_rate=0.1, parameters=model.parameters())
resumed = checkpoint.load_paddle(model, optimizer)
start = 0 if resumed is None else resumed + 1
print(f"start {start} weight {float(model.weight.sum()):.6f}", flush=True)
x, y = paddle.ones([8, 4]), paddle.zeros([8, 1])
for step in range(start, start + 3):
    loss = ((model(x) - y) ** 2).mean()
    loss.backward()
    optimizer.step()
    optimizer.clear_grad()
    checkpoint.save_paddle(step, model, optimizer, metric=float(loss), keep=1, keep_best=1)
print(f"end {step} weight {float(model.weight.sum()):.6f}", flush=True)
if os.environ.get("FAIL"):
    raise SystemExit("failing after a checkpoint, as told")
"""


@pytest.fixture
def package(tmp_path: Path) -> Path:
    folder = tmp_path / "ckpt"
    folder.mkdir()
    (folder / "train.py").write_text(TRAIN)
    return folder


def log_of(portal: Portal, job: Job) -> str:
    path = portal.pfs_home / "jobs" / job.name / "output" / job.uid / "trainer_0" / "log.txt"
    return path.read_text(errors="replace")


def submit(portal: Portal, package: Path, name: str, *flags: str) -> None:
    result = portal.run("submit", "-jobname", name, "-entry", "python train.py", "-cpu", "1", "-memory", "2Gi",
                        "-parallelism", "1", *flags, str(package))  # fmt: skip
    assert result.exit_code == 0, result.stderr


@pytest.mark.paddle
@pytest.mark.celery
@pytest.mark.django_db(transaction=True)
@pytest.mark.timeout(600)
def test_a_run_starts_from_another_s_checkpoint_and_a_failed_rerun_resumes(
    portal: Portal, worker: WorkerProcess, package: Path
) -> None:
    submit(portal, package, "base")
    base = finished("base", worker, timeout=300)
    assert base.state == "succeeded", log_of(portal, base)
    ended = re.search(r"end 2 weight (\S+)", log_of(portal, base))
    assert ended, log_of(portal, base)

    listed = portal.run("get", "checkpoints", "base")
    assert listed.exit_code == 0, listed.stderr
    rows = listed.stdout.splitlines()
    assert rows[0].split() == ["STEP", "SAVED", "SIZE", "METRIC", "PATH"]
    losses = {int(row.split()[0]): float(row.split()[3]) for row in rows[1:]}
    assert 2 in losses and 1 <= len(losses) <= 2, rows  # kept: the newest (2) and the best by the loss
    assert 0 not in losses  # neither the newest nor the best (Adam's first step leaves the highest loss)
    assert rows[-1].endswith(f"/jobs/base/output/{base.uid}/checkpoints/step-2")
    api = portal.run("get", "checkpoints", "base", "-o", "json").stdout
    assert '"metric"' in api and '"complete_size": true' in api

    submit(portal, package, "tune", "-resume-from", "base")  # the newest checkpoint of base: step 2
    tune = finished("tune", worker, timeout=300)
    assert tune.state == "succeeded" and tune.spec["resume_checkpoint"]["step"] == 2
    assert f"start 3 weight {ended.group(1)}" in log_of(portal, tune)  # base's final weights, restored
    assert "end 5 " in log_of(portal, tune)
    assert portal.run("get", "checkpoints", "base").stdout.splitlines()[-1].split()[0] == "2"  # read, never changed
    browser = Client()
    browser.force_login(portal.user)
    page = browser.get(f"/jobs/{base.uid}/").content.decode()
    assert 'data-testid="checkpoints"' in page and f"output/{base.uid}/checkpoints/step-2" in page
    assert f"output/{base.uid}/checkpoints/step-2" in browser.get(f"/jobs/{tune.uid}/").content.decode()

    submit(portal, package, "flaky", "-env", "FAIL=1")
    assert finished("flaky", worker, timeout=300).state == "failed"
    submit(portal, package, "flaky")  # a rerun of the failed job: it goes on from its latest checkpoint
    rerun = finished("flaky", worker, timeout=300)
    assert rerun.state == "succeeded" and "start 3 " in log_of(portal, rerun), log_of(portal, rerun)
    submit(portal, package, "flaky", "-no-resume")  # told not to: from nothing
    assert "start 0 " in log_of(portal, finished("flaky", worker, timeout=300))


@pytest.mark.django_db
def test_a_missing_checkpoint_or_another_user_s_run_is_refused_naming_resume_from(
    portal: Portal, bob_api: APIClient, package: Path
) -> None:
    submit(portal, package, "base")
    for flags, words in [(["-resume-from", "base"], "has no checkpoint to resume from"),
                         (["-resume-from", "base:7"], "has no checkpoint at step 7"),
                         (["-resume-from", "nope"], "you have no job 'nope'"),
                         (["-resume-from", "Base!"], "must be JOB or JOB:STEP")]:  # fmt: skip
        refused = portal.run("submit", "-jobname", "tune", "-entry", "python train.py", *flags, str(package))
        assert refused.exit_code != 0 and words in one_line_error(refused), refused.stderr
        assert "-resume-from" in one_line_error(refused)
    theirs = {"jobname": "steal", "entry": "python train.py", "resume_from": "base", "package": ""}
    answer = bob_api.post("/api/v1/jobs", theirs, format="json")
    assert answer.status_code == 400 and answer.json()["errors"][0]["field"] == "resume_from", answer.json()
    assert bob_api.get("/api/v1/jobs/base/checkpoints").status_code == 404
    assert not Job.objects.filter(name__in=["tune", "steal"]).exists()
