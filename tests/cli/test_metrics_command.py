"""paddlectl metrics JOB: the last step and values of each trainer, read through the metrics API."""

from __future__ import annotations

import json
from pathlib import Path

from jobs.models import Job, JobState, Role, Worker
from tests.cli.conftest import Portal


def finished_job(portal: Portal) -> Job:
    job = Job.objects.create(
        owner=portal.user, datacenter=portal.datacenter, name="fit", uid="fit-ab12c",
        spec={"parallelism": 2, "pservers": 0}, state=JobState.SUCCEEDED, released=True,
    )
    for index in range(2):
        Worker.objects.create(job=job, role=Role.TRAINER, index=index, state="succeeded")
    return job


def write_points(portal: Portal, job: Job, worker: str, points: list[tuple[int, dict[str, float]]]) -> None:
    folder = Path(portal.pfs_home, "jobs", job.name, "output", job.uid, worker)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "metrics.jsonl").write_text(
        "".join(json.dumps({"step": s, "time": 1.0, "values": v}) + "\n" for s, v in points)
    )


def test_it_prints_the_last_values_per_trainer(portal: Portal) -> None:
    job = finished_job(portal)
    write_points(portal, job, "trainer_0", [(0, {"loss": 2.0}), (9, {"loss": 0.5, "acc": 0.75})])
    write_points(portal, job, "trainer_1", [(9, {"loss": 0.25})])
    result = portal.run("metrics", "fit")
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines() == [
        "WORKER     STEP  acc   loss",
        "trainer-0  9     0.75  0.5",
        "trainer-1  9     -     0.25",
    ]
    as_json = json.loads(portal.run("metrics", "fit", "-o", "json").stdout)
    assert as_json["trainer-1"] == {"step": 9, "values": {"loss": 0.25}}


def test_a_job_without_metrics_says_so(portal: Portal) -> None:
    finished_job(portal)
    result = portal.run("metrics", "fit")
    assert result.exit_code == 0 and result.stdout == ""
    assert "no metrics yet" in result.stderr
