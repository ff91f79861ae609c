"""What CI builds in the background while the suite runs (.ci/run, .ci/build-k8s.sh): the test control plane, the real
node and the images. The tests that need it (BUILT_FOR) run last, on one pytest-xdist worker, and wait for it."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

# Node id prefixes of the tests that need the build: the Kubernetes tests, and buildah's (the runtime image).
BUILT_FOR = ("tests/k8s/", "tests/cli/test_build.py")


def needs_build(nodeid: str) -> bool:
    return nodeid.startswith(BUILT_FOR)


def running() -> bool:
    """True while CI's background build has not ended (PADDLECLOUD_K8S_BUILD_STATUS names its status file)."""
    status_file = os.environ.get("PADDLECLOUD_K8S_BUILD_STATUS") or ""
    return bool(status_file) and not Path(status_file).exists()


def wait() -> None:
    """Until CI's background build ended (a no-op outside CI); a failed or endless build fails the test with its log."""
    status_file = os.environ.get("PADDLECLOUD_K8S_BUILD_STATUS")
    if not status_file:
        return
    status, log = Path(status_file), Path(status_file).with_suffix(".log")
    deadline = time.monotonic() + float(os.environ.get("PADDLECLOUD_K8S_BUILD_WAIT", 5400))
    while not status.exists():
        if time.monotonic() > deadline:
            pytest.fail(f"the background k8s build did not end in time; its log: {log}", pytrace=False)
        time.sleep(2)
    code = status.read_text().strip()
    if code != "0":
        tail = log.read_text(errors="replace")[-4000:] if log.exists() else "(no log)"
        pytest.fail(f"the background k8s build failed (exit {code}); the end of {log}:\n{tail}", pytrace=False)
