"""ASHA: the rule at a rung (pure), and a sweep on the local engine with a real worker whose curves are known: the
trials that fall behind at the first rung are stopped (reason EarlyStopped, their metrics kept), the best
configuration never is, and the experiment ends with it as its best trial."""

from __future__ import annotations

import math
import time
from pathlib import Path

import pytest
from django.contrib.auth.models import User
from rest_framework.test import APIClient

from datacenters.models import Datacenter
from experiments import asha, services
from experiments.models import Experiment
from experiments.search import Metric, parse
from jobs.models import Job
from tests.jobs.conftest import put_package
from tests.wait import wait_for
from tests.workers import WorkerProcess

LOSS, GAIN = Metric("loss"), Metric("acc", "maximize")


@pytest.mark.parametrize(
    ("value", "values", "metric", "stopped"),
    [
        (0.5, [0.5], LOSS, False),  # the first at a rung goes on
        (0.6, [0.5, 0.6], LOSS, True),  # the best 1 of 2 (ceil(2/3)) goes on
        (0.5, [0.5, 0.6], LOSS, False),
        (0.6, [0.4, 0.5, 0.6, 0.7], LOSS, True),  # the best 2 of 4 go on
        (0.5, [0.4, 0.5, 0.6, 0.7], LOSS, False),
        (0.5, [0.4, 0.5, 0.6, 0.7], GAIN, True),  # maximize: 0.7 and 0.6 go on
        (0.6, [0.4, 0.5, 0.6, 0.7], GAIN, False),
        (0.5, [0.5, 0.5, 0.5], LOSS, False),  # a tie with the cutoff goes on
    ],
)
def test_a_trial_goes_on_only_among_the_best_one_in_reduction(
    value: float, values: list[float], metric: Metric, stopped: bool
) -> None:
    assert asha.stops(value, values, metric, 3) is stopped


def test_the_best_value_is_never_stopped() -> None:
    for n in range(1, 30):
        values = [math.sin(i) for i in range(n)]
        assert not asha.stops(min(values), values, LOSS, 3) and not asha.stops(max(values), values, GAIN, 4)


# The loss of lr falls as 1/(step+1) towards 10 x (log10(lr) - log10(0.03))^2: curves that never cross, so the
# order of the trials at every rung is the order of their lr's distance from 0.03.
TRAIN = """\
import math, time
import paddlecloud
from paddlecloud import metrics
lr = paddlecloud.params()["lr"]
floor = 10 * (math.log10(lr) - math.log10(0.03)) ** 2
for step in range(20):
    metrics.log(step=step, loss=floor + 1 / (step + 1))
    metrics.flush()
    time.sleep(0.25)
print("ran to the end", flush=True)
"""
SWEEP = {
    "name": "asha",
    "params": {"lr": {"min": 1e-4, "max": 1.0, "log": True}},
    "search": "asha",
    "max_trials": 6,
    "seed": 27,  # trials 0 and 1 are the two best of the six (their floors 0.14 and 1.08; the others 6.7 and more)
    "parallel": 2,
    "metric": {"name": "loss", "goal": "minimize"},
    "asha": {"min_steps": 2, "max_steps": 18, "reduction": 3},  # rungs at steps 2 and 6
}


@pytest.mark.celery
@pytest.mark.django_db(transaction=True)
def test_asha_stops_the_trials_behind_at_the_first_rung_and_never_the_best(
    alice_api: APIClient, alice: User, local_dc: Datacenter, worker: WorkerProcess, tmp_path: Path
) -> None:
    source = tmp_path / "asha"
    source.mkdir()
    (source / "train.py").write_text(TRAIN)
    put_package(local_dc, alice, "asha", source)
    template = {"entry": "python train.py", "cpu": "0.5", "package": "/pfs/local/home/alice/jobs/asha"}
    created = alice_api.post("/api/v1/experiments", {**SWEEP, "template": template}, format="json")
    assert created.status_code == 201, created.json()
    experiment = Experiment.objects.get()

    def ended() -> Experiment | None:  # this test advances it as often as beat would if it ran every 0.2 s
        services.advance(experiment.pk)
        time.sleep(0.2)
        return Experiment.objects.exclude(state="running").first()

    assert wait_for(ended, "the sweep to end", 240, watch=worker).state == "succeeded"
    trials = {t["index"]: t for t in alice_api.get("/api/v1/experiments/asha/trials?ordering=index").json()["results"]}
    drawn = parse(SWEEP).trials
    assert [trials[i]["params"] for i in range(6)] == drawn  # the seed's draws, as parse makes them again
    assert trials[0]["state"] == "succeeded" and trials[0]["steps"] == 19  # the best ran to its end
    stopped_first = [t for t in trials.values() if t["state"] == "stopped" and "at rung 1 (step 2)" in t["message"]]
    assert len(stopped_first) >= 3, trials  # trials 2 to 5 fall behind trials 0 and 1 at the first rung
    assert {2, 3, 4, 5} <= {t["index"] for t in stopped_first}
    for trial in stopped_first:
        job = Job.objects.get(uid=trial["job"])
        assert (job.state, job.reason) == ("killed", "EarlyStopped") and "not among the best 1/3" in job.message
        assert trial["steps"] is not None and trial["steps"] < 19  # its metrics as far as it got are kept
        points = alice_api.get(f"/api/v1/jobs/{job.uid}/metrics?worker=trainer-0").json()["points"]
        assert points and points[0]["values"]["loss"] > 0
    best = alice_api.get("/api/v1/experiments/asha").json()
    assert best["best_trial"]["index"] == 0 and best["message"].endswith("stopped early")
