"""Helpers for the deploy tests on the real node: the portal image, a Redis and an API relay on the node's bridge."""

from __future__ import annotations

import contextlib
import secrets
import shutil
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client as k8s

from tests import background_build
from tests.wait import wait_for
from tools.k8s.images import deploy_image
from tools.k8s.testcluster import TestCluster

ROOT = Path(__file__).resolve().parents[2]


def built_image(name: str) -> dict[str, str]:
    """A deploy test's image ("portal", "services") as an OCI layout, built by tools/k8s/images.py when
    this checkout's is missing (cached by its Dockerfile and the files it copies); in CI, once the background build
    has packed it."""
    background_build.wait("images")
    entry = deploy_image(name)
    if not (Path(entry["layout"]) / "index.json").exists():
        subprocess.run([sys.executable, str(ROOT / "tools/k8s/images.py"), f"build-{name}"], check=True, timeout=1800)
    return entry


def import_image(cluster: TestCluster, image: dict[str, str]) -> None:
    """`ctr images import` into the real node's containerd (the node imports only the runtime and pause)."""
    runner = cluster.node_runner
    assert runner is not None
    tar = subprocess.Popen(["tar", "-C", image["layout"], "-cf", "-", "."], stdout=subprocess.PIPE)
    ctr = [str(runner.node.bin_dir / "ctr"), "--address", str(runner.sock), "-n", "k8s.io", "images", "import", "-"]
    result = subprocess.run(ctr, stdin=tar.stdout, capture_output=True, text=True, timeout=600, check=False)
    assert tar.stdout is not None
    tar.stdout.close()
    tar.wait()
    assert result.returncode == 0, result.stderr


def manifest(body: dict[str, Any]) -> Any:
    """A plain dict as the client's body (it takes dicts; its stubs name only its model classes)."""
    return body


def fernet_key() -> str:
    raw = subprocess.run(["openssl", "rand", "-base64", "32"], capture_output=True, text=True, check=True).stdout
    return raw.strip().replace("+", "-").replace("/", "_")


def pod_of(core: k8s.CoreV1Api, namespace: str, component: str = "web") -> Any:
    pods = core.list_namespaced_pod(namespace, label_selector=f"app.kubernetes.io/component={component}").items
    return pods[0] if pods else None


def ready(core: k8s.CoreV1Api, namespace: str) -> bool | None:
    """The web pod's Ready condition as the kubelet's readiness probe set it (None: no pod or no condition)."""
    pod = pod_of(core, namespace)
    conditions = {c.type: c.status for c in (pod.status.conditions or [])} if pod else {}
    return {"True": True, "False": False}.get(conditions.get("Ready", ""))


class Broker:
    """A real Redis on the node's bridge address (what pods reach), started and stopped by the test."""

    def __init__(self, address: str, work: Path) -> None:
        with socket.socket() as probe:
            probe.bind((address, 0))
            self.port = int(probe.getsockname()[1])
        self.address, self.work = address, work
        self.password = secrets.token_hex(12)
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://:{self.password}@{self.address}:{self.port}/0"

    def start(self) -> None:
        self.process = subprocess.Popen(
            ["redis-server", "--bind", self.address, "--port", str(self.port), "--requirepass", self.password,
             "--save", "", "--appendonly", "no", "--dir", str(self.work)],
            stdout=subprocess.DEVNULL,
        )  # fmt: skip
        wait_for(self._answers, "redis answers", 10)

    def _answers(self) -> bool:
        try:
            socket.create_connection((self.address, self.port), timeout=1).close()
        except OSError:
            return False
        return True

    def stop(self) -> None:
        if self.process:
            self.process.terminate()
            self.process.wait(10)
            self.process = None


class Relay:
    """TCP from the node's bridge to the API server on loopback (pods cannot reach the host's loopback)."""

    def __init__(self, address: str, target: tuple[str, int]) -> None:
        self.listener = socket.create_server((address, 0))
        self.port = int(self.listener.getsockname()[1])
        self.target = target
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                near, _ = self.listener.accept()
            except OSError:
                return
            far = socket.create_connection(self.target)
            for a, b in ((near, far), (far, near)):
                threading.Thread(target=self._pump, args=(a, b), daemon=True).start()

    @staticmethod
    def _pump(src: socket.socket, dst: socket.socket) -> None:
        with contextlib.suppress(OSError):
            while data := src.recv(65536):
                dst.sendall(data)
        with contextlib.suppress(OSError):
            dst.shutdown(socket.SHUT_WR)

    def close(self) -> None:
        self.listener.close()


def running_broker(cluster: TestCluster, work: Path) -> Iterator[Broker]:
    """For a fixture: a Broker on the real node's bridge, stopped afterwards."""
    if not shutil.which("redis-server"):
        pytest.skip("redis-server (Debian package redis-server) is needed")
    assert cluster.node is not None
    broker = Broker(cluster.node.gateway, work)
    broker.start()
    yield broker
    broker.stop()
