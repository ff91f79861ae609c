"""A real Kubernetes control plane for tests: etcd, apiserver, controller-manager, scheduler and kwok on free ports."""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import datetime as dt
import json
import os
import secrets
import signal
import socket
import ssl
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from kubernetes import client as k8s
from kubernetes.client.rest import ApiException

from tools.k8s.pki import make_pki

HERE = Path(__file__).resolve().parent
STAGES_FILE = HERE / "stages.yaml"
KWOK_CRDS = (HERE / "kwok-crds" / "kwok.x-k8s.io_logs.yaml", HERE / "kwok-crds" / "kwok.x-k8s.io_clusterlogs.yaml")
BINARIES = ("etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok")
CONTEXT = "paddlecloud-test"
SERVICE_CIDR = "10.96.0.0/16"
SERVICE_IP = "10.96.0.1"  # first address of SERVICE_CIDR: the `kubernetes` Service
KWOK_GROUP, KWOK_VERSION = "kwok.x-k8s.io", "v1alpha1"

# Pod annotations understood by tools/k8s/stages.yaml.
FATE = "paddlecloud.org/fake-fate"
DELAY = "paddlecloud.org/fake-delay"
EXIT_CODE = "paddlecloud.org/fake-exit-code"


def pinned_versions() -> dict[str, str]:
    """Versions from tools/k8s/versions.env, overridable by the same env vars build.sh honours."""
    versions: dict[str, str] = {}
    for line in (HERE / "versions.env").read_text().splitlines():
        key, sep, value = line.strip().partition("=")
        if sep and not key.startswith("#"):
            versions[key] = os.environ.get(key) or value
    return versions


def default_bin_dir() -> Path:
    """Where build.sh puts the binaries: $PADDLECLOUD_K8S_BIN_DIR, else the version-keyed cache dir."""
    explicit = os.environ.get("PADDLECLOUD_K8S_BIN_DIR")
    if explicit:
        return Path(explicit)
    v = pinned_versions()
    cache = Path(os.environ.get("PADDLECLOUD_K8S_CACHE") or Path.home() / ".cache" / "paddlecloud" / "k8s")
    key = f"{v['K8S_VERSION']}-etcd{v['ETCD_VERSION'].removeprefix('v')}-kwok{v['KWOK_VERSION'].removeprefix('v')}"
    return cache / key / "bin"


def missing_binaries(bin_dir: Path) -> list[str]:
    """Names of the control-plane binaries not present (or not executable) in bin_dir."""
    return [b for b in BINARIES if not os.access(bin_dir / b, os.X_OK)]


@dataclass(frozen=True)
class FakeNode:
    """A kwok node: capacity is what the scheduler sees; nothing runs on it."""

    name: str
    cpu: str = "32"
    memory: str = "256Gi"
    pods: str = "110"
    gpus: int = 0
    labels: dict[str, str] = field(default_factory=dict)


DEFAULT_NODES = (FakeNode("kwok-node-0", gpus=4), FakeNode("kwok-node-1", gpus=4), FakeNode("kwok-node-2"))


class ClusterError(RuntimeError):
    """A component failed to start or become ready; the message names its log file."""


def free_ports(count: int) -> list[int]:
    """Ports the kernel hands out for port 0, all held open together so they are distinct."""
    socks = []
    try:
        for _ in range(count):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.bind(("127.0.0.1", 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def _die_with_parent() -> None:
    # PR_SET_PDEATHSIG: if the test process is SIGKILLed, the kernel kills the component too.
    with contextlib.suppress(OSError):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)


def kill_group(pid: int, grace: float = 5.0) -> None:
    """SIGTERM the process group led by pid, SIGKILL it after `grace` seconds; returns once it is gone."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pid, signal.SIGTERM)
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline and _group_alive(pid):
        time.sleep(0.05)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pid, signal.SIGKILL)
    while _group_alive(pid):
        time.sleep(0.02)


def _group_alive(pgid: int) -> bool:
    # Reap the leader if it is our child, otherwise it lingers as a zombie and the group looks alive.
    with contextlib.suppress(ChildProcessError):
        os.waitpid(pgid, os.WNOHANG)
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A group whose only members are zombies not reaped by us (e.g. `down` from another shell) is dead.
    return any(_is_live(p) for p in _pids_in_group(pgid))


def _pids_in_group(pgid: int) -> list[int]:
    pids = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError, ValueError, IndexError):
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
                if int(fields[2]) == pgid:
                    pids.append(int(entry.name))
    return pids


def _is_live(pid: int) -> bool:
    with contextlib.suppress(OSError, IndexError):
        return (Path("/proc") / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    return False


_LIVE: set[TestCluster] = set()


@atexit.register
def _stop_all_at_exit() -> None:
    # Safety net: a test run that forgot stop() (or died in a fixture) must not leave a cluster behind.
    for cluster in list(_LIVE):
        cluster.stop()


class TestCluster:
    """etcd + kube-apiserver + kube-controller-manager + kube-scheduler + kwok, on 127.0.0.1 with free ports.

    After start(): `server` (https URL), `token` (bearer, group system:masters), `ca_file`, `kubeconfig_path`
    (context `context`), `api_client()` for the kubernetes client, and `pids` of every component.
    """

    __test__ = False  # not a pytest test class despite the name

    def __init__(
        self,
        bin_dir: Path | str,
        work_dir: Path | str,
        nodes: Sequence[FakeNode] = DEFAULT_NODES,
        stages_file: Path | str = STAGES_FILE,
        die_with_parent: bool = True,
    ) -> None:
        self.bin_dir = Path(bin_dir)
        self.work_dir = Path(work_dir).resolve()
        self.nodes = tuple(nodes)
        self.stages_file = Path(stages_file)
        self.die_with_parent = die_with_parent
        self.context = CONTEXT
        self.token = secrets.token_hex(24)
        self.kubeconfig_path = self.work_dir / "kubeconfig"
        self.ca_file = self.work_dir / "pki" / "ca.crt"
        self.log_dir = self.work_dir / "logs"
        self.pod_log_dir = self.work_dir / "pod-logs"
        self.server = ""
        self.ports: dict[str, int] = {}
        self.procs: dict[str, subprocess.Popen[bytes]] = {}
        self._args: dict[str, tuple[str, ...]] = {}  # each component's arguments, for start_component

    # ----- lifecycle -----

    def start(self, timeout: float = 120.0) -> None:
        """Start every component in order, waiting for each to be ready; on any failure stop what started."""
        missing = missing_binaries(self.bin_dir)
        if missing:
            raise ClusterError(f"missing binaries in {self.bin_dir}: {', '.join(missing)} (run tools/k8s/build.sh)")
        deadline = time.monotonic() + timeout
        for attempt in range(3):
            _LIVE.add(self)  # stop() removes it
            try:
                self._start(deadline)
                return
            except ClusterError:
                self.stop()
                # free_ports() only reserves ports until it returns; another process may take one first.
                if attempt == 2 or not self._port_clash():
                    raise
            except BaseException:
                self.stop()
                raise

    def _port_clash(self) -> bool:
        logs = self.log_dir.glob("*.log") if self.log_dir.exists() else []
        return any("address already in use" in p.read_text(errors="replace") for p in logs)

    def stop(self) -> None:
        """Kill every component's process group (SIGTERM, then SIGKILL) and wait until none is left."""
        # Reverse start order, so controllers do not log storms about a vanished apiserver first.
        for name in reversed(list(self.procs)):
            proc = self.procs[name]
            kill_group(proc.pid)
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=1)
        self.procs.clear()
        _LIVE.discard(self)

    def detach(self) -> None:
        """Leave the components running after this Python process exits (used by `up`)."""
        _LIVE.discard(self)

    def __enter__(self) -> TestCluster:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def pids(self) -> dict[str, int]:
        """Component name -> pid (each is also the id of the component's own process group)."""
        return {name: proc.pid for name, proc in self.procs.items()}

    def api_client(self) -> k8s.ApiClient:
        """A new kubernetes ApiClient authenticated as cluster admin (close it, or use it as a context manager)."""
        conf = k8s.Configuration()
        conf.host = self.server
        conf.ssl_ca_cert = str(self.ca_file)
        conf.api_key = {"authorization": self.token}
        conf.api_key_prefix = {"authorization": "Bearer"}
        return k8s.ApiClient(conf)

    # ----- startup steps -----

    def _start(self, deadline: float) -> None:
        if self.work_dir.exists():
            # A fresh etcd every time: leftovers from an earlier run would resurrect old objects.
            subprocess.run(["rm", "-rf", str(self.work_dir)], check=True)
        for d in (self.work_dir, self.log_dir, self.pod_log_dir):
            d.mkdir(parents=True, exist_ok=True)
        names = ("etcd", "etcd-peer", "apiserver", "controller-manager", "scheduler", "kwok")
        self.ports = dict(zip(names, free_ports(len(names)), strict=True))
        pki = make_pki(self.work_dir / "pki", SERVICE_IP)
        self.server = f"https://127.0.0.1:{self.ports['apiserver']}"
        (self.work_dir / "tokens.csv").write_text(f'{self.token},admin,admin,"system:masters"\n')
        self._write_kubeconfig()

        etcd_url = f"http://127.0.0.1:{self.ports['etcd']}"
        peer_url = f"http://127.0.0.1:{self.ports['etcd-peer']}"
        self._spawn(
            "etcd",
            f"--data-dir={self.work_dir / 'etcd'}",
            f"--listen-client-urls={etcd_url}",
            f"--advertise-client-urls={etcd_url}",
            f"--listen-peer-urls={peer_url}",
            f"--initial-advertise-peer-urls={peer_url}",
            f"--initial-cluster=default={peer_url}",
            "--unsafe-no-fsync",  # test data: durability only costs time
            "--log-level=warn",
        )
        self._wait("etcd", deadline, lambda: b'"health":"true"' in self._http_get(f"{etcd_url}/health"))

        self._spawn(
            "kube-apiserver",
            f"--etcd-servers={etcd_url}",
            "--bind-address=127.0.0.1",
            "--advertise-address=127.0.0.1",
            f"--secure-port={self.ports['apiserver']}",
            f"--cert-dir={self.work_dir / 'pki'}",
            f"--tls-cert-file={pki.serving_cert}",
            f"--tls-private-key-file={pki.serving_key}",
            f"--client-ca-file={pki.ca_cert}",
            f"--token-auth-file={self.work_dir / 'tokens.csv'}",
            "--authorization-mode=RBAC",
            "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
            f"--service-account-key-file={pki.sa_pub}",
            f"--service-account-signing-key-file={pki.sa_key}",
            f"--service-cluster-ip-range={SERVICE_CIDR}",
            "--allow-privileged=true",
            "--endpoint-reconciler-type=none",
            # kwok nodes carry InternalIP 127.0.0.1 and kwok's port: that is where `kubectl logs` goes.
            "--kubelet-preferred-address-types=InternalIP",
            "--profiling=false",
        )
        self._wait("kube-apiserver", deadline, lambda: self._http_get(f"{self.server}/readyz") == b"ok")

        common = [f"--kubeconfig={self.kubeconfig_path}", "--leader-elect=false", "--bind-address=127.0.0.1"]
        self._spawn(
            "kube-controller-manager",
            *common,
            f"--secure-port={self.ports['controller-manager']}",
            f"--cert-dir={self.work_dir / 'kcm-certs'}",
            "--controllers=*",
            f"--service-account-private-key-file={pki.sa_key}",
            f"--root-ca-file={pki.ca_cert}",
            f"--cluster-signing-cert-file={pki.ca_cert}",
            f"--cluster-signing-key-file={pki.ca_key}",
            "--profiling=false",
        )
        self._spawn(
            "kube-scheduler",
            *common,
            f"--secure-port={self.ports['scheduler']}",
            f"--cert-dir={self.work_dir / 'scheduler-certs'}",
            "--profiling=false",
        )
        # kwok watches Logs/ClusterLogs objects, so their CRDs must be served before it starts.
        with self.api_client() as api:
            self._install_crds(api, deadline)
        kwok_port = self.ports["kwok"]
        self._spawn(
            "kwok",
            f"--kubeconfig={self.kubeconfig_path}",
            f"--config={self.stages_file}",
            "--manage-all-nodes=true",
            "--node-ip=127.0.0.1",
            f"--node-port={kwok_port}",
            f"--server-address=127.0.0.1:{kwok_port}",
            "--enable-crds=Logs,ClusterLogs",
        )
        self._wait(
            "kube-controller-manager",
            deadline,
            lambda: self._http_get(f"https://127.0.0.1:{self.ports['controller-manager']}/healthz") == b"ok",
        )
        self._wait(
            "kube-scheduler",
            deadline,
            lambda: self._http_get(f"https://127.0.0.1:{self.ports['scheduler']}/healthz") == b"ok",
        )
        self._wait("kwok", deadline, lambda: self._http_get(f"http://127.0.0.1:{kwok_port}/healthz") == b"ok")
        with self.api_client() as api:
            core = k8s.CoreV1Api(api)
            for node in self.nodes:
                core.create_node(self._node_body(node))  # type: ignore[arg-type]  # dict bodies are accepted
            self._wait("kwok", deadline, lambda: self._nodes_ready(core), what="nodes Ready")
            # The controller-manager's token and service-account controllers are up once this exists,
            # and pods cannot be created in a namespace before its `default` ServiceAccount.
            self._wait(
                "kube-controller-manager",
                deadline,
                lambda: self._has_default_sa(core, "default"),
                what="default ServiceAccount",
            )

    def _spawn(self, name: str, *args: str) -> None:
        self._args[name] = args
        log = (self.log_dir / f"{name}.log").open("ab")
        try:
            self.procs[name] = subprocess.Popen(
                [str(self.bin_dir / name), *args],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                cwd=self.work_dir,
                start_new_session=True,  # own process group: stop() kills the whole group
                preexec_fn=_die_with_parent if self.die_with_parent else None,
            )
        finally:
            log.close()

    def _wait(self, name: str, deadline: float, ready: Callable[[], bool], what: str = "ready") -> None:
        while True:
            proc = self.procs.get(name)
            if proc is not None and proc.poll() is not None:
                raise ClusterError(f"{name} exited with {proc.returncode}:\n{self.log_tail(name)}")
            with contextlib.suppress(OSError, ApiException, ValueError):
                if ready():
                    return
            if time.monotonic() > deadline:
                raise ClusterError(f"timed out waiting for {name} ({what}):\n{self.log_tail(name)}")
            time.sleep(0.1)

    def log_tail(self, name: str, lines: int = 30) -> str:
        """Last lines of a component's log file (for error messages)."""
        path = self.log_dir / f"{name}.log"
        text = path.read_text(errors="replace") if path.exists() else ""
        return f"--- {path} (last {lines} lines) ---\n" + "\n".join(text.splitlines()[-lines:])

    def _http_get(self, url: str) -> bytes:
        ctx = ssl.create_default_context(cafile=str(self.ca_file))
        if "127.0.0.1:" + str(self.ports["apiserver"]) not in url:
            # controller-manager/scheduler serve self-signed certs of their own; only liveness matters here.
            ctx.check_hostname = False
            ctx.verify_mode = ssl.CERT_NONE
        req = urllib.request.Request(url, headers={"Authorization": f"Bearer {self.token}"})  # noqa: S310
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}), urllib.request.HTTPSHandler(context=ctx))
        try:
            with opener.open(req, timeout=5) as resp:
                return bytes(resp.read())
        except urllib.error.HTTPError:
            return b""

    def _write_kubeconfig(self) -> None:
        conf = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [
                {"name": CONTEXT, "cluster": {"server": self.server, "certificate-authority": str(self.ca_file)}}
            ],
            "users": [{"name": "admin", "user": {"token": self.token}}],
            "contexts": [{"name": CONTEXT, "context": {"cluster": CONTEXT, "user": "admin"}}],
            "current-context": CONTEXT,
        }
        self.kubeconfig_path.write_text(yaml.safe_dump(conf))
        self.kubeconfig_path.chmod(0o600)

    def _install_crds(self, api: k8s.ApiClient, deadline: float) -> None:
        ext = k8s.ApiextensionsV1Api(api)
        names = []
        for path in KWOK_CRDS:
            body = yaml.safe_load(path.read_text())
            ext.create_custom_resource_definition(body)
            names.append(body["metadata"]["name"])

        def established() -> bool:
            for name in names:
                status = ext.read_custom_resource_definition(name).status
                conds = (status.conditions if status else None) or []
                if not any(c.type == "Established" and c.status == "True" for c in conds):
                    return False
            return True

        self._wait("kube-apiserver", deadline, established, what="kwok CRDs Established")

    def _node_body(self, node: FakeNode) -> dict[str, Any]:
        resources = {"cpu": node.cpu, "memory": node.memory, "pods": node.pods, "ephemeral-storage": "1Ti"}
        if node.gpus:
            resources["nvidia.com/gpu"] = str(node.gpus)
        labels = {
            "kubernetes.io/hostname": node.name,
            "kubernetes.io/os": "linux",
            "kubernetes.io/arch": "amd64",
            "type": "kwok",
            **node.labels,
        }
        return {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": node.name, "labels": labels, "annotations": {"kwok.x-k8s.io/node": "fake"}},
            "status": {
                "allocatable": resources,
                "capacity": resources,
                "addresses": [
                    {"type": "InternalIP", "address": "127.0.0.1"},
                    {"type": "Hostname", "address": node.name},
                ],
            },
        }

    def _nodes_ready(self, core: k8s.CoreV1Api) -> bool:
        items = core.list_node().items
        ready = {
            n.metadata.name
            for n in items
            if n.metadata
            and n.status
            and any(c.type == "Ready" and c.status == "True" for c in n.status.conditions or [])
        }
        return ready >= {n.name for n in self.nodes}

    @staticmethod
    def _has_default_sa(core: k8s.CoreV1Api, namespace: str) -> bool:
        try:
            core.read_namespaced_service_account("default", namespace)
        except ApiException as exc:
            if exc.status == 404:
                return False
            raise
        return True

    # ----- helpers for tests -----

    def stop_component(self, name: str) -> None:
        """Stop one running component (e.g. "kube-apiserver": an unreachable cluster) and wait until it is gone."""
        proc = self.procs.pop(name)
        kill_group(proc.pid)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=1)

    def start_component(self, name: str, timeout: float = 60.0) -> None:
        """Start a component stopped by stop_component again (same arguments, same port) and wait until it serves."""
        if name in self.procs:
            return
        self._spawn(name, *self._args[name])
        deadline = time.monotonic() + timeout
        urls = {
            "kube-apiserver": (f"{self.server}/readyz", b"ok"),
            "kube-controller-manager": (f"https://127.0.0.1:{self.ports['controller-manager']}/healthz", b"ok"),
            "kube-scheduler": (f"https://127.0.0.1:{self.ports['scheduler']}/healthz", b"ok"),
            "kwok": (f"http://127.0.0.1:{self.ports['kwok']}/healthz", b"ok"),
        }
        if name in urls:
            url, want = urls[name]
            self._wait(name, deadline, lambda: self._http_get(url) == want)

    def wait_for_default_service_account(self, namespace: str, timeout: float = 30.0) -> None:
        """Block until the controller-manager made the namespace's `default` SA (needed to create bare pods)."""
        with self.api_client() as api:
            core = k8s.CoreV1Api(api)
            self._wait(
                "kube-controller-manager", time.monotonic() + timeout, lambda: self._has_default_sa(core, namespace)
            )

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
        self._wait("kwok", time.monotonic() + 30, lambda: self._http_get(url) == want, what=f"logs for {pod}")


# ----- `python -m tools.k8s.testcluster up|down|status` -----


def state_dir() -> Path:
    """Where `up` keeps the cluster's files and state.json: ${PADDLECLOUD_VAR_DIR:-./var}/k8s."""
    return Path(os.environ.get("PADDLECLOUD_VAR_DIR") or "var").resolve() / "k8s"


def _read_state() -> dict[str, Any] | None:
    path = state_dir() / "state.json"
    return json.loads(path.read_text()) if path.exists() else None


def _pid_is(pid: int, exe: str) -> bool:
    # Guards against a recycled pid: only signal a process still running the binary we started.
    try:
        cmdline = (Path("/proc") / str(pid) / "cmdline").read_bytes().split(b"\0")
    except OSError:
        return False
    return bool(cmdline) and cmdline[0].decode(errors="replace") == exe


def _down() -> int:
    state = _read_state()
    if state is None:
        print("no test cluster state in", state_dir())
        return 0
    for name, info in reversed(list(state["components"].items())):
        if _pid_is(info["pid"], info["exe"]):
            kill_group(info["pid"])
            print(f"stopped {name} (pid {info['pid']})")
    (state_dir() / "state.json").unlink()
    return 0


def _status() -> int:
    state = _read_state()
    if state is None:
        print("test cluster is down (no state in", state_dir(), ")")
        return 1
    alive = True
    for name, info in state["components"].items():
        up = _pid_is(info["pid"], info["exe"])
        alive &= up
        print(f"{name:24} pid {info['pid']:>7}  {'running' if up else 'NOT RUNNING'}")
    print(f"server     {state['server']}\nkubeconfig {state['kubeconfig']}")
    return 0 if alive else 1


def _up() -> int:
    state = _read_state()
    if state is not None:
        if all(_pid_is(i["pid"], i["exe"]) for i in state["components"].values()):
            print(f"test cluster already running\nexport KUBECONFIG={state['kubeconfig']}")
            return 0
        _down()  # half-dead leftovers: clean up and start over
    bin_dir = default_bin_dir()
    missing = missing_binaries(bin_dir)
    if missing:
        print(f"k8s control plane binaries not found in {bin_dir}: run `make k8s-build` (tools/k8s/build.sh)")
        return 1
    cluster = TestCluster(bin_dir, state_dir() / "cluster", die_with_parent=False)
    started = time.monotonic()
    cluster.start()
    cluster.detach()
    state = {
        "server": cluster.server,
        "kubeconfig": str(cluster.kubeconfig_path),
        "context": cluster.context,
        "ca_file": str(cluster.ca_file),
        "work_dir": str(cluster.work_dir),
        "components": {n: {"pid": p.pid, "exe": str(cluster.bin_dir / n)} for n, p in cluster.procs.items()},
    }
    (state_dir() / "state.json").write_text(json.dumps(state, indent=2))
    print(f"test cluster up in {time.monotonic() - started:.1f}s at {cluster.server} (logs: {cluster.log_dir})")
    print(f"export KUBECONFIG={cluster.kubeconfig_path}")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """CLI entry point: up | down | status."""
    args = list(sys.argv[1:] if argv is None else argv)
    commands = {"up": _up, "down": _down, "status": _status}
    if len(args) != 1 or args[0] not in commands:
        print("usage: python -m tools.k8s.testcluster up|down|status", file=sys.stderr)
        return 2
    return commands[args[0]]()


if __name__ == "__main__":
    sys.exit(main())
