"""paddlectl usage and the SDK's usage(): the ledger's sums from the live portal as a table, JSON and CSV."""

from __future__ import annotations

import csv
import io
import json
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal

import pytest
from django.contrib.auth.models import Group, User
from paddlecloud.sdk.errors import APIError
from paddlecloud.sdk.session import Session
from paddlecloud.sdk.usage import usage, usage_csv

from jobs.models import UsageRecord
from tests.cli.conftest import Portal, golden, one_line_error

pytestmark = pytest.mark.django_db(transaction=True)
GIB = 1024**3
DAY = datetime(2026, 1, 10, tzinfo=UTC)
WINDOW = ("-since", "2026-01-09", "-until", "2026-01-11")


@pytest.fixture
def ledger(portal: Portal, bob: User) -> None:
    """Alice: 2 trainers x 2 cores x 4 GiB, 22:00 to 02:00 across midnight; bob: 3 hours she must not see."""
    for worker in ("trainer-0", "trainer-1"):
        UsageRecord.objects.create(
            owner=portal.user, datacenter=portal.datacenter, job_uid="fit-a1", job_name="fit", worker=worker,
            cpu=Decimal(2), memory=4 * GIB, gpu=0, started_at=DAY - timedelta(hours=2),
            ended_at=DAY + timedelta(hours=2),
        )  # fmt: skip
    UsageRecord.objects.create(
        owner=bob, datacenter=portal.datacenter, job_uid="bobs-b1", job_name="bobs", worker="trainer-0",
        cpu=Decimal(1), memory=GIB, gpu=1, started_at=DAY, ended_at=DAY + timedelta(hours=3),
    )  # fmt: skip
    portal.user.groups.add(Group.objects.create(name="vision"))


def test_usage_prints_a_table_per_day(portal: Portal, ledger: None) -> None:
    result = portal.run("usage", *WINDOW, "-group-by", "day")
    assert result.exit_code == 0, result.stderr
    golden("usage_by_day.txt", result.stdout)


def test_usage_by_user_shows_only_alices_own(portal: Portal, ledger: None) -> None:
    result = portal.run("usage", *WINDOW)
    assert result.exit_code == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].split()[0] == "USER" and len(lines) == 2 and lines[1].split()[:2] == ["alice", "16"]
    team = portal.run("usage", *WINDOW, "-group-by", "team").stdout.splitlines()
    assert team[0].startswith("TEAM") and team[1].split()[:2] == ["vision", "16"]
    runs = portal.run("usage", *WINDOW, "-group-by", "job").stdout.splitlines()
    assert runs[0].split()[0] == "JOB" and [line.split()[0] for line in runs[1:]] == ["fit-a1"], runs


def test_usage_json_and_csv_agree(portal: Portal, ledger: None) -> None:
    report = json.loads(portal.run("usage", *WINDOW, "-o", "json").stdout)
    assert report["datacenter"] == "local" and report["since"] == "2026-01-09T00:00:00Z"
    assert report["results"] == [{"key": "alice", "cpu_core_hours": 16.0, "memory_gib_hours": 32.0, "gpu_hours": 0.0,
                                  "jobs": 1, "workers": 2, "cpu_core_hours_used": 0.0, "peak_memory_gib": 0.0,
                                  "storage_gib_days": 0.0}]  # fmt: skip
    result = portal.run("usage", *WINDOW, "-o", "csv")
    assert result.exit_code == 0, result.stderr
    rows = list(csv.DictReader(io.StringIO(result.stdout)))
    assert len(rows) == 1 and rows[0]["key"] == "alice" and float(rows[0]["cpu_core_hours"]) == 16.0
    assert float(rows[0]["memory_gib_hours"]) == 32.0 and rows[0]["datacenter"] == "local"


def test_usage_with_nothing_in_the_window_says_so(portal: Portal, ledger: None) -> None:
    result = portal.run("usage", "-since", "2025-01-01", "-until", "2025-02-01", "-datacenter", "all")
    assert result.exit_code == 0 and result.stdout.startswith("No usage in every datacenter from 2025-01-01")


def test_usage_refusals_are_one_line_naming_the_flag(portal: Portal, ledger: None) -> None:
    bad = portal.run("usage", "-since", "last week")
    assert bad.exit_code == 1 and "since" in one_line_error(bad)
    too_long = portal.run("usage", "-since", "2020-01-01", "-until", "2026-01-01")
    assert too_long.exit_code == 1 and "366 days" in one_line_error(too_long)
    other = portal.run("usage", "-user", "bob")
    assert other.exit_code == 1 and "operators" in one_line_error(other)
    assert portal.run("usage", "-group-by", "month").exit_code == 2  # a usage error: click knows the choices


def test_the_sdk_reads_the_same_report(portal: Portal, ledger: None) -> None:
    session = Session.from_config(portal.config)
    report = usage(session, datacenter="local", since=date(2026, 1, 10), until=datetime(2026, 1, 11), group_by="day")
    assert [row["key"] for row in report["results"]] == ["2026-01-10"]
    assert report["results"][0]["cpu_core_hours"] == 8.0
    text = usage_csv(session, since="2026-01-09", until="2026-01-11", group_by="day")
    assert [row["key"] for row in csv.DictReader(io.StringIO(text))] == ["2026-01-09", "2026-01-10"]
    with pytest.raises(APIError) as refused:
        usage(session, group_by="week")
    assert refused.value.status == 400 and "group_by" in str(refused.value)
