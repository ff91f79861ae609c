"""kwok's fake nodes: the capacity and labels the scheduler sees, as Node objects kwok keeps Ready."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from kubernetes import client as k8s


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


def node_body(node: FakeNode) -> dict[str, Any]:
    """The Node object of a fake node, annotated so that kwok (and only kwok) manages it."""
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


def nodes_ready(core: k8s.CoreV1Api, nodes: Iterable[FakeNode]) -> bool:
    """Whether every one of `nodes` has condition Ready=True."""
    items = core.list_node().items
    ready = {
        n.metadata.name
        for n in items
        if n.metadata and n.status and any(c.type == "Ready" and c.status == "True" for c in n.status.conditions or [])
    }
    return ready >= {n.name for n in nodes}
