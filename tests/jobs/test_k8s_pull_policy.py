"""Which images the kubelet must ask the registry for, even when the node has them cached (pure)."""

from __future__ import annotations

import pytest

from datacenters.models import Datacenter
from jobs.engines.kubernetes.manifests import pull_policy

DC = Datacenter(name="k", cpu_image="r.io/paddle:3.0.0", gpu_image="r.io/paddle:3.0.0-gpu")


@pytest.mark.parametrize(
    ("image", "policy"),
    [
        ("r.io/paddle:3.0.0", "IfNotPresent"),  # the datacenter's own images are everyone's
        ("r.io/paddle:3.0.0-gpu", "IfNotPresent"),
        ("r.io/alice/fit:1", "Always"),  # a user's image: their login is checked at every start
        ("r.io/paddle:latest", "Always"),
    ],
)
def test_only_the_datacenters_images_may_come_from_the_nodes_cache(image: str, policy: str) -> None:
    assert pull_policy(image, DC) == policy
