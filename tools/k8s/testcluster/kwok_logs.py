"""Pod logs served by kwok for fake nodes: `set_pod_log_lines` / `set_namespace_log_lines` on TestCluster."""

from __future__ import annotations

import datetime as dt
import time
import uuid
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from kubernetes import client as k8s
from kubernetes.client.exceptions import ApiException

KWOK_GROUP, KWOK_VERSION = "kwok.x-k8s.io", "v1alpha1"


class KwokLogs:
    """Mixin for TestCluster: writes CRI-format log files and points kwok's Logs/ClusterLogs at them."""

    pod_log_dir: Path
    ports: dict[str, int]

    def api_client(self) -> k8s.ApiClient:
        raise NotImplementedError

    def _wait(self, name: str, deadline: float, ready: Callable[[], bool], what: str = "ready") -> None:
        raise NotImplementedError

    def _http_get(self, url: str) -> bytes:
        raise NotImplementedError

    def set_pod_log_lines(
        self, namespace: str, pod_name: str, lines: Iterable[str], container: str | None = None
    ) -> Path:
        """Make `read_namespaced_pod_log(pod_name, namespace[, container])` return exactly these lines.

        Works before or after the pod exists. Without `container` the lines serve every container of the pod.
        Returns once kwok serves them, so a test can read the log right away.
        """
        lines = list(lines)
        path = self._write_cri_log(f"{namespace}_{pod_name}_{container or 'all'}", lines)
        entry: dict[str, Any] = {"logsFile": str(path)}
        if container:
            entry["containers"] = [container]
        with self.api_client() as api:
            custom = k8s.CustomObjectsApi(api)
            try:
                current: dict[str, Any] = custom.get_namespaced_custom_object(  # type: ignore[assignment]
                    KWOK_GROUP, KWOK_VERSION, namespace, "logs", pod_name
                )
            except ApiException as exc:
                if exc.status != 404:
                    raise
                body = {
                    "apiVersion": f"{KWOK_GROUP}/{KWOK_VERSION}",
                    "kind": "Logs",
                    "metadata": {"name": pod_name, "namespace": namespace},
                    "spec": {"logs": [entry]},
                }
                custom.create_namespaced_custom_object(KWOK_GROUP, KWOK_VERSION, namespace, "logs", body)
            else:
                keep = [e for e in current["spec"]["logs"] if (e.get("containers") or [None]) != [container]]
                current["spec"]["logs"] = [*keep, entry]
                custom.replace_namespaced_custom_object(KWOK_GROUP, KWOK_VERSION, namespace, "logs", pod_name, current)
        self._wait_kwok_serves(namespace, pod_name, container or "any", lines)
        return path

    def set_namespace_log_lines(self, namespace: str, lines: Iterable[str]) -> Path:
        """Default log lines for every container of every pod in `namespace` (per-pod lines take precedence)."""
        lines = list(lines)
        path = self._write_cri_log(f"{namespace}_ns", lines)
        name = f"paddlecloud-test-{namespace}"
        body: dict[str, Any] = {
            "apiVersion": f"{KWOK_GROUP}/{KWOK_VERSION}",
            "kind": "ClusterLogs",
            "metadata": {"name": name},
            "spec": {"selector": {"matchNamespaces": [namespace]}, "logs": [{"logsFile": str(path)}]},
        }
        with self.api_client() as api:
            custom = k8s.CustomObjectsApi(api)
            try:
                current_cl: dict[str, Any] = custom.get_cluster_custom_object(  # type: ignore[assignment]
                    KWOK_GROUP, KWOK_VERSION, "clusterlogs", name
                )
            except ApiException as exc:
                if exc.status != 404:
                    raise
                custom.create_cluster_custom_object(KWOK_GROUP, KWOK_VERSION, "clusterlogs", body)
            else:
                body["metadata"]["resourceVersion"] = current_cl["metadata"]["resourceVersion"]
                custom.replace_cluster_custom_object(KWOK_GROUP, KWOK_VERSION, "clusterlogs", name, body)
        self._wait_kwok_serves(namespace, f"probe-{uuid.uuid4().hex[:8]}", "any", lines)
        return path

    def _write_cri_log(self, stem: str, lines: list[str]) -> Path:
        # A new file per call: kwok's informer may still point at the previous file for a moment,
        # and _wait_kwok_serves tells the two apart by content.
        path = self.pod_log_dir / f"{stem}_{uuid.uuid4().hex[:8]}.log"
        start = dt.datetime.now(dt.UTC)
        with path.open("w") as f:
            for i, line in enumerate(lines):
                ts = (start + dt.timedelta(microseconds=i)).strftime("%Y-%m-%dT%H:%M:%S.%f000Z")
                f.write(f"{ts} stdout F {line}\n")
        return path

    def _wait_kwok_serves(self, namespace: str, pod: str, container: str, lines: list[str]) -> None:
        url = f"http://127.0.0.1:{self.ports['kwok']}/containerLogs/{namespace}/{pod}/{container}"
        want = "".join(f"{line}\n" for line in lines).encode()
        self._wait("kwok", time.monotonic() + 90, lambda: self._http_get(url) == want, what=f"logs for {pod}")
