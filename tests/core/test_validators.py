"""The one bounded quantity parser (paddlecloud.contract.quantity) and where the portal uses it.

Unit tests of the parser, then the quota PUT, a quota row saved by older code, and the job spec.
"""

from __future__ import annotations

import time
from decimal import Decimal
from pathlib import Path

import pytest
from django.contrib.auth.models import User
from django.core.exceptions import ValidationError
from django.test import Client
from paddlecloud.contract import quantity
from paddlecloud.contract import spec as rules
from rest_framework.test import APIClient

from datacenters.models import Datacenter, Quota
from jobs.models import Job
from tests.conftest import PASSWORD

GOOD = [
    ("1", quantity.CPU, Decimal(1)),
    ("500m", quantity.CPU, Decimal("0.5")),
    ("0.25", quantity.CPU, Decimal("0.25")),
    (".5", quantity.CPU, Decimal("0.5")),
    ("+2", quantity.CPU, Decimal(2)),
    ("1e3", quantity.CPU, Decimal(1000)),
    ("1e6", quantity.CPU, Decimal(10**6)),
    ("1000000", quantity.CPU, Decimal(10**6)),
    ("100n", quantity.CPU, Decimal("1E-7")),
    ("1Ki", quantity.MEMORY, Decimal(1024)),
    ("1.5Gi", quantity.MEMORY, Decimal(3 * 2**29)),
    ("512Mi", quantity.MEMORY, Decimal(2**29)),
    ("1G", quantity.MEMORY, Decimal(10**9)),
    ("1k", quantity.MEMORY, Decimal(1000)),
    ("1E", quantity.MEMORY, Decimal(10**18)),
    ("1Ei", quantity.MEMORY, Decimal(2**60)),
    ("1Ei", quantity.STORAGE, Decimal(2**60)),
    ("0", quantity.STORAGE, Decimal(0)),
    (" 2Gi ", quantity.MEMORY, Decimal(2 * 2**30)),
    (3, quantity.CPU, Decimal(3)),
]


@pytest.mark.parametrize(("text", "kind", "amount"), GOOD, ids=[f"{g[0]!s}-{g[1].name}" for g in GOOD])
def test_good_quantities_parse_exactly(text: str, kind: quantity.Kind, amount: Decimal) -> None:
    assert quantity.parse(text, kind) == amount


BAD = [
    ("NaN", quantity.CPU, "'NaN' is not a finite number"),
    ("nan", quantity.MEMORY, "'nan' is not a finite number"),
    ("sNaN", quantity.MEMORY, "'sNaN' is not a finite number"),
    ("Infinity", quantity.CPU, "'Infinity' is not a finite number"),
    ("-Infinity", quantity.CPU, "'-Infinity' is not a finite number"),
    ("inf", quantity.STORAGE, "'inf' is not a finite number"),
    ("1e999999999", quantity.MEMORY, "'1e999999999' has an exponent outside -40..40; memory is at most 1Ei"),
    ("1e999999", quantity.CPU, "has an exponent outside -40..40"),
    ("1e-999999", quantity.CPU, "has an exponent outside -40..40"),
    ("1e41", quantity.CPU, "has an exponent outside -40..40"),
    ("1e40", quantity.CPU, "'1e40' is too large: cpu is at most 1000000 cores (1e6)"),
    ("1000001", quantity.CPU, "is too large: cpu is at most 1000000 cores"),
    ("2Ei", quantity.MEMORY, "'2Ei' is too large: memory is at most 1Ei"),
    ("1025Pi", quantity.STORAGE, "is too large: storage is at most 1Ei"),
    ("9" * 32, quantity.MEMORY, "is too large"),
    ("9" * 33, quantity.MEMORY, "is too long: a quantity has at most 32 characters"),
    ("-1", quantity.CPU, "'-1' must not be negative"),
    ("-1Gi", quantity.MEMORY, "must not be negative"),
    ("1GB", quantity.MEMORY, "'1GB' is not a quantity; use 1Gi, 1G or 512Mi"),
    ("1e3Mi", quantity.MEMORY, "is not a quantity"),
    ("two", quantity.CPU, "'two' is not a quantity; use a number of cores such as 2, 0.5 or 500m"),
    ("", quantity.CPU, "is not a quantity"),
    ("0x10", quantity.CPU, "is not a quantity"),
    ("1_000", quantity.CPU, "is not a quantity"),
    ("١", quantity.CPU, "is not a quantity"),  # an Arabic-Indic digit: \d alone would take it
    (True, quantity.CPU, "is not a quantity"),
    (None, quantity.CPU, "is not a quantity"),
]


@pytest.mark.parametrize(("text", "kind", "message"), BAD, ids=[str(b[0])[:20] for b in BAD])
def test_bad_quantities_are_refused_with_the_rule(text: object, kind: quantity.Kind, message: str) -> None:
    with pytest.raises(quantity.QuantityError) as refused:
        quantity.parse(text, kind)
    assert message in str(refused.value)
    assert quantity.problem(text, kind) == str(refused.value)


def test_a_huge_exponent_is_answered_at_once() -> None:
    started = time.monotonic()
    for text in ("1e999999999", "9" * 31 + "e9", "1e" + "9" * 30, "0e999999999"):
        assert quantity.problem(text, quantity.MEMORY) is not None
    assert time.monotonic() - started < 0.5


def test_a_message_quotes_at_most_32_characters() -> None:
    assert quantity.problem("1" * 10**6, quantity.MEMORY) == (
        f"{'1' * 32!r}… is too long: a quantity has at most 32 characters"
    )
    assert len(quantity.quote("\x00" * 1000)) < 200
    assert (quantity.problem("x", quantity.MEMORY, "psmemory") or "").startswith("psmemory 'x' is not a quantity")


def test_bytes_are_rounded_up_to_a_whole_byte() -> None:
    assert quantity.byte_count("0.5") == 1
    assert quantity.byte_count("1.5Ki") == 1536
    assert quantity.cores("250m") == Decimal("0.25")


def test_the_whole_job_is_summed_with_bounded_numbers() -> None:
    cpu, memory, gpu = rules.requested(
        {"parallelism": 1000, "pservers": 100, "cpu": "1e6", "memory": "1Ei", "pscpu": "1", "psmemory": "1Gi",
         "gpu": 64}
    )
    assert (cpu, memory, gpu) == (Decimal(10**9 + 100), 1000 * 2**60 + 100 * 2**30, 64000)


# --- the quota API and saved values --------------------------------------------------------------


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"cpu": "NaN"}, "cpu"),
        ({"cpu": "Infinity"}, "cpu"),
        ({"memory": "1e999999"}, "memory"),
        ({"memory": "1e999999999"}, "memory"),
        ({"storage": "sNaN"}, "storage"),
        ({"storage": "2Ei"}, "storage"),
        ({"cpu": "2000000"}, "cpu"),
        ({"gpu": 1025}, "gpu"),
        ({"cpu": "1", "memory": "inf"}, "memory"),
    ],
)
def test_a_bad_quota_put_is_a_400_and_saves_nothing(
    carol_api: APIClient, alice: User, local_dc: Datacenter, body: dict[str, object], field: str
) -> None:
    started = time.monotonic()
    response = carol_api.put("/api/v1/quota/local/alice", body, format="json")
    assert time.monotonic() - started < 5
    assert response.status_code == 400, response.json()
    assert field in [e["field"] for e in response.json()["errors"]]
    assert len(response.content) < 1000
    assert not Quota.objects.exists()


def test_a_quota_put_at_the_caps_is_saved(carol_api: APIClient, alice: User, local_dc: Datacenter) -> None:
    body = {"cpu": "1e6", "memory": "1Ei", "storage": "1Ei", "gpu": 1024}
    response = carol_api.put("/api/v1/quota/local/alice", body, format="json")
    assert response.status_code == 200, response.json()
    assert response.json()["limits"]["memory"] == 2**60 and response.json()["limits"]["cpu"] == 1e6


@pytest.fixture
def saved_bad_quota(alice: User, local_dc: Datacenter) -> Quota:
    """A row as the old code saved it: values that were never quantities, written without validation."""
    return Quota.objects.create(user=alice, datacenter=local_dc, cpu="NaN", memory="1e999999999", storage="sNaN",
                                gpu=1)


def test_a_saved_bad_quota_counts_as_the_datacenter_default(
    alice_api: APIClient, saved_bad_quota: Quota, caplog: pytest.LogCaptureFixture
) -> None:
    response = alice_api.get("/api/v1/quota")
    assert response.status_code == 200
    limits = response.json()["results"][0]["limits"]
    assert (limits["cpu"], limits["memory"], limits["storage"], limits["gpu"]) == (16.0, 64 * 2**30, 100 * 2**30, 1)
    assert "ignoring the saved memory and using the default" in caplog.text


def test_a_saved_bad_quota_breaks_neither_the_dashboard_nor_submit(
    alice_api: APIClient, alice: User, saved_bad_quota: Quota, local_dc: Datacenter
) -> None:
    browser = Client()
    assert browser.login(username="alice", password=PASSWORD)
    assert browser.get("/").status_code == 200
    (Path(local_dc.storage_root) / "home" / "alice" / "jobs" / "fit").mkdir(parents=True)
    response = alice_api.post("/api/v1/jobs", {"jobname": "fit", "entry": "python train.py"}, format="json")
    assert response.status_code == 201, response.json()
    assert Job.objects.count() == 1


def test_a_bad_datacenter_default_counts_as_zero(alice_api: APIClient, local_dc: Datacenter) -> None:
    Datacenter.objects.filter(pk=local_dc.pk).update(default_cpu="Infinity")
    limits = alice_api.get("/api/v1/quota").json()["results"][0]["limits"]
    assert limits["cpu"] == 0.0 and limits["memory"] == 64 * 2**30


def test_the_admin_form_refuses_a_non_finite_quota(alice: User, local_dc: Datacenter) -> None:
    quota_row = Quota(user=alice, datacenter=local_dc, cpu="NaN", memory="1e999999")
    with pytest.raises(ValidationError) as refused:
        quota_row.full_clean()
    assert set(refused.value.message_dict) == {"cpu", "memory"}
    assert "cpu 'NaN' is not a finite number" in refused.value.message_dict["cpu"][0]


# --- the job spec --------------------------------------------------------------------------------

SPEC = {"jobname": "fit", "entry": "python train.py"}


@pytest.mark.parametrize("field", ["cpu", "memory", "pscpu", "psmemory"])
@pytest.mark.parametrize("value", ["NaN", "sNaN", "Infinity", "-inf", "1e999999", "1e999999999", "1" * 5000])
def test_a_non_finite_or_huge_spec_quantity_is_a_short_400(
    alice_api: APIClient, local_dc: Datacenter, field: str, value: str
) -> None:
    started = time.monotonic()
    response = alice_api.post("/api/v1/jobs", {**SPEC, field: value}, format="json")
    assert time.monotonic() - started < 5
    assert response.status_code == 400
    assert [e["field"] for e in response.json()["errors"]] == [field]
    assert len(response.content) < 1000
    assert not Job.objects.exists()


ENV_REFUSED = ["LD_PRELOAD", "LD_LIBRARY_PATH", "LD_AUDIT", "DYLD_INSERT_LIBRARIES", "PYTHONSTARTUP", "PYTHONHOME",
               "PYTHONINSPECT", "PYTHONEXECUTABLE", "BASH_ENV", "ENV", "GCONV_PATH", "GLIBC_TUNABLES", "IFS"]


@pytest.mark.parametrize("name", ENV_REFUSED)
def test_env_names_that_change_how_programs_start_are_refused(
    alice_api: APIClient, local_dc: Datacenter, name: str
) -> None:
    response = alice_api.post("/api/v1/jobs", {**SPEC, "env": {name: "x"}}, format="json")
    assert response.status_code == 400
    error = response.json()["errors"][0]
    assert error["field"] == "env" and error["message"].startswith(f"{name!r} is refused: ")
    assert not Job.objects.exists()


@pytest.mark.parametrize("name", ["PYTHONPATH", "OMP_NUM_THREADS", "CUDA_VISIBLE_DEVICES_HINT", "NCCL_DEBUG",
                                  "GLOG_v", "FLAGS_check_nan_inf", "LANG", "TMPDIR", "HF_HOME", "MY_LD_FLAG"])
def test_env_names_a_job_may_need_are_kept(name: str) -> None:
    assert rules.env_name_problem(name) is None


def test_env_is_bounded() -> None:
    assert rules.env_problem({f"V{i}": "x" for i in range(rules.MAX_ENV_VARS + 1)}) == "at most 256 variables (got 257)"
    assert "not a valid variable name" in (rules.env_name_problem("A" * 300) or "")
