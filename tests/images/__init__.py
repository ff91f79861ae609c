"""Image build tests; `builder_datacenter` is the kubernetes datacenter with a builder they share."""

from __future__ import annotations

from pathlib import Path

from datacenters.models import Datacenter, Engine, StorageKind

REGISTRY = "r.example:5000"


def builder_datacenter(root: Path) -> Datacenter:
    """Datacenter `kdc`: kubernetes (no cluster needed for the API), hostPath PFS at `root`, Kaniko set."""
    (root / "home").mkdir(parents=True)
    (root / "public").mkdir()
    return Datacenter.objects.create(
        name="kdc",
        engine=Engine.KUBERNETES,
        kubeconfig="apiVersion: v1\nkind: Config\n",
        storage_kind=StorageKind.HOSTPATH,
        host_path=str(root),
        storage_root=str(root),
        builder_image=f"{REGISTRY}/tools/kaniko:1",
        cpu_image=f"{REGISTRY}/paddle:3.0.0",
    )
