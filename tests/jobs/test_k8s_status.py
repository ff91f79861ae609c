"""The Kubernetes status rules (jobs/engines/kubernetes/status.py) on objects recorded from the real control plane.

No cluster needed: each case in tests/jobs/k8s_status_cases/ is what the engine listed of one job at one
poll (re-record them with tests/jobs/k8s_status_cases/record.py). Every case states the rule it shows by
hand; the whole observation (workers included) is also kept as a syrupy snapshot, so any change in what
the rules say shows up in review (`pytest --snapshot-update` after an intended change).
"""

from __future__ import annotations

import copy
import dataclasses
from typing import Any

import pytest
from syrupy.assertion import SnapshotAssertion

from jobs.engines.base import WorkerStatus
from jobs.engines.kubernetes import pods as k8s_pods
from jobs.engines.kubernetes import status as k8s_status
from jobs.engines.kubernetes.pods import JobObjects
from jobs.engines.kubernetes.status import VANISHED_AFTER, Facts
from jobs.models import JobState, Reason, WorkerState
from tests.jobs.k8s_status_cases import HERE, load

CASES = sorted(path.stem for path in HERE.glob("*.json"))

# case -> (state, reason, a piece of the message, exit code): what the module docstring's rules say.
EXPECTED: dict[str, tuple[str, str, str, int | None]] = {
    "first_poll": (JobState.PENDING, "", "", None),
    "running": (JobState.RUNNING, "", "", None),
    "succeeded": (JobState.SUCCEEDED, "", "", 0),
    "trainer_restarting": (JobState.RUNNING, "", "", None),  # it had run: a restart does not make it pending
    "backoff_limit": (JobState.FAILED, Reason.BACKOFF_LIMIT, "trainer 0 exited with code 3 after 1 restart(s)", 3),
    "trainer_failed": (JobState.FAILED, Reason.TRAINER_FAILED, "exited with code 2", 2),
    "oomkilled": (JobState.FAILED, Reason.OOM_KILLED, "trainer 0 was OOMKilled (exit code 137)", 137),
    "pserver_failed": (JobState.FAILED, Reason.PSERVER_LOST, "; the job cannot go on without it", None),
    "pserver_pod_deleted": (JobState.FAILED, Reason.PSERVER_LOST, "pserver 0 ", None),
    "image_pull": (JobState.PENDING, Reason.IMAGE_PULL, "trainer 0: ErrImagePull: ", None),
    "unschedulable": (JobState.PENDING, Reason.UNSCHEDULABLE, "trainer 0: 0/3 nodes are available", None),
    "quota_exceeded": (JobState.PENDING, Reason.QUOTA_EXCEEDED, "exceeded quota: paddlecloud-quota", None),
    "trainers_job_deleted": (JobState.RUNNING, "", "", None),
}


def test_every_recorded_case_has_an_expectation() -> None:
    assert set(CASES) == set(EXPECTED)


@pytest.mark.parametrize("name", CASES)
def test_recorded_case(name: str, snapshot: SnapshotAssertion) -> None:
    facts, objs = load(name)
    observed = k8s_status.observe(facts, objs)
    state, reason, message, exit_code = EXPECTED[name]
    assert (observed.state, observed.reason) == (state, reason)
    assert message in observed.message
    if exit_code is not None or observed.state == JobState.FAILED:
        assert observed.exit_code == exit_code or name.startswith("pserver")
    assert len(observed.workers) == facts.trainers + facts.pservers
    assert dataclasses.asdict(observed) == snapshot


def _aged(facts: Facts, age: float) -> Facts:
    return dataclasses.replace(facts, age=age)


def test_a_quota_rejection_fails_the_job_once_it_outlasts_the_grace() -> None:
    facts, objs = load("quota_exceeded")
    assert k8s_status.missing_pods(facts, objs)
    within = k8s_status.observe(dataclasses.replace(facts, quota_rejected_for=facts.quota_grace - 1), objs)
    assert (within.state, within.reason) == (JobState.PENDING, Reason.QUOTA_EXCEEDED)
    after = k8s_status.observe(dataclasses.replace(facts, quota_rejected_for=facts.quota_grace + 1), objs)
    assert (after.state, after.reason) == (JobState.FAILED, Reason.QUOTA_EXCEEDED)
    assert "exceeded quota" in after.message
    # A job Kueue held for long, refused at once on its admission (its victims' pods still terminate): the grace
    # counts from the rejection, not from the submit.
    old = k8s_status.observe(dataclasses.replace(facts, age=3600, quota_rejected_for=0), objs)
    assert (old.state, old.reason) == (JobState.PENDING, Reason.QUOTA_EXCEEDED)


def test_a_trainers_job_deleted_behind_our_back_fails_the_job_after_a_while() -> None:
    facts, objs = load("trainers_job_deleted")
    assert objs.trainer_job is None
    soon = k8s_status.observe(_aged(facts, VANISHED_AFTER - 1), objs)
    assert soon.state != JobState.FAILED
    later = k8s_status.observe(_aged(facts, VANISHED_AFTER + 1), objs)
    assert (later.state, later.reason) == (JobState.FAILED, Reason.LAUNCH_FAILED)
    assert later.message == f"the Job {facts.uid}-trainer of the job disappeared (deleted outside PaddleCloud?)"


def test_a_restarting_trainer_is_pending_with_its_attempt() -> None:
    facts, objs = load("trainer_restarting")
    observed = k8s_status.observe(facts, objs)
    [trainer] = observed.workers
    assert trainer.state == WorkerState.PENDING
    assert trainer.message == "restarting after it exited with code 3 (attempt 2 of 2)"
    assert (trainer.exit_code, trainer.restarts) == (3, 1)


def test_a_pserver_missing_after_it_ran_is_lost() -> None:
    facts, objs = load("running")
    ran = {i: "a-uid-seen-before" for i in range(facts.pservers)}
    without = JobObjects(
        objs.trainer_job, objs.pserver_set, [p for p in objs.pods if "ps-" not in p["metadata"]["name"]]
    )
    observed = k8s_status.observe(dataclasses.replace(facts, pserver_pods=ran), without)
    assert (observed.state, observed.reason) == (JobState.FAILED, Reason.PSERVER_LOST)
    assert observed.message == "pserver 0 vanished (its pod was deleted); the job cannot go on without it"


def test_a_pserver_replaced_by_a_new_pod_is_lost() -> None:
    facts, objs = load("running")
    observed = k8s_status.observe(dataclasses.replace(facts, pserver_pods={0: "the-first-pod"}), objs)
    assert (observed.state, observed.reason) == (JobState.FAILED, Reason.PSERVER_LOST)
    assert "was replaced by a new pod" in observed.message


@pytest.mark.parametrize("name", CASES)
def test_group_finds_every_object_of_a_case_by_its_job_label(name: str) -> None:
    facts, objs = load(name)
    jobs = [objs.trainer_job] if objs.trainer_job else []
    sets = [objs.pserver_set] if objs.pserver_set else []
    grouped = k8s_pods.group(objs.pods, jobs, sets).get(facts.uid, JobObjects())
    assert (grouped.trainer_job, grouped.pserver_set, grouped.pods) == (objs.trainer_job, objs.pserver_set, objs.pods)


@pytest.mark.parametrize(
    ("text", "indexes"),
    [(None, set()), ("", set()), ("3", {3}), ("0,2-4", {0, 2, 3, 4}), (" 1 , 5-5 ", {1, 5})],
)
def test_index_set(text: str | None, indexes: set[int]) -> None:
    assert k8s_pods.index_set(text) == indexes


@pytest.mark.parametrize(
    ("term", "said"),
    [
        (None, "ended without an exit status"),
        ({"exitCode": 0, "reason": "Completed"}, "exited with code 0"),
        ({"exitCode": 3, "reason": "Error"}, "exited with code 3"),
        ({"exitCode": 137, "reason": "OOMKilled"}, "was OOMKilled (exit code 137)"),
        ({"exitCode": 128, "reason": "ContainerCannotRun"}, "exited with code 128 (ContainerCannotRun)"),
    ],
)
def test_describe(term: dict[str, Any] | None, said: str) -> None:
    assert k8s_pods.describe(term) == said


def test_an_oom_kill_names_the_containers_memory_limit_where_the_pod_says_it() -> None:
    pod = {"spec": {"containers": [{"name": "main", "resources": {"limits": {"cpu": "1", "memory": "512Mi"}}}]}}
    assert k8s_pods.memory_limit(pod) == "512Mi" and k8s_pods.memory_limit({}) == ""
    oom = {"exitCode": 137, "reason": "OOMKilled"}
    said = k8s_pods.describe(oom, memory="512Mi")
    assert said == "went over its memory limit (512Mi) and was OOMKilled (exit code 137)"


def test_an_oomkilled_trainer_names_its_memory_limit_in_the_job_and_its_row() -> None:
    facts, objs = load("oomkilled")
    pods = copy.deepcopy(objs.pods)
    for pod in pods:  # what the real pod's manifest carries (recorded cases keep only what the rules read)
        pod["spec"]["containers"] = [{"name": "main", "resources": {"limits": {"memory": "2Gi"}}}]
    observed = k8s_status.observe(facts, JobObjects(objs.trainer_job, objs.pserver_set, pods, objs.create_failures))
    said = "went over its memory limit (2Gi) and was OOMKilled (exit code 137)"
    assert (observed.reason, observed.message) == (Reason.OOM_KILLED, f"trainer 0 {said}")
    assert next(w for w in observed.workers if w.role == "trainer").message == said


@pytest.mark.parametrize(
    ("meta", "role", "index"),
    [
        ({"labels": {"apps.kubernetes.io/pod-index": "1"}}, "pserver", 1),
        ({"name": "j-ps-2"}, "pserver", 2),
        ({"name": "j-ps-x"}, "pserver", None),
        ({"labels": {"batch.kubernetes.io/job-completion-index": "4"}}, "trainer", 4),
        ({"annotations": {"batch.kubernetes.io/job-completion-index": "5"}}, "trainer", 5),
        ({"labels": {"batch.kubernetes.io/job-completion-index": "five"}}, "trainer", None),
    ],
)
def test_pod_index(meta: dict[str, Any], role: str, index: int | None) -> None:
    assert k8s_pods.pod_index({"metadata": meta}, role) == index


def _pserver_restarted_after(objs: JobObjects, code: int) -> JobObjects:
    """The case's objects with pserver 0's container restarted by the kubelet after it exited `code`."""
    pods = copy.deepcopy(objs.pods)
    for pod in pods:
        if "-ps-0" in pod["metadata"]["name"]:
            status = pod["status"]["containerStatuses"][0]
            status["restartCount"] = 1
            status["lastState"] = {"terminated": {"exitCode": code, "reason": "Completed"}}
    return JobObjects(objs.trainer_job, objs.pserver_set, pods, objs.create_failures)


def test_a_pserver_that_returned_0_while_trainers_run_is_lost() -> None:
    facts, objs = load("running")
    observed = k8s_status.observe(facts, _pserver_restarted_after(objs, 0))
    assert (observed.state, observed.reason, observed.exit_code) == (JobState.FAILED, Reason.PSERVER_LOST, 0)
    assert observed.message == "pserver 0 restarted after it exited with code 0; the job cannot go on without it"


def test_a_pserver_that_ended_after_every_trainer_succeeded_is_no_loss() -> None:
    facts, objs = load("succeeded")
    observed = k8s_status.observe(facts, _pserver_restarted_after(objs, 0))
    assert (observed.state, observed.exit_code) == (JobState.SUCCEEDED, 0)


def test_explain_quotes_the_failing_workers_error_line_in_its_row_and_the_jobs_message() -> None:
    facts, objs = load("running")
    lost = k8s_status.observe(facts, _pserver_restarted_after(objs, 0))
    asked: list[str] = []

    def reason_of(worker: WorkerStatus) -> str:
        asked.append(f"{worker.role}-{worker.index}")
        return "OSError: [Errno 98] Address already in use"

    said = k8s_status.explain(lost, reason_of)
    assert asked == ["pserver-0"]
    assert said.message == (
        "pserver 0 restarted after it exited with code 0: OSError: [Errno 98] Address already in use; "
        "the job cannot go on without it"
    )
    row = next(w for w in said.workers if (w.role, w.index) == ("pserver", 0))
    assert row.message.endswith("exited with code 0: OSError: [Errno 98] Address already in use")
    facts, objs = load("trainer_failed")
    failed = k8s_status.observe(facts, objs)
    explained = k8s_status.explain(failed, lambda worker: "ValueError: bad learning rate 7")
    assert explained.message == f"{failed.message}: ValueError: bad learning rate 7"
    assert k8s_status.explain(failed, lambda worker: "") == failed  # no log, nothing said
    running = k8s_status.observe(*load("running"))
    assert k8s_status.explain(running, lambda worker: "never asked") == running
