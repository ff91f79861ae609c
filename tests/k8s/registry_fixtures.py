"""Fixtures for the test registry (tools/k8s/testcluster/registry.py): `k8s_registry`, `k8s_registry_image`.

`k8s_registry` is one TestRegistry for the tests here with the users alice and bob (random passwords in
`k8s_registry.users`); its `host` (the real node's bridge address and a port) is what the kubelet and
pods pull from, `ca_pem` what a client in a pod must trust. The node's containerd trusts it already.
"""

from __future__ import annotations

import os
import secrets
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests import background_build
from tools.k8s.images import read_manifest
from tools.k8s.testcluster.node_config import REGISTRY_HOSTS_DIR
from tools.k8s.testcluster.registry import TestRegistry, registry_missing

USERS = ("alice", "bob")
RUNTIME_REPOSITORY = "alice/paddle"

_pushed: dict[tuple[int, str], str] = {}
_push_lock = threading.Lock()


def push_runtime_image(registry: TestRegistry, repository: str = RUNTIME_REPOSITORY) -> str:
    """Push this checkout's runtime image (an OCI layout, ~1.2 GB) to `<repository>:<its tag>` once per
    registry; returns the reference to pull it by (`<registry.host>/<repository>:<tag>`)."""
    manifest = read_manifest()
    if manifest is None:
        pytest.fail("the runtime image is not built: run tools/k8s/build.sh as root", pytrace=False)
    tag = manifest["runtime"]["ref"].rsplit(":", 1)[1]
    key = (id(registry), repository)
    with _push_lock:
        if key not in _pushed:
            _pushed[key] = registry.push_layout(Path(manifest["runtime"]["layout"]), f"{repository}:{tag}")
        return _pushed[key]


@pytest.fixture(scope="package")
def k8s_registry(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestRegistry]:
    """The private registry of the tests here (htpasswd + TLS), users alice and bob; skips without its binaries
    (fails with PADDLECLOUD_REQUIRE_K8S=1, as in CI)."""
    background_build.wait("node")
    missing = registry_missing()
    if missing:
        message = f"test registry binaries missing ({', '.join(missing)}): run tools/k8s/build.sh"
        if os.environ.get("PADDLECLOUD_REQUIRE_K8S") == "1":
            pytest.fail(message, pytrace=False)
        pytest.skip(message)
    # Only root may tell the node's containerd to trust it (and only root runs the node).
    hosts_dir = REGISTRY_HOSTS_DIR if os.geteuid() == 0 else None
    registry = TestRegistry(work_dir=tmp_path_factory.mktemp("registry"), hosts_dir=hosts_dir)
    registry.start()
    try:
        for user in USERS:
            registry.add_user(user, secrets.token_urlsafe(12))
        yield registry
    finally:
        with _push_lock:  # a registry started later may get the same id()
            for key in [key for key in _pushed if key[0] == id(registry)]:
                del _pushed[key]
        registry.stop()


@pytest.fixture(scope="package")
def k8s_registry_image(k8s_registry: TestRegistry) -> str:
    """This checkout's runtime image in the registry as `<host>/alice/paddle:<tag>` (pushed once per registry)."""
    return push_runtime_image(k8s_registry)
