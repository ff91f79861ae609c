"""Starting many jobs: a user's namespace is made once (not re-read and re-listed at every start), and
every call to the cluster is paced by the client's token bucket (pacing.RateLimit)."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from kubernetes import client as k8s
from kubernetes.client.exceptions import ApiException

from datacenters.models import Datacenter
from jobs.engines.base import EngineError
from jobs.engines.kubernetes import client as kube
from jobs.engines.kubernetes import objects, pacing
from jobs.engines.kubernetes import policies as p
from tests.k8s.engine_helpers import FATE, drive, job_in, kill, new_job, start, submit
from tests.wait import wait_for

HANG = {FATE: "hang"}


@pytest.mark.django_db
def test_a_start_in_a_namespace_already_made_reads_it_once_and_creates_only_the_jobs_objects(
    k8s_dc: Datacenter, alice: User
) -> None:
    first = [submit(k8s_dc, alice, {"jobname": f"j{i}", "pservers": 1}, trainer_annotations=HANG) for i in range(3)]
    job = new_job(k8s_dc, alice, {"jobname": "next", "pservers": 1}, trainer_annotations=HANG)
    kube.reset_calls()
    start(job)
    # Before: namespace, quota, three policies, and a list of the namespace's Services and policies (as
    # long as the user's jobs) at every start: the start grew with the jobs already there.
    assert dict(kube.CALLS) == {
        "GET Namespace": 1,
        "POST Service": 1,
        "POST NetworkPolicy": 1,
        "POST StatefulSet": 1,
        "POST Job": 1,
    }
    drive(k8s_dc, lambda: job_in(job, "running"), "the job running")
    for each in [*first, job]:
        kill(each)


@pytest.mark.django_db
def test_a_namespace_deleted_behind_the_portals_back_is_made_again_with_its_quota_and_policies(
    k8s_dc: Datacenter, alice: User, k8s_api: k8s.ApiClient
) -> None:
    before = submit(k8s_dc, alice, {"jobname": "before"}, trainer_annotations=HANG)
    ns = before.engine_data["namespace"]
    kill(before)
    core = k8s.CoreV1Api(k8s_api)
    core.delete_namespace(ns)

    def gone() -> bool:
        try:
            core.read_namespace(ns)
        except ApiException as exc:
            return bool(exc.status == 404)
        return False

    wait_for(gone, "the namespace to be deleted", timeout=240)
    after = submit(k8s_dc, alice, {"jobname": "after"}, trainer_annotations=HANG)
    assert core.read_namespaced_resource_quota("paddlecloud-quota", ns).spec.hard
    found = {i.metadata.name for i in k8s.NetworkingV1Api(k8s_api).list_namespaced_network_policy(ns).items}
    assert found == {p.DEFAULT_DENY, p.DNS, p.EGRESS, f"{after.uid}-peers"}
    drive(k8s_dc, lambda: job_in(after, "running"), "the job in the new namespace running")
    kill(after)


@pytest.mark.django_db
def test_a_quota_changed_in_the_portal_reaches_the_namespace_at_the_next_start_and_one_deleted_by_hand_later(
    k8s_dc: Datacenter, alice: User, k8s_api: k8s.ApiClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    first = submit(k8s_dc, alice, {"jobname": "first"}, trainer_annotations=HANG)
    ns = first.engine_data["namespace"]
    core = k8s.CoreV1Api(k8s_api)
    k8s_dc.default_cpu = "48"
    k8s_dc.save()
    second = submit(k8s_dc, alice, {"jobname": "second"}, trainer_annotations=HANG)
    assert core.read_namespaced_resource_quota("paddlecloud-quota", ns).spec.hard["requests.cpu"] == "48"

    core.delete_namespaced_resource_quota("paddlecloud-quota", ns)  # by hand
    monkeypatch.setattr(objects, "NAMESPACE_RECHECK_SECONDS", 0)  # the recheck time has passed
    third = submit(k8s_dc, alice, {"jobname": "third"}, trainer_annotations=HANG)
    assert core.read_namespaced_resource_quota("paddlecloud-quota", ns).spec.hard["requests.cpu"] == "48"
    for job in (first, second, third):
        kill(job)


# ----- the client's pace (no cluster) -----


class Clock:
    """A clock the limiter reads and sleeps on: time moves only when it sleeps or the test says so."""

    def __init__(self) -> None:
        self.now = 100.0
        self.slept: list[float] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.slept.append(round(seconds, 6))
        self.now += seconds


def test_the_rate_limit_lets_a_burst_through_then_paces_calls_at_its_rate() -> None:
    clock = Clock()
    pace = pacing.RateLimit(qps=10, burst=3, clock=clock, sleep=clock.sleep)
    waits = [pace.wait() for _ in range(6)]
    assert waits[:3] == [0, 0, 0]
    assert [round(w, 6) for w in waits[3:]] == [0.1, 0.1, 0.1]  # one call every 1/qps seconds
    clock.now += 60  # a quiet minute refills the bucket up to its burst, no more
    assert [pace.wait() for _ in range(3)] == [0, 0, 0]
    assert round(pace.wait(), 6) == 0.1


def test_the_rate_limit_comes_from_the_environment_within_bounds(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(pacing.QPS_ENV, raising=False)
    monkeypatch.delenv(pacing.BURST_ENV, raising=False)
    default = pacing.rate_limit_from_env()
    assert (default.qps, default.burst) == (50, 100)
    monkeypatch.setenv(pacing.QPS_ENV, "200")
    monkeypatch.setenv(pacing.BURST_ENV, "400")
    chosen = pacing.rate_limit_from_env()
    assert (chosen.qps, chosen.burst) == (200, 400)
    for bad in ("0", "-5", "lots", "1e9"):
        monkeypatch.setenv(pacing.QPS_ENV, bad)
        with pytest.raises(EngineError, match=pacing.QPS_ENV):
            pacing.rate_limit_from_env()
