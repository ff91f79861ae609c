"""The one module that imports the `kubernetes` client: a thin REST wrapper the engine talks through.

Objects go in and come out as plain dicts (the API's own JSON, camelCase): the engine builds
manifests as dicts (`manifests`) and reads status from dicts (`status`), and skipping the
client's model classes keeps a list of thousands of pods fast to decode.

Calls are paced per client (per process and cluster) by pacing.RateLimit (why and how fast: pacing.py).

Errors are sorted once, here: the cluster not answering (connection refused, timeouts, 5xx, 429,
401) -> `TransientEngineError` (the caller retries later); 404 -> `NotFound`; 409 -> `Conflict`;
any other 4xx -> `KubeError` carrying the API server's own message. Every request is counted
(`CALLS`: "LIST Pod", "GET Pod", ...), so tests and the benchmark can show how many calls a reconcile cycle
makes; the long-lived watches of watch.py count theirs apart.
"""

from __future__ import annotations

import contextlib
import gc
import hashlib
import json
import threading
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

import urllib3
import yaml
from kubernetes import client as k8s
from kubernetes import config as k8s_config
from kubernetes.config.config_exception import ConfigException

from datacenters.models import Datacenter
from jobs.engines.base import EngineError, TransientEngineError
from jobs.engines.kubernetes.pacing import RateLimit, rate_limit_from_env

TIMEOUT = (5, 30)  # (connect, read) seconds for every call but logs
LOG_TIMEOUT = (5, 60)


Objects = list[dict[str, Any]]  # a list's items, as the API's own JSON


@dataclass(frozen=True)
class Resource:
    prefix: str  # "/api/v1" or "/apis/<group>/<version>"
    plural: str
    namespaced: bool = True


KINDS: dict[str, Resource] = {
    "Namespace": Resource("/api/v1", "namespaces", namespaced=False),
    "ResourceQuota": Resource("/api/v1", "resourcequotas"),
    "Secret": Resource("/api/v1", "secrets"),
    "ConfigMap": Resource("/api/v1", "configmaps"),
    "Service": Resource("/api/v1", "services"),
    "Pod": Resource("/api/v1", "pods"),
    "Event": Resource("/api/v1", "events"),
    "StatefulSet": Resource("/apis/apps/v1", "statefulsets"),
    "Job": Resource("/apis/batch/v1", "jobs"),
    "NetworkPolicy": Resource("/apis/networking.k8s.io/v1", "networkpolicies"),
    # Only on clusters running JobSet and Kueue (datacenters with admission: kueue).
    "JobSet": Resource("/apis/jobset.x-k8s.io/v1alpha2", "jobsets"),
    "Workload": Resource("/apis/kueue.x-k8s.io/v1beta2", "workloads"),
    "LocalQueue": Resource("/apis/kueue.x-k8s.io/v1beta2", "localqueues"),
    "ClusterQueue": Resource("/apis/kueue.x-k8s.io/v1beta2", "clusterqueues", namespaced=False),
    "Cohort": Resource("/apis/kueue.x-k8s.io/v1beta2", "cohorts", namespaced=False),
    "ResourceFlavor": Resource("/apis/kueue.x-k8s.io/v1beta2", "resourceflavors", namespaced=False),
    "WorkloadPriorityClass": Resource("/apis/kueue.x-k8s.io/v1beta2", "workloadpriorityclasses", namespaced=False),
    # Kueue's visibility API (aggregated): a ClusterQueue's `pendingworkloads`, read with get(..., sub=).
    "ClusterQueueVisibility": Resource("/apis/visibility.kueue.x-k8s.io/v1beta2", "clusterqueues", namespaced=False),
}

_calls_lock = threading.Lock()
CALLS: Counter[str] = Counter()  # "GET Pod" -> count, since the process started (or reset_calls())


def reset_calls() -> None:
    with _calls_lock:
        CALLS.clear()


def total_calls() -> int:
    with _calls_lock:
        return sum(CALLS.values())


def _count(calls: Counter[str], verb: str, kind: str) -> None:
    with _calls_lock:
        calls[f"{verb} {kind}"] += 1


class KubeError(Exception):
    """The API server refused a request (4xx); `message` is its own explanation."""

    def __init__(self, status: int, reason: str, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.reason = reason
        self.message = message


class NotFound(KubeError):
    pass


class Conflict(KubeError):
    pass


class Gone(KubeError):
    """410: a watch asked for a version the API server no longer keeps; list again."""


class WatchStream:
    """An open watch: iterate for its events (`{"type": ADDED|MODIFIED|DELETED|BOOKMARK|ERROR, "object": ...}`)
    as the API server sends them; `close()` from another thread ends the iteration at once."""

    def __init__(self, kind: str, response: urllib3.BaseHTTPResponse) -> None:
        self.kind = kind
        self._response = response
        self.closed = False

    def __iter__(self) -> Iterator[dict[str, Any]]:
        try:
            for line in self._response:
                if line.strip():
                    event: dict[str, Any] = json.loads(line)
                    yield event
        except (urllib3.exceptions.HTTPError, OSError, ValueError) as exc:
            if not self.closed:
                raise TransientEngineError(f"the watch of {self.kind} broke: {_short(exc)}") from None
        finally:
            if self.closed:
                self._response.close()  # its socket is shut: it must never go back to the pool
            else:
                self._response.release_conn()

    def close(self) -> None:
        self.closed = True
        with contextlib.suppress(Exception):  # closing a stream already ended is fine
            self._response.shutdown()


def _selectors(label_selector: str, field_selector: str) -> list[tuple[str, str]]:
    query = []
    if label_selector:
        query.append(("labelSelector", label_selector))
    if field_selector:
        query.append(("fieldSelector", field_selector))
    return query


def _path(kind: str, namespace: str | None, name: str | None = None, sub: str = "") -> str:
    res = KINDS[kind]
    path = res.prefix
    if res.namespaced and namespace:
        path += f"/namespaces/{quote(namespace, safe='')}"
    path += f"/{res.plural}"
    if name:
        path += f"/{quote(name, safe='')}"
    if sub:
        path += f"/{sub}"
    return path


class Kube:
    """Create, read, list, patch and delete objects as dicts; read pod logs."""

    def __init__(self, api: k8s.ApiClient, pace: RateLimit | None = None, calls: Counter[str] | None = None) -> None:
        self.api = api
        self.pace = pace or rate_limit_from_env()
        self.calls = CALLS if calls is None else calls  # the watches count theirs apart (watch.py)

    def counted_apart(self, calls: Counter[str]) -> Kube:
        """The same cluster, pace and connections, its requests counted in `calls` instead of CALLS."""
        return Kube(self.api, self.pace, calls)

    def count(self, verb: str, kind: str) -> None:
        """Count a request made beside this client (a kubelet's, jobs/engines/kubernetes/usage.py)."""
        _count(self.calls, verb, kind)

    def _request(self, verb: str, kind: str, path: str, **kwargs: Any) -> bytes:
        """Send one request (`_send`) and read its whole body."""
        response = self._send(verb, kind, path, **kwargs)
        try:
            return bytes(response.read() or b"")
        except (urllib3.exceptions.HTTPError, OSError) as exc:
            raise TransientEngineError(f"cannot reach the Kubernetes API server: {_short(exc)}") from None

    def _send(
        self,
        verb: str,
        kind: str,
        path: str,
        *,
        query: list[tuple[str, str]] | None = None,
        body: Any = None,
        content_type: str = "application/json",
        accept: str = "application/json",
        timeout: tuple[int, int] = TIMEOUT,
    ) -> Any:
        """Send one request; a 2xx response comes back unread (its body may be a stream), anything else raises."""
        _count(self.calls, verb, kind)
        self.pace.wait()
        headers = {"Accept": accept}
        if body is not None:
            headers["Content-Type"] = content_type  # a JSON type: the client serializes the dict itself
        try:
            method, url, headers, _, _ = self.api.param_serialize(
                method="GET" if verb in ("LIST", "WATCH") else verb,  # counted apart, sent as what they are
                resource_path=path,
                query_params=query or [],
                header_params=headers,
                auth_settings=["BearerToken"],
            )
            response = self.api.call_api(method, url, header_params=headers, body=body, _request_timeout=timeout)
            status = int(response.status)
            if 200 <= status < 300:
                return response
            data = bytes(response.read() or b"")
        except k8s.ApiException as exc:  # status 0: TLS and request-building failures
            raise TransientEngineError(f"{verb} {kind}: {exc.reason or exc}") from None
        except (urllib3.exceptions.HTTPError, OSError) as exc:
            raise TransientEngineError(f"cannot reach the Kubernetes API server: {_short(exc)}") from None
        message, reason = _status_message(data, status)
        if status in (401, 429) or status >= 500:
            raise TransientEngineError(f"Kubernetes API server answered {status} to {verb} {kind}: {message}")
        error = NotFound if status == 404 else Conflict if status == 409 else KubeError
        raise error(status, reason, message)

    def _json(self, verb: str, kind: str, path: str, **kwargs: Any) -> dict[str, Any]:
        data = self._request(verb, kind, path, **kwargs)
        if not data:
            return {}
        # A datacenter-wide list is megabytes of small dicts: without this the cyclic garbage
        # collector runs over and over while they are built (parsed JSON holds no cycles).
        enabled = gc.isenabled()
        gc.disable()
        try:
            result: dict[str, Any] = json.loads(data)
        finally:
            if enabled:
                gc.enable()
        return result

    # ----- objects -----

    def create(self, kind: str, namespace: str | None, body: dict[str, Any]) -> dict[str, Any]:
        return self._json("POST", kind, _path(kind, namespace), body=body)

    def get(
        self,
        kind: str,
        namespace: str | None,
        name: str,
        sub: str = "",
        query: list[tuple[str, str]] | None = None,
        timeout: tuple[int, int] = TIMEOUT,
    ) -> dict[str, Any]:
        return self._json("GET", kind, _path(kind, namespace, name, sub), query=query, timeout=timeout)

    def replace(self, kind: str, namespace: str | None, name: str, body: dict[str, Any]) -> dict[str, Any]:
        return self._json("PUT", kind, _path(kind, namespace, name), body=body)

    def patch(self, kind: str, namespace: str | None, name: str, body: dict[str, Any]) -> dict[str, Any]:
        return self._json(
            "PATCH", kind, _path(kind, namespace, name), body=body, content_type="application/merge-patch+json"
        )

    def delete(self, kind: str, namespace: str | None, name: str, propagation: str = "Background") -> bool:
        """Delete (dependents by the garbage collector); False if it was not there."""
        try:
            self._request(
                "DELETE",
                kind,
                _path(kind, namespace, name),
                body={"kind": "DeleteOptions", "apiVersion": "v1", "propagationPolicy": propagation},
            )
        except NotFound:
            return False
        return True

    def list(
        self, kind: str, namespace: str | None = None, label_selector: str = "", field_selector: str = ""
    ) -> list[dict[str, Any]]:
        """Every object of `kind` matching the selectors, in one call (all namespaces without `namespace`)."""
        return self.list_at(kind, namespace, label_selector, field_selector)[0]

    def list_at(
        self, kind: str, namespace: str | None = None, label_selector: str = "", field_selector: str = ""
    ) -> tuple[Objects, str]:
        """(the objects, the list's resourceVersion): a watch from that version misses nothing after the list."""
        query = _selectors(label_selector, field_selector)
        found = self._json("LIST", kind, _path(kind, namespace), query=query)
        return found.get("items") or [], str((found.get("metadata") or {}).get("resourceVersion") or "")

    def watch(
        self, kind: str, resource_version: str, label_selector: str = "", field_selector: str = "", seconds: int = 60
    ) -> WatchStream:
        """Open a watch of `kind` in every namespace after `resource_version`, for at most `seconds`.

        Raises `Gone` when the API server no longer keeps that version (list again), like every other
        request's errors otherwise; the stream's events may still carry a 410 as an ERROR event."""
        query = [
            *_selectors(label_selector, field_selector),
            ("watch", "true"),
            ("resourceVersion", resource_version),
            ("allowWatchBookmarks", "true"),
            ("timeoutSeconds", str(seconds)),
        ]
        try:
            response = self._send("WATCH", kind, _path(kind, None), query=query, timeout=(5, seconds + 30))
        except KubeError as exc:
            if exc.status == 410:
                raise Gone(exc.status, exc.reason, exc.message) from None
            raise
        return WatchStream(kind, response.response)

    def log(self, namespace: str, pod: str, container: str, previous: bool = False) -> str:
        query = [("container", container)]
        if previous:
            query.append(("previous", "true"))
        data = self._request(
            "GET", "Pod/log", _path("Pod", namespace, pod, "log"), query=query, accept="*/*", timeout=LOG_TIMEOUT
        )
        return data.decode("utf-8", errors="replace")


def _status_message(data: bytes, status: int) -> tuple[str, str]:
    try:
        body = json.loads(data)
    except ValueError:
        return (data.decode("utf-8", errors="replace").strip() or f"HTTP {status}")[:2000], ""
    if not isinstance(body, dict):
        return f"HTTP {status}", ""
    return str(body.get("message") or f"HTTP {status}"), str(body.get("reason") or "")


def _short(exc: BaseException) -> str:
    # urllib3's MaxRetryError wraps the real cause ("Connection refused") in a long repr.
    reason = getattr(exc, "reason", None)
    return str(reason or exc)[:300]


# ----- clients per datacenter -----

_clients: dict[tuple[Any, ...], Kube] = {}
_clients_lock = threading.Lock()


def for_datacenter(datacenter: Datacenter) -> Kube:
    """A client for the datacenter's cluster (its service account in-cluster, else its kubeconfig + context).

    Clients are cached per process and rebuilt when the credentials change.
    """
    secret = hashlib.sha256((datacenter.kubeconfig or "").encode()).hexdigest()
    key = (datacenter.pk, datacenter.name, datacenter.in_cluster, datacenter.kube_context, secret)
    with _clients_lock:
        cached = _clients.get(key)
        if cached is not None:
            return cached
    conf = k8s.Configuration()
    try:
        if datacenter.in_cluster:
            k8s_config.load_incluster_config(client_configuration=conf)
        else:
            if not datacenter.kubeconfig:
                raise EngineError(f"datacenter {datacenter.name} has no kubeconfig and is not set to 'in cluster'")
            config_dict = yaml.safe_load(datacenter.kubeconfig)
            if not isinstance(config_dict, dict):
                raise EngineError(f"datacenter {datacenter.name}: the kubeconfig is not a YAML mapping")
            k8s_config.load_kube_config_from_dict(
                config_dict, context=datacenter.kube_context or None, client_configuration=conf, persist_config=False
            )
    except (ConfigException, yaml.YAMLError) as exc:
        # The message names what is wrong (a missing context, a bad field), never the credentials.
        raise EngineError(f"datacenter {datacenter.name}: cannot use its cluster credentials: {exc}") from None
    conf.retries = 1  # connection refused must fail fast: the caller retries later
    kube = Kube(k8s.ApiClient(conf))
    with _clients_lock:
        for old in [k for k in _clients if k[0] == datacenter.pk]:
            del _clients[old]
        _clients[key] = kube
    return kube
