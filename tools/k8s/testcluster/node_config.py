"""The real node's settings (RealNode) and what its processes start with: containerd's config and CNI
conflist, CoreDNS's Corefile, the kubelet's config and flags, kube-router's flags."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from tools.k8s.bin_dirs import netpol_bin_dir, node_bin_dir

CNI_BIN_DIR = Path("/usr/lib/cni")
NODE_LABEL = "paddlecloud.org/node"  # = "real" on this node, so tests and users can choose it
# containerd's registry host configs (`config_path`): `<host:port>/hosts.toml` names the CA a registry's
# certificate is checked with. Read at every pull, so a test registry can add its directory before or
# after the node starts; one fixed place, so neither needs to know the other.
REGISTRY_HOSTS_DIR = Path("/run/paddlecloud-node/certs.d")
NETPOL_BINARY = "kube-router-netpol"  # tools/k8s/build-netpol.sh: kube-router's network policy controller
POD_PIDS_LIMIT = 4096  # the kubelet's podPidsLimit on the test node (tests/k8s/test_pods.py reads it back)


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


@dataclass(frozen=True)
class NodeConfig:
    """One node's files (under `dir`, sockets under the short `run_dir`) and ports: each method writes what
    its process reads and returns that process's arguments."""

    node: RealNode
    dir: Path
    run_dir: Path
    sock: Path  # containerd's socket
    ports: dict[str, int]
    kubeconfig: Path
    context: str

    def netpol_args(self) -> tuple[str, ...]:
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

    def containerd_args(self, pause_ref: str) -> tuple[str, ...]:
        self._write_cni_conflist()
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
  sandbox = "{pause_ref}"

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
        return (f"--config={path}",)

    def _write_cni_conflist(self) -> None:
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

    def coredns_args(self) -> tuple[str, ...]:
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
        return ("-conf", str(path))

    def kubelet_args(self) -> tuple[str, ...]:
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
            # As a production kubelet: callers authenticate (the API server with its kubelet client cert, the
            # portal with its token) and are authorized by the API server (the portal's `get nodes/stats`); its
            # serving cert is signed by the cluster CA (NodeRunner.prepare), so callers can check it.
            "authentication": {
                "anonymous": {"enabled": False},
                "webhook": {"enabled": True},
                "x509": {"clientCAFile": str(self.dir.parent / "pki" / "ca.crt")},
            },
            "authorization": {"mode": "Webhook"},
            "tlsCertFile": str(self.dir / "kubelet-serving" / "tls.crt"),
            "tlsPrivateKeyFile": str(self.dir / "kubelet-serving" / "tls.key"),
            "clusterDNS": [self.node.gateway],
            "clusterDomain": "cluster.local",
            "resolvConf": str(self._pods_resolv_conf()),
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
            # Processes and threads one pod may hold (issue 34): what the operators' guide tells a cluster to
            # set, so no job fills the node's process table (this host's kernel.pid_max is 32,768).
            "podPidsLimit": POD_PIDS_LIMIT,
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

    def _pods_resolv_conf(self) -> Path:
        # Pods resolve through CoreDNS only: no search domain or server of this machine leaks in.
        path = self.dir / "resolv.conf"
        path.write_text(f"nameserver {self.node.gateway}\n")
        return path
