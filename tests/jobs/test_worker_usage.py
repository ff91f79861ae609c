"""Live resource use per worker (jobs.follow.worker_usage, jobs.engines.local.usage): a real local job shows its CPU and
memory in the API and its history, a stranger sees none of it, a silent trainer that computes is not stalled;
the cgroup readers, the CPU rate, the GPU query and the history's bound on their own."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from django.test import Client
from django.utils import timezone
from rest_framework.test import APIClient

from datacenters.models import Datacenter
from jobs.api import workers as api_workers
from jobs.engines.local import cgroups
from jobs.engines.local import usage as local_usage
from jobs.engines.usage_samples import HISTORY_POINTS, WorkerUsage, with_point
from jobs.follow import stalls
from jobs.models import Job, Worker
from tests.wait import wait_for
from tests.workers import WorkerProcess

BURN = {"FAKE_STEPS": "1", "FAKE_STEP_SECONDS": "600", "FAKE_BURN": "1"}  # one line, then computes silently


def _running_usage(api: APIClient, uid: str) -> dict[str, Any] | None:
    workers = api.get(f"/api/v1/jobs/{uid}/workers").json()["results"]
    usage: dict[str, Any] | None = workers[0]["usage"] if workers and workers[0]["state"] == "running" else None
    return usage


@pytest.mark.celery
@pytest.mark.django_db(transaction=True)
@pytest.mark.timeout(180)
def test_a_computing_trainer_shows_memory_and_cpu_while_it_runs_and_is_never_stalled(
    alice_api: APIClient, bob_api: APIClient, local_dc: Datacenter, fake_package: Path, worker: WorkerProcess
) -> None:
    Datacenter.objects.filter(pk=local_dc.pk).update(stall_timeout=3)  # silent for far longer than this
    body = {"jobname": "fake", "entry": "python train.py", "parallelism": 1, "env": BURN, "stall_action": "fail"}
    created = alice_api.post("/api/v1/jobs", body, format="json")
    assert created.status_code == 201, created.json()
    uid = created.json()["uid"]
    usage = wait_for(lambda: _running_usage(alice_api, uid), "a usage sample", 90, interval=0.5, watch=worker)
    assert usage["memory_bytes"] > 0 and usage["cpu_cores"] > 0, usage
    assert usage["gpu_util"] is None and usage["gpu_memory_bytes"] is None  # no GPU asked for
    time.sleep(8)  # several stall checks of a trainer that has not logged for longer than its 3 s
    job = alice_api.get(f"/api/v1/jobs/{uid}").json()
    assert job["state"] == "running" and not job["warnings"], job
    history = alice_api.get(f"/api/v1/jobs/{uid}/usage").json()
    points = dict((w["name"], w["points"]) for w in history["workers"])["trainer-0"]
    assert len(points) >= 2 and all(p[2] > 0 for p in points)
    assert bob_api.get(f"/api/v1/jobs/{uid}/usage").status_code == 404
    alice_api.delete(f"/api/v1/jobs/{uid}")


def test_cpu_time_is_read_from_either_hierarchys_file(tmp_path: Path) -> None:
    assert local_usage.cpu_seconds("usage_usec 2500000\nuser_usec 2000000\n") == 2.5  # v2 cpu.stat
    assert local_usage.cpu_seconds("3000000000\n") == 3.0  # v1 cpuacct.usage, nanoseconds
    v2 = cgroups.Hierarchy(2, tmp_path, tmp_path)
    assert cgroups.live_files(v2, "job-trainer-0-0") == (
        tmp_path / "job-trainer-0-0" / "cpu.stat", tmp_path / "job-trainer-0-0" / "memory.current"
    )
    v1 = cgroups.Hierarchy(1, tmp_path / "memory", tmp_path / "cpu", None, tmp_path / "cpuacct")
    assert cgroups.live_files(v1, "g") == (tmp_path / "cpuacct" / "g" / "cpuacct.usage",
                                           tmp_path / "memory" / "g" / "memory.usage_in_bytes")  # fmt: skip


def test_cores_are_the_cpu_time_used_between_two_readings() -> None:
    started = timezone.now() - timedelta(seconds=10)
    assert local_usage.cores("t-a", 5.0, started, now=100.0) == pytest.approx(0.5, rel=0.05)  # since its start
    assert local_usage.cores("t-a", 9.0, started, now=102.0) == 2.0  # 4 s of CPU in 2 s
    assert local_usage.cores("t-a", 9.0, started, now=104.0) == 0.0  # idle
    # A counter that went down (a new process or group behind the key) is not a negative rate.
    assert local_usage.cores("t-a", 1.0, None, now=106.0) == 0.0


def test_gpu_query_lines_give_each_gpus_use_and_skip_unknown_figures() -> None:
    output = "0, 87, 1024\n1, [N/A], [N/A]\n"
    assert local_usage.parse_gpu_query(output) == {"0": (87.0, 1024 << 20)}


def test_the_history_is_bounded_and_keeps_the_whole_run_and_the_newest_point() -> None:
    start = datetime(2026, 1, 1, tzinfo=UTC)
    history: list[list[float]] = []
    for second in range(1000):
        history = with_point(history, WorkerUsage(1.0, 1, start + timedelta(seconds=second)))
    assert len(history) <= HISTORY_POINTS
    assert history[0][0] == start.timestamp() and history[-1][0] == (start + timedelta(seconds=999)).timestamp()
    assert [p[0] for p in history] == sorted(p[0] for p in history)


def test_the_json_shape_is_the_one_the_api_and_the_kubernetes_sampler_share() -> None:
    sample = WorkerUsage(1.23456, 2048, datetime(2026, 1, 1, tzinfo=UTC), gpu_util=50.04, gpu_memory_bytes=1 << 30)
    assert sample.to_json() == {
        "cpu_cores": 1.235, "memory_bytes": 2048, "gpu_util": 50.0, "gpu_memory_bytes": 1 << 30,
        "sampled_at": "2026-01-01T00:00:00Z",
    }  # fmt: skip


def _silent_job(datacenter: Datacenter, owner: Any, cpu: float) -> Job:
    job = Job.objects.create(
        owner=owner, datacenter=datacenter, name="quiet", uid="quiet-abc12", state="running",
        started_at=timezone.now() - timedelta(minutes=5),
        spec={"jobname": "quiet", "entry": "python train.py", "parallelism": 1, "pservers": 0, "stall_timeout": 60},
    )  # fmt: skip
    sampled = timezone.now() - timedelta(seconds=5)
    Worker.objects.create(job=job, role="trainer", index=0, state="running", started_at=job.started_at,
                          usage_history=[[sampled.timestamp(), cpu, 1 << 20]])  # fmt: skip
    return job


@pytest.mark.django_db
def test_a_silent_trainer_using_cpu_is_alive_and_an_idle_one_is_stalled(local_dc: Datacenter, alice: Any) -> None:
    working = _silent_job(local_dc, alice, cpu=0.9)
    stalls.check(working)
    working.refresh_from_db()
    assert working.stalled_at is None
    stalls.forget(working.pk)
    Job.objects.all().delete()
    idle = _silent_job(local_dc, alice, cpu=0.01)
    stalls.check(idle)
    idle.refresh_from_db()
    assert idle.stalled_at is not None
    assert "or used CPU" in idle.warnings[0]["message"]



@pytest.mark.django_db
def test_the_job_page_shows_a_running_workers_cpu_and_memory_and_the_usage_chart(
    local_dc: Datacenter, alice: Any
) -> None:
    job = _silent_job(local_dc, alice, cpu=1.5)
    sample = WorkerUsage(1.5, 700 << 20, timezone.now()).to_json()
    Worker.objects.filter(job=job).update(usage=sample)
    Worker.objects.create(job=job, role="trainer", index=1, state="failed", usage=sample)  # ended: shows none
    client = Client()
    client.force_login(alice)
    live = client.get(f"/jobs/{job.uid}/live").content.decode()
    assert live.count('data-testid="worker-cpu"') == 1 and ">1.50<" in live and "700.0 MiB" in live
    page = client.get(f"/jobs/{job.uid}/").content.decode()
    assert 'data-testid="usage"' in page and f"/api/v1/jobs/{job.uid}/usage" in page


@pytest.mark.django_db
def test_the_usage_history_answer_is_bounded_in_workers(local_dc: Datacenter, alice: Any, alice_api: APIClient) -> None:
    job = _silent_job(local_dc, alice, cpu=0.5)  # trainer 0, with one point
    Worker.objects.bulk_create(Worker(job=job, role="trainer", index=i, state="running") for i in range(1, 70))
    answer = alice_api.get(f"/api/v1/jobs/{job.name}/usage").json()
    assert len(answer["workers"]) == api_workers.MAX_CHARTED and answer["more_workers"] == 70 - api_workers.MAX_CHARTED
    assert answer["workers"][0] == {"name": "trainer-0", "points": job.workers.get(index=0).usage_history}


@pytest.mark.django_db
def test_without_javascript_the_job_page_lists_each_workers_samples_last_and_peak(
    local_dc: Datacenter, alice: Any
) -> None:
    job = _silent_job(local_dc, alice, cpu=1.5)  # trainer-0 with one sample of 1 MiB
    at = timezone.now().timestamp()
    Worker.objects.filter(job=job).update(usage_history=[[at - 20, 0.5, 300 << 20], [at - 10, 1.25, 200 << 20]])
    client = Client()
    client.force_login(alice)
    page = client.get(f"/jobs/{job.uid}/").content.decode()
    table = page.split('data-testid="usage-table"', 1)[1].split("</table>", 1)[0]
    assert "<td>trainer-0</td><td>2</td><td>1.25</td><td>200.0 MiB</td><td>300.0 MiB</td>" in table
    assert 'class="muted needs-js">No samples yet' in page  # "no samples" only for a browser that draws them
