"""Engines report, the domain records: no module of jobs/engines writes a job's or a worker's row.

(That no engine imports the modules that do is an import contract: pyproject.toml, `make lint`.)
"""

from __future__ import annotations

import ast
from pathlib import Path

import jobs.engines
from jobs.engines.base import Engine
from jobs.engines.kubernetes.engine import KubernetesEngine
from jobs.engines.kubernetes.objects import ClusterObjects

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


def test_the_kubernetes_engine_s_cluster_methods_win_over_the_base_s_defaults() -> None:
    """Engine's no-op defaults (image_builder, revoke_registry_secret) must not hide the cluster's own."""
    shared = set(vars(Engine)) & set(vars(ClusterObjects)) - {"__dict__", "__weakref__", "__module__", "__doc__"}
    assert shared, "the base and the cluster mixin share capabilities"
    for name in shared:
        assert getattr(KubernetesEngine, name) is not getattr(Engine, name), name
