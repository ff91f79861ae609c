"""Fixtures for tests against the real test control plane (tools/k8s): `k8s_cluster`, `k8s_api`, `k8s_namespace`."""

from __future__ import annotations

import contextlib
import os
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from datacenters.models import Datacenter, Engine, StorageKind

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:  # `tools` lives at the repo root, which plain `pytest` does not put on sys.path
    sys.path.insert(0, str(ROOT))

from kubernetes import client as k8s  # noqa: E402
from kubernetes.client.exceptions import ApiException  # noqa: E402

from tests import background_build  # noqa: E402
from tests.k8s.registry_fixtures import k8s_registry, k8s_registry_image  # noqa: E402, F401
from tools.k8s.images import read_manifest  # noqa: E402
from tools.k8s.testcluster import (  # noqa: E402
    FakeNode,
    RealNode,
    TestCluster,
    default_bin_dir,
    kueue_missing,
    missing_binaries,
    node_missing,
)

HERE = Path(__file__).resolve().parent
GPU_NODE_LABEL = "paddlecloud.test/gpu"  # the Kueue cluster's GPU node; tests give it to the GPU flavor


def _missing_message() -> str | None:
    bin_dir = default_bin_dir()
    if not missing_binaries(bin_dir):
        return None
    return f"k8s control plane binaries not found in {bin_dir}: run `make k8s-build` (tools/k8s/build.sh) to build them"


def _node_missing_message() -> str | None:
    missing = _missing_message() or (", ".join(node_missing()) or None)
    if not missing:
        return None
    return (
        f"real-node (pods) tests need root and the built node, missing: {missing}; "
        "run `sudo bash tools/k8s/build.sh` (CI builds and runs them)"
    )


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark tests under tests/k8s `k8s`; without binaries, skip every test needing the cluster (one summary line)."""
    required = os.environ.get("PADDLECLOUD_REQUIRE_K8S") == "1"
    missing = None if required else _missing_message()
    wants_node = [i for i in items if "k8s_node_cluster" in getattr(i, "fixturenames", ())]
    node_missing_reason = None if required or not wants_node else _node_missing_message()
    # Under pytest-xdist they (and the other tests of background_build.BUILT_FOR) go to two workers, the control plane's
    # tests to one and the real node's to another (tests/conftest.py, pytest_xdist_make_scheduler): first, so they run
    # beside the rest. While CI still builds what they need in the background (.ci/run) they are collected last, and
    # the scheduler sends each unit out as soon as its part is built: every worker runs other tests meanwhile, and the
    # control plane's tests run while the node still builds. Either way each unit's tests come in the order their
    # parts of the build end (background_build.order_key).
    # Within a part, the tests outside tests/k8s come first: the clusters here are package-scoped, and one such test
    # between two of this package's (pytest-django orders a unit's tests by their database use) stopped the node's
    # cluster and started it again.
    last = background_build.running()
    items[:] = sorted(items, key=lambda item: collection_key(item, last))
    for item in items:
        _check_build_part(item)
        if item.path.is_relative_to(HERE):
            item.add_marker(pytest.mark.k8s)
        # A skip *marker* (not pytest.skip() in the fixture) lets pytest fold the reports into one line per file.
        if missing and "k8s_cluster" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.skip(reason=missing))
        if item in wants_node:
            item.add_marker(pytest.mark.pods)
            if node_missing_reason:
                item.add_marker(pytest.mark.skip(reason=node_missing_reason))


def collection_key(item: pytest.Item, last: bool) -> tuple[int, bool]:
    """Where a test goes in the collection: by the part of the build it waits for, this package's tests last."""
    return _built_order(item.nodeid, last), item.path.is_relative_to(HERE)


def _built_order(nodeid: str, last: bool) -> int:
    key = background_build.order_key(nodeid)
    if last or key == 0:
        return key
    return key - len(background_build.PARTS) - 1  # before the tests that need no build


def _check_build_part(item: pytest.Item) -> None:
    """A test of the control plane's unit runs while the node still builds: one asking for the node is a collection
    error naming the list it belongs in, not a test that fails only in a cold CI."""
    node_fixtures = background_build.NODE_FIXTURES.intersection(getattr(item, "fixturenames", ()))
    if node_fixtures and background_build.part_needed(item.nodeid) == "control-plane":
        raise pytest.UsageError(
            f"{item.nodeid} uses {', '.join(sorted(node_fixtures))}: add its file to NEEDS_NODE in "
            "tests/background_build.py (its tests must wait for the node's part of CI's background build)"
        )


@pytest.fixture(scope="package", autouse=True)
def _k8s_control_plane_built() -> None:
    """In CI the control plane, node and images build in the background while the other tests run: the first test
    here waits for the control plane (tests/background_build.py); the node's fixtures wait for the node."""
    background_build.wait("control-plane")


# The clusters are package-scoped, not session-scoped: pytest stops them when the worker's next test is outside
# tests/k8s, i.e. once the worker's unit of them is done (tests/conftest.py sends each unit whole to one worker). An
# idle Kueue cluster on kwok nodes still costs a third of a core (34% measured, 2026-11-30); kept up until the worker
# ended, the clusters took that from the rest of the suite for most of a CI run.
@pytest.fixture(scope="package")
def k8s_node_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestCluster]:
    """A control plane whose only node is a real one (kubelet + containerd + CNI + CoreDNS): pods run."""
    background_build.wait("node")
    missing = _node_missing_message()
    if missing:  # only reached with PADDLECLOUD_REQUIRE_K8S=1 (CI): otherwise skipped at collection
        pytest.fail(missing, pytrace=False)
    # Only one real node can run on a host, so the one real-node cluster also runs Kueue and JobSet
    # (they leave `admission: portal` jobs alone: no queue-name label). Without build-kueue.sh's output it runs
    # without them and the `kueue_node_dc` tests skip; in CI (PADDLECLOUD_REQUIRE_K8S=1) the cluster fails to start.
    kueue = os.environ.get("PADDLECLOUD_REQUIRE_K8S") == "1" or not kueue_missing()
    cluster = TestCluster(
        default_bin_dir(), tmp_path_factory.mktemp("k8s-node"), nodes=(), node=RealNode(), kueue=kueue
    )
    cluster.start(timeout=300)
    try:
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture(scope="package")
def k8s_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestCluster]:
    """A running control plane shared by the tests here; skips (fails if PADDLECLOUD_REQUIRE_K8S=1) without binaries."""
    missing = _missing_message()
    if missing:  # only reached with PADDLECLOUD_REQUIRE_K8S=1 (CI): otherwise the test was skipped at collection
        pytest.fail(missing, pytrace=False)
    cluster = TestCluster(default_bin_dir(), tmp_path_factory.mktemp("k8s"))
    cluster.start()
    try:
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture(scope="package")
def kueue_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestCluster]:
    """A control plane of its own running JobSet's controller and Kueue (the `k8s_cluster` of other tests stays
    without them), on three 8-cpu kwok nodes and a 4-cpu one with 2 GPUs (labelled GPU_NODE_LABEL); skips
    without the built binaries (fails if PADDLECLOUD_REQUIRE_K8S=1)."""
    missing = _missing_message() or (", ".join(kueue_missing()) or None)
    if missing:
        message = f"Kueue tests need the control plane and tools/k8s/build-kueue.sh's output, missing: {missing}"
        if os.environ.get("PADDLECLOUD_REQUIRE_K8S") == "1":
            pytest.fail(message, pytrace=False)
        pytest.skip(message)
    nodes = [FakeNode(f"kueue-node-{i}", cpu="8", memory="32Gi") for i in range(3)]
    nodes.append(FakeNode("kueue-gpu-0", cpu="4", memory="16Gi", gpus=2, labels={GPU_NODE_LABEL: "yes"}))
    cluster = TestCluster(default_bin_dir(), tmp_path_factory.mktemp("k8s-kueue"), nodes=nodes, kueue=True)
    cluster.start()
    try:
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture
def kueue_api(kueue_cluster: TestCluster) -> Iterator[k8s.ApiClient]:
    """A client of the Kueue cluster's API server (cluster-admin), closed after the test."""
    with kueue_cluster.api_client() as client:
        yield client


@pytest.fixture(scope="package")
def k8s_api(k8s_cluster: TestCluster) -> Iterator[k8s.ApiClient]:
    """An admin ApiClient for k8s_cluster."""
    with k8s_cluster.api_client() as api:
        yield api


@pytest.fixture
def k8s_namespace(k8s_cluster: TestCluster, k8s_api: k8s.ApiClient) -> Iterator[str]:
    """A fresh namespace (with its default ServiceAccount, so bare pods can be created); deleted afterwards."""
    name = f"t-{uuid.uuid4().hex[:10]}"
    core = k8s.CoreV1Api(k8s_api)
    core.create_namespace({"metadata": {"name": name}})
    k8s_cluster.wait_for_default_service_account(name)
    yield name
    try:
        core.delete_namespace(name)
    except ApiException as exc:  # a test may have deleted it already
        if exc.status != 404:
            raise


# ----- the kubernetes engine against the test cluster -----


def hostpath_datacenter(cluster: TestCluster, root: Path, name: str, ns: str, **fields: Any) -> Any:
    """A `kubernetes` datacenter on `cluster` with hostPath storage at `root` (made here, with home and
    public), a name `<name>-<tag>` and a namespace prefix `<ns><tag>-` of its own."""
    tag = uuid.uuid4().hex[:6]
    (root / "home").mkdir(parents=True)
    (root / "public").mkdir()
    return Datacenter.objects.create(
        name=f"{name}-{tag}",
        engine=Engine.KUBERNETES,
        kubeconfig=cluster.kubeconfig_path.read_text(),
        kube_context=cluster.context,
        namespace_prefix=f"{ns}{tag}-",
        storage_kind=StorageKind.HOSTPATH,
        host_path=str(root),
        storage_root=str(root),
        **fields,
    )


def node_datacenter(cluster: TestCluster, root: Path, name: str, ns: str, **fields: Any) -> Any:
    """hostpath_datacenter on the real node: CPU and GPU jobs run this checkout's runtime image (the node
    imported it), 8 CPUs and 16Gi by default, finished jobs kept 5 s; `fields` add to or override these."""
    manifest = read_manifest()
    assert manifest is not None
    runtime = manifest["runtime"]["ref"]
    defaults = {"cpu_image": runtime, "gpu_image": runtime, "default_cpu": "8", "default_memory": "16Gi"}
    assert cluster.node_runner is not None
    # The test node's kubelet listens on a free port, not 10250: the pods' isolation wait probes that one.
    defaults["kubelet_port"] = cluster.node_runner.ports["kubelet"]
    return hostpath_datacenter(cluster, root, name, ns, **{**defaults, "finished_ttl": 5, **fields})


@pytest.fixture
def k8s_dc(db: None, k8s_cluster: TestCluster, tmp_path: Path) -> Iterator[Any]:
    """A `kubernetes` datacenter on the test cluster: hostPath storage under tmp_path, a name and a
    namespace prefix of its own (so tests never see each other's objects), generous default quotas.

    Afterwards every namespace the engine made for it is deleted (with everything in it).
    """
    dc = hostpath_datacenter(
        k8s_cluster,
        tmp_path / "pfs",
        "k8s",
        "t",
        cpu_image="registry.example/paddle:3.0.0",
        gpu_image="registry.example/paddle:3.0.0-gpu",
        default_cpu="64",
        default_memory="256Gi",
        default_gpu=16,
        default_jobs=50,
    )
    yield dc
    with k8s_cluster.api_client() as api:
        custom = k8s.CustomObjectsApi(api)
        for name in _delete_namespaces_of(api, dc):
            with contextlib.suppress(ApiException):  # set_namespace_log_lines' ClusterLogs
                custom.delete_cluster_custom_object(
                    "kwok.x-k8s.io", "v1alpha1", "clusterlogs", f"paddlecloud-test-{name}"
                )


def _delete_namespaces_of(api: k8s.ApiClient, dc: Datacenter) -> list[str]:
    """Delete every namespace the engine made for `dc` (with everything in it); their names."""
    core = k8s.CoreV1Api(api)
    names = [str(ns.metadata.name) for ns in core.list_namespace(label_selector=_dc_selector(dc)).items]
    for name in names:
        with contextlib.suppress(ApiException):
            core.delete_namespace(name)
    return names


def _dc_selector(dc: Datacenter) -> str:
    return f"paddlecloud.org/datacenter={dc.name}"


@pytest.fixture
def kueue_dc(db: None, kueue_cluster: TestCluster, tmp_path: Path) -> Iterator[Any]:
    """A `kubernetes` datacenter with `admission: kueue` on the Kueue cluster (k8s_dc's twin): every user's
    quota 4 cores, 16Gi, 0 GPUs (their ClusterQueue's nominal quota); tests lower it with a Quota row.

    Afterwards the namespaces, ClusterQueues and team Cohorts the engine made for it are deleted."""
    dc = hostpath_datacenter(
        kueue_cluster,
        tmp_path / "pfs",
        "kq",
        "q",
        admission="kueue",
        cpu_image="registry.example/paddle:3.0.0",
        gpu_image="registry.example/paddle:3.0.0-gpu",
        default_cpu="4",
        default_memory="16Gi",
        default_jobs=50,
    )
    yield dc
    _delete_kueue_objects_of(kueue_cluster, dc)


@pytest.fixture
def kueue_node_dc(db: None, k8s_node_cluster: TestCluster, tmp_path: Path) -> Iterator[Any]:
    """kueue_dc on the real node (node_datacenter: the runtime image): every user's quota the node's 2 cores and
    8Gi, so two jobs of 2 cores take turns or preempt. Skips where the node cluster runs without Kueue (never in
    CI: there k8s_node_cluster fails instead)."""
    if k8s_node_cluster.kueue_bin_dir is None:
        pytest.skip(f"the real-node cluster runs without Kueue, missing: {', '.join(kueue_missing())}")
    fields = {"admission": "kueue", "default_cpu": "2", "default_memory": "8Gi", "default_jobs": 10}
    dc = node_datacenter(k8s_node_cluster, tmp_path / "kqpfs", "kqn", "k", **fields)
    yield dc
    _delete_kueue_objects_of(k8s_node_cluster, dc)


def _delete_kueue_objects_of(cluster: TestCluster, dc: Datacenter) -> None:
    """Delete the namespaces and ClusterQueues the engine made for `dc`."""
    with cluster.api_client() as api:
        custom = k8s.CustomObjectsApi(api)
        _delete_namespaces_of(api, dc)
        kind = ("kueue.x-k8s.io", "v1beta2", "clusterqueues")
        for queue in custom.list_cluster_custom_object(*kind, label_selector=_dc_selector(dc))["items"]:
            with contextlib.suppress(ApiException):
                custom.delete_cluster_custom_object(*kind, queue["metadata"]["name"])
        cohorts = ("kueue.x-k8s.io", "v1beta2", "cohorts")  # the teams' (named after the datacenter)
        for cohort in custom.list_cluster_custom_object(*cohorts)["items"]:
            if cohort["metadata"]["name"].startswith(f"paddlecloud-{dc.name}-"):
                with contextlib.suppress(ApiException):
                    custom.delete_cluster_custom_object(*cohorts, cohort["metadata"]["name"])
