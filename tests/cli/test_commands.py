"""Every paddlectl command against the live portal, in table and JSON output; tables against golden files.

Golden files are in tests/cli/golden/; after an intended change, regenerate them with
UPDATE_GOLDEN=1 and read the diff.
"""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml
from paddlecloud.contract import logtimes

from accounts.models import ApiToken
from datacenters.models import Datacenter, Engine, StorageKind
from jobs.models import Job, Worker
from jobs.spec import requested
from registry.models import RegistrySecret
from tests.cli.conftest import NOW, Portal, golden, one_line_error

pytestmark = pytest.mark.django_db(transaction=True)

def make_job(portal: Portal, name: str, state: str, ago: timedelta, **fields: Any) -> Job:
    trainers, pservers = fields.pop("trainers", 2), fields.pop("pservers", 2)
    spec = {
        "jobname": name, "package": "", "entry": "python train.py", "parallelism": trainers, "pservers": pservers,
        "cpu": "1", "memory": "1Gi", "gpu": 0, "pscpu": "1", "psmemory": "1Gi", "passes": 1, "image": "",
        "registry": "", "env": {}, "max_retries": 0, "datacenter": "local",
    }
    cpu, memory, gpu = requested(spec)
    admitted = None if state == "queued" else NOW - ago  # what the scheduler would have admitted (and released)
    job = Job.objects.create(
        owner=portal.user, datacenter=portal.datacenter, name=name, uid=f"{name}-x1y2z", spec=spec, state=state,
        cpu_request=cpu, memory_request=memory, gpu_request=gpu, admitted_at=admitted,
        **{"released": state in ("succeeded", "failed", "killed"), **fields},
    )
    Job.objects.filter(pk=job.pk).update(created_at=NOW - ago)
    return job


@pytest.fixture
def history(portal: Portal) -> dict[str, Job]:
    """Four jobs of alice's in every kind of state, and one of bob's she must not see."""
    jobs = {
        "fit": make_job(portal, "fit", "running", timedelta(minutes=5, seconds=30), trainers_running=2,
                        pservers_running=2, progress={"step": 41, "total_steps": 100, "fraction": 0.41,
                                                      "eta_seconds": 190, "rate_steps_per_s": 0.31}),
        "new": make_job(portal, "new", "queued", timedelta(seconds=10), trainers=1, pservers=0),
        "bad": make_job(portal, "bad", "failed", timedelta(hours=2), reason="TrainerFailed",
                        message="trainer 1 exited with code 1: ValueError: bad learning rate 7", exit_code=1,
                        trainers_succeeded=1, trainers_failed=1),
        "old": make_job(portal, "old", "succeeded", timedelta(days=3, hours=1), trainers_succeeded=2, exit_code=0),
    }
    fit = jobs["fit"]
    sampled = {"cpu_cores": 1.5, "memory_bytes": 700 << 20, "gpu_util": None, "gpu_memory_bytes": None,
               "sampled_at": "2025-01-02T03:04:05Z"}  # fmt: skip
    for role, index, state, started, restarts, code, message in (
        ("pserver", 0, "running", 300, 0, None, ""),
        ("pserver", 1, "running", 299, 0, None, ""),
        ("trainer", 0, "running", 290, 0, None, ""),
        ("trainer", 1, "running", 45, 1, None, "restarted after it exited with code 1"),
    ):
        Worker.objects.create(job=fit, role=role, index=index, state=state, host="127.0.0.1", pid=1000 + index,
                              started_at=NOW - timedelta(seconds=started), restarts=restarts, exit_code=code,
                              message=message, usage=sampled if role == "trainer" else None)
    return jobs


def test_get_jobs_prints_the_table_of_the_original_columns(portal: Portal, history: dict[str, Job],
                                                           pinned: datetime) -> None:
    result = portal.run("get", "jobs")
    assert result.exit_code == 0, result.stderr
    golden("get_jobs.txt", result.stdout)


def test_get_jobs_json_and_yaml_are_the_api_objects(portal: Portal, history: dict[str, Job]) -> None:
    as_json = json.loads(portal.run("get", "jobs", "-o", "json").stdout)
    assert [j["name"] for j in as_json] == ["new", "fit", "bad", "old"]
    assert as_json[1]["trainers"] == {"total": 2, "pending": 0, "running": 2, "succeeded": 0, "failed": 0}
    as_yaml = yaml.safe_load(portal.run("get", "jobs", "--output", "yaml").stdout)
    assert as_yaml == as_json


def test_get_jobs_filters_active_and_by_state(portal: Portal, history: dict[str, Job]) -> None:
    active = json.loads(portal.run("get", "jobs", "-active", "-o", "json").stdout)
    assert [j["name"] for j in active] == ["new", "fit"]
    failed = json.loads(portal.run("get", "job", "--state", "failed", "-o", "json").stdout)
    assert [j["name"] for j in failed] == ["bad"]


def test_get_jobs_with_no_jobs_says_so(portal: Portal) -> None:
    assert portal.run("get", "jobs").stdout == "No jobs.\n"


def test_get_workers_prints_each_worker(portal: Portal, history: dict[str, Job], pinned: datetime) -> None:
    result = portal.run("get", "workers", "fit")
    assert result.exit_code == 0, result.stderr
    golden("get_workers.txt", result.stdout)
    as_json = json.loads(portal.run("get", "workers", "fit", "-o", "json").stdout)
    assert [w["name"] for w in as_json] == ["pserver-0", "pserver-1", "trainer-0", "trainer-1"]


def test_registry_add_get_and_delete(portal: Portal, pinned: datetime) -> None:
    added = portal.run("registry", "-name", "hub", "-username", "me", "-password-stdin", "-server",
                       "registry.example.com:5000", input="s3cret\n")
    assert added.exit_code == 0, added.stderr
    assert "registry secret hub added" in added.stdout
    portal.run("registry", "--name", "quay", "--username", "robot", "--password", "pw", "--server", "quay.io")
    RegistrySecret.objects.update(created_at=NOW - timedelta(days=1))
    golden("get_registry.txt", portal.run("get", "registry").stdout)
    listed = json.loads(portal.run("get", "registry", "-o", "json").stdout)
    assert [r["name"] for r in listed] == ["hub", "quay"] and all("password" not in r for r in listed)
    assert RegistrySecret.objects.get(name="hub").password == "s3cret"
    deleted = portal.run("delete", "registry", "hub")
    assert (deleted.exit_code, deleted.stdout) == (0, "registry secret hub deleted\n")
    assert [r["name"] for r in json.loads(portal.run("get", "registry", "-o", "json").stdout)] == ["quay"]


def test_get_quota_shows_compute_and_storage(portal: Portal, history: dict[str, Job]) -> None:
    (portal.pfs_home).mkdir(parents=True, exist_ok=True)
    result = portal.run("get", "quota")
    assert result.exit_code == 0, result.stderr
    # fit (2 trainers + 2 pservers, 1 core and 1Gi each) and new (1 trainer) are active.
    golden("get_quota.txt", result.stdout)
    data = json.loads(portal.run("get", "quota", "-datacenter", "local", "-o", "json").stdout)
    assert data[0]["usage"]["cpu"] == 4 and data[0]["limits"]["jobs"] == 10  # running jobs hold; queued ones not


def test_get_datacenters_marks_the_current_one(portal: Portal) -> None:
    Datacenter.objects.create(name="gpu", description="GPU cluster", engine=Engine.LOCAL,
                              storage_kind=StorageKind.LOCAL, storage_root=str(portal.storage.parent / "gpu"))
    result = portal.run("get", "datacenters")
    golden("get_datacenters.txt", result.stdout)
    assert [d["name"] for d in json.loads(portal.run("get", "dc", "-o", "json").stdout)] == ["gpu", "local"]


def test_submit_uploads_the_package_and_creates_the_job(portal: Portal, tmp_path: Path) -> None:
    package = tmp_path / "my_pkg"
    (package / "lib").mkdir(parents=True)
    (package / "train.py").write_text("print('training')\n")
    (package / "lib" / "model.py").write_text("W = 1\n")
    (package / "__pycache__").mkdir()
    (package / "__pycache__" / "train.cpython-311.pyc").write_bytes(b"junk")
    result = portal.run("submit", "-jobname", "fit", "-parallelism", "2", "-pservers", "1", "-cpu", "500m",
                        "-memory", "512Mi", "-entry", "python train.py", "-env", "LR=0.1", "--passes", "3",
                        str(package))
    assert result.exit_code == 0, result.stderr
    assert re.match(r"job fit submitted to local \(uid fit-[a-z0-9]{5}, queued\)\n", result.stdout)
    assert "uploaded 2 files" in result.stderr
    folder = portal.pfs_home / "jobs" / "fit"
    assert (folder / "train.py").read_text() == "print('training')\n"
    assert (folder / "lib" / "model.py").read_text() == "W = 1\n"
    assert not (folder / "__pycache__").exists()
    job = Job.objects.get(name="fit")
    assert job.spec["package"] == "/pfs/local/home/alice/jobs/fit"
    assert (job.spec["parallelism"], job.spec["pservers"], job.spec["cpu"], job.spec["memory"]) == (2, 1, "500m",
                                                                                                   "512Mi")
    assert (job.spec["env"], job.spec["passes"]) == ({"LR": "0.1"}, 3)


def test_submit_of_a_pfs_package_and_json_output(portal: Portal) -> None:
    (portal.pfs_home / "pkgs" / "fit").mkdir(parents=True)
    result = portal.run("submit", "--jobname", "fit", "--entry", "python train.py", "-o", "json",
                        "/pfs/local/home/alice/pkgs/fit")
    assert result.exit_code == 0, result.stderr
    job = json.loads(result.stdout)
    assert (job["name"], job["state"], job["spec"]["package"]) == ("fit", "queued", "/pfs/local/home/alice/pkgs/fit")


def test_submit_names_the_job_after_the_package_by_default(portal: Portal, tmp_path: Path) -> None:
    package = tmp_path / "Fit_A_Line"
    package.mkdir()
    (package / "train.py").write_text("")
    result = portal.run("submit", "-entry", "python train.py", str(package))
    assert result.exit_code == 0, result.stderr
    assert Job.objects.get().name == "fit-a-line"


def test_submit_refuses_to_upload_over_an_active_job_of_that_name(portal: Portal, history: dict[str, Job],
                                                                  tmp_path: Path) -> None:
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "train.py").write_text("changed")
    result = portal.run("submit", "-jobname", "fit", "-entry", "python train.py", str(tmp_path / "pkg"))
    assert result.exit_code == 1
    assert "already have an active job named 'fit' (running)" in result.stderr
    assert not (portal.pfs_home / "jobs" / "fit" / "train.py").exists()


def test_kill_and_kill_rm(portal: Portal, history: dict[str, Job]) -> None:
    killed = portal.run("kill", "fit")
    assert (killed.exit_code, killed.stdout) == (0, "job fit killed\n")
    assert Job.objects.get(name="fit").state == "killed"
    again = portal.run("kill", "old")
    assert again.stdout == "job old had already succeeded; nothing to kill\n"
    Job.objects.filter(name="old").update(released=True)
    removed = portal.run("kill", "-rm", "old")
    assert (removed.exit_code, removed.stdout) == (0, "job old removed\n")
    assert not Job.objects.filter(name="old").exists()
    assert portal.run("delete", "job", "bad").exit_code == 0


def test_logs_prints_every_worker_or_one_and_the_tail(portal: Portal, history: dict[str, Job]) -> None:
    fit = history["fit"]
    output = portal.pfs_home / "jobs" / "fit" / "output" / fit.uid
    for worker in ("trainer_0", "trainer_1", "pserver_0", "pserver_1"):
        (output / worker).mkdir(parents=True)
        (output / worker / "log.txt").write_text("".join(f"{worker} line {i}\n" for i in range(5)))
    everything = portal.run("logs", "fit")
    assert everything.exit_code == 0, everything.stderr
    lines = everything.stdout.splitlines()
    assert lines[0] == "[trainer-0] trainer_0 line 0" and len(lines) == 20
    assert lines[-1] == "[pserver-1] pserver_1 line 4"
    one = portal.run("logs", "-w", "trainer-1", "fit")
    assert one.stdout == "".join(f"trainer_1 line {i}\n" for i in range(5))
    tail = portal.run("logs", "-n", "2", "--worker", "fit-pserver-0", "fit")  # the original's pod-style name
    assert tail.stdout == "pserver_0 line 3\npserver_0 line 4\n"


def test_logs_timestamps_starts_each_line_with_the_time_it_arrived(portal: Portal, history: dict[str, Job]) -> None:
    folder = portal.pfs_home / "jobs" / "fit" / "output" / history["fit"].uid / "trainer_0"
    folder.mkdir(parents=True)
    (folder / "log.txt").write_bytes(b"old line\nfirst\nsecond\n")
    t0 = datetime(2026, 1, 2, 3, 4, 5, 678000, tzinfo=UTC).timestamp()
    records = logtimes.RECORD.pack(9, t0) + logtimes.RECORD.pack(15, t0 + 1.5)  # none for the old line
    (folder / logtimes.TIMES_NAME).write_bytes(records)
    stamped = portal.run("logs", "-timestamps", "-w", "trainer-0", "fit")
    assert stamped.exit_code == 0, stamped.stderr
    assert stamped.stdout.splitlines() == [
        "-                        old line",
        "2026-01-02T03:04:05.678Z first",
        "2026-01-02T03:04:07.178Z second",
    ]
    assert portal.run("logs", "-w", "trainer-0", "fit").stdout == "old line\nfirst\nsecond\n"  # default unchanged


def test_version_commands_help_and_completion(portal: Portal) -> None:
    version = portal.run("version")
    assert version.exit_code == 0
    assert re.match(r"paddlectl 0\.1\.0 \(python [\d.]+\)\nportal 0\.1\.0 \(api v1\) at http://", version.stdout)
    assert portal.run("--version").stdout == "paddlectl 0.1.0\n"
    bare = portal.run()  # no command: the help, as the original printed it
    assert bare.exit_code == 0 and bare.stdout.startswith("Usage: paddlectl [OPTIONS] COMMAND")
    assert "Files on the PFS:" in bare.stdout
    names = [line.split("   ")[0].strip() for line in portal.run("commands").stdout.splitlines()]
    for expected in ("submit", "get jobs", "get workers", "get registry", "get quota", "get datacenters", "logs",
                     "kill", "delete registry", "registry", "file cp", "file ls", "file mkdir", "file rm", "cp",
                     "ls", "mkdir", "rm", "version", "commands", "help", "completion", "login", "config init",
                     "config use"):
        assert expected in names, expected
    help_text = portal.run("help", "submit").stdout
    for flag in ("-jobname, --jobname", "-cpu, --cpu", "-gpu, --gpu", "-memory, --memory", "-parallelism",
                 "-pservers", "-pscpu", "-psmemory", "-entry", "-passes", "-image", "-registry", "-datacenter",
                 "-env"):
        assert flag in help_text, flag
    assert "Usage: paddlectl get workers" in portal.run("help", "get", "workers").stdout
    assert "-rm, --rm" in portal.run("kill", "--help").stdout
    script = portal.run("completion", "bash")
    assert script.exit_code == 0 and "_PADDLECTL_COMPLETE" in script.stdout


def test_login_caches_the_token_with_mode_0600_and_logout_revokes_it(portal: Portal) -> None:
    result = portal.run("login")
    assert result.exit_code == 0, result.stderr
    assert result.stdout.startswith(f"logged in to {portal.url} as alice (the token is valid until ")
    cached = list((portal.home / ".paddle" / "token_cache").iterdir())
    assert len(cached) == 1 and cached[0].stat().st_mode & 0o777 == 0o600
    assert (portal.home / ".paddle" / "token_cache").stat().st_mode & 0o777 == 0o700
    token = json.loads(cached[0].read_text())["token"]
    assert portal.run("get", "jobs").exit_code == 0
    assert json.loads(cached[0].read_text())["token"] == token  # reused, not a new login
    assert portal.run("logout").stdout == f"logged out of {portal.url}\n"
    assert not cached[0].exists()
    assert ApiToken.objects.filter(revoked_at__isnull=True).count() == 0


def test_delete_job_with_several_runs_asks_which_and_all_deletes_each(portal: Portal, pinned: datetime) -> None:
    older = make_job(portal, "twice", "killed", timedelta(minutes=9), reason="Killed", released=True)
    Job.objects.filter(pk=older.pk).update(uid="twice-old01")
    newer = make_job(portal, "twice", "failed", timedelta(minutes=2), reason="TrainerFailed", released=True)
    Job.objects.filter(pk=newer.pk).update(uid="twice-new02")
    asked = portal.run("delete", "job", "twice")
    assert asked.exit_code == 1
    assert one_line_error(asked) == (
        "error: job twice has 2 runs: twice-new02 (failed, 2m ago), twice-old01 (killed, 9m ago); delete one "
        "with `paddlectl delete job UID`, or all of them with `paddlectl delete job --all twice`"
    )
    assert Job.objects.filter(name="twice").count() == 2  # nothing deleted on a guess
    one = portal.run("delete", "job", "twice-old01")
    assert one.exit_code == 0, one.stderr
    assert list(Job.objects.filter(name="twice").values_list("uid", flat=True)) == ["twice-new02"]
    again = make_job(portal, "twice", "failed", timedelta(minutes=1), released=True)
    Job.objects.filter(pk=again.pk).update(uid="twice-new03")
    every = portal.run("delete", "job", "--all", "twice")
    assert (every.exit_code, every.stdout) == (
        0, "job twice (uid twice-new03) removed\njob twice (uid twice-new02) removed\n"), every.stderr
    assert not Job.objects.filter(name="twice").exists()
