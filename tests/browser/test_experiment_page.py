"""The experiment page in a real browser: 100 trials sorted by the metric and by a param, filtered by state, their
curves overlaid (uPlot) and parallel coordinates (ECharts) drawn, the CSV of the table; and /compare/ of runs
ticked in the job list."""

from __future__ import annotations

import csv
import io
import json
import math
from pathlib import Path

import pytest
from django.contrib.auth.models import User
from django.utils import timezone

from datacenters.models import Datacenter
from experiments.models import Experiment, Trial
from jobs.models import Job, JobState, Role, Worker
from jobs.spec import requested
from tests.browser.conftest import SCREENS, Page, login

pytestmark = pytest.mark.django_db(transaction=True)

LRS = [0.001, 0.003, 0.01, 0.03, 0.1]
BATCHES = [16, 32, 64, 128]


def trial_job(dc: Datacenter, owner: User, name: str, state: str, params: dict[str, float]) -> Job:
    spec = {"parallelism": 1, "pservers": 0, "entry": "python train.py", "params": params}
    cpu, memory, gpu = requested(spec)
    job = Job.objects.create(owner=owner, datacenter=dc, name=name, uid=f"{name}-ab12c", spec=spec, state=state,
                             cpu_request=cpu, memory_request=memory, gpu_request=gpu,
                             admitted_at=timezone.now())  # fmt: skip
    Worker.objects.create(job=job, role=Role.TRAINER, index=0, state="running" if state == "running" else "succeeded")
    return job


def make_experiment(dc: Datacenter, owner: User, trials: int = 100, with_jobs: int = 30) -> Experiment:
    """A grid over lr x batch (repeated to `trials`); the first `with_jobs` trials ran and logged a loss whose
    floor is lr's distance from 0.01 (the best lr), the others still wait."""
    sweep = {"name": "grid", "params": {"lr": {"values": LRS}, "batch": {"values": BATCHES}}, "parallel": 30,
             "metric": {"name": "loss", "goal": "minimize"}}  # fmt: skip
    experiment = Experiment.objects.create(uid="grid-ab12c", name="grid", owner=owner, datacenter=dc,
                                           template={"entry": "python train.py"}, sweep=sweep)  # fmt: skip
    for index in range(trials):
        params = {"lr": LRS[index % 5], "batch": BATCHES[(index // 5) % 4]}
        trial = Trial(experiment=experiment, index=index, params=params)
        if index < with_jobs:
            state = JobState.RUNNING if index % 3 == 0 else JobState.SUCCEEDED
            job = trial_job(dc, owner, f"grid-{index}", state, params)
            floor = abs(math.log10(params["lr"]) + 2) + params["batch"] / 1000
            losses = [floor + 1 / (step + 1) for step in range(0, 60, 2)]
            write_points(job, [(step, {"loss": loss}) for step, loss in zip(range(0, 60, 2), losses, strict=True)])
            trial.job, trial.state, trial.best, trial.last, trial.steps = job, state, min(losses), losses[-1], 58
        trial.save()
    return experiment


def write_points(job: Job, points: list[tuple[int, dict[str, float]]]) -> None:
    folder = Path(job.datacenter.storage_root, "home", job.owner.username, "jobs", job.name, "output", job.uid)
    (folder / "trainer_0").mkdir(parents=True, exist_ok=True)
    lines = (json.dumps({"step": step, "time": 0.0, "values": values}) + "\n" for step, values in points)
    (folder / "trainer_0" / "metrics.jsonl").write_text("".join(lines))


def rows(page: Page, column: int) -> list[str]:
    found: list[str] = page.page.eval_on_selector_all(
        "[data-testid=trial-row]", f"rows => rows.map(r => r.children[{column}].textContent.trim())"
    )
    return found


def test_the_experiment_page_sorts_filters_and_draws_its_trials(
    logged_in: Page, local_dc: Datacenter, alice: User
) -> None:
    experiment = make_experiment(local_dc, alice)
    logged_in.goto(f"/experiments/{experiment.uid}/")
    page = logged_in.page
    assert len(rows(logged_in, 0)) == 100
    best = [float(v) for v in rows(logged_in, 4)[:30]]
    assert best == sorted(best) and rows(logged_in, 1)[0] == "0.01"  # the best first: lr 0.01
    assert "trial 2: loss" in page.inner_text("[data-testid=experiment-best]")
    page.wait_for_selector("#runs[data-drawn='30'] #runs-chart canvas", timeout=15_000)
    assert page.locator("#runs-chart .u-legend .u-series").count() == 31  # step, and one line per trial with a job
    page.wait_for_selector("#parcoords[data-lines='30'] canvas", timeout=15_000)
    page.select_option("#runs-color-by", "batch")
    assert page.locator(".runs-key-item").count() == 4  # batch=16, 32, 64, 128
    page.check("#runs-log")
    page.wait_for_selector("#runs-chart canvas")
    logged_in.screenshot("experiment")
    page.locator("#runs").screenshot(path=str(SCREENS / "experiment-charts.png"))

    # Each a page load: the rows are read once the new page is there (a read mid-load found none, seen in CI).
    with page.expect_navigation():
        page.click("[data-testid=sort-param] >> text=lr")  # by lr, ascending, then again: descending
    assert rows(logged_in, 1)[:20] == ["0.001"] * 20
    with page.expect_navigation():
        page.click("[data-testid=sort-param] >> text=lr")
    assert rows(logged_in, 1)[:20] == ["0.1"] * 20
    page.select_option("[data-testid=trial-filters] select", "running")
    with page.expect_navigation():
        page.click("[data-testid=trial-filters] button")
    assert set(rows(logged_in, 3)) == {"running"} and len(rows(logged_in, 0)) == 10

    answer = page.request.get(logged_in.url + f"/experiments/{experiment.uid}/trials.csv")
    table = list(csv.reader(io.StringIO(answer.text())))
    assert table[0] == ["index", "lr", "batch", "state", "best", "last", "steps", "job", "message"]
    assert len(table) == 101 and table[1][:4] == ["0", "0.001", "16", "running"]
    assert logged_in.problems == []


def test_another_users_experiment_is_not_found(browser: object, live_server: object, local_dc: Datacenter,
                                               alice: User, bob: User) -> None:  # fmt: skip
    make_experiment(local_dc, alice, trials=3, with_jobs=1)
    page = login(browser, live_server.url, bob)  # type: ignore[attr-defined]
    for page_of in ("", "curves.json", "trials.csv"):
        path = f"/experiments/grid-ab12c/{page_of}"
        assert page.page.request.get(page.url + path).status == 404
    assert "grid" not in page.page.request.get(page.url + "/experiments/").text()
    page.page.context.close()


def test_jobs_ticked_in_the_list_are_compared_side_by_side(logged_in: Page, local_dc: Datacenter, alice: User) -> None:
    make_experiment(local_dc, alice, trials=4, with_jobs=4)
    logged_in.goto("/jobs/")
    page = logged_in.page
    for uid in ("grid-1-ab12c", "grid-2-ab12c", "grid-3-ab12c"):
        page.check(f"#compare-{uid}")
    page.wait_for_timeout(2500)  # the table refreshes meanwhile (every 2 s while a job runs): the ticks stay
    assert page.is_checked("#compare-grid-2-ab12c")
    page.click("[data-testid=compare-ticked]")
    page.wait_for_url(lambda url: "/compare/" in url)
    names = page.eval_on_selector_all("[data-testid=compare-row] a", "links => links.map(a => a.textContent)")
    assert names == ["grid-3", "grid-2", "grid-1"]  # in the job list's order, the newest first
    header = page.eval_on_selector_all("[data-testid=compare-table] th", "ths => ths.map(t => t.textContent.trim())")
    assert header[:4] == ["Job", "State", "batch", "lr"] and "loss (last)" in header
    page.wait_for_selector("#runs[data-drawn='3'] #runs-chart canvas", timeout=15_000)
    assert page.locator("#runs-chart .u-legend .u-series").count() == 4
    logged_in.screenshot("compare")
    logged_in.goto("/compare/?jobs=grid-1,nope")
    assert "nope" in page.inner_text("[data-testid=compare-missing]")
    assert logged_in.problems == []
