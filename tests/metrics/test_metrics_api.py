"""GET /api/v1/jobs/<name>/metrics: points by cursor, checked line by line, the owner's only, beneath the root."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from django.contrib.auth.models import User
from rest_framework.test import APIClient

from datacenters.models import Datacenter
from jobs.models import Job, JobState, Role, Worker

URL = "/api/v1/jobs/fit/metrics"


@pytest.fixture
def job(local_dc: Datacenter, alice: User) -> Job:
    job = Job.objects.create(
        owner=alice, datacenter=local_dc, name="fit", uid="fit-ab12c", spec={"parallelism": 2, "pservers": 1},
        state=JobState.RUNNING,
    )
    for index in range(2):
        Worker.objects.create(job=job, role=Role.TRAINER, index=index, state="running")
    return job


def metrics_file(job: Job, worker: str = "trainer_0") -> Path:
    folder = Path(job.datacenter.storage_root, "home", job.owner.username, "jobs", job.name, "output", job.uid, worker)
    folder.mkdir(parents=True, exist_ok=True)
    return folder / "metrics.jsonl"


def point(step: int, **values: object) -> str:
    return json.dumps({"step": step, "time": 1.5, "values": values}) + "\n"


def test_a_follower_gets_every_point_once_and_a_partial_line_waits(alice_api: APIClient, job: Job) -> None:
    path = metrics_file(job)
    path.write_text(point(0, loss=1.0) + point(1, loss=0.5) + '{"step": 2, "ti')
    first = alice_api.get(URL).json()
    assert [p["step"] for p in first["points"]] == [0, 1]
    assert first["points"][0] == {"step": 0, "time": 1.5, "values": {"loss": 1.0}}
    assert (first["worker"], first["complete"], first["state"]) == ("trainer-0", False, "running")
    with path.open("a") as out:
        out.write('me": 2.0, "values": {"loss": 0.25}}\n')
    second = alice_api.get(URL, {"cursor": first["cursor"]}).json()
    assert [(p["step"], p["values"]) for p in second["points"]] == [(2, {"loss": 0.25})]
    assert alice_api.get(URL, {"cursor": second["cursor"]}).json()["points"] == []


def test_each_trainer_has_its_own_points(alice_api: APIClient, job: Job) -> None:
    metrics_file(job, "trainer_1").write_text(point(7, loss=3.0))
    answer = alice_api.get(URL, {"worker": "trainer-1"}).json()
    assert [p["step"] for p in answer["points"]] == [7]
    assert alice_api.get(URL).json()["points"] == []  # trainer-0 has logged nothing yet


def test_lines_the_client_would_not_write_are_skipped_and_counted(alice_api: APIClient, job: Job) -> None:
    bad = [
        "not json",
        '{"step": -1, "values": {"loss": 1}}',
        '{"step": 1, "values": {"loss": NaN}}',
        '{"step": 1, "values": {"loss": "1"}}',
        '{"step": 1, "values": {}}',
        json.dumps({"step": 1, "values": {"x" * 65: 1}}),
        json.dumps({"step": 1, "values": {"bad\nname": 1}}),
        "[1, 2]",
    ]
    metrics_file(job).write_text("\n".join(bad) + "\n" + point(5, loss=0.1))
    answer = alice_api.get(URL).json()
    assert ([p["step"] for p in answer["points"]], answer["skipped"]) == ([5], len(bad))


def test_a_metric_named_with_html_comes_back_as_the_same_text(alice_api: APIClient, job: Job) -> None:
    name = "<img src=x onerror=alert(1)>"
    metrics_file(job).write_text(point(0, **{name: 1.0}))
    response = alice_api.get(URL)
    assert response["Content-Type"].startswith("application/json")
    assert list(response.json()["points"][0]["values"]) == [name]


def test_a_huge_line_is_stepped_over_in_bounded_answers(alice_api: APIClient, job: Job) -> None:
    metrics_file(job).write_text("x" * (600 * 1024) + "\n" + point(1, loss=1.0))
    cursor, steps, skipped = "", [], 0
    for _ in range(10):
        answer = alice_api.get(URL, {"cursor": cursor}).json()
        steps += [p["step"] for p in answer["points"]]
        skipped += answer["skipped"]
        if answer["cursor"] == cursor:
            break
        cursor = answer["cursor"]
    assert steps == [1] and skipped >= 1


def test_no_file_yet_is_an_empty_answer(alice_api: APIClient, job: Job) -> None:
    answer = alice_api.get(URL).json()
    assert (answer["points"], answer["cursor"], answer["complete"]) == ([], "0", False)


def test_a_finished_job_is_complete_at_the_end(alice_api: APIClient, job: Job) -> None:
    Job.objects.filter(pk=job.pk).update(state=JobState.SUCCEEDED, released=True)
    metrics_file(job).write_text(point(0, loss=1.0) + point(1, loss=2.0).rstrip("\n"))
    answer = alice_api.get(URL).json()
    assert [p["step"] for p in answer["points"]] == [0, 1] and answer["complete"] is True


@pytest.mark.parametrize(
    ("params", "field"),
    [({"worker": "trainer-9"}, "worker"), ({"worker": "<b>x</b>"}, "worker"), ({"cursor": "-1"}, "cursor"),
     ({"cursor": "abc"}, "cursor")],
)
def test_bad_parameters_get_a_400_naming_the_field(
    alice_api: APIClient, job: Job, params: dict[str, str], field: str
) -> None:
    response = alice_api.get(URL, params)
    assert response.status_code == 400
    assert field in json.dumps(response.json())


def test_bob_gets_404_for_alices_metrics_and_anonymous_401(
    bob_api: APIClient, anon_api: APIClient, job: Job
) -> None:
    metrics_file(job).write_text(point(0, loss=1.0))
    assert bob_api.get(URL).status_code == 404
    assert bob_api.get(f"/api/v1/jobs/{job.uid}/metrics").status_code == 404
    assert anon_api.get(URL).status_code in (401, 403)


def test_an_operator_reads_anyones_metrics_by_uid(carol_api: APIClient, job: Job) -> None:
    metrics_file(job).write_text(point(0, loss=1.0))
    assert carol_api.get(f"/api/v1/jobs/{job.uid}/metrics", {"all": "1"}).json()["points"][0]["step"] == 0


def test_a_metrics_file_that_is_a_link_out_of_the_home_is_refused(
    alice_api: APIClient, job: Job, tmp_path: Path
) -> None:
    secret = tmp_path / "secret.jsonl"
    secret.write_text(point(0, stolen=1.0))
    metrics_file(job).symlink_to(secret)
    response = alice_api.get(URL)
    assert response.status_code == 403
    assert "stolen" not in response.content.decode()
