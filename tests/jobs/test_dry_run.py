"""POST /api/v1/jobs?dry_run=1 answers what a real submit would, quota and name included, and creates nothing."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import User
from rest_framework.test import APIClient

from datacenters.models import Datacenter, Quota
from jobs.models import Job
from tests.jobs.conftest import put_package

GOOD: dict[str, Any] = {"jobname": "fake", "entry": "python train.py", "parallelism": 2, "pservers": 2}


def files_under(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*"))


def test_a_good_dry_run_answers_the_job_and_creates_nothing(
    alice_api: APIClient, local_dc: Datacenter, fake_package: Path, django_capture_on_commit_callbacks: Any
) -> None:
    before = files_under(Path(local_dc.storage_root))
    with django_capture_on_commit_callbacks() as callbacks:
        response = alice_api.post("/api/v1/jobs?dry_run=1", {**GOOD, "cpu": "500m", "memory": "1Gi"}, format="json")
    assert response.status_code == 200, response.json()
    answer = response.json()
    assert answer["dry_run"] is True
    assert answer["job"]["name"] == "fake" and answer["job"]["state"] == "queued"
    assert answer["job"]["datacenter"] == "local" and answer["job"]["owner"] == "alice"
    assert answer["job"]["trainers"]["total"] == 2 and answer["job"]["pservers"]["total"] == 2
    assert answer["requested"] == {"cpu": 3.0, "memory": 4 * 2**30, "gpu": 0}
    assert not Job.objects.exists()
    assert callbacks == []  # no submit_job task queued
    assert files_under(Path(local_dc.storage_root)) == before


@pytest.mark.parametrize("value", ["1", "true", "TRUE"])
def test_dry_run_accepts_1_and_true(alice_api: APIClient, local_dc: Datacenter, fake_package: Path,
                                    value: str) -> None:
    assert alice_api.post(f"/api/v1/jobs?dry_run={value}", GOOD, format="json").status_code == 200
    assert not Job.objects.exists()


@pytest.mark.parametrize("value", ["yes", "2", "", "tru"])
def test_a_bad_dry_run_value_is_a_400_naming_dry_run(
    alice_api: APIClient, local_dc: Datacenter, fake_package: Path, value: str
) -> None:
    response = alice_api.post(f"/api/v1/jobs?dry_run={value}", GOOD, format="json")
    assert response.status_code == 400
    assert [e["field"] for e in response.json()["errors"]] == ["dry_run"]
    assert not Job.objects.exists()


REFUSALS: list[tuple[str, dict[str, Any], int, str]] = [
    ("bad quantity", {"memory": "1e999999999"}, 400, "memory"),
    ("nan cpu", {"cpu": "NaN"}, 400, "cpu"),
    ("unknown registry", {"registry": "harbor"}, 400, "registry"),
    ("missing package", {"package": "/pfs/local/home/alice/nothing"}, 400, "package"),
    ("over quota", {"parallelism": 20}, 400, "quota"),
    ("loader env", {"env": {"LD_PRELOAD": "/tmp/x.so"}}, 400, "env"),
]


@pytest.mark.parametrize(("case", "change", "status", "field"), REFUSALS, ids=[c[0] for c in REFUSALS])
def test_a_dry_run_refuses_exactly_what_a_submit_refuses(
    alice_api: APIClient, local_dc: Datacenter, fake_package: Path, case: str, change: dict[str, Any],
    status: int, field: str,
) -> None:
    body = {**GOOD, **change}
    dry = alice_api.post("/api/v1/jobs?dry_run=1", body, format="json")
    real = alice_api.post("/api/v1/jobs", body, format="json")
    assert dry.status_code == real.status_code == status
    assert dry.json() == real.json()
    assert field in [e["field"] for e in dry.json()["errors"]]
    assert not Job.objects.exists()


def test_a_dry_run_sees_the_name_of_an_active_job(
    alice_api: APIClient, local_dc: Datacenter, fake_package: Path
) -> None:
    assert alice_api.post("/api/v1/jobs", GOOD, format="json").status_code == 201
    dry = alice_api.post("/api/v1/jobs?dry_run=1", GOOD, format="json")
    assert dry.status_code == 409
    assert dry.json()["errors"][0]["field"] == "jobname"
    assert Job.objects.count() == 1


def test_a_dry_run_refuses_only_what_could_never_start(
    alice_api: APIClient, alice: User, local_dc: Datacenter, fake_package: Path
) -> None:
    """The quota caps what runs at once: a job that fits it waits in the queue, so its dry run passes."""
    Quota.objects.create(user=alice, datacenter=local_dc, cpu="4")
    assert alice_api.post("/api/v1/jobs", {**GOOD, "jobname": "first"}, format="json").status_code == 400
    put_package(local_dc, alice, "first", Path(__file__).parent / "fake_package")
    assert alice_api.post("/api/v1/jobs", {**GOOD, "jobname": "first"}, format="json").status_code == 201
    assert alice_api.post("/api/v1/jobs?dry_run=1", GOOD, format="json").status_code == 200
    dry = alice_api.post("/api/v1/jobs?dry_run=1", {**GOOD, "parallelism": 5}, format="json")
    assert dry.status_code == 400
    assert any(e["field"] == "quota" and e["message"].startswith("cpu:") for e in dry.json()["errors"])


def test_upload_pending_checks_the_path_but_not_that_it_exists(
    alice_api: APIClient, local_dc: Datacenter
) -> None:
    home = Path(local_dc.storage_root) / "home" / "alice"
    ok = alice_api.post("/api/v1/jobs?dry_run=1&upload_pending=1", GOOD, format="json")
    assert ok.status_code == 200, ok.json()
    # Alice's home is made on her first use of storage, as every files call does; nothing goes in it.
    assert files_under(home) == []
    # Without upload_pending the same dry run says the package is missing, as a submit would.
    missing = alice_api.post("/api/v1/jobs?dry_run=1", GOOD, format="json")
    assert missing.status_code == 400 and missing.json()["errors"][0]["field"] == "package"
    elsewhere = alice_api.post(
        "/api/v1/jobs?dry_run=1&upload_pending=1", {**GOOD, "package": "/pfs/local/home/bob/jobs/x"}, format="json"
    )
    assert elsewhere.status_code == 400 and elsewhere.json()["errors"][0]["field"] == "package"
    public = alice_api.post(
        "/api/v1/jobs?dry_run=1&upload_pending=1", {**GOOD, "package": "/pfs/local/public/x"}, format="json"
    )
    assert public.status_code == 400 and public.json()["errors"][0]["field"] == "package"
    assert not Job.objects.exists()


def test_upload_pending_is_only_for_a_dry_run(alice_api: APIClient, local_dc: Datacenter,
                                              fake_package: Path) -> None:
    response = alice_api.post("/api/v1/jobs?upload_pending=1", GOOD, format="json")
    assert response.status_code == 400
    assert [e["field"] for e in response.json()["errors"]] == ["upload_pending"]
    assert not Job.objects.exists()


def test_the_schema_documents_the_dry_run(alice_api: APIClient) -> None:
    schema = alice_api.get("/api/schema/?format=json").json()
    post = schema["paths"]["/api/v1/jobs"]["post"]
    assert {"dry_run", "upload_pending"} <= {p["name"] for p in post["parameters"]}
    assert "200" in post["responses"] and "201" in post["responses"]
    dry = post["responses"]["200"]["content"]["application/json"]["schema"]["$ref"].rsplit("/", 1)[-1]
    assert set(schema["components"]["schemas"][dry]["properties"]) == {"dry_run", "job", "requested"}
