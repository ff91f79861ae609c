"""PaddleCloud client package (no Django here), in four floors, each importing only the floors below it.

- `ctl`: paddlectl, click commands over the SDK (the `paddlectl` script runs `paddlecloud.cli:main`);
- `sdk`: the library a script uses (session, jobs, files, image builds, errors);
- `runtime`: what runs inside a job (launcher, launch env, gloo store, metrics, data tools);
- `contract`: every rule both sides of the wire know (spec, quantities, job env, states, log times, the log cap and
  the venv cache that the portal and the launcher both use, ...).

User code keeps its documented names: `from paddlecloud import PaddleJob, metrics`, `paddlecloud.trainer_id()`,
`from paddlecloud.dataset import split` (MOVED below says where each documented module now lives).
"""

from __future__ import annotations

import importlib
import sys
from importlib.abc import Loader, MetaPathFinder
from importlib.machinery import ModuleSpec, PathFinder
from types import ModuleType
from typing import Any

# A documented module path -> the module that now holds it. Both names are the same module object.
MOVED = {
    "paddlecloud.dataset": "paddlecloud.runtime.dataset",
    "paddlecloud.recordio": "paddlecloud.runtime.recordio",
    "paddlecloud.metrics": "paddlecloud.runtime.metrics",
    "paddlecloud.ctl.errors": "paddlecloud.sdk.errors",
    "paddlecloud.ctl.images": "paddlecloud.sdk.images",
}
# A public name of `paddlecloud` -> the module that defines it.
NAMES = {
    "__version__": "paddlecloud.contract.version",
    "trainer_id": "paddlecloud.runtime.dataset",
    "trainers": "paddlecloud.runtime.dataset",
    "PaddleJob": "paddlecloud.sdk.job",
    "Experiment": "paddlecloud.sdk.experiments",
    "CephFSVolume": "paddlecloud.sdk.job",
    "dist_train": "paddlecloud.sdk.job",
    "PaddleCloudError": "paddlecloud.sdk.errors",
    "APIError": "paddlecloud.sdk.errors",
    "NetworkError": "paddlecloud.sdk.errors",
    "UsageProblem": "paddlecloud.sdk.errors",
    "ConfigError": "paddlecloud.sdk.errors",
    "JobFailed": "paddlecloud.sdk.errors",
    "params": "paddlecloud.runtime.params",
}


class _MovedModules(MetaPathFinder, Loader):
    """Answers an import of a MOVED path with the module where it lives (asked after the path finder, so
    a real module wins, but before any other: an editable install of another checkout must not)."""

    def find_spec(self, fullname: str, path: Any = None, target: ModuleType | None = None) -> ModuleSpec | None:
        return ModuleSpec(fullname, self) if fullname in MOVED else None

    def create_module(self, spec: ModuleSpec) -> ModuleType:
        module = importlib.import_module(MOVED[spec.name])
        spec.loader_state = module.__spec__  # the import system sets __spec__ to the alias's; put it back below
        return module

    def exec_module(self, module: ModuleType) -> None:
        if module.__spec__ is not None and module.__spec__.loader_state is not None:
            module.__spec__ = module.__spec__.loader_state


if not any(isinstance(finder, _MovedModules) for finder in sys.meta_path):
    _after = next((i + 1 for i, finder in enumerate(sys.meta_path) if finder is PathFinder), len(sys.meta_path))
    sys.meta_path.insert(_after, _MovedModules())


def __getattr__(name: str) -> Any:
    # Lazy so `import paddlecloud` stays instant inside jobs: nothing loads until a name is used.
    if name in NAMES:
        return getattr(importlib.import_module(NAMES[name]), name)
    if f"{__name__}.{name}" in MOVED:  # `paddlecloud.metrics.log(...)` after a bare `import paddlecloud`
        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module 'paddlecloud' has no attribute {name!r}")
