"""Progress and ETA (jobs.follow.progress): the math from points, the line rules of total_steps, and the stored
progress on the job list, the job page and `paddlectl get jobs` (a real job: tests/cli/test_describe.py)."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.utils import timezone
from paddlecloud.ctl.output import progress_cell

from datacenters.models import Datacenter
from jobs.follow import progress
from jobs.follow.metrics import parse_line
from jobs.models import EventKind, Job, JobEvent, JobState, Role, Worker
from jobs.templatetags import job_tags
from tests.pages.test_pages import make_job, page_client


def points(*steps: tuple[int, float], total: int | None = 100) -> list[dict[str, Any]]:
    """(step, time) pairs as jobs.follow.metrics parses them, each with `total` if given."""
    made = []
    for step, when in steps:
        point: dict[str, Any] = {"step": step, "time": when, "values": {}}
        if total is not None:
            point["total_steps"] = total
        made.append(point)
    return made


def test_the_rate_and_eta_come_from_the_recent_points() -> None:
    found = progress.of_points(points((10, 1000.0), (20, 1010.0), (40, 1030.0)))
    assert found == {"step": 40, "total_steps": 100, "fraction": 0.4, "eta_seconds": 60, "rate_steps_per_s": 1.0}


def test_the_rate_follows_the_last_five_minutes_not_the_whole_run() -> None:
    # Fast at first (100 steps in 10 s), then one step every 10 s for ten minutes.
    slow = [(100 + i, 1010.0 + 10 * i) for i in range(61)]
    found = progress.of_points(points((0, 1000.0), *slow, total=1000))
    assert found is not None and found["rate_steps_per_s"] == pytest.approx(0.1, rel=0.05)
    assert found["eta_seconds"] == pytest.approx(8400, rel=0.05)


def test_a_resumed_run_measures_its_rate_after_the_step_went_back() -> None:
    found = progress.of_points(points((90, 1000.0), (95, 1005.0), (50, 1100.0), (52, 1104.0)))
    assert found is not None and (found["step"], found["rate_steps_per_s"]) == (52, 0.5)


@pytest.mark.parametrize(
    "steps",
    [((5, 1000.0),), ((5, 1000.0), (5, 1010.0)), ((5, 1000.0), (6, 1000.0))],
    ids=["one point", "no step moved", "no time passed"],
)
def test_the_eta_is_unknown_without_a_rate(steps: tuple[tuple[int, float], ...]) -> None:
    found = progress.of_points(points(*steps))
    assert found is not None and found["eta_seconds"] is None and found["rate_steps_per_s"] is None


def test_without_a_total_there_is_no_progress_and_past_the_total_is_done() -> None:
    assert progress.of_points(points((5, 1000.0), total=None)) is None
    assert progress.of_points([]) is None
    past = progress.of_points(points((120, 1000.0), (130, 1010.0)))
    assert past is not None and (past["fraction"], past["eta_seconds"]) == (1.0, 0)


def test_the_job_shows_its_slowest_trainer_and_the_latest_eta() -> None:
    ahead = {"step": 80, "total_steps": 100, "fraction": 0.8, "eta_seconds": 900, "rate_steps_per_s": 0.02}
    behind = {"step": 40, "total_steps": 100, "fraction": 0.4, "eta_seconds": 60, "rate_steps_per_s": 1.0}
    assert progress.combine([ahead, behind]) == {**behind, "eta_seconds": 900}
    assert progress.combine([ahead, {**behind, "eta_seconds": None}])["eta_seconds"] is None  # type: ignore[index]
    assert progress.combine([]) is None


def line(**fields: object) -> str:
    return json.dumps({"step": 3, "time": 1.5, "values": {"loss": 0.5}, **fields})


def test_a_line_may_carry_a_total_and_then_needs_no_values() -> None:
    assert parse_line(line(total_steps=10)) == {"step": 3, "time": 1.5, "values": {"loss": 0.5}, "total_steps": 10}
    assert parse_line(line(total_steps=10, values={})) == {"step": 3, "time": 1.5, "values": {}, "total_steps": 10}
    assert parse_line(line(values={})) is None  # without a total a line still needs a value


@pytest.mark.parametrize("total", [0, -5, 2.5, True, "10", 2**53])
def test_a_line_with_a_total_that_is_not_a_positive_whole_number_is_refused(total: object) -> None:
    assert parse_line(line(total_steps=total)) is None


RUNNING = {"step": 41, "total_steps": 100, "fraction": 0.41, "eta_seconds": 190, "rate_steps_per_s": 0.31}


def test_get_jobs_shows_percent_and_eta_and_done() -> None:
    assert progress_cell({"state": "running", "progress": RUNNING}) == "41% eta 3m10s"
    assert progress_cell({"state": "failed", "progress": RUNNING}) == "41%"  # no ETA for a job that ended
    assert progress_cell({"state": "succeeded", "progress": None}) == "done"
    assert progress_cell({"state": "running", "progress": None}) == "-"
    assert progress_cell({"state": "running", "progress": {**RUNNING, "fraction": 0.999}}) == "99% eta 3m10s"
    stalled = [{"reason": "Stalled", "message": "no trainer wrote a log line for 31 s"}]
    assert progress_cell({"state": "running", "progress": RUNNING, "warnings": stalled}) == "41% stalled"


@pytest.mark.django_db
def test_a_stalled_jobs_eta_is_not_frozen_at_the_moment_it_hung(local_dc: Datacenter, alice: User) -> None:
    job = make_job(local_dc, alice, state=JobState.RUNNING, released=False, progress=RUNNING)
    progress._store(job, RUNNING)
    assert (Job.objects.get(pk=job.pk).progress or {})["eta_seconds"] == 190
    Job.objects.filter(pk=job.pk).update(stalled_at=timezone.now())
    job.refresh_from_db()
    progress._store(job, RUNNING)  # its last points still give a rate: no ETA from it while it is stalled
    assert Job.objects.get(pk=job.pk).progress == {**RUNNING, "eta_seconds": None}
    page = page_client(alice).get(f"/jobs/{job.uid}/").content.decode()
    assert '<span class="muted">stalled</span>' in page and "eta 3m" not in page


@pytest.mark.django_db
def test_the_job_list_and_page_show_the_bar_and_eta(local_dc: Datacenter, alice: User) -> None:
    job = make_job(local_dc, alice, state=JobState.RUNNING, released=False, progress=RUNNING)
    make_job(local_dc, alice, name="old", uid="old-ab12c")  # succeeded, logged no total: still "done"
    client = page_client(alice)
    listed = client.get("/jobs/").content.decode()
    assert '<progress max="100" value="41"' in listed and "eta 3m<" in listed
    assert listed.count('data-testid="job-progress"') == 2 and ">done</span>" in listed
    page = client.get(f"/jobs/{job.uid}/").content.decode()
    assert '<progress max="100" value="41"' in page and "step 41 of 100" in page


@pytest.mark.django_db
def test_the_api_gives_the_stored_progress(local_dc: Datacenter, alice: User, alice_api: Any) -> None:
    job = make_job(local_dc, alice, state=JobState.RUNNING, released=False, progress=RUNNING)
    assert alice_api.get(f"/api/v1/jobs/{job.uid}").json()["progress"] == RUNNING
    Job.objects.filter(pk=job.pk).update(progress=None)
    assert alice_api.get("/api/v1/jobs").json()["results"][0]["progress"] is None


@pytest.mark.django_db
def test_a_metrics_file_that_cannot_be_read_gives_no_progress_and_no_error(local_dc: Datacenter, alice: User) -> None:
    job = make_job(local_dc, alice, state=JobState.RUNNING, released=False)
    folder = Path(local_dc.storage_root, "home", "alice", "jobs", job.name, "output", job.uid)
    (folder / "trainer_0").mkdir(parents=True)
    (folder / "trainer_0" / "metrics.jsonl").mkdir()  # a directory where the file should be: refused
    (folder / "trainer_1").mkdir()
    (folder / "trainer_1" / "metrics.jsonl").write_text(
        "".join(json.dumps({"step": s, "time": 1000.0 + s, "values": {}, "total_steps": 10}) + "\n" for s in (2, 4))
    )
    progress.check(job)
    job.refresh_from_db()
    assert job.progress == {"step": 4, "total_steps": 10, "fraction": 0.4, "eta_seconds": 6, "rate_steps_per_s": 1.0}


@pytest.mark.parametrize(
    ("seconds", "shown"), [(None, ""), (45, "45s"), (190, "3m"), (5400, "1h 30m"), (190_000, "2d 4h")]
)
def test_the_pages_round_an_eta_to_what_it_can_tell(seconds: int | None, shown: str) -> None:
    assert job_tags.eta(seconds) == shown


def test_a_young_job_without_progress_is_looked_at_often_then_as_usual() -> None:
    job = Job(state=JobState.RUNNING, started_at=timezone.now() - timedelta(seconds=5), progress=None)
    assert progress.interval(job) == progress.FIRST_CHECK_SECONDS  # the first percentage shows within 2 s
    job.progress = {"step": 1, "total_steps": 40}
    assert progress.interval(job) == progress.CHECK_SECONDS  # it has one: every 10 s
    job.progress, job.started_at = None, timezone.now() - timedelta(seconds=61)
    assert progress.interval(job) == progress.CHECK_SECONDS  # a job that never logs a total: often only a minute


@pytest.mark.django_db
def test_a_trainer_that_exits_0_short_of_its_total_is_said_incomplete(local_dc: Datacenter, alice: User) -> None:
    """The issue's PS trainer: exit 0 at step 49 of the 600 it declared. The job succeeded (every trainer exited 0),
    and its worker and timeline say IncompleteTraining; a trainer that reached its total says nothing of it."""
    job = make_job(local_dc, alice)  # succeeded, released; trainer 0's row
    Worker.objects.create(job=job, role=Role.TRAINER, index=1, state="succeeded", host="node-1")
    folder = Path(local_dc.storage_root, "home", "alice", "jobs", job.name, "output", job.uid)
    for index, last in ((0, 49), (1, 599)):
        (folder / f"trainer_{index}").mkdir(parents=True)
        lines = (json.dumps({"step": s, "time": 1000.0 + s, "values": {}, "total_steps": 600}) for s in range(last + 1))
        (folder / f"trainer_{index}" / "metrics.jsonl").write_text("\n".join(lines) + "\n")
    progress.finish(job)
    progress.finish(job)  # the note and its event once
    notes = dict(Worker.objects.filter(job=job).values_list("index", "message"))
    assert notes[0] == "IncompleteTraining: exited 0 at step 49 of the 600 it declared (metrics.log(total_steps=))"
    assert notes[1] == ""
    said = list(JobEvent.objects.filter(job=job, kind=EventKind.WORKER_EXITED).values_list("worker", "message"))
    assert said == [("trainer-0", notes[0])]
    job.refresh_from_db()
    assert job.state == JobState.SUCCEEDED and (job.progress or {})["step"] == 49


@pytest.mark.django_db
def test_the_sampler_notes_when_a_running_job_last_saved_a_checkpoint(local_dc: Datacenter, alice: User) -> None:
    job = make_job(local_dc, alice, state=JobState.RUNNING, released=False)
    progress.check(job)
    assert Job.objects.get(pk=job.pk).checkpointed_at is None  # none saved yet
    folder = Path(local_dc.storage_root, "home", "alice", "jobs", job.name, "output", job.uid, "checkpoints")
    for step, when in ((10, 1_700_000_000.0), (20, 1_700_000_100.0)):
        (folder / f"step-{step}").mkdir(parents=True)
        (folder / f"step-{step}" / ".paddlecloud-checkpoint.json").write_text(json.dumps({"step": step, "time": when}))
    (folder / "step-30").write_text("a file, not a checkpoint")
    progress.checked.forget(job.pk)
    progress.check(job)
    saved = Job.objects.get(pk=job.pk).checkpointed_at
    assert saved is not None and saved.timestamp() == 1_700_000_100.0


@pytest.mark.django_db
def test_a_killed_jobs_bar_says_where_it_stopped_not_a_live_eta(local_dc: Datacenter, alice: User) -> None:
    make_job(local_dc, alice, state=JobState.KILLED, reason="Killed", progress=RUNNING)
    listed = page_client(alice).get("/jobs/").content.decode()
    assert 'class="progress progress-killed"' in listed and "41%" in listed
    assert "when it was killed" in listed and "eta 3m" not in listed
