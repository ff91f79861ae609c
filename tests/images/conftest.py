"""Fixtures for image build tests: a kubernetes datacenter with a builder (no cluster needed for the API),
alice's package folder in her home, and her registry secret."""

from __future__ import annotations

from pathlib import Path

import pytest
from django.contrib.auth.models import User

from datacenters.models import Datacenter
from registry.models import RegistrySecret
from tests.images import REGISTRY, builder_datacenter

PACKAGE = "/pfs/kdc/home/alice/jobs/fit"


@pytest.fixture
def kdc(db: None, tmp_path: Path) -> Datacenter:
    return builder_datacenter(tmp_path / "pfs" / "kdc")


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
