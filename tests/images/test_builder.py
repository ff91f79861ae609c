"""images.builder asks the datacenter's engine for what builds need (Engine.image_builder), never builds one."""

from __future__ import annotations

from pathlib import Path

import pytest

from datacenters.models import Datacenter, Engine
from images import builder
from jobs.engines.base import EngineError


def test_a_kubernetes_datacenter_offers_builds_in_its_cluster(kdc: Datacenter) -> None:
    cluster = builder.cluster_of(kdc)
    assert callable(cluster.ensure_user_namespace) and callable(cluster.ensure_registry_secret)
    assert callable(cluster.ensure_builder_egress)


def test_a_local_datacenter_offers_none(db: None, tmp_path: Path) -> None:
    local = Datacenter.objects.create(name="ldc", engine=Engine.LOCAL, storage_root=str(tmp_path))
    with pytest.raises(EngineError, match="ldc cannot build images"):
        builder.cluster_of(local)
