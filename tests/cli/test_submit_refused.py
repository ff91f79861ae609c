"""A refused `paddlectl submit` leaves nothing behind: no file in the user's home, no open upload, no job."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from paddlecloud import PaddleJob
from paddlecloud.sdk import files as client_files
from paddlecloud.sdk.errors import APIError

from datacenters.models import Quota
from jobs.models import Job
from storage.models import Upload
from tests.cli.conftest import Portal, one_line_error


def package(tmp_path: Path) -> Path:
    pkg = tmp_path / "pkg"
    (pkg / "lib").mkdir(parents=True)
    (pkg / "train.py").write_text("print('hello')\n")
    (pkg / "lib" / "data.txt").write_text("x" * 70000)
    return pkg


def submit_args(pkg: Path, *extra: str) -> list[str]:
    return ["submit", "-jobname", "fit", "-entry", "python train.py", *extra, str(pkg)]


def left_in_home(portal: Portal) -> list[str]:
    home = portal.pfs_home
    return sorted(str(p.relative_to(home)) for p in home.rglob("*")) if home.exists() else []


def assert_nothing_left(portal: Portal) -> None:
    assert left_in_home(portal) == []
    assert not Upload.objects.exists()
    assert not Job.objects.exists()


REFUSED: list[tuple[str, list[str], int, str]] = [
    ("over quota", ["-parallelism", "20"], 1, "quota: cpu: the job needs 20 cores but your quota in local is 16"),
    ("unknown registry", ["-registry", "harbor"], 1, "-registry: you have no registry secret named 'harbor'"),
    ("unknown datacenter", ["-datacenter", "mars"], 1, "-datacenter: unknown datacenter 'mars'"),
    ("huge memory", ["-memory", "1e999999999"], 2, "-memory: '1e999999999' has an exponent outside -40..40"),
    ("nan cpu", ["-cpu", "NaN"], 2, "-cpu: 'NaN' is not a finite number"),
    ("loader env", ["-env", "LD_PRELOAD=/tmp/x.so"], 2, "-env: 'LD_PRELOAD' is refused"),
]


@pytest.mark.parametrize(("case", "extra", "code", "message"), REFUSED, ids=[r[0] for r in REFUSED])
def test_a_refused_submit_uploads_nothing(
    portal: Portal, tmp_path: Path, case: str, extra: list[str], code: int, message: str
) -> None:
    result = portal.run(*submit_args(package(tmp_path), *extra))
    assert result.exit_code == code, (result.stdout, result.stderr)
    assert message in one_line_error(result)
    assert_nothing_left(portal)


def test_a_refused_submit_as_a_real_process_uploads_nothing(portal: Portal, tmp_path: Path) -> None:
    Quota.objects.create(user=portal.user, datacenter=portal.datacenter, memory="1Gi")
    result = portal.process(*submit_args(package(tmp_path), "-parallelism", "2"))
    assert result.returncode == 1
    assert "quota: memory: the job needs 2Gi but your quota in local is 1Gi" in one_line_error(result)
    assert_nothing_left(portal)


def test_a_dry_run_uploads_and_creates_nothing(portal: Portal, tmp_path: Path) -> None:
    result = portal.run(*submit_args(package(tmp_path), "-dry-run"))
    assert result.exit_code == 0, result.stderr
    assert result.stdout.startswith("the portal would accept job fit on local (1 cores, 1GiB memory, 0 GPUs")
    assert_nothing_left(portal)


def test_notify_reaches_the_portal_in_the_spec(portal: Portal, tmp_path: Path) -> None:
    result = portal.run(*submit_args(package(tmp_path), "-notify", "email", "-dry-run", "-o", "json"))
    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout)["job"]["spec"]["notify"] == {"email": True, "webhook": ""}
    assert_nothing_left(portal)


def lower_quota_after_upload(portal: Portal, monkeypatch: pytest.MonkeyPatch) -> None:
    """The race: the dry run passes, then an operator lowers the quota while the package uploads."""
    upload = client_files.Files.copy

    def copy_then_lower(self: Any, *args: Any, **kwargs: Any) -> Any:
        summary = upload(self, *args, **kwargs)
        Quota.objects.create(user=portal.user, datacenter=portal.datacenter, cpu="500m")
        return summary

    monkeypatch.setattr(client_files.Files, "copy", copy_then_lower)


def test_a_job_refused_after_its_upload_removes_the_new_folder(
    portal: Portal, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    lower_quota_after_upload(portal, monkeypatch)
    result = portal.run(*submit_args(package(tmp_path)))
    assert result.exit_code == 1
    assert "quota: cpu: the job needs 1 cores but your quota in local is 0.5" in one_line_error(result)
    assert left_in_home(portal) == []
    assert not Upload.objects.filter(state="open").exists()
    assert not Job.objects.exists()


def test_a_job_refused_after_its_upload_keeps_what_was_there_before(
    portal: Portal, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    earlier = portal.pfs_home / "jobs" / "fit" / "output" / "fit-abcde"
    earlier.mkdir(parents=True)
    (earlier / "log.txt").write_text("an earlier run\n")
    lower_quota_after_upload(portal, monkeypatch)
    result = portal.run(*submit_args(package(tmp_path)))
    assert result.exit_code == 1
    assert left_in_home(portal) == ["jobs", "jobs/fit", "jobs/fit/output", "jobs/fit/output/fit-abcde",
                                    "jobs/fit/output/fit-abcde/log.txt"]
    assert not Upload.objects.filter(state="open").exists()


def test_the_sdk_asks_before_it_uploads(portal: Portal, tmp_path: Path) -> None:
    pkg = package(tmp_path)
    answer = PaddleJob(job_name="fit", entry_point="python train.py", trainer_package_path=pkg,
                       trainers=2).submit(dry_run=True)
    assert answer["dry_run"] is True and answer["requested"]["cpu"] == 2.0
    assert_nothing_left(portal)
    over = PaddleJob(job_name="fit", entry_point="python train.py", trainer_package_path=pkg, trainers=17)
    with pytest.raises(APIError, match="quota: cpu: the job needs 17 cores"):
        over.submit()
    assert over.job is None
    assert_nothing_left(portal)
