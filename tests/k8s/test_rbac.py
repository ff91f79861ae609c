"""deploy/base/rbac.yaml grants what the engine needs: a whole job lifecycle, and an image build's, run as
that service account."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from django.contrib.auth.models import User
from kubernetes import client as k8s

from datacenters.models import Datacenter
from images import builder
from images import services as image_services
from images.models import ImageBuild
from images.tasks import start_build
from jobs.engines import engine_for
from jobs.engines.kubernetes import client as kube
from jobs.engines.kubernetes import names, policies, watch
from jobs.engines.kubernetes.engine import KubernetesEngine
from jobs.follow.records import RECORDS
from jobs.models import Job
from registry.models import RegistrySecret
from tests.k8s import rbac_helpers
from tests.k8s.engine_helpers import DELAY, FATE, drive, finished, job_in, kill, nothing_left, submit
from tests.wait import wait_for
from tools.k8s.testcluster import TestCluster

pytestmark = pytest.mark.django_db



@pytest.fixture(scope="module")
def service_account_kubeconfig(k8s_cluster: TestCluster, k8s_api: k8s.ApiClient) -> Iterator[str]:
    """deploy/base/rbac.yaml applied, and a kubeconfig with a token of its service account (removed afterwards)."""
    with rbac_helpers.service_account_kubeconfig(k8s_cluster, k8s_api) as kubeconfig:
        yield kubeconfig


def test_a_whole_job_lifecycle_needs_nothing_beyond_the_rbac_manifest(
    k8s_dc: Datacenter,
    alice: User,
    k8s_api: k8s.ApiClient,
    service_account_kubeconfig: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    k8s_dc.kubeconfig, k8s_dc.kube_context = service_account_kubeconfig, "portal"
    k8s_dc.save()
    RegistrySecret.objects.create(owner=alice, name="hub", server="reg.example", username="a", password="p")
    spec = {"jobname": "fit", "parallelism": 2, "pservers": 1, "registry": "hub"}
    job = submit(k8s_dc, alice, spec, trainer_annotations={FATE: "succeed", DELAY: "3s"})
    again = submit(k8s_dc, alice, {**spec, "jobname": "again"})  # the namespace, quota and secret exist now
    k8s_dc.job_egress = False  # the namespace's egress policy is replaced at the next start
    k8s_dc.save()
    hang = submit(k8s_dc, alice, {"jobname": "hang"}, trainer_annotations={FATE: "hang"})
    egress = kube.for_datacenter(k8s_dc).get("NetworkPolicy", job.engine_data["namespace"], policies.EGRESS)
    assert "egress" not in egress["spec"]
    # Its trainers end 3 s after they start: on a loaded machine one reconcile may see it pending, the next succeeded.
    drive(k8s_dc, lambda: job_in(job, "running", "succeeded"), "running")
    engine = engine_for(k8s_dc)
    assert isinstance(engine, KubernetesEngine)
    # The control worker follows the datacenter by watching it: the role lets it list and watch each kind.
    watch.enable()
    try:
        selector = names.datacenter_selector(k8s_dc.name)
        wait_for(lambda: watch.mirror_for(k8s_dc.pk, engine.k8s, selector), "watching as the service account", 15)
    finally:
        watch.disable()
    assert engine.read_log(job, "trainer-0", "").cursor == "0"  # pods/log answered (kwok has no lines)
    job = drive(k8s_dc, lambda: finished(job), "success")
    assert job.state == "succeeded"
    kill(hang)
    wait_for(lambda: nothing_left(k8s_api, hang.uid), "the killed job to be gone")
    Job.objects.filter(pk=again.pk).delete()
    monkeypatch.setattr("jobs.engines.kubernetes.engine.REAP_GRACE_SECONDS", 0)
    assert engine.reap() == 1
    assert engine.cleanup(job, RECORDS)
    engine.k8s.list("Event", field_selector="reason=FailedCreate")
    # ... and no more than that: no secret can be read back, no pod made directly.
    ns = job.engine_data["namespace"]
    with pytest.raises(kube.KubeError) as refused:
        engine.k8s.get("Secret", ns, "pcr-hub")
    assert refused.value.status == 403
    with pytest.raises(kube.KubeError):
        engine.k8s.create("Pod", ns, {"metadata": {"name": "x"}, "spec": {"containers": [{"name": "c", "image": "x"}]}})


def test_a_whole_image_build_needs_nothing_beyond_the_rbac_manifest(
    k8s_dc: Datacenter, alice: User, service_account_kubeconfig: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    k8s_dc.kubeconfig, k8s_dc.kube_context = service_account_kubeconfig, "portal"
    k8s_dc.builder_image, k8s_dc.builder_ca = "reg.example/kaniko:1", ""
    k8s_dc.save()
    monkeypatch.setenv(policies.REGISTRY_CIDRS_ENV, "10.1.2.3/32")  # the builder gets a policy to its registry
    RegistrySecret.objects.create(owner=alice, name="hub", server="10.1.2.3:5000", username="a", password="p")
    folder = Path(k8s_dc.storage_root) / "home" / "alice" / "pkg"
    folder.mkdir(parents=True)
    request = {"package": f"/pfs/{k8s_dc.name}/home/alice/pkg", "image": "10.1.2.3:5000/alice/pkg:1", "registry": "hub"}
    build = image_services.create(image_services.check(alice, request))
    start_build.apply(args=(build.pk,))
    start_build.apply(args=(build.pk,))  # a repeat reads the Job it finds (get)
    build.refresh_from_db()
    assert build.state == "building" and build.k8s_job, build.message
    registry = kube.for_datacenter(k8s_dc).get("NetworkPolicy", build.namespace, f"{build.uid}-registry")
    assert registry["spec"]["egress"][0]["ports"] == [{"protocol": "TCP", "port": 5000}]

    def ended() -> ImageBuild | None:
        builder.poll(k8s_dc)  # lists Jobs and pods, reads the pod's log, deletes the Job
        build.refresh_from_db()
        return build if build.state == "succeeded" and build.released else None

    wait_for(ended, "the build to succeed and be released", 30)


def test_worker_usage_may_read_kubelet_stats_but_never_proxy_to_a_kubelet(
    k8s_api: k8s.ApiClient, service_account_kubeconfig: str
) -> None:
    # What a kubelet asks the API server when the portal reads /stats/summary (jobs/engines/kubernetes/usage.py).
    assert rbac_helpers.allowed(k8s_api, "", "nodes", "get", "stats")
    # nodes/proxy would also reach every kubelet's exec endpoint; the node's address comes from the pod instead.
    for verb in ("get", "create"):
        assert not rbac_helpers.allowed(k8s_api, "", "nodes", verb, "proxy")
    assert not rbac_helpers.allowed(k8s_api, "", "nodes", "get")
