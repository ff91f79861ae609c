"""A job's params (spec `params`): the rules, typed values from -param, the 400s that name `params.<name>`, the
job reading them with paddlecloud.params() on the local engine, and where a user sees them (API, page, clone,
describe, get jobs -o wide)."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import paddlecloud
import pytest
from django.contrib.auth.models import User
from django.test import Client
from paddlecloud.contract import spec as rules
from paddlecloud.contract.jobenv import JobEnv
from paddlecloud.ctl.output import jobs_table, params_text
from paddlecloud.sdk import spec as sdk_spec
from paddlecloud.sdk.errors import UsageProblem
from paddlecloud.sdk.job import PaddleJob
from rest_framework.test import APIClient

from datacenters.models import Datacenter
from jobs.engines.launch import Launch, Peers, SpecFacts
from jobs.models import Job
from jobs.web.forms import SubmitForm, initial_from_spec
from tests.jobs.conftest import put_package
from tests.jobs.test_local_engine import finished
from tests.workers import WorkerProcess

GOOD: dict[str, Any] = {"jobname": "sweep", "entry": "python train.py", "parallelism": 1, "pservers": 0}
PARAMS: dict[str, str | int | float | bool] = {"lr": 0.003, "batch": 64, "amp": True, "optimizer": "adam"}


def test_minus_param_values_are_typed_as_given() -> None:
    pairs = ["lr=0.003", "batch=64", "amp=true", "optimizer=adam", "warmup=-5", "tag=1e-3x", "empty="]
    assert sdk_spec.parse_params(pairs) == {
        "lr": 0.003, "batch": 64, "amp": True, "optimizer": "adam", "warmup": -5, "tag": "1e-3x", "empty": "",
    }  # fmt: skip
    assert rules.parse_param("x=nan") == ("x", "nan")  # not a finite number: the text
    for bad, words in [("lr", "NAME=VALUE"), ("LR=1", "a name is a-z first"), ("1x=1", "a name is a-z first")]:
        with pytest.raises(UsageProblem, match=words):
            sdk_spec.parse_params([bad])


@pytest.mark.parametrize(
    ("params", "field", "rule"),
    [
        ([1, 2], "params", "must be an object"),
        ({f"p{i}": i for i in range(65)}, "params", "at most 64 parameters"),
        ({"Bad-Name": 1}, "params.Bad-Name", "a name is a-z first"),
        ({"x" * 41: 1}, "params." + "x" * 40, "at most 40 characters"),
        ({"lr": [0.1, 0.2]}, "params.lr", "a string, a number, true or false"),
        ({"lr": {"min": 1}}, "params.lr", "a string, a number, true or false"),
        ({"lr": None}, "params.lr", "a string, a number, true or false"),
        ({"note": "x" * 1001}, "params.note", "at most 1000 characters"),
        ({"big": 2**64}, "params.big", "within 64 bits"),
    ],
)
def test_bad_params_are_a_400_naming_the_param_and_create_nothing(
    alice_api: APIClient, local_dc: Datacenter, params: object, field: str, rule: str
) -> None:
    response = alice_api.post("/api/v1/jobs", {**GOOD, "params": params}, format="json")
    assert response.status_code == 400, response.json()
    errors = response.json()["errors"]
    assert any(e["field"] == field and rule in e["message"] for e in errors), errors
    assert not Job.objects.exists()


def test_a_non_finite_number_is_refused_by_the_shared_rule() -> None:
    assert rules.params_problem({"lr": math.inf}) == ("params.lr", "must be a finite number")


def test_the_launcher_is_told_the_params_as_json_and_reads_them_back() -> None:
    launch = Launch("j", "dc", "alice", 1, 0, "python t.py", 1, 1, "/p", "/h", "/o", None,
                    facts=SpecFacts(params=json.dumps(PARAMS, sort_keys=True)))  # fmt: skip
    env = launch.env("trainer", Peers(("127.0.0.1",), (1,), ("127.0.0.1",), (2,), 3, 4), 0)
    assert json.loads(env["PADDLECLOUD_PARAMS"]) == PARAMS
    assert JobEnv.from_env(env).params == env["PADDLECLOUD_PARAMS"]
    without = Launch("j", "dc", "alice", 1, 0, "python t.py", 1, 1, "/p", "/h", "/o", None)
    assert "PADDLECLOUD_PARAMS" not in without.env("trainer", Peers((), (), ("h",), (2,), 3, 4), 0)


@pytest.mark.celery
@pytest.mark.django_db(transaction=True)
def test_the_job_reads_its_params_and_the_user_sees_them_everywhere(
    alice_api: APIClient, alice: User, local_dc: Datacenter, worker: WorkerProcess, tmp_path: Path
) -> None:
    source = tmp_path / "package"
    source.mkdir()
    (source / "train.py").write_text(
        "import json, paddlecloud\nprint('params', json.dumps(paddlecloud.params(), sort_keys=True), flush=True)\n"
    )
    put_package(local_dc, alice, "sweep", source)
    created = alice_api.post("/api/v1/jobs", {**GOOD, "params": PARAMS}, format="json")
    assert created.status_code == 201, created.json()
    assert created.json()["spec"]["params"] == PARAMS
    job = finished("sweep", worker)
    assert job.state == "succeeded", job.message
    log = alice_api.get("/api/v1/jobs/sweep/logs?worker=trainer-0").json()["text"]
    assert f"params {json.dumps(PARAMS, sort_keys=True)}" in log
    # The page shows them, a clone keeps them, the CLI's describe and `get jobs -o wide` show them.
    page = Client()
    page.force_login(alice)
    html = page.get(f"/jobs/{job.uid}/").content.decode()
    assert "<code>amp=true</code>" in html and "<code>lr=0.003</code>" in html
    assert initial_from_spec(job.spec, with_env_values=True)["params"].splitlines() == [
        "amp=true", "batch=64", "lr=0.003", "optimizer=adam",
    ]  # fmt: skip
    listed = alice_api.get("/api/v1/jobs").json()["results"]
    assert params_text(PARAMS) == "amp=true batch=64 lr=0.003 optimizer=adam"
    assert "PARAMS" in jobs_table(listed, wide=True) and "amp=true batch=64" in jobs_table(listed, wide=True)
    assert "PARAMS" not in jobs_table(listed)


def test_the_submit_form_reads_a_params_table_and_names_a_bad_line() -> None:
    def form_with(text: str) -> SubmitForm:
        form = SubmitForm({"jobname": "sweep", "entry": "python train.py", "params": text},
                          datacenters=["local"], registries=[])  # fmt: skip
        assert form.is_valid(), form.errors
        return form

    form = form_with("lr=0.003\n\nbatch=64\n  amp=false  \n")  # blank lines and the spaces around a line: none
    assert form.payload()["params"] == {"lr": 0.003, "batch": 64, "amp": False}
    bad = form_with("lr=0.003\nBatch=64")
    bad.payload()
    assert "line 2: params.Batch: a name is a-z first" in str(bad.errors["params"])


def test_the_sdk_sends_params_and_the_job_side_reads_them(monkeypatch: pytest.MonkeyPatch) -> None:
    job = PaddleJob(job_name="sweep", entry_point="python train.py", trainers=1, pservers=0, params=PARAMS)
    assert job.to_spec()["params"] == PARAMS
    with pytest.raises(UsageProblem, match=r"params\.LR"):
        PaddleJob(job_name="sweep", entry_point="python train.py", trainers=1, pservers=0, params={"LR": 1})
    monkeypatch.setenv("PADDLECLOUD_PARAMS", json.dumps(PARAMS))
    assert paddlecloud.params() == PARAMS
    monkeypatch.setenv("PADDLECLOUD_PARAMS", "{not json")
    with pytest.raises(ValueError, match="PADDLECLOUD_PARAMS is not JSON"):
        paddlecloud.params()
    monkeypatch.delenv("PADDLECLOUD_PARAMS")
    assert paddlecloud.params() == {}


@pytest.mark.parametrize(
    "value",
    ["42", "true", "1e-3", " spaced ", '"quoted"', "١٢٣", "1_000", "adam", "", 42, -5, 0.1, 1e-05, True, False],
)
def test_a_value_written_as_text_reads_back_the_same(value: str | int | float | bool) -> None:
    """Clone and describe write param_text; -param and the form read it back with parse_param."""
    assert rules.parse_param(f"p={rules.param_text(value)}") == ("p", value)


def test_digits_past_64_bits_and_unicode_digits_stay_text() -> None:
    assert rules.parse_param("seed=1234567890123456789012") == ("seed", "1234567890123456789012")
    assert rules.parse_param("n=١٢٣") == ("n", "١٢٣")
    assert rules.parse_param("n=1_000") == ("n", "1_000")


def test_params_past_32_kib_as_json_are_refused_before_the_job_could_not_start() -> None:
    big = {f"p{i}": "é" * 1000 for i in range(20)}  # 20 x 2,000 bytes of UTF-8
    field, problem = rules.params_problem(big) or ("", "")
    assert (field, problem) == ("params", "at most 32768 bytes as JSON (got 40210): the job reads them from its env")
