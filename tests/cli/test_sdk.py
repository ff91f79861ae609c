"""The SDK: PaddleJob with both spellings of the original documents, validation, dist_train, the portal."""

from __future__ import annotations

import subprocess
import sys
import warnings
from pathlib import Path
from typing import Any

import paddlecloud
import pytest
from paddlecloud import CephFSVolume, PaddleJob, dist_train
from paddlecloud.sdk.errors import APIError, UsageProblem

from jobs.models import Job
from tests.cli.conftest import Portal

pytestmark = pytest.mark.django_db(transaction=True)


def test_import_paddlecloud_stays_light_and_keeps_its_exports() -> None:
    code = (
        "import sys, paddlecloud; "
        "print(sorted(m for m in ('requests', 'rich', 'click', 'yaml') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
    assert callable(paddlecloud.trainer_id) and callable(paddlecloud.trainers)
    assert paddlecloud.PaddleJob is PaddleJob and paddlecloud.dist_train is dist_train


def test_the_original_parameter_names_and_defaults() -> None:
    new = PaddleJob(job_name="fit", entry_point="python train.py", cpu_nums=2, runtime_image="img:1",
                    trainer_package_path="/pfs/dc/home/u/fit", pservers=2, trainers=3, gpu_nums=0)
    old = PaddleJob(job_name="fit", entry_point="python train.py", cpu_num=2, base_image="img:1",
                    trainer_package="/pfs/dc/home/u/fit", pservers=2, trainers=3, gpu_num=0)
    assert new.to_spec() == old.to_spec()
    assert new.to_spec() == {
        "jobname": "fit", "entry": "python train.py", "parallelism": 3, "pservers": 2, "cpu": "2", "memory": "1G",
        "gpu": 0, "pscpu": "1", "psmemory": "1Gi", "passes": 1, "image": "img:1", "registry": "", "env": {},
        "max_retries": 0,
    }
    defaults = PaddleJob(job_name="fit", entry_point="python train.py", trainers=-1, pservers=-1)
    assert (defaults.trainers, defaults.pservers, defaults.cpu_nums, defaults.gpu_nums) == (1, 0, "1", 0)
    assert PaddleJob(job_name="g", entry_point="x", use_gpu=True).gpu_nums == 1
    assert defaults.namespace == "default"


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"job_name": "My_Job"}, "job_name: '_' is not allowed in DNS names"),
        ({"memory": "lots"}, "memory: 'lots' is not a quantity"),
        ({"cpu_nums": 0}, "cpu_nums: '0' must be greater than zero"),
        ({"trainers": 0}, "trainers: must be between 1 and 1000 (got 0)"),
        ({"pservers": 500}, "pservers: must be between 0 and 100 (got 500)"),
        ({"env": {"PADDLE_TRAINERS_NUM": "3"}}, "env: 'PADDLE_TRAINERS_NUM' is set by PaddleCloud"),
        ({"cpu_nums": 1, "cpu_num": 2}, "give cpu_nums or cpu_num, not both"),
        ({"entry_point": "  "}, "entry_point: must not be empty"),
        ({"use_gpu": False, "gpu_nums": 2}, "use_gpu=False but gpu_nums > 0"),
        ({"stall_timeout": 9}, "stall_timeout: must be between 10 and 604800 (got 9)"),
        ({"stall_action": "panic"}, "stall_action: must be one of warn, fail"),
    ],
)
def test_bad_parameters_are_refused_by_name(kwargs: dict[str, Any], message: str) -> None:
    arguments = {"job_name": "fit", "entry_point": "python train.py", **kwargs}
    with pytest.raises(ValueError, match=None) as caught:
        PaddleJob(**arguments)
    assert isinstance(caught.value, UsageProblem) and message in str(caught.value)


def test_stall_settings_are_sent_only_when_given() -> None:
    assert "stall_timeout" not in PaddleJob(job_name="fit", entry_point="python train.py").to_spec()
    spec = PaddleJob(job_name="fit", entry_point="python train.py", stall_timeout=600, stall_action="fail").to_spec()
    assert (spec["stall_timeout"], spec["stall_action"]) == (600, "fail")


def test_retired_parameters_and_volumes_are_accepted_with_a_warning(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CEPHFS_MONITOR_ADDRS", "10.0.0.1:6789,10.0.0.2:6789")
    volume = CephFSVolume()
    assert (volume.monitors_addr, volume.user, volume.secret_name, volume.mount_path, volume.path) == (
        ["10.0.0.1:6789", "10.0.0.2:6789"], "admin", "cephfs-secret", "/mnt/cephfs", "/")
    assert CephFSVolume(monitors_addr="m:1", cephfs_path="/data").volume["cephfs"]["path"] == "/data"
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        PaddleJob(job_name="fit", entry_point="x", cephfs_volume=volume, input="/in", output="/out", port=7164)
    texts = " | ".join(str(w.message) for w in caught)
    assert "cephfs_volume is not needed" in texts and "input, output, port" in texts
    with pytest.raises(TypeError, match="unexpected keyword argument"):
        PaddleJob(job_name="fit", entry_point="x", trainerz=3)
    with pytest.raises(UsageProblem, match="mount_path 'mnt' must be an absolute path"):
        CephFSVolume(monitors_addr="m:1", mount_path="mnt")


def test_dist_train_runs_the_function_here_unless_in_a_notebook(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PADDLE_NOTEBOOK", raising=False)
    assert dist_train(lambda a, b=0: a + b, 1, b=2, paddle_job=None) == 3

    class V2Trainer:
        def train(self, reader: Any, num_passes: int = 1) -> str:
            return f"trained {num_passes} passes"

    assert dist_train(V2Trainer(), None, num_passes=3) == "trained 3 passes"
    monkeypatch.setenv("PADDLE_NOTEBOOK", "YES")
    with pytest.raises(UsageProblem, match="paddle_job is required when PADDLE_NOTEBOOK=YES"):
        dist_train(lambda: None)


def test_the_sdk_submits_reads_status_and_kills(portal: Portal, tmp_path: Path) -> None:
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "train.py").write_text("print('x')\n")
    job = PaddleJob(job_name="sdk", entry_point="python train.py", trainer_package_path=package, trainers=2)
    submitted = job.submit()
    assert submitted["state"] == "queued" and job.state == "queued"
    assert (portal.pfs_home / "jobs" / "sdk" / "train.py").read_text() == "print('x')\n"
    assert job.status()["trainers"]["total"] == 2
    assert list(job.logs()) == []  # nothing ran yet (no worker in this test)
    with pytest.raises(APIError, match="you already have an active job named 'sdk'"):
        PaddleJob(job_name="sdk", entry_point="python train.py", trainer_package_path=package).submit()
    assert job.kill()["state"] == "killed"
    Job.objects.filter(name="sdk").update(released=True)
    assert job.kill(rm=True) is None and not Job.objects.exists()
    with pytest.raises(UsageProblem, match="trainer_package_path is required"):
        PaddleJob(job_name="x", entry_point="y").submit()
