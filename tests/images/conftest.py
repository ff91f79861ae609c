"""Fixtures for image build tests: a kubernetes datacenter with a builder (no cluster needed for the API),
alice's package folder in her home, and her registry secret."""

from __future__ import annotations

from pathlib import Path

import pytest
from django.contrib.auth.models import User

from jobs.engines import EngineName as Engine
from portal.datacenters.models import Datacenter, StorageKind
from portal.registry.models import RegistrySecret

REGISTRY = "r.example:5000"
PACKAGE = "/pfs/kdc/home/alice/jobs/fit"


@pytest.fixture
def kdc(db: None, tmp_path: Path) -> Datacenter:
    root = tmp_path / "pfs" / "kdc"
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


@pytest.fixture
def alice_package(kdc: Datacenter, alice: User) -> Path:
    folder = Path(kdc.storage_root) / "home" / "alice" / "jobs" / "fit"
    folder.mkdir(parents=True)
    (folder / "train.py").write_text("print('training')\n")
    return folder


@pytest.fixture
def alice_secret(alice: User) -> RegistrySecret:
    return RegistrySecret.objects.create(owner=alice, name="mine", server=REGISTRY, username="alice", password="pw")


def build_request(**overrides: str) -> dict[str, str]:
    return {"package": PACKAGE, "image": f"{REGISTRY}/alice/fit:1", "registry": "mine", **overrides}
