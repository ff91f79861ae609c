"""A sweep end to end on the local engine with a real worker: the trials read their params, write beside their
shared code, log the metric, never run more than `parallel` at once, and the experiment ends with the trial of the
lowest loss as its best."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest
from django.contrib.auth.models import User
from rest_framework.test import APIClient

from datacenters.models import Datacenter
from experiments.models import Experiment
from jobs.models import TERMINAL_STATES, Job
from tests.jobs.conftest import put_package
from tests.jobs.test_local_engine import finished
from tests.wait import wait_for
from tests.workers import WorkerProcess

pytestmark = [pytest.mark.celery, pytest.mark.django_db(transaction=True)]

TRAIN = """\
import os
import paddlecloud
from paddlecloud import metrics
p = paddlecloud.params()
os.makedirs("data", exist_ok=True)  # beside its code, in the package the trials share (as the examples do)
with open(f"data/trial-{p['lr']}-{p['batch']}", "w") as f:
    f.write("downloaded")
loss = (p["lr"] - 0.03) ** 2 + p["batch"] / 1000
for step in range(3):
    metrics.log(step=step, loss=loss + (2 - step) * 0.1)
metrics.flush()
print("trained with", p, "loss", loss, flush=True)
print("trial", os.environ["PADDLECLOUD_TRIAL"], "of", os.environ["PADDLECLOUD_EXPERIMENT"], flush=True)
"""

THEN = "import paddlecloud\nprint('evaluating the best:', paddlecloud.params(), flush=True)\n"


def test_a_grid_sweep_runs_two_at_a_time_and_finds_the_best_trial(
    alice_api: APIClient, alice: User, local_dc: Datacenter, worker: WorkerProcess, tmp_path: Path
) -> None:
    source = tmp_path / "sweep"
    source.mkdir()
    (source / "train.py").write_text(TRAIN)
    (source / "then.py").write_text(THEN)
    put_package(local_dc, alice, "sweep", source)
    sweep = {
        "name": "sweep",
        "params": {"lr": {"values": [0.01, 0.03]}, "batch": {"values": [64, 32]}},
        "parallel": 2,
        "metric": {"name": "loss", "goal": "minimize"},
        "template": {"entry": "python train.py", "parallelism": 1, "pservers": 0, "cpu": "0.5",
                     "package": "/pfs/local/home/alice/jobs/sweep"},
        "then": {"entry": "python then.py", "cpu": "0.5", "package": "/pfs/local/home/alice/jobs/sweep"},
    }  # fmt: skip
    most, done = [0], threading.Event()

    def sample() -> None:  # how many trials wait or run at once, every 100 ms, while the sweep runs
        while not done.is_set():
            most[0] = max(most[0], Job.objects.exclude(state__in=TERMINAL_STATES).count())
            time.sleep(0.1)

    sampler = threading.Thread(target=sample, daemon=True)
    created = alice_api.post("/api/v1/experiments", sweep, format="json")
    assert created.status_code == 201, created.json()
    sampler.start()
    try:
        ended = wait_for(
            lambda: Experiment.objects.exclude(state="running").first(), "the sweep to end", 300, watch=worker
        )
    finally:
        done.set()
        sampler.join(5)
    assert ended.state == "succeeded" and ended.message.startswith("4 of 4 trials succeeded; then sweep-best-")
    assert 1 <= most[0] <= 2, most[0]
    answer = alice_api.get("/api/v1/experiments/sweep").json()
    assert answer["best_trial"]["params"] == {"lr": 0.03, "batch": 32}
    assert answer["best_trial"]["best"] == pytest.approx(0.032) and answer["best_trial"]["steps"] == 2
    trials = alice_api.get("/api/v1/experiments/sweep/trials").json()["results"]
    assert trials[0]["params"] == {"lr": 0.03, "batch": 32}
    assert [t["best"] for t in trials] == sorted(t["best"] for t in trials)  # the metric's order, best first
    written = sorted(p.name for p in (Path(local_dc.storage_root) / "home/alice/jobs/sweep/data").iterdir())
    assert written == ["trial-0.01-32", "trial-0.01-64", "trial-0.03-32", "trial-0.03-64"]
    log = alice_api.get(f"/api/v1/jobs/{answer['best_trial']['job']}/logs?worker=trainer-0").json()["text"]
    assert "trained with {'batch': 32, 'lr': 0.03} loss 0.032" in log
    assert f"trial {answer['best_trial']['index']} of {answer['uid']}" in log  # PADDLECLOUD_TRIAL, _EXPERIMENT
    then = finished("sweep-best", worker)  # the `then` job, run with the best trial's params
    assert then.state == "succeeded" and answer["then_job"] == then.uid
    then_log = alice_api.get(f"/api/v1/jobs/{then.uid}/logs?worker=trainer-0").json()["text"]
    assert "evaluating the best: {'batch': 32, 'lr': 0.03}" in then_log
