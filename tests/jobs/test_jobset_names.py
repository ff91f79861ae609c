"""A job's JobSet names fit JobSet's webhook rule, or the submit to a Kueue datacenter is refused naming `jobname`."""

from __future__ import annotations

from pathlib import Path

import pytest
from django.contrib.auth.models import User
from paddlecloud.contract.spec import MAX_NAME
from rest_framework.test import APIClient

from datacenters.models import Datacenter, Engine, StorageKind
from jobs.engines.kubernetes import names
from tests.jobs.conftest import put_package

LIMITS = {"parallelism": 1000, "pservers": 100}  # the spec's largest (paddlecloud.contract.spec)


def webhook_accepts(uid: str, replicated_job: str, count: int) -> bool:
    """JobSet v0.11.1 ValidateCreate: GenPodName(js, rjob, replicas-1, completions-1) + "-abcde" is a DNS-1035 label."""
    return len(f"{uid}-{replicated_job}-0-{count - 1}-abcde") <= 63


@pytest.mark.parametrize("name_length", range(1, MAX_NAME + 1))
def test_the_rule_refuses_exactly_what_jobsets_webhook_would(name_length: int) -> None:
    uid = "n" * name_length + "-abcde"  # jobs.services._uid: the name and a 5-character suffix
    for trainers in (1, 9, 10, 99, 100, 999, LIMITS["parallelism"]):
        for pservers in (0, 1, 10, LIMITS["pservers"]):
            fits = webhook_accepts(uid, names.JOBSET_TRAINERS, trainers) and (
                not pservers or webhook_accepts(uid, names.JOBSET_PSERVERS, pservers)
            )
            problem = names.jobset_name_problem("n" * name_length, trainers, pservers)
            assert (problem is None) == fits, (name_length, trainers, pservers, problem)


def test_the_longest_names_do_not_fit_so_the_rule_is_needed() -> None:
    assert names.jobset_name_problem("n" * MAX_NAME, 1, 0) is not None
    assert names.jobset_name_problem("n" * 37, LIMITS["parallelism"], LIMITS["pservers"]) is None


@pytest.fixture
def kueue_datacenter(db: None, tmp_path: Path) -> Datacenter:
    (tmp_path / "home").mkdir()
    (tmp_path / "public").mkdir()
    return Datacenter.objects.create(
        name="kq", engine=Engine.KUBERNETES, admission="kueue", kubeconfig="x", storage_kind=StorageKind.HOSTPATH,
        host_path=str(tmp_path), storage_root=str(tmp_path), capacity_cpu="256", default_cpu="64",
    )  # fmt: skip


def test_a_kueue_datacenter_refuses_a_name_its_jobset_could_not_have_with_a_400_naming_jobname(
    alice_api: APIClient, alice: User, kueue_datacenter: Datacenter, tmp_path: Path
) -> None:
    source = tmp_path / "src"
    source.mkdir()
    (source / "train.py").write_text("print('hi')\n")
    long_name = "n" * MAX_NAME
    put_package(kueue_datacenter, alice, long_name, source)
    body = {"jobname": long_name, "entry": "python train.py", "datacenter": "kq"}
    refused = alice_api.post("/api/v1/jobs?dry_run=1", body, format="json")
    assert refused.status_code == 400, refused.content
    error = refused.json()["errors"][0]
    assert error["field"] == "jobname" and "at most 39 characters" in error["message"], error
    fits = "n" * 39
    put_package(kueue_datacenter, alice, fits, source)
    accepted = alice_api.post("/api/v1/jobs?dry_run=1", {**body, "jobname": fits}, format="json")
    assert accepted.status_code == 200, accepted.content
