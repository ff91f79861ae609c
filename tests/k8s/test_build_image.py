"""A runtime image built by `paddlectl build` (buildah) runs in a real pod: the package, its requirement, the launcher.

The image goes to the node's containerd the way the node gets its runtime image (an OCI layout
imported with `ctr images import`, tools/k8s/testcluster/node.py), so no registry is needed here.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from kubernetes import client as k8s

from tests.buildah import (
    buildah,
    buildah_storage,
    load_base,
    needs_buildah,
    paddlectl_build,
    require_buildah,
    trainer_package,
)
from tests.wait import wait_for
from tools.k8s.testcluster import TestCluster

pytestmark = [needs_buildah]
IMAGE = f"paddlecloud.local/test-build/tiny:{uuid.uuid4().hex[:8]}"


@pytest.fixture
def buildah_env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[dict[str, str], Path, str]]:
    require_buildah()
    root = tmp_path_factory.mktemp("buildah")
    with buildah_storage(root) as env:
        yield env, root, load_base(env, root)


def import_into_node(cluster: TestCluster, layout: Path) -> None:
    """Name the image for containerd (as images.py's layouts are named) and import it into the node."""
    runner = cluster.node_runner
    assert runner is not None
    index = json.loads((layout / "index.json").read_text())
    for manifest in index["manifests"]:
        manifest.setdefault("annotations", {})["io.containerd.image.name"] = IMAGE
    (layout / "index.json").write_text(json.dumps(index))
    done = runner.import_layout(layout, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]


def test_a_built_runtime_image_runs_the_package_with_its_requirement_in_a_real_pod(
    k8s_node_cluster: TestCluster, buildah_env: tuple[dict[str, str], Path, str], tmp_path: Path
) -> None:
    env, root, base = buildah_env
    built = paddlectl_build(env, str(trainer_package(tmp_path / "tiny")), "/opt/job", base, IMAGE)
    assert built.returncode == 0, built.stdout[-3000:] + built.stderr[-3000:]
    layout = root / "export"
    # Uncompressed, so the base's layers keep the digests containerd already has.
    buildah(env, "push", "--disable-compression", IMAGE, f"oci:{layout}:{IMAGE}")
    import_into_node(k8s_node_cluster, layout)
    runner = k8s_node_cluster.node_runner
    assert runner is not None
    ns = f"build-{uuid.uuid4().hex[:6]}"
    script = "python entry.py && command -v paddlecloud-launch && paddlecloud-launch --help >/dev/null && echo ok"
    container = k8s.V1Container(name="c", image=IMAGE, image_pull_policy="Never", command=["sh", "-c", script])
    pod = k8s.V1Pod(
        metadata=k8s.V1ObjectMeta(name="tiny"),
        spec=k8s.V1PodSpec(restart_policy="Never", automount_service_account_token=False, containers=[container]),
    )
    with k8s_node_cluster.api_client() as api:
        core = k8s.CoreV1Api(api)
        core.create_namespace(k8s.V1Namespace(metadata=k8s.V1ObjectMeta(name=ns)))
        try:
            k8s_node_cluster.wait_for_default_service_account(ns)
            core.create_namespaced_pod(ns, pod)

            def phase() -> str:
                status = core.read_namespaced_pod("tiny", ns).status
                return (status.phase if status else None) or ""

            wait_for(lambda: phase() in ("Succeeded", "Failed"), "the pod to finish", 180)
            log = core.read_namespaced_pod_log("tiny", ns)
            assert (phase(), log.splitlines()) == ("Succeeded", [
                "tiny wheel 0.1 in /opt/job as uid 1000", "/opt/paddle/bin/paddlecloud-launch", "ok"
            ]), log
        finally:
            core.delete_namespace(ns)
            runner.ctr("images", "rm", IMAGE)
