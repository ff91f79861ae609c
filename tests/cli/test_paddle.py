"""Real PaddlePaddle jobs on the local engine through paddlectl and the SDK (a real Celery worker with beat).

The first run installs paddlepaddle into the launcher's cached environment (~20 s); later ones reuse it.
"""

from __future__ import annotations

import subprocess
import threading
import time
from pathlib import Path

import paddlecloud
import pytest

from jobs.models import Job
from tests.cli.conftest import EXAMPLES, PADDLECTL, Portal, config_text, write_config
from tests.cli.proxy import Proxy
from tests.wait import wait_for
from tests.workers import WorkerProcess

pytestmark = [pytest.mark.paddle, pytest.mark.celery, pytest.mark.django_db(transaction=True), pytest.mark.timeout(600)]


def log_lines(portal: Portal, job: Job, worker: str) -> list[str]:
    role, _, index = worker.partition("-")
    path = portal.pfs_home / "jobs" / job.name / "output" / job.uid / f"{role}_{index}" / "log.txt"
    return path.read_text(errors="replace").splitlines()


def test_logs_f_follows_a_ps_job_to_the_end_through_a_portal_restart(
    portal: Portal, worker: WorkerProcess, tmp_path: Path
) -> None:
    submitted = portal.run("submit", "-jobname", "fit", "-pservers", "2", "-parallelism", "2", "-cpu", "1",
                           "-memory", "1Gi", "-passes", "4", "-entry", "python train.py", str(EXAMPLES / "fit_a_line"))
    assert submitted.exit_code == 0, submitted.stderr
    assert (portal.pfs_home / "jobs" / "fit" / "train.py").exists()

    proxy = Proxy(portal.url).start()
    write_config(portal.config, config_text(proxy.url))
    follower = subprocess.Popen(
        [str(PADDLECTL), "logs", "-f", "fit"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env=portal.env(),
    )
    out: list[str] = []
    stdout = follower.stdout
    assert stdout is not None  # stdout=PIPE
    reader = threading.Thread(target=lambda: out.extend(iter(stdout.readline, "")), daemon=True)
    reader.start()
    try:
        wait_for(lambda: any("loss" in line for line in out), "the first loss line", 300, watch=worker)
        proxy.stop()  # the portal "restarts": every connection drops and nothing answers for 3 s
        time.sleep(3)
        proxy.start()
        code = follower.wait(timeout=300)
    finally:
        if follower.poll() is None:
            follower.kill()
        proxy.stop()
    reader.join(10)
    err = follower.stderr.read() if follower.stderr else ""
    job = Job.objects.get(name="fit")
    assert (code, job.state) == (0, "succeeded"), (err, job.message, worker.log()[-3000:])
    assert "waiting for the portal to come back" in err and "the portal is back" in err, err
    assert err.rstrip().endswith("job fit succeeded"), err
    for name in ("trainer-0", "trainer-1", "pserver-0", "pserver-1"):
        followed = [line[len(f"[{name}] "):].rstrip("\n") for line in out if line.startswith(f"[{name}] ")]
        assert followed == log_lines(portal, job, name), name  # every line, once, in order
    assert sum(1 for line in out if "loss" in line) >= 4


def test_the_sdk_submits_waits_for_and_reads_a_real_job(
    portal: Portal, worker: WorkerProcess, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PADDLE_NOTEBOOK", "YES")
    job = paddlecloud.PaddleJob(
        job_name="sdk", entry_point="python train.py", trainer_package_path=str(EXAMPLES / "fit_a_line_collective"),
        trainers=2, pservers=0, cpu_nums=1, memory="1Gi", passes=2,
    )
    ran_here: list[bool] = []
    returned = paddlecloud.dist_train(lambda: ran_here.append(True), paddle_job=job)
    assert returned is job and ran_here == [] and job.state == "queued"
    end = job.wait(timeout=300, poll=0.5)
    assert (end["state"], end["exit_code"]) == ("succeeded", 0), (end["message"], worker.log()[-3000:])
    followed = list(job.logs(follow=True))  # the job has ended: this returns once its logs are complete
    assert job.status()["trainers"]["succeeded"] == 2
    trainer_0 = [line[len("[trainer-0] "):] for line in followed if line.startswith("[trainer-0] ")]
    assert trainer_0 == list(job.logs(worker="trainer-0"))
    assert any("loss" in line for line in trainer_0), trainer_0
    assert next(iter(job.logs(worker="trainer-1", tail=1))).rstrip("\n") == \
        log_lines(portal, Job.objects.get(name="sdk"), "trainer-1")[-1]
