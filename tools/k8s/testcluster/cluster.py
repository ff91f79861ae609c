"""The test control plane: etcd, apiserver, controller-manager, scheduler and kwok on free ports (plus a real node),
started in order and torn down whole; the processes themselves are run by components.py."""

from __future__ import annotations

import atexit
import contextlib
import os
import secrets
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path

import yaml
from kubernetes import client as k8s
from kubernetes.client.exceptions import ApiException

from tools.k8s.pki import issue_client_cert, make_pki
from tools.k8s.testcluster.components import ClusterError, Components
from tools.k8s.testcluster.fake_nodes import DEFAULT_NODES, FakeNode, node_body, nodes_ready
from tools.k8s.testcluster.kueue import KueueControllers, kueue_bin_dir, kueue_missing
from tools.k8s.testcluster.kwok_logs import KwokLogs
from tools.k8s.testcluster.node import NodeRunner
from tools.k8s.testcluster.node_config import NETPOL_BINARY, RealNode
from tools.k8s.testcluster.processes import free_ports

HERE = Path(__file__).resolve().parent.parent
STAGES_FILE = HERE / "stages.yaml"
KWOK_CRDS = (HERE / "kwok-crds" / "kwok.x-k8s.io_logs.yaml", HERE / "kwok-crds" / "kwok.x-k8s.io_clusterlogs.yaml")
BINARIES = ("etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok")
CONTEXT = "paddlecloud-test"
SERVICE_CIDR = "10.96.0.0/16"
SERVICE_IP = "10.96.0.1"  # first address of SERVICE_CIDR: the `kubernetes` Service

# Pod annotations understood by tools/k8s/stages.yaml.
FATE = "paddlecloud.org/fake-fate"
DELAY = "paddlecloud.org/fake-delay"
EXIT_CODE = "paddlecloud.org/fake-exit-code"


def missing_binaries(bin_dir: Path) -> list[str]:
    """Names of the control-plane binaries not present (or not executable) in bin_dir."""
    return [b for b in BINARIES if not os.access(bin_dir / b, os.X_OK)]


_LIVE: set[TestCluster] = set()


@atexit.register
def _stop_all_at_exit() -> None:
    # Safety net: a test run that forgot stop() (or died in a fixture) must not leave a cluster behind.
    for cluster in list(_LIVE):
        cluster.stop()


class TestCluster(Components, KwokLogs, KueueControllers):
    """etcd + kube-apiserver + kube-controller-manager + kube-scheduler + kwok, on 127.0.0.1 with free ports.

    After start(): `server` (https URL), `token` (bearer, group system:masters), `ca_file`, `kubeconfig_path`
    (context `context`), `api_client()` for the kubernetes client, and `pids` of every component.
    With `kueue=True` also JobSet's controller and Kueue (kueue.py), ready to admit JobSets, once start() returns.
    """

    __test__ = False  # not a pytest test class despite the name

    def __init__(
        self,
        bin_dir: Path | str,
        work_dir: Path | str,
        nodes: Sequence[FakeNode] = DEFAULT_NODES,
        stages_file: Path | str = STAGES_FILE,
        die_with_parent: bool = True,
        node: RealNode | None = None,
        kueue: bool = False,
    ) -> None:
        super().__init__(Path(bin_dir), Path(work_dir).resolve(), die_with_parent)
        self.nodes = tuple(nodes)
        self.stages_file = Path(stages_file)
        self.context = CONTEXT
        self.token = secrets.token_hex(24)
        self.kubeconfig_path = self.work_dir / "kubeconfig"
        self.ca_file = self.work_dir / "pki" / "ca.crt"
        self.pod_log_dir = self.work_dir / "pod-logs"
        self.server = ""
        self.ports = {}
        self.node = node
        self.node_runner: NodeRunner | None = None
        # build-kueue.sh's cache dir is only asked for (a subprocess) when this cluster runs Kueue.
        self.kueue_bin_dir = kueue_bin_dir() if kueue else None

    # ----- lifecycle -----

    def start(self, timeout: float = 120.0) -> None:
        """Start every component in order, waiting for each to be ready; on any failure stop what started."""
        missing = missing_binaries(self.bin_dir)
        if missing:
            raise ClusterError(f"missing binaries in {self.bin_dir}: {', '.join(missing)} (run tools/k8s/build.sh)")
        if self.kueue_bin_dir is not None and kueue_missing(self.kueue_bin_dir):
            missing = kueue_missing(self.kueue_bin_dir)
            raise ClusterError(f"missing {', '.join(missing)} (run tools/k8s/build-kueue.sh)")
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
        """Kill every component's process group (SIGTERM, then SIGKILL) and wait until none is left.

        With a real node: its pods are deleted first (the kubelet tears their sandboxes and networks
        down), then whatever containerd still holds is killed, then shims, mounts, the bridge and the
        kubelet's cgroups are removed, so nothing of the node is left on the host.
        """
        runner = self.node_runner
        if runner is not None and "kubelet" in self.procs and "kube-apiserver" in self.procs:
            with contextlib.suppress(Exception), self.api_client() as api:
                runner.drain(api, lambda ready: self._wait("kubelet", time.monotonic() + 30, ready, "pods gone"))
        if runner is not None and "kubelet" in self.procs:
            self._kill("kubelet")
        if runner is not None and "containerd" in self.procs:
            runner.remove_containers()
        # Reverse start order, so controllers do not log storms about a vanished apiserver first.
        for name in reversed(list(self.procs)):
            self._kill(name)
        if runner is not None:
            runner.cleanup_host()
        _LIVE.discard(self)

    def detach(self) -> None:
        """Leave the components running after this Python process exits (used by `up`)."""
        _LIVE.discard(self)

    def __enter__(self) -> TestCluster:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

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
            *(self._kueue_apiserver_args() if self.kueue_bin_dir is not None else ()),
            *(self._kubelet_client_args() if self.node is not None else ()),
        )
        self._wait_healthy("kube-apiserver", deadline)

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
            # Only the fake nodes: a real node beside them belongs to its kubelet.
            "--manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake",
            "--node-ip=127.0.0.1",
            f"--node-port={kwok_port}",
            f"--server-address=127.0.0.1:{kwok_port}",
            "--enable-crds=Logs,ClusterLogs",
        )
        for name in ("kube-controller-manager", "kube-scheduler", "kwok"):
            self._wait_healthy(name, deadline)
        with self.api_client() as api:
            core = k8s.CoreV1Api(api)
            for node in self.nodes:
                core.create_node(node_body(node))  # type: ignore[arg-type]  # dict bodies are accepted
            self._wait("kwok", deadline, lambda: nodes_ready(core, self.nodes), what="nodes Ready")
            # The controller-manager's token and service-account controllers are up once this exists,
            # and pods cannot be created in a namespace before its `default` ServiceAccount.
            self._wait(
                "kube-controller-manager",
                deadline,
                lambda: self._has_default_sa(core, "default"),
                what="default ServiceAccount",
            )
        if self.kueue_bin_dir is not None:
            self._start_kueue(deadline)
        if self.node is not None:
            self._start_node(deadline)

    def _kubelet_client_args(self) -> tuple[str, ...]:
        # The real node's kubelet authenticates and authorizes every caller (as a production one does, so the
        # portal's `nodes/stats` right is what lets it read /stats/summary): the API server, fetching logs and
        # exec'ing there, presents a client cert in system:masters.
        pki = self.work_dir / "pki"
        cert, key = issue_client_cert(
            pki / "ca.crt", pki / "ca.key", pki, "kube-apiserver-kubelet-client", "system:masters"
        )
        return (f"--kubelet-client-certificate={cert}", f"--kubelet-client-key={key}")

    def _start_node(self, deadline: float) -> None:
        node = self.node
        assert node is not None
        runner = self.node_runner = NodeRunner(node, self.work_dir, self.kubeconfig_path, self.context)
        waited = time.monotonic()
        args = runner.prepare()  # may wait for another real node on this host to stop first
        deadline += time.monotonic() - waited
        env = {**os.environ, "PATH": f"{node.bin_dir}:{os.environ.get('PATH', '/usr/bin:/bin')}"}
        self._spawn("containerd", *args["containerd"], exe=node.bin_dir / "containerd", env=env)
        self._wait("containerd", deadline, runner.containerd_ready)
        runner.import_images()
        self._spawn("coredns", *args["coredns"], exe=node.bin_dir / "coredns")
        self._wait("coredns", deadline, runner.coredns_ready)
        self._spawn("kubelet", *args["kubelet"], exe=node.bin_dir / "kubelet", env=env)
        with self.api_client() as api:
            core = k8s.CoreV1Api(api)
            self._wait("kubelet", deadline, lambda: runner.node_ready(core), what=f"node {node.name} Ready")
        # After the Node object exists (kube-router reads its InternalIP), before any test makes a pod.
        self._spawn("kube-router", *args["kube-router"], exe=node.netpol_bin_dir / NETPOL_BINARY)
        self._wait("kube-router", deadline, runner.netpol_ready, what="policy chains in the filter table")

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

    def wait_for_default_service_account(self, namespace: str, timeout: float = 30.0) -> None:
        """Block until the controller-manager made the namespace's `default` SA (needed to create bare pods)."""
        with self.api_client() as api:
            core = k8s.CoreV1Api(api)
            self._wait(
                "kube-controller-manager", time.monotonic() + timeout, lambda: self._has_default_sa(core, namespace)
            )
