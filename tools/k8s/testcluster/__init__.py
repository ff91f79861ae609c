"""The test Kubernetes cluster (tools/k8s): control plane, kwok nodes, a real node, a private registry, Kueue and
JobSet; re-exports."""

from tools.k8s.bin_dirs import default_bin_dir, node_bin_dir, pinned_versions, registry_bin_dir
from tools.k8s.testcluster.cluster import BINARIES, CONTEXT, DELAY, EXIT_CODE, FATE, TestCluster, missing_binaries
from tools.k8s.testcluster.components import ClusterError
from tools.k8s.testcluster.fake_nodes import DEFAULT_NODES, FakeNode
from tools.k8s.testcluster.kueue import KUEUE_NAMESPACE, VISIBILITY_GROUP, kueue_bin_dir, kueue_missing
from tools.k8s.testcluster.kwok_logs import KWOK_GROUP, KWOK_VERSION
from tools.k8s.testcluster.node import node_missing
from tools.k8s.testcluster.node_config import NODE_LABEL, REGISTRY_HOSTS_DIR, NodeError, RealNode
from tools.k8s.testcluster.processes import free_ports, kill_group
from tools.k8s.testcluster.registry import RegistryError, TestRegistry, registry_missing

__all__ = [
    "BINARIES",
    "CONTEXT",
    "DEFAULT_NODES",
    "DELAY",
    "EXIT_CODE",
    "FATE",
    "KUEUE_NAMESPACE",
    "KWOK_GROUP",
    "KWOK_VERSION",
    "NODE_LABEL",
    "REGISTRY_HOSTS_DIR",
    "VISIBILITY_GROUP",
    "ClusterError",
    "FakeNode",
    "NodeError",
    "RealNode",
    "RegistryError",
    "TestCluster",
    "TestRegistry",
    "default_bin_dir",
    "free_ports",
    "kill_group",
    "kueue_bin_dir",
    "kueue_missing",
    "missing_binaries",
    "node_bin_dir",
    "node_missing",
    "pinned_versions",
    "registry_bin_dir",
    "registry_missing",
]
