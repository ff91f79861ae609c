"""The engine table, beside `Datacenter.engine`: each engine's name and where its classes live.

Classes are named by dotted path and imported on first use (Django's import_string): the engines live
in the jobs app, one floor up, and the kubernetes engine imports the kubernetes client, which costs most
of a second that the portal's processes must not pay at start.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from django.db import models
from django.utils.module_loading import import_string

if TYPE_CHECKING:
    from datacenters.models import Datacenter


class EngineName(models.TextChoices):
    """The engine choices of a datacenter: the keys of ENGINES below."""

    LOCAL = "local", "local (processes on the worker's host)"
    KUBERNETES = "kubernetes", "Kubernetes"


class EngineRules(Protocol):
    """What an engine requires of a datacenter and a job spec (jobs/engines/rules.py is the base the engines extend)."""

    @classmethod
    def validate_datacenter(cls, datacenter: Datacenter) -> dict[str, str]: ...

    @classmethod
    def check_spec(cls, datacenter: Datacenter, spec: dict[str, Any]) -> None: ...

    @classmethod
    def check_builds(cls, datacenter: Datacenter) -> None: ...

    @classmethod
    def prepare_new(cls, datacenter: Datacenter) -> None: ...

    @classmethod
    def host_report(cls) -> str: ...

    @classmethod
    def detect_gpus(cls) -> list[str]: ...


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
