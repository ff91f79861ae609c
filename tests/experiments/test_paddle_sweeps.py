"""Sweeps of real PaddlePaddle training, in parameter-server and collective mode: the examples made to read their
learning rate from the trial's params by the tutorial's own edit (docs/tutorial/first-sweep.md), two trials each,
through the API and a real Celery worker. Each trial trains with its rate, logs its loss curve, and the experiment
names as best the trial whose loss, as the portal read it from the trial's metrics, is lowest."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import User
from rest_framework.test import APIClient

from datacenters.models import Datacenter
from experiments.models import Experiment
from tests.jobs.conftest import EXAMPLES, put_package
from tests.wait import wait_for
from tests.workers import WorkerProcess

pytestmark = [pytest.mark.paddle, pytest.mark.celery, pytest.mark.django_db(transaction=True)]

FIXED_RATE = "LEARNING_RATE = 0.05\n"
RATE_FROM_PARAMS = 'LEARNING_RATE = float(__import__("paddlecloud").params().get("lr", 0.05))\n'


def sweepable(example: str, into: Path) -> Path:
    """The example with the tutorial's edit: its learning rate read from the trial's params."""
    package = into / example
    shutil.copytree(EXAMPLES / example, package)
    train = package / "train.py"
    text = train.read_text()
    assert text.count(FIXED_RATE) == 1, "the tutorial's sed no longer matches the example"
    train.write_text(text.replace(FIXED_RATE, RATE_FROM_PARAMS))
    return package


def why_not(api: APIClient, trials: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each trial that did not succeed: its job's reason and message, its events and its trainers' last log lines."""
    told = []
    for trial in trials:
        if trial["state"] == "succeeded" or not trial["job"]:
            continue
        job = api.get(f"/api/v1/jobs/{trial['job']}").json()
        events = api.get(f"/api/v1/jobs/{trial['job']}/events").json()
        logs = {
            name: api.get(f"/api/v1/jobs/{trial['job']}/logs?worker={name}").json().get("text", "")[-1500:]
            for name in ("trainer-0", "trainer-1", "pserver-0")
        }
        told.append({"trial": trial, "job": job, "events": events, "logs": logs})
    return told


@pytest.mark.parametrize(
    ("example", "shape"),
    [
        ("fit_a_line", {"parallelism": 2, "pservers": 1, "pscpu": "0.5", "psmemory": "1Gi"}),
        ("fit_a_line_collective", {"parallelism": 2, "pservers": 0}),
    ],
    ids=["ps", "collective"],
)
def test_a_sweep_of_real_paddle_training_names_the_trial_of_lowest_loss(
    alice_api: APIClient, alice: User, local_dc: Datacenter, worker: WorkerProcess, tmp_path: Path,
    example: str, shape: dict[str, Any],
) -> None:  # fmt: skip
    put_package(local_dc, alice, "rates", sweepable(example, tmp_path))
    sweep = {
        "name": "rates",
        "params": {"lr": {"values": [0.001, 0.05]}},
        "parallel": 2,
        "metric": {"name": "loss", "goal": "minimize"},
        "template": {"entry": "python train.py", "passes": 3, "cpu": "0.5", "memory": "1Gi",
                     "package": "/pfs/local/home/alice/jobs/rates", **shape},
    }  # fmt: skip
    created = alice_api.post("/api/v1/experiments", sweep, format="json")
    assert created.status_code == 201, created.json()
    ended = wait_for(lambda: Experiment.objects.exclude(state="running").first(), "the sweep to end", 420, watch=worker)
    trials = alice_api.get("/api/v1/experiments/rates/trials?ordering=index").json()["results"]
    assert ended.state == "succeeded", (ended.message, why_not(alice_api, trials))
    assert [t["state"] for t in trials] == ["succeeded", "succeeded"], why_not(alice_api, trials)
    assert all(t["steps"] and t["steps"] > 0 and t["best"] is not None for t in trials), trials
    best = alice_api.get("/api/v1/experiments/rates").json()["best_trial"]
    assert best["index"] == min(trials, key=lambda t: t["best"])["index"]
    for trial in trials:  # each trained with its own rate: the curves differ
        log = alice_api.get(f"/api/v1/jobs/{trial['job']}/logs?worker=trainer-0").json()["text"]
        assert "loss" in log, log[-2000:]
    assert trials[0]["best"] != trials[1]["best"]
