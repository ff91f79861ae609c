"""A real node beside the control plane: containerd + runc, a CNI bridge, CoreDNS, a kubelet and kube-router's
NetworkPolicy enforcer (needs root)."""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shlex
import shutil
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from kubernetes import client as k8s

from tools.k8s.images import read_manifest
from tools.k8s.testcluster.processes import die_with_parent, free_ports, kill_group

HERE = Path(__file__).resolve().parent.parent
NODE_BINARIES = ("kubelet", "containerd", "containerd-shim-runc-v2", "ctr", "runc", "coredns", "pause")
CNI_BIN_DIR = Path("/usr/lib/cni")
CNI_PLUGINS = ("bridge", "host-local", "loopback")
NAMESPACE = "k8s.io"  # containerd namespace the CRI plugin uses
NODE_LABEL = "paddlecloud.org/node"  # = "real" on this node, so tests and users can choose it
# One real node per host: nodes share the bridge name, its address (CoreDNS) and the kubepods cgroups,
# so a second one starting or stopping breaks the first (seen: pods losing DNS, `cpuset.mems: no such
# device`). A node holds this lock from prepare() to cleanup_host(); another waits for it.
HOST_LOCK = Path("/run/paddlecloud-node/host.lock")
HOST_LOCK_WAIT_SECONDS = 1800
# containerd's registry host configs (`config_path`): `<host:port>/hosts.toml` names the CA a registry's
# certificate is checked with. Read at every pull, so a test registry can add its directory before or
# after the node starts; one fixed place, so neither needs to know the other.
REGISTRY_HOSTS_DIR = Path("/run/paddlecloud-node/certs.d")
NETNS_DIR = Path("/run/netns")  # where `ip netns` (and the CNI plugins) name network namespaces
NETPOL_BINARY = "kube-router-netpol"  # tools/k8s/build-netpol.sh: kube-router's network policy controller
NETPOL_TOOLS = ("iptables", "iptables-save", "iptables-restore", "ipset")  # what it runs
# What kube-router makes in the filter table and in ipset; the node removes them when it stops (kube-router
# leaves them behind on SIGTERM, and its --cleanup-config does nothing for the policy controller in v2.1).
NETPOL_JUMP_COMMENT = "kube-router netpol"
NETPOL_CHAIN_PREFIXES = ("KUBE-ROUTER-", "KUBE-POD-FW-", "KUBE-NWPLCY-")
NETPOL_IPSET_PREFIXES = ("KUBE-SRC-", "KUBE-DST-", "inet6:KUBE-")


def _netns_names() -> set[str]:
    return {entry.name for entry in NETNS_DIR.iterdir()} if NETNS_DIR.is_dir() else set()


def node_bin_dir() -> Path:
    """Where build-node.sh puts kubelet, containerd, CoreDNS and pause: $PADDLECLOUD_K8S_NODE_BIN_DIR or the cache."""
    explicit = os.environ.get("PADDLECLOUD_K8S_NODE_BIN_DIR")
    if explicit:
        return Path(explicit)
    out = subprocess.run(
        ["bash", str(HERE / "build-node.sh"), "--print-bin-dir"], check=True, capture_output=True, text=True
    )
    return Path(out.stdout.strip())


def netpol_bin_dir() -> Path:
    """Where build-netpol.sh puts kube-router-netpol: $PADDLECLOUD_K8S_NETPOL_BIN_DIR or the cache."""
    explicit = os.environ.get("PADDLECLOUD_K8S_NETPOL_BIN_DIR")
    if explicit:
        return Path(explicit)
    out = subprocess.run(
        ["bash", str(HERE / "build-netpol.sh"), "--print-bin-dir"], check=True, capture_output=True, text=True
    )
    return Path(out.stdout.strip())


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


@dataclass
class RealNode:
    """Settings of the real node; the pod network is the node's own bridge, nothing is routed elsewhere."""

    name: str = "real-node-0"
    bridge: str = "pcbr0"
    subnet: str = "10.244.0.0/24"
    gateway: str = "10.244.0.1"  # the bridge's address on the host: CoreDNS listens here (clusterDNS)
    labels: dict[str, str] = field(default_factory=lambda: {NODE_LABEL: "real"})
    bin_dir: Path = field(default_factory=node_bin_dir)
    netpol_bin_dir: Path = field(default_factory=netpol_bin_dir)
    service_cidr: str = "10.96.0.0/16"  # the control plane's (cluster.SERVICE_CIDR); kube-router must know it


class NodeError(RuntimeError):
    """The real node failed to start; the message names the log to read."""


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

    def _lock_host(self) -> None:
        """Wait (up to HOST_LOCK_WAIT_SECONDS) until no other real node runs on this host."""
        HOST_LOCK.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(HOST_LOCK, os.O_RDWR | os.O_CREAT, 0o644)
        deadline = time.monotonic() + HOST_LOCK_WAIT_SECONDS
        said = False
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    os.close(fd)
                    raise NodeError(f"another real node still runs on this host ({HOST_LOCK})") from None
                if not said:
                    holder = os.pread(fd, 64, 0).decode(errors="replace").strip()
                    print(f"waiting for another real node on this host to stop (pid {holder})", file=sys.stderr)
                    said = True
                time.sleep(1)
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        self._host_lock = fd

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
        self._lock_host()
        for d in (self.dir, self.run_dir, self.dir / "cni", self.dir / "kubelet"):
            d.mkdir(parents=True, exist_ok=True)
        self._netns_before = _netns_names()
        names = ("kubelet", "kubelet-healthz", "coredns-health", "coredns-ready", "netpol-health")
        self.ports = dict(zip(names, free_ports(len(names)), strict=True))
        self._bridge_up()
        return {
            "containerd": (f"--config={self._containerd_config()}",),
            "coredns": ("-conf", str(self._corefile())),
            "kubelet": self._kubelet_args(),
            "kube-router": self._netpol_args(),
        }

    def _netpol_args(self) -> tuple[str, ...]:
        # Only the policy controller runs (the generated main of build-netpol.sh); it finds the node's pods
        # by the node's InternalIP (the bridge address) and filters their traffic in the host's filter table.
        return (
            f"--kubeconfig={self.kubeconfig}",
            f"--hostname-override={self.node.name}",
            f"--service-cluster-ip-range={self.node.service_cidr}",
            f"--health-port={self.ports['netpol-health']}",
            "--enable-ipv4=true",
            "--enable-ipv6=false",  # the pods have IPv4 addresses only
            "--metrics-port=0",
            "--iptables-sync-period=1m",  # a full resync besides the one every pod/policy/namespace change starts
            "--v=1",
        )

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

    def _containerd_config(self) -> Path:
        conflist = {
            "cniVersion": "1.0.0",
            "name": "paddlecloud",
            "plugins": [
                {
                    "type": "bridge",
                    "bridge": self.node.bridge,
                    "isGateway": True,
                    "ipMasq": False,  # pods talk to each other and the host only
                    "hairpinMode": True,
                    "ipam": {
                        "type": "host-local",
                        "ranges": [[{"subnet": self.node.subnet, "gateway": self.node.gateway}]],
                        "dataDir": str(self.dir / "cni-ipam"),
                    },
                }
            ],
        }
        (self.dir / "cni" / "10-paddlecloud.conflist").write_text(json.dumps(conflist, indent=2))
        runc = self.node.bin_dir / "runc"
        config = f"""version = 3
root = "{self.dir / "containerd-root"}"
state = "{self.run_dir / "state"}"

[grpc]
  address = "{self.sock}"

[ttrpc]
  address = "{self.run_dir / "ttrpc.sock"}"

[debug]
  address = ""

[metrics]
  address = ""

[plugins.'io.containerd.cri.v1.images']
  snapshotter = "overlayfs"

[plugins.'io.containerd.cri.v1.images'.registry]
  config_path = "{REGISTRY_HOSTS_DIR}"

[plugins.'io.containerd.cri.v1.images'.pinned_images]
  sandbox = "{self.images["pause"]["ref"]}"

[plugins.'io.containerd.cri.v1.runtime']
  enable_selinux = false
  # This machine refuses lowering oom_score_adj (-998 for sandboxes): clamp to containerd's own.
  restrict_oom_score_adj = true

[plugins.'io.containerd.cri.v1.runtime'.cni]
  bin_dirs = ["{CNI_BIN_DIR}"]
  conf_dir = "{self.dir / "cni"}"
  max_conf_num = 1

[plugins.'io.containerd.cri.v1.runtime'.containerd]
  default_runtime_name = "runc"

[plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc]
  runtime_type = "io.containerd.runc.v2"

[plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc.options]
  BinaryName = "{runc}"
  SystemdCgroup = false

[plugins.'io.containerd.grpc.v1.cri']
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
"""
        path = self.dir / "containerd.toml"
        path.write_text(config)
        return path

    def _corefile(self) -> Path:
        path = self.dir / "Corefile"
        path.write_text(
            f""".:53 {{
    bind {self.node.gateway}
    errors
    health 127.0.0.1:{self.ports["coredns-health"]}
    ready 127.0.0.1:{self.ports["coredns-ready"]}
    kubernetes cluster.local in-addr.arpa ip6.arpa {{
        kubeconfig {self.kubeconfig} {self.context}
        pods insecure
        fallthrough in-addr.arpa ip6.arpa
    }}
    cache 5
}}
"""
        )
        return path

    def _kubelet_args(self) -> tuple[str, ...]:
        config = {
            "apiVersion": "kubelet.config.k8s.io/v1beta1",
            "kind": "KubeletConfiguration",
            # This machine has the cgroup v1 (hybrid) hierarchy; kubelet >= 1.35 refuses it unless told.
            "failCgroupV1": False,
            "cgroupDriver": "cgroupfs",
            # The kubelet refuses a loopback node IP, so the node's address is its own bridge's.
            "address": self.node.gateway,
            "port": self.ports["kubelet"],
            "readOnlyPort": 0,
            "healthzBindAddress": "127.0.0.1",
            "healthzPort": self.ports["kubelet-healthz"],
            # The API server reaches the kubelet (logs) on the bridge address with no client cert: test-only trust.
            "authentication": {"anonymous": {"enabled": True}, "webhook": {"enabled": False}},
            "authorization": {"mode": "AlwaysAllow"},
            "clusterDNS": [self.node.gateway],
            "clusterDomain": "cluster.local",
            "resolvConf": str(self._empty_resolv_conf()),
            "containerRuntimeEndpoint": f"unix://{self.sock}",
            "failSwapOn": False,
            "rotateCertificates": False,
            "serializeImagePulls": False,
            "imageGCHighThresholdPercent": 100,
            "imageGCLowThresholdPercent": 99,
            "evictionHard": {"memory.available": "1Mi", "nodefs.available": "1%", "imagefs.available": "1%"},
            "nodeStatusUpdateFrequency": "2s",
            "syncFrequency": "5s",
            "fileCheckFrequency": "5s",
            "staticPodPath": "",
            "maxPods": 32,
            "protectKernelDefaults": False,
            "makeIPTablesUtilChains": False,
            "localStorageCapacityIsolation": False,
        }
        path = self.dir / "kubelet.yaml"
        path.write_text(yaml.safe_dump(config))
        labels = ",".join(f"{k}={v}" for k, v in self.node.labels.items())
        return (
            f"--config={path}",
            f"--kubeconfig={self.kubeconfig}",
            f"--root-dir={self.dir / 'kubelet'}",
            f"--cert-dir={self.dir / 'kubelet-pki'}",
            f"--hostname-override={self.node.name}",
            f"--node-ip={self.node.gateway}",
            f"--node-labels={labels}",
            "--v=1",
        )

    def _empty_resolv_conf(self) -> Path:
        # Pods resolve through CoreDNS only: no search domain or server of this machine leaks in.
        path = self.dir / "resolv.conf"
        path.write_text(f"nameserver {self.node.gateway}\n")
        return path

    def containerd_ready(self) -> bool:
        return self.sock.exists() and self.ctr("version").returncode == 0

    def import_images(self) -> None:
        """Import the runtime and pause images (OCI layouts) into containerd's k8s.io namespace."""
        for entry in self.images.values():
            tar = subprocess.Popen(["tar", "-C", entry["layout"], "-cf", "-", "."], stdout=subprocess.PIPE)
            try:
                result = subprocess.run(
                    [
                        str(self.node.bin_dir / "ctr"),
                        "--address",
                        str(self.sock),
                        "-n",
                        NAMESPACE,
                        "images",
                        "import",
                        "--no-unpack=false",
                        "-",
                    ],
                    stdin=tar.stdout,
                    capture_output=True,
                    text=True,
                    check=False,
                )
            finally:
                if tar.stdout:
                    tar.stdout.close()
                tar.wait()
            if result.returncode != 0:
                raise NodeError(f"ctr images import {entry['ref']} failed: {result.stderr[-2000:]}")

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
        for pid in self._shim_pids():
            kill_group(pid, grace=1.0)
        mounts = [line.split()[1] for line in Path("/proc/self/mounts").read_text().splitlines()]
        for mount in reversed(mounts):
            if mount.startswith((str(self.dir), str(self.run_dir))):
                subprocess.run(["umount", "-l", mount], capture_output=True, check=False)
        for ns in _netns_names() - self._netns_before:
            if ns.startswith("cni-"):
                subprocess.run(["ip", "netns", "delete", ns], capture_output=True, check=False)
        subprocess.run(["ip", "link", "del", self.node.bridge], capture_output=True, check=False)
        remove_netpol_rules()
        shutil.rmtree(self.run_dir, ignore_errors=True)
        for hierarchy in self._kubepods_cgroups():
            for dirpath, _, _ in sorted(os.walk(hierarchy), key=lambda w: -len(w[0])):
                with contextlib.suppress(OSError):
                    Path(dirpath).rmdir()
        self._unlock_host()

    @staticmethod
    def _kubepods_cgroups() -> list[Path]:
        # The kubelet's cgroupfs driver makes /sys/fs/cgroup/<controller>/kubepods; it outlives the kubelet.
        root = Path("/sys/fs/cgroup")
        return [d / "kubepods" for d in root.iterdir() if (d / "kubepods").is_dir()] + (
            [root / "kubepods"] if (root / "kubepods").is_dir() else []
        )

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

    def _shim_pids(self) -> list[int]:
        # Shims daemonize into their own session, so stopping containerd's group does not reach them.
        pids = []
        for entry in Path("/proc").iterdir():
            if entry.name.isdigit():
                with contextlib.suppress(OSError):
                    cmdline = (entry / "cmdline").read_bytes().split(b"\0")
                    if b"containerd-shim" in cmdline[0] and str(self.sock).encode() in cmdline:
                        pids.append(int(entry.name))
        return pids

    def leftovers(self) -> list[str]:
        """What of this node is still on the host (empty after a clean stop): for tests."""
        found = [f"shim pid {p}" for p in self._shim_pids()]
        mounts = [line.split()[1] for line in Path("/proc/self/mounts").read_text().splitlines()]
        found += [f"mount {m}" for m in mounts if m.startswith((str(self.dir), str(self.run_dir)))]
        if subprocess.run(["ip", "link", "show", self.node.bridge], capture_output=True, check=False).returncode == 0:
            found.append(f"interface {self.node.bridge}")
        found += [f"netns {n}" for n in _netns_names() - self._netns_before]
        found += [f"cgroup {c}" for c in self._kubepods_cgroups()]
        found += [f"iptables chain {c}" for c in _netpol_chains()]
        found += [f"ipset {name}" for name in _netpol_ipsets()]
        return found


def _netpol_chains() -> list[str]:
    rules = subprocess.run(["iptables", "-S"], capture_output=True, text=True, check=False).stdout.splitlines()
    chains = [line.split()[1] for line in rules if line.startswith("-N ")]
    return [chain for chain in chains if chain.startswith(NETPOL_CHAIN_PREFIXES)]


def _netpol_ipsets() -> list[str]:
    if shutil.which("ipset") is None:
        return []
    names = subprocess.run(["ipset", "list", "-n"], capture_output=True, text=True, check=False).stdout.split()
    return [name for name in names if name.startswith(NETPOL_IPSET_PREFIXES)]


def remove_netpol_rules() -> None:
    """Remove what kube-router put in the host's filter table and ipset (after it stopped): the jumps from
    the built-in chains first, then its chains (flushed, then deleted: they refer to each other), then its sets."""
    for builtin in ("INPUT", "FORWARD", "OUTPUT"):
        rules = subprocess.run(["iptables", "-S", builtin], capture_output=True, text=True, check=False).stdout
        for rule in rules.splitlines():
            if rule.startswith("-A ") and NETPOL_JUMP_COMMENT in rule:
                subprocess.run(["iptables", "-D", *shlex.split(rule)[1:]], capture_output=True, check=False)
    chains = _netpol_chains()
    for verb in ("-F", "-X"):
        for chain in chains:
            subprocess.run(["iptables", verb, chain], capture_output=True, check=False)
    for name in _netpol_ipsets():
        subprocess.run(["ipset", "destroy", name], capture_output=True, check=False)


__all__ = [
    "NODE_LABEL",
    "REGISTRY_HOSTS_DIR",
    "NodeError",
    "NodeRunner",
    "RealNode",
    "die_with_parent",
    "netpol_bin_dir",
    "node_bin_dir",
    "node_missing",
    "remove_netpol_rules",
]
