"""`paddlectl get queue` and `get priorities` against the live portal, and `submit -priority` accepted or refused."""

from __future__ import annotations

import json
from datetime import timedelta
from decimal import Decimal
from pathlib import Path

import pytest
from django.contrib.auth.models import User
from django.utils import timezone
from paddlecloud import PaddleJob
from paddlecloud.sdk.errors import APIError, UsageProblem

from jobs.models import Job, JobState, PriorityClass
from jobs.scheduling import cycle
from tests.cli.conftest import Portal, golden, one_line_error

pytestmark = pytest.mark.django_db(transaction=True)

CLASSES = {"low": (0, True), "normal": (100, True), "high": (1000, False)}


@pytest.fixture(autouse=True)
def classes(transactional_db: None) -> None:
    """The starting classes (the migration seeds them; an earlier transactional test's flush removed them)."""
    for name, (value, open_to_all) in CLASSES.items():
        PriorityClass.objects.get_or_create(name=name, defaults={"value": value, "open_to_all": open_to_all})


def make_job(portal: Portal, owner: User, name: str, priority: str = "normal", ago: float = 0, **fields: object) -> Job:
    spec = {"jobname": name, "entry": "python train.py", "parallelism": 1, "pservers": 0, "priority": priority}
    job = Job.objects.create(
        owner=owner, datacenter=portal.datacenter, name=name, uid=f"{name}-{owner.username}", spec=spec,
        cpu_request=Decimal(1), memory_request=1024**3, priority_class=priority, priority=CLASSES[priority][0],
        **fields,
    )  # fmt: skip
    Job.objects.filter(pk=job.pk).update(created_at=timezone.now() - timedelta(seconds=ago))
    return job


@pytest.fixture
def waiting(portal: Portal, bob: User) -> None:
    """One core, taken by alice's `busy`; bob's `b1` and alice's `a1` and `a2` wait; a finished job of 10m30s."""
    dc = portal.datacenter
    dc.capacity_cpu = "1"
    dc.save()
    busy = make_job(portal, portal.user, "busy", ago=3600)
    assert cycle.schedule(dc) == [busy.pk]
    done = make_job(portal, portal.user, "done", ago=7200, state=JobState.SUCCEEDED)
    now = timezone.now()
    Job.objects.filter(pk=done.pk).update(started_at=now - timedelta(minutes=40, seconds=30),
                                          finished_at=now - timedelta(minutes=30))  # fmt: skip
    make_job(portal, portal.user, "a1", ago=20 * 60 + 30)
    make_job(portal, portal.user, "a2", ago=15 * 60 + 30)
    make_job(portal, bob, "b1", ago=10 * 60 + 30)
    make_job(portal, portal.user, "later", priority="low", ago=12 * 60 + 30)
    cycle.schedule(dc)


def test_get_queue_prints_positions_owners_and_estimates(portal: Portal, waiting: None) -> None:
    result = portal.run("get", "queue")
    assert result.exit_code == 0, result.stderr
    # bob (holding nothing) first; estimates: 10m30s a job, one at a time.
    golden("get_queue.txt", result.stdout)


def test_get_queue_json_is_the_api_answer(portal: Portal, waiting: None) -> None:
    answer = json.loads(portal.run("get", "queue", "-datacenter", "local", "-o", "json").stdout)
    assert (answer["datacenter"], answer["count"], answer["truncated"]) == ("local", 4, False)
    assert [(r["position"], r["job"], r["owner"]) for r in answer["results"]] == [
        (1, None, "another user"), (2, "a1", "alice"), (3, "a2", "alice"), (4, "later", "alice"),
    ]  # fmt: skip
    refused = portal.run("get", "queue", "-datacenter", "mars")
    assert refused.exit_code == 1
    assert "datacenter" in one_line_error(refused) and "mars" in one_line_error(refused)


def test_get_priorities_lists_the_classes_alice_may_use(portal: Portal) -> None:
    result = portal.run("get", "priorities")
    assert result.exit_code == 0, result.stderr
    assert [line.split()[0] for line in result.stdout.splitlines()] == ["NAME", "normal", "low"]


def package(tmp_path: Path) -> Path:
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "train.py").write_text("print('hello')\n")
    return pkg


def test_submit_with_a_class_alice_may_use_is_queued_with_it(portal: Portal, tmp_path: Path) -> None:
    result = portal.run("submit", "-jobname", "fit", "-entry", "python train.py", "-priority", "low",
                        "-o", "json", str(package(tmp_path)))  # fmt: skip
    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout)["priority"] == "low"
    assert Job.objects.get(name="fit").priority_class == "low"


@pytest.mark.parametrize(
    ("value", "code", "message"),
    [
        ("high", 1, "-priority: 'high': you may not use it; you may use: normal, low"),
        ("urgent", 1, "-priority: 'urgent': no such class"),
        ("p" * 41, 2, "-priority: must be at most 40 characters"),
    ],
    ids=["not hers", "unknown", "too long"],
)
def test_submit_with_a_class_alice_may_not_use_is_refused(
    portal: Portal, tmp_path: Path, value: str, code: int, message: str
) -> None:
    result = portal.run("submit", "-jobname", "fit", "-entry", "python train.py", "-priority", value,
                        str(package(tmp_path)))  # fmt: skip
    assert result.exit_code == code, (result.stdout, result.stderr)
    assert message in one_line_error(result)
    assert not Job.objects.exists()
    assert not (portal.pfs_home / "jobs" / "fit").exists()  # the dry run refused it before any upload


def test_the_sdk_submits_with_a_priority_and_the_portal_names_a_refused_one(portal: Portal, tmp_path: Path) -> None:
    pkg = package(tmp_path)
    job = PaddleJob(job_name="fit", entry_point="python train.py", trainer_package_path=pkg, priority="low",
                    config=portal.config)  # fmt: skip
    assert job.to_spec()["priority"] == "low"
    assert job.submit()["priority"] == "low"
    refused = PaddleJob(job_name="fit2", entry_point="python train.py", trainer_package_path=pkg, priority="high",
                        config=portal.config)  # fmt: skip
    with pytest.raises(APIError) as caught:
        refused.submit()
    assert caught.value.status == 400 and "priority" in caught.value.fields()
    with pytest.raises(UsageProblem, match="priority: must be at most 40"):
        PaddleJob(job_name="fit3", entry_point="python train.py", priority="p" * 41)
