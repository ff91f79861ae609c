"""A real node beside the control plane: containerd + runc, a CNI bridge, CoreDNS, a kubelet and kube-router's
NetworkPolicy enforcer (needs root); its settings and config files are in node_config.py, its host footprint in
host.py."""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

from kubernetes import client as k8s

from tools.k8s.bin_dirs import netpol_bin_dir, node_bin_dir
from tools.k8s.images import read_manifest
from tools.k8s.pki import issue_serving_cert
from tools.k8s.testcluster import host
from tools.k8s.testcluster.node_config import CNI_BIN_DIR, NETPOL_BINARY, NodeConfig, NodeError, RealNode
from tools.k8s.testcluster.processes import free_ports, kill_group

NODE_BINARIES = ("kubelet", "containerd", "containerd-shim-runc-v2", "ctr", "runc", "coredns", "pause")
CNI_PLUGINS = ("bridge", "host-local", "loopback")
NAMESPACE = "k8s.io"  # containerd namespace the CRI plugin uses
NETPOL_TOOLS = ("iptables", "iptables-save", "iptables-restore", "ipset")  # what kube-router runs


def node_missing(bin_dir: Path | None = None) -> list[str]:
    """What a real node still needs here (root, binaries, Debian packages, images); empty when it can start."""
    bin_dir = bin_dir or node_bin_dir()
    missing = [] if os.geteuid() == 0 else ["root"]
    missing += [b for b in NODE_BINARIES if not os.access(bin_dir / b, os.X_OK)]
    if not os.access(netpol_bin_dir() / NETPOL_BINARY, os.X_OK):
        missing.append(f"{NETPOL_BINARY} (tools/k8s/build-netpol.sh)")
    missing += [tool for tool in NETPOL_TOOLS if shutil.which(tool) is None]
    missing += [f"{CNI_BIN_DIR}/{p}" for p in CNI_PLUGINS if not os.access(CNI_BIN_DIR / p, os.X_OK)]
    if read_manifest() is None:
        missing.append("the runtime image of this checkout (tools/k8s/images.py build)")
    return missing


class NodeRunner:
    """Starts and stops the real node's processes for a TestCluster (which owns spawn/wait/logs)."""

    def __init__(self, node: RealNode, work_dir: Path, kubeconfig: Path, context: str) -> None:
        self.node = node
        self.dir = work_dir / "node"
        self.kubeconfig = kubeconfig
        self.context = context
        # Unix socket paths are limited to 108 bytes, so the sockets live in a short directory.
        self.run_dir = Path("/run/paddlecloud-node") / f"{os.getpid()}-{id(self) % 100000}"
        self.sock = self.run_dir / "containerd.sock"
        self.images: dict[str, Any] = {}
        self.ports: dict[str, int] = {}
        self._netns_before: set[str] = set()
        self._host_lock: int | None = None

    def _unlock_host(self) -> None:
        if self._host_lock is not None:
            os.close(self._host_lock)  # closing the only descriptor releases the flock
            self._host_lock = None

    # ----- start -----

    def prepare(self) -> dict[str, tuple[str, ...]]:
        """Write configs, create the bridge; returns each process's argv (name -> args) in start order."""
        images = read_manifest()
        if images is None:
            raise NodeError("node images are not built: run tools/k8s/build.sh as root")
        self.images = images
        self._host_lock = host.lock_host()
        for d in (self.dir, self.run_dir, self.dir / "cni", self.dir / "kubelet"):
            d.mkdir(parents=True, exist_ok=True)
        self._netns_before = host.netns_names()
        names = ("kubelet", "kubelet-healthz", "coredns-health", "coredns-ready", "netpol-health")
        self.ports = dict(zip(names, free_ports(len(names)), strict=True))
        self._bridge_up()
        pki = self.dir.parent / "pki"  # the control plane's (TestCluster._start made it)
        issue_serving_cert(
            pki / "ca.crt", pki / "ca.key", self.dir / "kubelet-serving", [self.node.gateway], [self.node.name]
        )
        config = NodeConfig(self.node, self.dir, self.run_dir, self.sock, self.ports, self.kubeconfig, self.context)
        return {
            "containerd": config.containerd_args(self.images["pause"]["ref"]),
            "coredns": config.coredns_args(),
            "kubelet": config.kubelet_args(),
            "kube-router": config.netpol_args(),
        }

    def netpol_ready(self) -> bool:
        """kube-router answers its health check and has hooked its chains into INPUT, FORWARD and OUTPUT."""
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        with opener.open(f"http://127.0.0.1:{self.ports['netpol-health']}/healthz", timeout=2) as resp:
            if resp.status != 200:
                return False
        rules = subprocess.run(["iptables", "-S"], capture_output=True, text=True, check=False).stdout
        return all(f"-j KUBE-ROUTER-{chain}" in rules for chain in ("INPUT", "FORWARD", "OUTPUT"))

    def _bridge_up(self) -> None:
        # Made here (not lazily by the CNI bridge plugin) so CoreDNS can bind the gateway address first.
        subprocess.run(["ip", "link", "del", self.node.bridge], capture_output=True, check=False)
        prefix = self.node.subnet.split("/")[1]
        for cmd in (
            ["ip", "link", "add", self.node.bridge, "type", "bridge"],
            ["ip", "addr", "add", f"{self.node.gateway}/{prefix}", "dev", self.node.bridge],
            ["ip", "link", "set", self.node.bridge, "up"],
        ):
            subprocess.run(cmd, check=True, capture_output=True)

    def containerd_ready(self) -> bool:
        return self.sock.exists() and self.ctr("version").returncode == 0

    def import_images(self) -> None:
        """Import the images of the manifest (OCI layouts) into containerd's k8s.io namespace."""
        for entry in self.images.values():
            self._import(entry)

    def add_image(self, name: str, entry: dict[str, str]) -> None:
        """Import an image of the manifest packed after the node started (CI packs the image builder last), unless
        the node has it already."""
        if self.images.get(name) != entry:
            self._import(entry)
            self.images[name] = entry

    def _import(self, entry: dict[str, str]) -> None:
        result = self.import_layout(Path(entry["layout"]))
        if result.returncode != 0:
            raise NodeError(f"ctr images import {entry['ref']} failed: {result.stderr[-2000:]}")

    def import_layout(self, layout: Path, timeout: float | None = None) -> subprocess.CompletedProcess[str]:
        """`ctr images import` of an OCI layout (tarred on the fly) into containerd's k8s.io namespace, unpacked
        for the CRI; the image keeps the name its index's `io.containerd.image.name` annotation gives it."""
        tar = subprocess.Popen(["tar", "-C", str(layout), "-cf", "-", "."], stdout=subprocess.PIPE)
        ctr = [str(self.node.bin_dir / "ctr"), "--address", str(self.sock), "-n", NAMESPACE, "images", "import"]
        try:
            return subprocess.run(
                [*ctr, "--no-unpack=false", "-"],
                stdin=tar.stdout,
                capture_output=True,
                text=True,
                check=False,
                timeout=timeout,
            )
        finally:
            if tar.stdout:
                tar.stdout.close()
            tar.wait()

    def coredns_ready(self) -> bool:
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        with opener.open(f"http://127.0.0.1:{self.ports['coredns-ready']}/ready", timeout=2) as resp:
            return bool(resp.status == 200)

    def node_ready(self, core: k8s.CoreV1Api) -> bool:
        status = core.read_node(self.node.name).status
        conditions = (status.conditions if status else None) or []
        return any(c.type == "Ready" and c.status == "True" for c in conditions)

    def ctr(self, *args: str) -> subprocess.CompletedProcess[str]:
        cmd = [str(self.node.bin_dir / "ctr"), "--address", str(self.sock), "-n", NAMESPACE, *args]
        return subprocess.run(cmd, capture_output=True, text=True, check=False, timeout=30)

    # ----- stop -----

    def drain(self, api: k8s.ApiClient, wait: Callable[[Callable[[], bool]], None]) -> None:
        """Delete every pod bound to the node and wait until the kubelet has stopped their sandboxes."""
        core = k8s.CoreV1Api(api)
        selector = f"spec.nodeName={self.node.name}"
        for pod in core.list_pod_for_all_namespaces(field_selector=selector).items:
            meta = pod.metadata
            if meta and meta.name and meta.namespace:
                with contextlib.suppress(k8s.ApiException):
                    core.delete_namespaced_pod(meta.name, meta.namespace, grace_period_seconds=0)
        wait(lambda: not self.running_tasks())

    def running_tasks(self) -> list[str]:
        out = self.ctr("tasks", "ls").stdout.splitlines()[1:]
        return [line.split()[0] for line in out if line.split()[-1:] != ["STOPPED"]]

    def remove_containers(self) -> None:
        """Kill and delete whatever containerd still holds (after the kubelet is gone)."""
        for task in self.ctr("tasks", "ls", "-q").stdout.split():
            self.ctr("tasks", "kill", "-s", "SIGKILL", task)
        deadline = time.monotonic() + 10
        while self.running_tasks() and time.monotonic() < deadline:
            time.sleep(0.2)
        for task in self.ctr("tasks", "ls", "-q").stdout.split():
            self.ctr("tasks", "delete", "-f", task)
        for container in self.ctr("containers", "ls", "-q").stdout.split():
            self.ctr("containers", "delete", container)

    def cleanup_host(self) -> None:
        """After every process is gone: shims, mounts, network namespaces and the bridge this node made."""
        for pid in host.shim_pids(self.sock):
            kill_group(pid, grace=1.0)
        for mount in reversed(host.mounts_under(self.dir, self.run_dir)):
            subprocess.run(["umount", "-l", mount], capture_output=True, check=False)
        for ns in host.netns_names() - self._netns_before:
            if ns.startswith("cni-"):
                subprocess.run(["ip", "netns", "delete", ns], capture_output=True, check=False)
        subprocess.run(["ip", "link", "del", self.node.bridge], capture_output=True, check=False)
        host.remove_netpol_rules()
        shutil.rmtree(self.run_dir, ignore_errors=True)
        host.remove_kubepods_cgroups()
        self._unlock_host()

    def state(self) -> dict[str, str]:
        """What `down` in another process needs to clean up after this node."""
        return {
            "dir": str(self.dir),
            "run_dir": str(self.run_dir),
            "bridge": self.node.bridge,
            "bin_dir": str(self.node.bin_dir),
            "name": self.node.name,
        }

    @classmethod
    def restore(cls, state: dict[str, str], kubeconfig: Path, context: str) -> NodeRunner:
        node = RealNode(name=state["name"], bridge=state["bridge"], bin_dir=Path(state["bin_dir"]))
        runner = cls(node, Path(state["dir"]).parent, kubeconfig, context)
        runner.run_dir = Path(state["run_dir"])
        runner.sock = runner.run_dir / "containerd.sock"
        return runner

    def leftovers(self) -> list[str]:
        """What of this node is still on the host (empty after a clean stop): for tests."""
        found = [f"shim pid {p}" for p in host.shim_pids(self.sock)]
        found += [f"mount {m}" for m in host.mounts_under(self.dir, self.run_dir)]
        if subprocess.run(["ip", "link", "show", self.node.bridge], capture_output=True, check=False).returncode == 0:
            found.append(f"interface {self.node.bridge}")
        found += [f"netns {n}" for n in host.netns_names() - self._netns_before]
        found += [f"cgroup {c}" for c in host.kubepods_cgroups()]
        found += [f"iptables chain {c}" for c in host.netpol_chains()]
        found += [f"ipset {name}" for name in host.netpol_ipsets()]
        return found
