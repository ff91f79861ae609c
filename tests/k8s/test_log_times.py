"""Line times on the kubernetes engine: the launcher's log.times on the PFS, the same live and after the archive."""

from __future__ import annotations

from pathlib import Path

import pytest
from django.contrib.auth.models import User
from paddlecloud.contract import logtimes

from datacenters.models import Datacenter
from jobs.engines import engine_for
from tests.k8s.engine_helpers import DELAY, FATE, drive, finished, job_in, new_job, start
from tools.k8s.testcluster import TestCluster

pytestmark = pytest.mark.django_db

LINES = ["step 1 loss 2.5", "step 2 loss 0.7", "trainer done"]
T0 = 1_790_000_000.0


def test_times_come_from_the_launchers_record_live_and_after_the_archive(
    k8s_dc: Datacenter, alice: User, k8s_cluster: TestCluster
) -> None:
    job = new_job(k8s_dc, alice, {"jobname": "fit", "parallelism": 1, "pservers": 0},
                  trainer_annotations={FATE: "succeed", DELAY: "3s"})
    k8s_cluster.set_namespace_log_lines(f"{k8s_dc.namespace_prefix}alice", LINES)
    job = start(job)
    drive(k8s_dc, lambda: job_in(job, "running"), "running")
    engine = engine_for(k8s_dc)
    assert engine.read_log(job, "trainer-0", "").times is None  # the pod's own log keeps no times (the API: nulls)

    # What the launcher in the pod writes to the PFS (kwok runs no launcher): the same bytes, stamped.
    folder = (Path(k8s_dc.storage_root) / "home" / "alice" / "jobs" / job.name / "output" / job.uid / "trainer_0")
    folder.mkdir(parents=True, exist_ok=True)
    now = [T0]
    with (folder / "log.txt").open("ab", buffering=0) as log, (folder / logtimes.TIMES_NAME).open("ab") as index:
        stamps = logtimes.Recorder(index, 0, clock=lambda: now[0])
        for i, line in enumerate(LINES):
            now[0] = T0 + i
            stamps.note(len(line) + 1)
            log.write(f"{line}\n".encode())
    live = engine.read_log(job, "trainer-0", "")
    assert live.text == "".join(f"{line}\n" for line in LINES) and live.times == [T0, T0 + 1, T0 + 2]

    job = drive(k8s_dc, lambda: finished(job), "success")
    assert job.engine_data.get("archived")
    after = engine.read_log(job, "trainer-0", "")
    assert (after.text, after.times, after.complete) == (live.text, live.times, True)
    later = engine.read_log(job, "trainer-0", str(len(LINES[0]) + 1))  # a follower's cursor goes on with times
    assert later.times == [T0 + 1, T0 + 2]
