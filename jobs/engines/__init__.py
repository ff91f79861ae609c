"""Engines by name: the one table of engines, their classes and their rules; nothing else says which is which.

Both classes are named by dotted path and imported on first use: the kubernetes engine imports the
kubernetes client, which costs most of a second, and the portal's processes must not pay it at start.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from django.db import models
from django.utils.module_loading import import_string

if TYPE_CHECKING:
    from datacenters.models import Datacenter
    from jobs.engines.base import Engine
    from jobs.engines.rules import EngineRules


class EngineName(models.TextChoices):
    """The engine choices of a datacenter: the keys of ENGINES below."""

    LOCAL = "local", "local (processes on the worker's host)"
    KUBERNETES = "kubernetes", "Kubernetes"


@dataclass(frozen=True)
class EngineEntry:
    engine: str  # the Engine class: starts, watches and stops jobs
    rules: str  # the EngineRules class: what the engine requires of a datacenter and a job spec (light)


ENGINES: dict[str, EngineEntry] = {
    EngineName.LOCAL: EngineEntry("jobs.engines.local.engine.LocalEngine", "jobs.engines.local.rules.LocalRules"),
    EngineName.KUBERNETES: EngineEntry(
        "jobs.engines.kubernetes.engine.KubernetesEngine", "jobs.engines.kubernetes.rules.KubernetesRules"
    ),
}
assert set(ENGINES) == set(EngineName.values), "every engine choice has one entry in ENGINES"


def rules_for(engine_name: str) -> type[EngineRules]:
    """The rules of the engine named `engine_name` (a datacenter's `engine`)."""
    rules: type[EngineRules] = import_string(ENGINES[engine_name].rules)
    return rules


def engine_for(datacenter: Datacenter) -> Engine:
    engine: Engine = import_string(ENGINES[datacenter.engine].engine)(datacenter)
    return engine
