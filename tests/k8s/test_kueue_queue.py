"""The queue of an `admission: kueue` datacenter as users read it: the jobs Kueue holds, at their places in the owner's
ClusterQueue from Kueue's visibility API, with Kueue's reason, read as the web pods' account (the real control plane
running Kueue; kwok pods)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml
from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse
from kubernetes import client as k8s
from paddlecloud.contract.units import parse_time
from rest_framework.test import APIClient

from datacenters.models import Datacenter
from jobs.engines.kubernetes import client as kube
from jobs.engines.kubernetes import visibility
from jobs.models import Job, JobState, Reason
from tests.k8s import rbac_helpers
from tests.k8s.engine_helpers import FATE, drive, job_in, kill, submit
from tests.wait import wait_for
from tools.k8s.testcluster import TestCluster

pytestmark = [pytest.mark.django_db, pytest.mark.kueue]

RBAC_WEB = Path(__file__).resolve().parents[2] / "deploy" / "base" / "rbac-web.yaml"
HANG = {FATE: "hang"}
WHOLE_QUOTA = {"parallelism": 2, "pservers": 2, "cpu": "1", "memory": "1Gi", "pscpu": "1", "psmemory": "1Gi"}


def submit_whole_quota(dc: Datacenter, user: User, name: str) -> Job:
    return submit(dc, user, {"jobname": name, **WHOLE_QUOTA}, trainer_annotations=HANG, pserver_annotations=HANG)


def held_by_kueue(job: Job) -> Job | None:
    found = job_in(job, JobState.PENDING)
    return found if found and found.reason == Reason.QUOTA_EXHAUSTED else None


def queue_of(api: APIClient, dc: Datacenter) -> dict[str, Any]:
    response = api.get("/api/v1/queue", {"datacenter": dc.name})
    assert response.status_code == 200, response.content
    return dict(response.json())


@contextmanager
def web_account(cluster: TestCluster) -> Iterator[kube.Kube]:
    """A client with a token of the web pods' account, deploy/base/rbac-web.yaml applied (removed afterwards)."""
    docs = [d for d in yaml.safe_load_all(RBAC_WEB.read_text()) if d]
    with cluster.api_client() as admin:
        core, rbac = k8s.CoreV1Api(admin), k8s.RbacAuthorizationV1Api(admin)
        rbac_helpers.create_namespace_once_free(core, {"metadata": {"name": "paddlecloud"}})
        account, role, binding = (next(d for d in docs if d["kind"] == kind) for kind in
                                  ("ServiceAccount", "ClusterRole", "ClusterRoleBinding"))  # fmt: skip
        core.create_namespaced_service_account("paddlecloud", account)
        rbac.create_cluster_role(role)
        rbac.create_cluster_role_binding(binding)
        token = str(
            core.create_namespaced_service_account_token(
                "paddlecloud-web", "paddlecloud", {"spec": {"expirationSeconds": 600}}
            ).status.token
        )
        conf = k8s.Configuration(host=cluster.server, api_key={"authorization": token},
                                 api_key_prefix={"authorization": "Bearer"})  # fmt: skip
        conf.ssl_ca_cert = str(cluster.ca_file)
        try:
            with k8s.ApiClient(conf) as web:
                yield kube.Kube(web)
        finally:
            rbac.delete_cluster_role_binding("paddlecloud-web")
            rbac.delete_cluster_role("paddlecloud-web")
            core.delete_namespace("paddlecloud")


def test_jobs_kueue_holds_are_listed_at_their_place_with_kueues_reason(
    kueue_cluster: TestCluster, kueue_dc: Datacenter, alice: User, alice_api: APIClient, bob_api: APIClient
) -> None:
    first = submit_whole_quota(kueue_dc, alice, "first")
    drive(kueue_dc, lambda: job_in(first, JobState.RUNNING), "the first job running")
    second = submit_whole_quota(kueue_dc, alice, "second")
    drive(kueue_dc, lambda: held_by_kueue(second), "the second job held by Kueue")
    # Kueue orders a queue by creation time, which the API server keeps to the second: apart by more than that,
    # or the two tie and Kueue may list them either way.
    time.sleep(1.1)
    third = submit_whole_quota(kueue_dc, alice, "third")
    drive(kueue_dc, lambda: held_by_kueue(third), "the third job held by Kueue")

    # One job of 10 minutes finished here before: the estimates rest on that average (the replayed plan in Kueue's
    # order: alice's quota takes one such job at a time, so `second` starts as `first` ends, `third` 10 min later).
    started = Job.objects.get(pk=first.pk).started_at
    assert started is not None
    # The engine helper submits to the cluster directly: the rows get what the API's submit and gate give them.
    Job.objects.filter(pk__in=[first.pk, second.pk, third.pk]).update(cpu_request=4, memory_request=4 * 2**30,
                                                                      admitted_at=started)  # fmt: skip
    Job.objects.create(owner=alice, datacenter=kueue_dc, name="before", uid="before-alice", spec={}, released=True,
                       state=JobState.SUCCEEDED, started_at=started - timedelta(minutes=20),
                       finished_at=started - timedelta(minutes=10))  # fmt: skip

    # Kueue counts from 0; the portal shows 1-based places, as its own queue does. Its answer is cached 5 s.
    seen = wait_for(lambda: (q := queue_of(alice_api, kueue_dc))["count"] == 2 and q, "Kueue's pending workloads")
    rows = seen["results"]
    assert [(r["position"], r["job"], r["owner"], r["reason"]) for r in rows] == [
        (1, "second", "alice", Reason.QUOTA_EXHAUSTED),
        (2, "third", "alice", Reason.QUOTA_EXHAUSTED),
    ]
    for row in rows:
        assert row["message"].startswith("queued by Kueue: ") and "insufficient unused quota" in row["message"]
    starts = [parse_time(row["estimated_start"]) for row in rows]
    assert [row["estimate_basis"] for row in rows] == ["average", "average"]
    assert starts[0] is not None and starts[1] is not None
    assert abs((starts[0] - started).total_seconds() - 600) < 5
    assert abs((starts[1] - starts[0]).total_seconds() - 600) < 5

    detail = alice_api.get(f"/api/v1/jobs/{third.name}").json()
    assert (detail["queue_position"], detail["reason"]) == (2, Reason.QUOTA_EXHAUSTED)
    assert alice_api.get(f"/api/v1/jobs/{first.name}").json()["queue_position"] is None  # running: in no queue
    page = Client()
    page.force_login(alice)
    line = page.get(reverse("job-place", args=[third.uid])).content.decode()
    assert 'data-testid="queue-position">2<' in line and '(<span title="QuotaExhausted">quota exhausted</span>)' in line

    others = queue_of(bob_api, kueue_dc)["results"]
    assert [(r["position"], r["job"], r["uid"], r["owner"]) for r in others] == [
        (1, None, None, "another user"),
        (2, None, None, "another user"),
    ]

    # What the web pods' account may read (the queue is served by them): their RBAC lets the API server pass it on.
    with web_account(kueue_cluster) as web:
        cluster_queue = second.engine_data["namespace"]
        answer = web.get(visibility.KIND, None, cluster_queue, "pendingworkloads")
        assert visibility.positions(answer["items"]) == {second.uid: 1, third.uid: 2}
        with pytest.raises(kube.KubeError):
            web.get("ClusterQueue", None, cluster_queue)  # and nothing else of Kueue's
    for job in (third, second, first):
        kill(job)
