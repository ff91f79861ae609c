"""Real Paddle pods through Kueue on the real node: the PS and collective examples as JobSets, and a `high` job that
preempts a running `low` example, which resumes from its checkpoint as attempt 2 and succeeds.

One test, three JobSets (two attempts of the PS example, one collective run): each real-node job costs CI minutes.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest
from django.contrib.auth.models import User
from kubernetes import client as k8s
from rest_framework.test import APIClient

from datacenters.models import Datacenter
from jobs.files import layout
from jobs.models import Job, JobState, PriorityClass, Reason, UsageRecord
from jobs.scheduling.priorities import ensure_classes
from tests.k8s.engine_helpers import nothing_left
from tests.k8s.test_pods import EXAMPLES, done, log_of, losses, put, state_of, submit
from tests.k8s.test_pods import worker as worker  # the real Celery worker with beat, as root
from tests.wait import wait_for
from tests.workers import WorkerProcess
from tools.k8s.testcluster import TestCluster

pytestmark = [
    pytest.mark.kueue,
    pytest.mark.pods,
    pytest.mark.paddle,
    pytest.mark.celery,
    pytest.mark.django_db(transaction=True),
]

PASSES = 20
# 2 pservers + 2 trainers at half a core (test_pods' SMALL): all of alice's 2-core quota and of the node.
LOW = {"jobname": "fit", "entry": "python train.py", "parallelism": 2, "pservers": 2, "passes": PASSES,
       "priority": "low", "env": {"FIT_A_LINE_PASS_PAUSE": "1"}}  # fmt: skip
# A pass is well under a second on a free core: the pause keeps the low run going until the preemption comes.
HIGH = {"jobname": "dp", "entry": "python train.py", "parallelism": 2, "pservers": 0, "passes": 2, "cpu": "1",
        "priority": "high"}  # fmt: skip


@pytest.fixture
def node_api(k8s_node_cluster: TestCluster) -> Iterator[k8s.ApiClient]:
    with k8s_node_cluster.api_client() as api:
        yield api


def preempted(job: Job) -> Job | None:
    found = state_of(job, JobState.QUEUED)
    return found if found and found.reason == Reason.PREEMPTED else None


def test_a_high_collective_job_preempts_the_low_ps_example_which_resumes_from_its_checkpoint_as_a_jobset(
    alice_api: APIClient, alice: User, kueue_node_dc: Datacenter, node_api: k8s.ApiClient, worker: WorkerProcess
) -> None:
    dc = kueue_node_dc
    ensure_classes()
    PriorityClass.objects.get(name="high").users.add(alice)  # as an operator lists a user for `high`
    put(dc, alice, "fit", EXAMPLES / "fit_a_line")
    put(dc, alice, "dp", EXAMPLES / "fit_a_line_collective")
    low = submit(alice_api, dc, LOW)
    low = wait_for(lambda: state_of(low, JobState.RUNNING), "the low PS example admitted and running", 240,
                   watch=worker)  # fmt: skip
    assert low.engine_data["layout"] == "jobset"
    checkpoints = layout.output_dir(dc, alice.username, "fit", low.uid) / "checkpoints"

    def saved_after_pass_1() -> bool:  # step-1 or later: only the newest two are kept
        return any(p.name.startswith("step-") and int(p.name[5:]) >= 1 for p in checkpoints.glob("step-[0-9]*"))

    wait_for(saved_after_pass_1, "trainer 0's checkpoint of pass 1", 300, watch=worker)

    high = submit(alice_api, dc, HIGH)  # needs all of alice's quota: Kueue evicts her low job for it
    low = wait_for(lambda: preempted(low), "the low job queued/Preempted", 120, interval=0.1, watch=worker)
    print("preempted:", low.message)
    assert "preempted by Kueue" in low.message

    high = wait_for(lambda: done(high), "the high collective job to run and end", 300, watch=worker)
    assert (high.state, high.exit_code) == (JobState.SUCCEEDED, 0), high.message
    assert high.engine_data["layout"] == "jobset"
    assert len(losses(log_of(alice_api, "dp", "trainer-1")["text"])) >= 2

    low = wait_for(lambda: done(low), "the low job to run again and end", 400, watch=worker)
    assert (low.state, low.attempt, low.exit_code) == (JobState.SUCCEEDED, 2, 0), low.message
    assert low.engine_data["layout"] == "jobset"  # attempt 2 is a new JobSet too (the requeue emptied it)
    # The ledger holds both runs of its four pods: the preempted one and the one that finished.
    runs = sorted(UsageRecord.objects.filter(job_uid=low.uid).values_list("attempt", flat=True))
    assert runs == [1] * 4 + [2] * 4, runs
    text = log_of(alice_api, "fit", "trainer-0")["text"]
    resumed = re.search(r"attempt 2 resumes after pass (\d+)", text)
    assert resumed and int(resumed.group(1)) >= 1, text[-3000:]
    print(resumed.group(0))
    assert f"pass {PASSES - 1} step" in text  # it trained to the last pass
    wait_for(lambda: nothing_left(node_api, low.uid), "every object of the low job gone", 90, watch=worker)

