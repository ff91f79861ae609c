"""The operators' health page: staff only; capacity, use, jobs, last reconcile, engine errors, stale heartbeats."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest
from django.contrib.auth.models import User
from django.core.cache import cache
from django.test import Client
from django.utils import timezone

from datacenters.models import Datacenter, Engine, StorageKind
from health.models import WorkerHeartbeat
from jobs.follow import reconcile_runs
from jobs.follow.tasks import _reconcile_each
from jobs.models import JobState
from tests.conftest import PASSWORD
from tests.jobs.test_queue_api import make_job

pytestmark = pytest.mark.django_db


def logged_in(user: User) -> Client:
    client = Client()
    assert client.login(username=user.username, password=PASSWORD)
    return client


def test_it_is_refused_to_users_and_anonymous(alice: User) -> None:
    assert logged_in(alice).get("/health/").status_code == 403
    answer = Client().get("/health/")
    assert answer.status_code == 302 and "/login/" in answer["Location"]


def test_it_shows_each_datacenters_jobs_and_its_last_reconcile(carol: User, alice: User, local_dc: Datacenter) -> None:
    make_job(local_dc, alice, "waiting")
    page = logged_in(carol).get("/health/").content.decode()
    assert 'data-datacenter="local"' in page and "none recorded" in page
    _reconcile_each([local_dc])  # what the reconcile task does each tick
    last = reconcile_runs.last(local_dc.pk)
    assert last is not None and last["error"] == "" and 0 <= last["seconds"] < 60
    page = logged_in(carol).get("/health/").content.decode()
    assert "ago, took" in page and "none recorded" not in page


def test_a_worker_that_missed_its_heartbeats_is_marked_stale(carol: User, settings: object) -> None:
    now = timezone.now()
    WorkerHeartbeat.objects.create(hostname="fresh", last_seen=now, beats=3)
    WorkerHeartbeat.objects.create(hostname="gone", last_seen=now - timedelta(hours=1), beats=9)
    page = logged_in(carol).get("/health/").content.decode()
    assert page.count('data-stale="true"') == 1 and page.count('data-stale="false"') == 1
    assert page.index("gone") > page.index("fresh")  # newest first


def test_an_entry_that_is_not_what_record_wrote_reads_as_unknown(local_dc: Datacenter) -> None:
    cache.set(f"reconcile-run:{local_dc.pk}", {"at": "yesterday"})
    assert reconcile_runs.last(local_dc.pk) is None


KUBECONFIG = """apiVersion: v1
kind: Config
clusters: [{name: gone, cluster: {server: "https://127.0.0.1:9", insecure-skip-tls-verify: true}}]
users: [{name: op, user: {token: s3cr3t-token}}]
contexts: [{name: gone, context: {cluster: gone, user: op}}]
current-context: gone
"""


def test_an_unreachable_engines_errors_are_listed_counted_and_redacted(
    carol: User, alice: User, local_dc: Datacenter, tmp_path: Path
) -> None:
    gone = Datacenter.objects.create(name="gone", engine=Engine.KUBERNETES, kubeconfig=KUBECONFIG,
                                     storage_kind=StorageKind.HOSTPATH, host_path=str(tmp_path),
                                     storage_root=str(tmp_path))  # fmt: skip
    make_job(gone, alice, "stranded", state=JobState.RUNNING, admitted_at=timezone.now())
    page = logged_in(carol).get("/health/").content.decode()
    assert "No engine error recorded." in page
    _reconcile_each([gone, local_dc])  # twice: the same error counts up, it is not listed again
    _reconcile_each([gone, local_dc])
    errors = reconcile_runs.engine_errors(gone.pk)
    assert len(errors) == 1 and errors[0]["count"] == 2 and "cannot reach the datacenter" in errors[0]["error"]
    assert reconcile_runs.engine_errors(local_dc.pk) == []
    page = logged_in(carol).get("/health/").content.decode()
    assert page.count('data-testid="health-error" data-datacenter="gone"') == 1 and "s3cr3t" not in page


def test_engine_errors_are_redacted_and_bounded(local_dc: Datacenter) -> None:
    reconcile_runs.engine_error(local_dc.pk, "401: Authorization: Bearer abc.def at https://op:hunter2@api/x")
    reconcile_runs.engine_error(local_dc.pk, 'config {"token": "t0k3n", "password": "pw"} refused ' + "x" * 999)
    texts = [e["error"] for e in reconcile_runs.engine_errors(local_dc.pk)]
    assert not any(secret in text for text in texts for secret in ("abc.def", "hunter2", "t0k3n", '"pw"'))
    assert all(len(text) <= reconcile_runs.MAX_TEXT for text in texts)
    for n in range(reconcile_runs.MAX_ERRORS + 5):
        reconcile_runs.engine_error(local_dc.pk, f"error {n}")
    errors = reconcile_runs.engine_errors(local_dc.pk)
    assert len(errors) == reconcile_runs.MAX_ERRORS and errors[0]["error"] == f"error {reconcile_runs.MAX_ERRORS + 4}"
    cache.set(f"engine-errors:{local_dc.pk}", [{"error": "x", "first": "then", "last": 1, "count": "many"}, 7])
    assert reconcile_runs.engine_errors(local_dc.pk) == []  # not what engine_error wrote: left out
    reconcile_runs.engine_error(local_dc.pk, "x")  # and writing over it works
    assert [e["count"] for e in reconcile_runs.engine_errors(local_dc.pk)] == [1]
