"""Accounting: the ledger of a real job matches its wall time x requests; GET /api/v1/usage clips, groups, scopes
to the caller, answers CSV equal to its JSON, and names the parameter it refuses; the admin's ledger is read-only."""

from __future__ import annotations

import csv
import io
import time
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import Group, User
from django.test import Client
from rest_framework.test import APIClient

from datacenters.models import Datacenter
from jobs.engines.local import cgroups
from jobs.models import Job, UsageRecord
from jobs.scheduling import accounting
from storage.models import StorageSample, StorageUsage
from storage.tasks import sample_usage
from tests.wait import wait_for
from tests.workers import WorkerProcess

GIB = 1024**3
DAY = datetime(2026, 1, 10, tzinfo=UTC)


def put(owner: User, dc: Datacenter, uid: str, start: datetime, hours: float, cpu: str = "2", memory: int = 4 * GIB,
        gpu: int = 0, worker: str = "trainer-0") -> UsageRecord:  # fmt: skip
    return UsageRecord.objects.create(
        owner=owner, datacenter=dc, job_uid=uid, job_name=uid.split("-")[0], worker=worker, cpu=Decimal(cpu),
        memory=memory, gpu=gpu, started_at=start, ended_at=start + timedelta(hours=hours),
    )  # fmt: skip


def usage(api: APIClient, **params: str) -> Any:
    response = api.get("/api/v1/usage", params)
    assert response.status_code == 200, response.content[:500]
    return response.json()


def by_key(report: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {row["key"]: row for row in report["results"]}


@pytest.fixture
def ledger(local_dc: Datacenter, alice: User, bob: User, carol: User) -> None:
    """Alice: a job across midnight (22:00 to 02:00, 2 cores, 4 GiB, 1 GPU) and one ended before the window;
    bob: 3 hours on the 10th; carol: 1 hour. Alice is in teams vision and nlp, bob in vision, carol in none."""
    put(alice, local_dc, "across-a1", DAY - timedelta(hours=2), 4, gpu=1)
    put(alice, local_dc, "across-a1", DAY - timedelta(hours=2), 4, cpu="1", memory=GIB, worker="pserver-0")
    put(alice, local_dc, "before-a2", DAY - timedelta(days=3), 1)  # ends 3 days before: outside every window
    put(bob, local_dc, "bobs-b1", DAY + timedelta(hours=5), 3, cpu="0.5")
    put(carol, local_dc, "ops-c1", DAY + timedelta(hours=8), 1)
    vision, nlp = Group.objects.create(name="vision"), Group.objects.create(name="nlp")
    alice.groups.add(vision, nlp)
    bob.groups.add(vision)


# --- (a) a real job's ledger --------------------------------------------------------------------------------


@pytest.mark.celery
@pytest.mark.django_db(transaction=True)
def test_a_real_jobs_ledger_is_its_wall_time_times_its_requests(
    alice_api: APIClient, fake_package: Path, worker: WorkerProcess
) -> None:
    spec = {"jobname": "fake", "entry": "python train.py", "parallelism": 2, "pservers": 0, "cpu": "0.5",
            "memory": "256Mi", "env": {"FAKE_STEPS": "20", "FAKE_STEP_SECONDS": "0.1"}}  # fmt: skip
    asked = time.time()
    assert alice_api.post("/api/v1/jobs", spec, format="json").status_code == 201
    job = wait_for(lambda: Job.objects.filter(name="fake", released=True).first(), "released", 90, watch=worker)
    observed = time.time() - asked
    assert isinstance(job, Job) and job.state == "succeeded" and job.finished_at is not None
    records = {r.worker: r for r in UsageRecord.objects.filter(job_uid=job.uid)}
    workers = {w.name: w for w in job.workers.all()}
    assert set(records) == set(workers) and len(records) == 2
    total_core_seconds = 0.0
    for name, record in records.items():
        started = workers[name].started_at
        assert started is not None
        wall = (job.finished_at - started).total_seconds()
        assert abs(record.seconds - wall) <= 1.0, (name, record.seconds, wall)
        assert 20 * 0.1 <= record.seconds <= observed  # it trained its 20 steps, and no longer than we waited
        assert (record.cpu, record.memory, record.gpu) == (Decimal("0.5"), 256 * 1024**2, 0)
        total_core_seconds += 0.5 * wall
    # The API's sum for this job is the same wall time x request, within a second per worker.
    row = by_key(usage(alice_api, datacenter="local", group_by="user"))["alice"]
    assert abs(row["cpu_core_hours"] * 3600 - total_core_seconds) <= 0.5 * len(records)
    assert (row["jobs"], row["workers"]) == (1, 2)
    if cgroups.usable()[0] is not None:  # what each process used, as its cgroup counted it
        for record in records.values():
            assert record.cpu_seconds_used is not None and 0 < record.cpu_seconds_used < record.seconds, record
            # memory.peak needs Linux 5.19 (v2); the v1 counter is always there
            assert record.peak_memory is None or 1024**2 < record.peak_memory <= 256 * 1024**2, record
        assert row["cpu_core_hours_used"] > 0


# --- (b) clipping and grouping ------------------------------------------------------------------------------


def test_a_record_counts_only_its_part_inside_the_window(ledger: None, carol_api: APIClient) -> None:
    rows = by_key(usage(carol_api, since="2026-01-10", until="2026-01-11"))
    # Alice's job ran 22:00-02:00: two hours of it are on the 10th; her job of the 7th is outside.
    assert rows["alice"] == {"key": "alice", "cpu_core_hours": 2 * 2 + 1 * 2, "memory_gib_hours": 4 * 2 + 1 * 2,
                             "gpu_hours": 2.0, "jobs": 1, "workers": 2, "cpu_core_hours_used": 0.0,
                             "peak_memory_gib": 0.0, "storage_gib_days": 0.0}  # fmt: skip
    assert rows["bob"]["cpu_core_hours"] == 1.5 and rows["carol"]["cpu_core_hours"] == 2
    # A window of one hour, 01:00-02:00, inside the job.
    hour = by_key(usage(carol_api, since="2026-01-10T01:00:00Z", until="2026-01-10T02:00:00+00:00"))
    assert hour["alice"]["cpu_core_hours"] == 3 and set(hour) == {"alice"}


def test_group_by_day_cuts_records_at_utc_midnight(ledger: None, carol_api: APIClient) -> None:
    report = usage(carol_api, since="2026-01-09", until="2026-01-11", group_by="day")
    assert [row["key"] for row in report["results"]] == ["2026-01-09", "2026-01-10"]
    days = by_key(report)
    assert days["2026-01-09"]["cpu_core_hours"] == 6 and days["2026-01-09"]["jobs"] == 1
    assert days["2026-01-10"]["cpu_core_hours"] == 6 + 1.5 + 2 and days["2026-01-10"]["jobs"] == 3
    assert days["2026-01-10"]["workers"] == 4


def test_group_by_job_gives_each_run_its_row_and_storage_none(
    ledger: None, carol_api: APIClient, alice_api: APIClient, local_dc: Datacenter, alice: User
) -> None:
    StorageSample.objects.create(user=alice, datacenter=local_dc, taken_at=DAY, used_bytes=GIB)  # no job's
    runs = by_key(usage(carol_api, since="2026-01-09", until="2026-01-11", group_by="job"))
    assert list(runs) == ["across-a1", "bobs-b1", "ops-c1"]  # key order; before-a2 ended before the window
    assert runs["across-a1"]["cpu_core_hours"] == 2 * 4 + 1 * 4 and runs["across-a1"]["workers"] == 2
    assert runs["across-a1"]["gpu_hours"] == 4 and runs["across-a1"]["storage_gib_days"] == 0
    assert list(by_key(usage(alice_api, since="2026-01-09", until="2026-01-11", group_by="job"))) == ["across-a1"]


def test_group_by_team_counts_a_user_in_each_of_their_teams(ledger: None, carol_api: APIClient) -> None:
    teams = by_key(usage(carol_api, since="2026-01-10", until="2026-01-11", group_by="team"))
    assert list(teams) == ["(no team)", "nlp", "vision"]
    assert teams["vision"]["cpu_core_hours"] == 6 + 1.5 and teams["vision"]["jobs"] == 2
    assert teams["nlp"]["cpu_core_hours"] == 6
    assert teams["(no team)"]["cpu_core_hours"] == 2


def test_the_window_defaults_to_the_last_30_days() -> None:
    now = datetime(2026, 3, 1, 12, tzinfo=UTC)
    assert accounting.window(None, None, now) == accounting.Window(now - timedelta(days=30), now)
    until = datetime(2026, 2, 1, tzinfo=UTC)
    assert accounting.window(None, "2026-02-01", now) == accounting.Window(until - timedelta(days=30), until)


def test_the_datacenter_filter_keeps_only_its_records(ledger: None, carol_api: APIClient, carol: User) -> None:
    other = Datacenter.objects.create(name="other", engine="local", storage_root="/tmp/nowhere")
    put(carol, other, "elsewhere-c2", DAY, 1)
    local = usage(carol_api, datacenter="local", since="2026-01-10", until="2026-01-11")
    assert local["datacenter"] == "local" and by_key(local)["carol"]["cpu_core_hours"] == 2
    every = usage(carol_api, since="2026-01-10", until="2026-01-11")
    assert every["datacenter"] is None and by_key(every)["carol"]["cpu_core_hours"] == 4


# --- (c) who sees what --------------------------------------------------------------------------------------


def test_users_see_only_their_own_usage(ledger: None, alice_api: APIClient, bob_api: APIClient) -> None:
    window = {"since": "2026-01-09", "until": "2026-01-11"}
    assert list(by_key(usage(alice_api, **window))) == ["alice"]
    assert list(by_key(usage(bob_api, **window))) == ["bob"]
    assert by_key(usage(bob_api, **window, group_by="team")).keys() == {"vision"}  # bob's share of vision only
    assert by_key(usage(bob_api, **window, group_by="team"))["vision"]["cpu_core_hours"] == 1.5
    assert list(by_key(usage(alice_api, **window, user="alice"))) == ["alice"]
    refused = bob_api.get("/api/v1/usage", {**window, "user": "alice"})
    assert refused.status_code == 403 and refused.json()["errors"][0]["field"] == "user"


def test_staff_see_everyone_and_may_pick_one_user(ledger: None, carol_api: APIClient, anon_api: APIClient) -> None:
    window = {"since": "2026-01-09", "until": "2026-01-11"}
    assert list(by_key(usage(carol_api, **window))) == ["alice", "bob", "carol"]
    assert list(by_key(usage(carol_api, **window, user="bob"))) == ["bob"]
    assert anon_api.get("/api/v1/usage").status_code == 401


# --- (d) CSV ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("how", ["format", "accept"])
@pytest.mark.parametrize("group_by", ["user", "team", "day", "job"])
def test_the_csv_parses_and_equals_the_json(ledger: None, carol_api: APIClient, how: str, group_by: str) -> None:
    window = {"since": "2026-01-09", "until": "2026-01-11", "group_by": group_by, "datacenter": "local"}
    report = usage(carol_api, **window)
    if how == "format":
        response = carol_api.get("/api/v1/usage", {**window, "format": "csv"})
    else:
        response = carol_api.get("/api/v1/usage", window, HTTP_ACCEPT="text/csv")
    assert response.status_code == 200 and response["Content-Type"].startswith("text/csv")
    assert response["Content-Disposition"].startswith("attachment; filename=")
    rows = list(csv.DictReader(io.StringIO(response.content.decode())))
    assert [row["key"] for row in rows] == [row["key"] for row in report["results"]]
    for row, wanted in zip(rows, report["results"], strict=True):
        assert (row["datacenter"], row["since"], row["until"], row["group_by"]) == (
            "local", report["since"], report["until"], group_by)  # fmt: skip
        for column in ("cpu_core_hours", "memory_gib_hours", "gpu_hours"):
            assert float(row[column]) == wanted[column]
        assert (int(row["jobs"]), int(row["workers"])) == (wanted["jobs"], wanted["workers"])


def test_an_error_to_a_csv_request_is_json(db: None, alice_api: APIClient) -> None:
    response = alice_api.get("/api/v1/usage", {"format": "csv", "group_by": "month"})
    assert response.status_code == 400 and response["Content-Type"].startswith("application/json")
    assert response.json()["errors"][0]["field"] == "group_by"


# --- (e) bad parameters -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"since": "yesterday"}, "since"),
        ({"since": "2026-13-01"}, "since"),
        ({"until": "2026-02-30"}, "until"),
        ({"until": "2026-01-01T25:00"}, "until"),
        ({"since": "9" * 10_000}, "since"),
        ({"since": "0001-01-01"}, "since"),
        ({"until": "0001-01-01"}, "until"),  # a date alone skipped the year rule: the default since overflowed
        ({"until": "9999-12-31"}, "until"),
        ({"since": "2026-01-10", "until": "2026-01-10"}, "since"),
        ({"since": "2026-01-11", "until": "2026-01-10"}, "since"),
        ({"since": "2024-01-01", "until": "2025-01-02"}, "since"),  # 367 days
        ({"group_by": "month"}, "group_by"),
        ({"format": "xml"}, "format"),
        ({"datacenter": "nowhere"}, "datacenter"),
        ({"datacenter": ""}, "datacenter"),
        ({"datacenter": "d" * 10_000}, "datacenter"),
        ({"user": "u" * 10_000}, "user"),
        ({"groupby": "day"}, "groupby"),
    ],
)
def test_bad_parameters_are_a_400_naming_the_field(
    local_dc: Datacenter, carol_api: APIClient, params: dict[str, str], field: str
) -> None:
    response = carol_api.get("/api/v1/usage", params)
    assert response.status_code == 400, response.content[:300]
    body = response.json()
    assert {"detail", "code", "errors"} <= set(body) and field in {e["field"] for e in body["errors"]}, body


def test_a_full_year_window_is_allowed(local_dc: Datacenter, alice_api: APIClient) -> None:
    report = usage(alice_api, since="2024-01-01", until="2025-01-01")  # 366 days: 2024 is a leap year
    assert report["results"] == [] and report["since"] == "2024-01-01T00:00:00Z"


def test_staff_naming_an_unknown_user_is_a_400(local_dc: Datacenter, carol_api: APIClient) -> None:
    response = carol_api.get("/api/v1/usage", {"user": "zed"})
    assert response.status_code == 400 and response.json()["errors"][0]["field"] == "user"


# --- the admin ----------------------------------------------------------------------------------------------


def test_the_admin_ledger_is_read_only_and_downloads_csv(ledger: None, carol: User, alice: User) -> None:
    admin = Client()
    admin.force_login(carol)
    page = admin.get("/admin/jobs/usagerecord/", {"owner__id__exact": str(alice.pk)})
    assert page.status_code == 200 and b"across-a1" in page.content and b"bobs-b1" not in page.content
    assert b"Download CSV" in page.content
    record = UsageRecord.objects.get(job_uid="bobs-b1")
    assert admin.get(f"/admin/jobs/usagerecord/{record.pk}/change/").status_code == 200
    assert admin.post(f"/admin/jobs/usagerecord/{record.pk}/delete/").status_code == 403
    assert admin.get("/admin/jobs/usagerecord/add/").status_code == 403
    picked = UsageRecord.objects.filter(owner=alice).values_list("pk", flat=True)
    response = admin.post(
        "/admin/jobs/usagerecord/", {"action": "download_csv", "_selected_action": [str(pk) for pk in picked]}
    )
    assert response.status_code == 200 and response["Content-Type"].startswith("text/csv")
    rows = list(csv.DictReader(io.StringIO(response.content.decode())))
    assert sorted((row["job_uid"], row["worker"]) for row in rows) == [
        ("across-a1", "pserver-0"), ("across-a1", "trainer-0"), ("before-a2", "trainer-0")]  # fmt: skip
    assert {row["owner"] for row in rows} == {"alice"} and float(rows[0]["seconds"]) > 0


# --- (f) storage GiB-days -----------------------------------------------------------------------------------


def test_storage_samples_make_gib_days_each_held_until_the_next(local_dc: Datacenter, alice: User,
                                                                carol_api: APIClient) -> None:  # fmt: skip
    at = datetime(2026, 2, 1, tzinfo=UTC)
    for minutes, gib in ((0, 1), (30, 2)):  # 1 GiB for half an hour, then 2 GiB for (at most) an hour
        StorageSample.objects.create(user=alice, datacenter=local_dc, used_bytes=gib * 1024**3,
                                     taken_at=at + timedelta(minutes=minutes))  # fmt: skip
    rows = by_key(usage(carol_api, since="2026-02-01", until="2026-02-02"))
    assert rows["alice"]["storage_gib_days"] == round((1 * 0.5 + 2 * 1.0) / 24, 6)
    assert rows["alice"]["jobs"] == 0  # storage alone: no job ran
    clipped = by_key(usage(carol_api, since="2026-02-01T00:45:00Z", until="2026-02-01T01:15:00Z"))
    assert clipped["alice"]["storage_gib_days"] == round(2 * 0.5 / 24, 6)


def test_the_hourly_sample_records_what_each_user_stores(local_dc: Datacenter, alice: User, bob: User) -> None:
    StorageUsage.objects.create(user=alice, datacenter=local_dc, used_bytes=5 * 1024**2)
    StorageUsage.objects.create(user=bob, datacenter=local_dc, used_bytes=0)  # nothing stored: no sample
    assert sample_usage() == 1
    sample = StorageSample.objects.get()
    assert (sample.user, sample.used_bytes) == (alice, 5 * 1024**2)
