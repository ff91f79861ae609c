"""Engines report, the domain records: no module of jobs/engines writes a job's or a worker's row.

(That no engine imports the modules that do is an import contract: pyproject.toml, `make lint`.)
"""

from __future__ import annotations

import ast
from pathlib import Path

import jobs.engines
from jobs.engines.base import Engine
from jobs.engines.capabilities import (
    ChangeVersions,
    FinalWorkers,
    ImageBuilds,
    QueueVisibility,
    QuotaSync,
    Reaper,
    RegistryLogins,
    UsageMeter,
    UsageSampler,
    WorkerEvents,
    WorkerSpans,
)
from jobs.engines.kubernetes.engine import KubernetesEngine
from jobs.engines.local.engine import LocalEngine

ENGINES = Path(jobs.engines.__file__).parent
ROW_WRITES = {"save", "delete", "update", "create", "get_or_create", "update_or_create", "bulk_create", "bulk_update"}
# Tables an engine keeps for itself, as it keeps engine_data: the local engine's lease of host GPUs.
ENGINE_TABLES = {"GpuAssignment"}


def _modules() -> list[tuple[str, ast.Module]]:
    found = []
    for path in sorted(ENGINES.rglob("*.py")):
        name = path.relative_to(ENGINES).as_posix()
        found.append((name, ast.parse(path.read_text(), name)))
    return found


def _through_a_manager(node: ast.expr) -> bool:
    """`X.objects....` somewhere along the chain the call hangs on (a queryset or manager, not a dict),
    X not one of the engines' own tables."""
    while isinstance(node, ast.Attribute | ast.Call):
        if isinstance(node, ast.Attribute) and node.attr == "objects":
            return not (isinstance(node.value, ast.Name) and node.value.id in ENGINE_TABLES)
        node = node.value if isinstance(node, ast.Attribute) else node.func
    return False


def test_no_engine_module_writes_a_row() -> None:
    writes = [
        (name, node.lineno, node.func.attr)
        for name, tree in _modules()
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr in ROW_WRITES
        and (node.func.attr == "save" or _through_a_manager(node.func.value))
    ]
    assert writes == []


CAPABILITIES = [
    ChangeVersions, FinalWorkers, ImageBuilds, QueueVisibility, QuotaSync, Reaper, RegistryLogins, UsageMeter,
    UsageSampler, WorkerEvents, WorkerSpans,
]  # fmt: skip


def _members(protocol: type) -> set[str]:
    return {name for name in vars(protocol) if not name.startswith("_")}


def _offers(engine: type, protocol: type) -> bool:
    """What isinstance(engine_object, protocol) answers, read from the class (no datacenter needed)."""
    return all(hasattr(engine, name) for name in _members(protocol))


def test_the_base_holds_no_capability_so_none_can_hide_an_engine_s_own() -> None:
    """Capabilities are protocols an engine implements (jobs.engines.capabilities), not base-class defaults: the
    Kubernetes engine's cluster methods (builds, registry logins, quotas) were once hidden by no-op defaults."""
    offered = {name for proto in CAPABILITIES for name in _members(proto)}
    assert offered, "the capabilities name their methods"
    assert not offered & set(vars(Engine)), "a capability has a default on the base class"


def test_each_engine_offers_the_capabilities_it_implements() -> None:
    kubernetes = {proto.__name__ for proto in CAPABILITIES if _offers(KubernetesEngine, proto)}
    local = {proto.__name__ for proto in CAPABILITIES if _offers(LocalEngine, proto)}
    assert {"ImageBuilds", "RegistryLogins", "QuotaSync", "QueueVisibility", "ChangeVersions", "Reaper"} <= kubernetes
    assert {"UsageSampler", "UsageMeter", "FinalWorkers", "WorkerEvents"} <= local
    assert not {"ImageBuilds", "RegistryLogins", "QuotaSync", "QueueVisibility", "Reaper"} & local
