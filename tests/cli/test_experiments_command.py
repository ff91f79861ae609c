"""`paddlectl submit -sweep` uploads the package once and starts an experiment whose trials run it with their
params; `get experiments`, `get experiment NAME` (best first) and `kill experiment NAME`, against the live portal."""

from __future__ import annotations

from pathlib import Path

import pytest
from paddlecloud import Experiment, PaddleJob

from experiments.models import Experiment as ExperimentRow
from jobs.models import Job
from tests.cli.conftest import Portal, one_line_error
from tests.wait import wait_for
from tests.workers import WorkerProcess

pytestmark = pytest.mark.django_db(transaction=True)

TRAIN = """\
import paddlecloud
from paddlecloud import metrics
p = paddlecloud.params()
metrics.log(step=0, loss=abs(p["lr"] - 0.03))
metrics.flush()
"""
SWEEP = """\
name: lrs
params:
  lr: {values: [0.01, 0.03, 0.1]}
parallel: 3
metric: {name: loss, goal: minimize}
"""


def test_a_sweep_from_the_command_line_runs_and_shows_its_best_trial(
    portal: Portal, worker: WorkerProcess, tmp_path: Path
) -> None:
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "train.py").write_text(TRAIN)
    (tmp_path / "sweep.yaml").write_text(SWEEP)
    result = portal.run("submit", "-sweep", str(tmp_path / "sweep.yaml"), "-entry", "python train.py",
                        "-cpu", "0.5", "-parallelism", "1", str(package))  # fmt: skip
    assert result.exit_code == 0, result.stderr
    assert "experiment lrs submitted: 3 trials" in result.stdout
    wait_for(lambda: ExperimentRow.objects.exclude(state="running").first(), "the sweep to end", 300, watch=worker)
    listed = portal.run("get", "experiments").stdout
    assert "lrs" in listed and "succeeded" in listed and "3/3" in listed and "0 (trial 1)" in listed
    shown = portal.run("get", "experiment", "lrs").stdout.splitlines()
    assert shown[0].startswith("lrs  succeeded  3/3 succeeded  metric loss")
    assert shown[2].split()[:3] == ["1", "lr=0.03", "succeeded"]  # the best first
    assert sorted(Job.objects.values_list("name", flat=True)) == ["lrs-0", "lrs-1", "lrs-2"]
    assert all(j.spec["package"] == "/pfs/local/home/alice/jobs/lrs" for j in Job.objects.all())
    compared_run = portal.run("compare", "lrs-0", "lrs-1", "lrs-2")
    assert compared_run.exit_code == 0, compared_run.stderr
    compared = compared_run.stdout.splitlines()
    assert compared[0].split() == ["JOB", "STATE", "lr", "loss", "BEST", "loss", "STEP"]
    assert compared[2].split() == ["lrs-1", "succeeded", "0.03", "0", "0", "0"]
    assert compared[1].split() == ["lrs-0", "succeeded", "0.01", "0.02", "0.02", "0"]
    many = portal.run("compare", *[f"j{i}" for i in range(51)])
    assert many.exit_code == 2 and "at most 50 jobs" in one_line_error(many)
    refused = portal.run("kill", "experiment", "lrs")
    assert refused.exit_code == 1 and "experiment lrs is succeeded" in one_line_error(refused)
    bad = portal.run("submit", "-sweep", str(tmp_path / "sweep.yaml"), "-param", "lr=1", "-entry", "x", str(package))
    assert bad.exit_code == 2 and "-param: with -sweep" in one_line_error(bad)


def test_the_sdk_submits_a_sweep_and_reads_its_trials_and_a_trial_s_metrics(
    portal: Portal, worker: WorkerProcess, tmp_path: Path
) -> None:
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "train.py").write_text(TRAIN)
    job = PaddleJob(job_name="sdk", entry_point="python train.py", trainer_package_path=str(package), cpu_nums=0.5,
                    trainers=1, config=str(portal.config))  # fmt: skip
    sweep = {"name": "sdk-lrs", "params": {"lr": {"values": [0.1, 0.03]}}, "parallel": 2,
             "metric": {"name": "loss", "goal": "minimize"}}  # fmt: skip
    experiment = Experiment.submit(sweep, job)
    assert experiment.wait(timeout=300, poll=0.5)["state"] == "succeeded"
    best = experiment.best()
    assert best is not None and best["params"] == {"lr": 0.03} and best["best"] == 0
    assert [t["params"]["lr"] for t in Experiment("sdk-lrs", config=str(portal.config)).trials()] == [0.03, 0.1]
    trial = PaddleJob(job_name=best["job"], entry_point="python train.py", config=str(portal.config))
    assert [(p["step"], p["values"]) for p in trial.metrics()] == [(0, {"loss": 0})]
