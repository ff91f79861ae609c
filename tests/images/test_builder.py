"""images.builder asks the datacenter's engine for its builders (capabilities.ImageBuilds), never makes one itself."""

from __future__ import annotations

from pathlib import Path

import pytest

from datacenters.models import Datacenter, Engine
from images import builder
from jobs.engines.base import EngineError
from jobs.engines.capabilities import ImageBuilds


def test_a_kubernetes_datacenter_offers_builds_in_its_cluster(kdc: Datacenter) -> None:
    cluster = builder.cluster_of(kdc)
    assert isinstance(cluster, ImageBuilds)
    assert callable(cluster.start_builder) and callable(cluster.look_at_builders) and callable(cluster.delete_builder)


def test_a_local_datacenter_offers_none(db: None, tmp_path: Path) -> None:
    local = Datacenter.objects.create(name="ldc", engine=Engine.LOCAL, storage_root=str(tmp_path))
    with pytest.raises(EngineError, match="ldc cannot build images"):
        builder.cluster_of(local)
