"""The test Kubernetes cluster (tools/k8s): control plane, kwok nodes, a real node, a private registry; re-exports."""

from tools.k8s.testcluster.cluster import (
    BINARIES,
    CONTEXT,
    DEFAULT_NODES,
    DELAY,
    EXIT_CODE,
    FATE,
    ClusterError,
    FakeNode,
    TestCluster,
    default_bin_dir,
    missing_binaries,
    pinned_versions,
)
from tools.k8s.testcluster.kwok_logs import KWOK_GROUP, KWOK_VERSION
from tools.k8s.testcluster.node import NODE_LABEL, REGISTRY_HOSTS_DIR, NodeError, RealNode, node_bin_dir, node_missing
from tools.k8s.testcluster.processes import free_ports, kill_group
from tools.k8s.testcluster.registry import RegistryError, TestRegistry, registry_bin_dir, registry_missing

__all__ = [
    "BINARIES",
    "CONTEXT",
    "DEFAULT_NODES",
    "DELAY",
    "EXIT_CODE",
    "FATE",
    "KWOK_GROUP",
    "KWOK_VERSION",
    "NODE_LABEL",
    "REGISTRY_HOSTS_DIR",
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
    "missing_binaries",
    "node_bin_dir",
    "node_missing",
    "pinned_versions",
    "registry_bin_dir",
    "registry_missing",
]
