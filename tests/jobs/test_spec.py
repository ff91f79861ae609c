"""Bad specs: each a 400 naming the field and the rule, and nothing created."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import User
from rest_framework.test import APIClient

from datacenters.models import Datacenter, Quota
from jobs.models import Job, JobState
from jobs.scheduling import cycle
from jobs.spec import requested

GOOD: dict[str, Any] = {"jobname": "fake", "entry": "python train.py", "parallelism": 2, "pservers": 2}

CASES: list[tuple[str, dict[str, Any], str, str]] = [
    ("underscore in name", {"jobname": "my_job"}, "jobname", "'_' is not allowed in DNS names; use '-'"),
    ("dot in name", {"jobname": "my.job"}, "jobname", "'.' is not allowed"),
    ("uppercase name", {"jobname": "MyJob"}, "jobname", "must be lowercase"),
    ("name starts with digit", {"jobname": "1job"}, "jobname", "must start with a letter"),
    ("name ends with dash", {"jobname": "job-"}, "jobname", "must end with a letter or digit"),
    ("41-char name", {"jobname": "a" * 41}, "jobname", "at most 40 characters"),
    ("memory not a quantity", {"memory": "1GB"}, "memory", "'1GB' is not a quantity; use 1Gi, 1G or 512Mi"),
    ("cpu not a quantity", {"cpu": "two"}, "cpu", "'two' is not a quantity"),
    ("zero cpu", {"cpu": "0"}, "cpu", "must be greater than zero"),
    ("negative psmemory", {"psmemory": "-1Gi"}, "psmemory", "must not be negative"),
    ("zero parallelism", {"parallelism": 0}, "parallelism", "greater than or equal to 1"),
    ("negative pservers", {"pservers": -1}, "pservers", "greater than or equal to 0"),
    ("text parallelism", {"parallelism": "many"}, "parallelism", "valid integer"),
    ("negative gpu", {"gpu": -2}, "gpu", "greater than or equal to 0"),
    ("missing entry", {"entry": None}, "entry", "required"),
    ("blank entry", {"entry": "   "}, "entry", "may not be blank"),
    ("bad env name", {"env": {"1BAD": "x"}}, "env", "not a valid variable name"),
    ("reserved env name", {"env": {"PADDLE_TRAINER_ID": "3"}}, "env", "set by PaddleCloud"),
    ("env not an object", {"env": ["A=1"]}, "env", "Expected a dictionary"),
    ("pir flag in PS mode", {"env": {"FLAGS_enable_pir_api": "1"}}, "env", "set by PaddleCloud in parameter-server"),
    ("paddle's launcher", {"entry": "python -m paddle.distributed.launch train.py"}, "entry", "already starts each"),
    ("fleetrun", {"entry": "fleetrun --server_num=2 train.py"}, "entry", "rank 0 of 1"),
    ("unknown datacenter", {"datacenter": "mars"}, "datacenter", "unknown datacenter 'mars'; you may use: local"),
    ("missing package", {"package": "/pfs/local/home/alice/nothing"}, "package", "does not exist"),
    ("package outside home", {"package": "/pfs/local/home/bob/jobs/x"}, "package", "is another user's home"),
    ("package traversal", {"package": "/pfs/local/home/alice/../bob"}, "package", "'..' segments are not allowed"),
    ("unknown registry", {"registry": "harbor"}, "registry", "no registry secret named 'harbor'"),
    ("typo in a field", {"paralellism": 2}, "paralellism", "unknown field"),
    ("too many retries", {"max_retries": 11}, "max_retries", "less than or equal to 10"),
    ("quota cpu", {"parallelism": 20, "cpu": "1"}, "quota", "cpu: the job needs 22 cores but your quota in local is"),
]


@pytest.mark.parametrize(("case", "change", "field", "rule"), CASES, ids=[c[0] for c in CASES])
def test_bad_spec_is_refused_naming_the_field(
    alice_api: APIClient,
    local_dc: Datacenter,
    fake_package: Path,
    case: str,
    change: dict[str, Any],
    field: str,
    rule: str,
) -> None:
    body = {**GOOD, **change}
    body = {k: v for k, v in body.items() if v is not None}
    response = alice_api.post("/api/v1/jobs", body, format="json")
    assert response.status_code == 400, response.json()
    errors = response.json()["errors"]
    assert any(e["field"] == field and rule in e["message"] for e in errors), errors
    assert not Job.objects.exists()


def test_quota_message_says_which_limit_and_by_how_much(
    alice_api: APIClient, alice: User, local_dc: Datacenter, fake_package: Path
) -> None:
    Quota.objects.create(user=alice, datacenter=local_dc, memory="3Gi", gpu=1)
    local_dc.gpus = ["0", "1"]  # the datacenter has the GPUs; the quota is what refuses them
    local_dc.save()
    response = alice_api.post("/api/v1/jobs", {**GOOD, "gpu": 1}, format="json")
    messages = [e["message"] for e in response.json()["errors"] if e["field"] == "quota"]
    assert any(
        m == "memory: the job needs 4Gi but your quota in local is 3Gi, so it could never start" for m in messages
    ), messages
    assert "gpu: the job needs 2 but your quota in local is 1, so it could never start" in messages


def test_over_the_running_jobs_quota_a_job_queues_and_starts_as_quota_frees(
    alice_api: APIClient, alice: User, local_dc: Datacenter, fake_package: Path
) -> None:
    """The quota caps what runs at once, not what may be submitted: the second job waits, QuotaExhausted."""
    Quota.objects.create(user=alice, datacenter=local_dc, jobs=1)
    assert alice_api.post("/api/v1/jobs", GOOD, format="json").status_code == 201
    response = alice_api.post(
        "/api/v1/jobs", {**GOOD, "jobname": "other", "package": "/pfs/local/home/alice/jobs/fake"}, format="json"
    )
    assert response.status_code == 201, response.json()
    first, second = Job.objects.get(name=GOOD["jobname"]), Job.objects.get(name="other")
    assert cycle.schedule(local_dc) == [first.pk]
    second.refresh_from_db()
    assert (second.state, second.reason, second.admitted_at) == (JobState.QUEUED, "QuotaExhausted", None)
    assert "jobs" in second.message
    Job.objects.filter(pk=first.pk).update(state=JobState.SUCCEEDED, released=True)
    assert cycle.schedule(local_dc) == [second.pk]


def test_an_active_name_is_a_conflict(alice_api: APIClient, local_dc: Datacenter, fake_package: Path) -> None:
    assert alice_api.post("/api/v1/jobs", GOOD, format="json").status_code == 201
    response = alice_api.post("/api/v1/jobs", GOOD, format="json")
    assert response.status_code == 409
    assert response.json()["errors"][0]["field"] == "jobname"


def test_a_killed_name_is_reusable_at_once(alice_api: APIClient, local_dc: Datacenter, fake_package: Path) -> None:
    first = alice_api.post("/api/v1/jobs", GOOD, format="json").json()
    killed = alice_api.delete("/api/v1/jobs/fake").json()
    assert killed["state"] == "killed" and killed["reason"] == "Killed"
    second = alice_api.post("/api/v1/jobs", GOOD, format="json")
    assert second.status_code == 201
    assert second.json()["uid"] != first["uid"]
    assert alice_api.get("/api/v1/jobs/fake").json()["uid"] == second.json()["uid"]


def test_bob_cannot_see_or_kill_alice_job(
    alice_api: APIClient, bob_api: APIClient, carol_api: APIClient, local_dc: Datacenter, fake_package: Path
) -> None:
    alice_api.post("/api/v1/jobs", GOOD, format="json")
    assert bob_api.get("/api/v1/jobs").json()["count"] == 0
    for path in ("/api/v1/jobs/fake", "/api/v1/jobs/fake/workers", "/api/v1/jobs/fake/logs"):
        assert bob_api.get(path).status_code == 404
    assert bob_api.delete("/api/v1/jobs/fake").status_code == 404
    assert Job.objects.get().state == "queued"
    # Operators see everyone's jobs when they ask for them.
    assert carol_api.get("/api/v1/jobs").json()["count"] == 0
    assert carol_api.get("/api/v1/jobs?all=1").json()["count"] == 1
    assert carol_api.get("/api/v1/jobs/fake?owner=alice").json()["owner"] == "alice"


@pytest.mark.parametrize("path", ["/api/v1/jobs", "/api/v1/jobs/x", "/api/v1/jobs/x/workers", "/api/v1/jobs/x/logs"])
def test_anonymous_gets_401_on_job_routes(anon_api: APIClient, db: None, path: str) -> None:
    assert anon_api.get(path).status_code == 401


def test_requested_totals_count_every_process() -> None:
    spec = {
        "parallelism": 3,
        "pservers": 2,
        "cpu": "500m",
        "memory": "1Gi",
        "gpu": 1,
        "pscpu": "2",
        "psmemory": "512Mi",
    }
    cpu, memory, gpu = requested(spec)
    assert (float(cpu), memory, gpu) == (5.5, 3 * 2**30 + 2**29 * 2, 3)


@pytest.mark.parametrize("name", ["FLAGS_enable_pir_api", "TRAINING_ROLE"])
def test_names_only_ps_mode_sets_are_free_in_collective_mode_and_refused_in_ps_mode(
    alice_api: APIClient, local_dc: Datacenter, fake_package: Path, name: str
) -> None:
    body = {**GOOD, "pservers": 0, "env": {name: "0"}}
    response = alice_api.post("/api/v1/jobs?dry_run=1", body, format="json")
    assert response.status_code == 200, response.json()
    refused = alice_api.post("/api/v1/jobs?dry_run=1", {**body, "pservers": 1}, format="json")
    errors = refused.json()["errors"]
    assert refused.status_code == 400, errors
    assert any(e["field"] == "env" and "in parameter-server mode" in e["message"] for e in errors), errors
