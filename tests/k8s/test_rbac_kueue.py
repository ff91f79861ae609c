"""deploy/base/rbac.yaml on a Kueue cluster: a kueue job start to finish with the engine as the portal's ServiceAccount
(its JobSet, Workload and its priority boost, ClusterQueue, LocalQueue, ResourceFlavor and WorkloadPriorityClass),
and no more."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta

import pytest
from django.contrib.auth.models import User
from django.utils import timezone
from kubernetes import client as k8s

from datacenters.models import Datacenter
from jobs.engines import engine_for
from jobs.engines.kubernetes import client as kube
from jobs.engines.kubernetes import names
from jobs.engines.kubernetes.engine import KubernetesEngine
from jobs.models import Job, JobState
from jobs.scheduling import preemption_cost
from tests.k8s import rbac_helpers
from tests.k8s.engine_helpers import DELAY, FATE, drive, finished, job_in, nothing_left, submit
from tests.wait import wait_for
from tools.k8s.testcluster import TestCluster

pytestmark = [pytest.mark.django_db, pytest.mark.kueue]


@pytest.fixture
def as_service_account(
    kueue_dc: Datacenter, kueue_cluster: TestCluster, kueue_api: k8s.ApiClient
) -> Iterator[Datacenter]:
    """kueue_dc with the engine authenticated as deploy/base/rbac.yaml's ServiceAccount."""
    with rbac_helpers.service_account_kubeconfig(kueue_cluster, kueue_api) as kubeconfig:
        kueue_dc.kubeconfig, kueue_dc.kube_context = kubeconfig, "portal"
        kueue_dc.save()
        yield kueue_dc


def test_a_kueue_job_with_the_longest_name_its_size_allows_runs_as_the_service_account(
    as_service_account: Datacenter, alice: User, kueue_api: k8s.ApiClient
) -> None:
    dc = as_service_account
    # 39 characters and 10 trainers: its pods `<name>-<5>-trainer-0-9-<5>` are 63 characters, JobSet's limit.
    name = "n" * 39
    assert names.jobset_name_problem(name, 10, 2) is None and names.jobset_name_problem(name, 11, 2) is not None
    spec = {"jobname": name, "parallelism": 10, "pservers": 2, "cpu": "100m", "memory": "100Mi",
            "pscpu": "100m", "psmemory": "100Mi"}  # fmt: skip
    fates = {"trainer_annotations": {FATE: "succeed", DELAY: "10s"}, "pserver_annotations": {FATE: "hang"}}
    job = submit(dc, alice, spec, **fates)
    running = drive(dc, lambda: job_in(job, JobState.RUNNING), "running through Kueue as the service account")
    assert running.trainers_running == 10
    # What preempting it costs, on its Workload (jobs.scheduling.preemption_cost): a patch the account may make.
    Job.objects.filter(pk=job.pk).update(started_at=timezone.now() - timedelta(minutes=5))
    assert preemption_cost.update(dc, force=True) == 1
    job = drive(dc, lambda: finished(job), "success")
    assert job.state == JobState.SUCCEEDED, job.message
    wait_for(lambda: nothing_left(kueue_api, job.uid), "the JobSet and its pods gone", timeout=90)
    # Teams' Cohorts (jobs.follow.quota_sync deletes a removed team's); the queue's visibility API is the web pods' to
    # read (rbac-web.yaml), never the workers'.
    for verb in ("get", "list", "create", "update", "delete"):
        assert rbac_helpers.allowed(kueue_api, "kueue.x-k8s.io", "cohorts", verb)
    assert not rbac_helpers.allowed(kueue_api, "visibility.kueue.x-k8s.io", "clusterqueues", "get", "pendingworkloads")
    # ... and no more: no Workload written by hand, no ClusterQueue deleted.
    engine = engine_for(dc)
    assert isinstance(engine, KubernetesEngine)
    engine.k8s.list("Workload")
    with pytest.raises(kube.KubeError) as refused:
        engine.k8s.delete("ClusterQueue", None, job.engine_data["namespace"])
    assert refused.value.status == 403
    assert not rbac_helpers.allowed(kueue_api, "kueue.x-k8s.io", "workloads", "update")
