"""What CI builds in the background while the suite runs (.ci/run, .ci/build-k8s.sh), in three parts: the test control
plane with Kueue and JobSet, then the real node (with the test registry and the runtime image), then the images the
node's last tests need (the in-cluster image builder, Kaniko, and the deploy tests' images). The tests that need it
(BUILT_FOR) are collected last, as two units of their own (the control plane's tests and the node's, each on one
pytest-xdist worker); each unit goes to a worker as soon as the part its first tests need is built (unit_ready;
tests/conftest.py), and each test waits only for the part it needs: the control plane's tests run while the node
still builds, and the node's start before its images are built."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

# The parts, in the order .ci/build-k8s.sh builds them; each writes `<status file>.<part>` with its exit status when
# done, and the whole build writes the status file itself last.
PARTS = ("control-plane", "node", "images")

# Node id prefixes of the tests that need the build: the Kubernetes tests, and buildah's (the runtime image).
BUILT_FOR = ("tests/k8s/", "tests/cli/test_build.py")
# Those that need more than the control plane: a real node, the test registry or the runtime image ("node"), or the
# image builder or the deploy tests' images ("images"). tests/k8s/conftest.py fails the collection if a test outside
# them asks for one of NODE_FIXTURES, so a new test cannot land in the wrong unit.
NEEDS_NODE = (
    "tests/cli/test_build.py",
    "tests/k8s/test_build_image.py",
    "tests/k8s/test_kueue_pods.py",
    "tests/k8s/test_network_isolation_pods.py",
    "tests/k8s/test_pods.py",
    "tests/k8s/test_registry.py",
    "tests/k8s/test_registry_pulls.py",
    "tests/k8s/test_usage_pods.py",
)
NEEDS_IMAGES = ("tests/k8s/test_deploy_job.py", "tests/k8s/test_deploy_pods.py", "tests/k8s/test_image_build_pods.py")
NODE_FIXTURES = frozenset({"k8s_node_cluster", "k8s_registry", "buildah_env"})


def part_needed(nodeid: str) -> str | None:
    """The build part a test needs (one of PARTS), or None when it needs none of the build."""
    if nodeid.startswith(NEEDS_IMAGES):
        return "images"
    if nodeid.startswith(NEEDS_NODE):
        return "node"
    return "control-plane" if nodeid.startswith(BUILT_FOR) else None


def needs_build(nodeid: str) -> bool:
    return part_needed(nodeid) is not None


UNIT_PREFIX = "built:"


def unit_of(nodeid: str) -> str:
    """The pytest-xdist unit of a test needing the build: one for the control plane's tests, one for the node's (one
    real node per host, so every test of the node and its images runs on one worker)."""
    return f"{UNIT_PREFIX}control-plane" if part_needed(nodeid) == "control-plane" else f"{UNIT_PREFIX}node"


def part_done(part: str) -> bool:
    """True once CI's background build has ended `part` (built or failed: a test then fails with the log); always
    outside CI."""
    status_file = os.environ.get("PADDLECLOUD_K8S_BUILD_STATUS")
    return not status_file or Path(f"{status_file}.{part}").exists() or Path(status_file).exists()


def unit_ready(scope: str) -> bool:
    """True for a unit of unit_of whose first tests can start now: the part they wait for (the unit's name) is done."""
    return scope.startswith(UNIT_PREFIX) and part_done(scope.removeprefix(UNIT_PREFIX))


def order_key(nodeid: str) -> int:
    """Sorts the tests by the part they wait for (the rest first): each unit's tests in the order their parts end."""
    part = part_needed(nodeid)
    return 0 if part is None else 1 + PARTS.index(part)


def running() -> bool:
    """True while CI's background build has not ended (PADDLECLOUD_K8S_BUILD_STATUS names its status file)."""
    status_file = os.environ.get("PADDLECLOUD_K8S_BUILD_STATUS") or ""
    return bool(status_file) and not Path(status_file).exists()


def wait(part: str = PARTS[-1]) -> None:
    """Until CI's background build has built `part` (a no-op outside CI); a failed or endless build fails the test
    with its log."""
    status_file = os.environ.get("PADDLECLOUD_K8S_BUILD_STATUS")
    if not status_file:
        return
    whole, log = Path(status_file), Path(status_file).with_suffix(".log")
    own = Path(f"{status_file}.{part}")
    deadline = time.monotonic() + float(os.environ.get("PADDLECLOUD_K8S_BUILD_WAIT", 5400))
    while not part_done(part):
        if time.monotonic() > deadline:
            pytest.fail(f"the background k8s build did not finish its {part} part in time; log: {log}", pytrace=False)
        time.sleep(2)
    # The whole build ends (a status file) also when an earlier part failed: then that part's status is the answer.
    code = (own if own.exists() else whole).read_text().strip()
    if code != "0":
        tail = log.read_text(errors="replace")[-4000:] if log.exists() else "(no log)"
        pytest.fail(f"the background k8s build failed (exit {code}); the end of {log}:\n{tail}", pytrace=False)
