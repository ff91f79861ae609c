"""Engines by name: the only place that knows which engine class serves which datacenter."""

from __future__ import annotations

from importlib import import_module

from jobs.engines.base import Engine
from portal.datacenters.models import Datacenter

ENGINES = {
    "local": "jobs.engines.local.LocalEngine",
    "kubernetes": "jobs.engines.kubernetes.KubernetesEngine",
}


def engine_for(datacenter: Datacenter) -> Engine:
    module_name, _, class_name = ENGINES[datacenter.engine].rpartition(".")
    engine_class = getattr(import_module(module_name), class_name)
    engine: Engine = engine_class(datacenter)
    return engine
