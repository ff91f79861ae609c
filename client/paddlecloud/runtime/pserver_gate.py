"""A PS trainer waits for its pservers inside Paddle's ``init_worker``, so its own start overlaps theirs.

Trainer 0 pushes its parameters inside ``fleet.init_worker()`` and fails (``push dense param failed``) unless
every pserver already accepts TCP; Paddle's own ``wait_server_ready()`` does nothing (paddle-notes trap 3). The
launcher used to wait before running the entry at all, so a trainer imported Paddle and built its program only
after the pservers had done the same: on a job of half-core processes two Paddle starts of ~10 s each, one after
the other. Now the launcher runs a PS trainer's entry at once with ``startup/`` first on its PYTHONPATH; that
folder's ``sitecustomize`` (Python runs it at the start of every interpreter, the entry's children too) calls
``install()``, which wraps ``Fleet.init_worker`` as Paddle's module defining it is imported: the wait happens
there, right before the push, with the same bound (``PADDLECLOUD_PSERVER_WAIT_TIMEOUT``), message and exit code
(69) as the launcher's wait had. Python run with ``-I`` or ``-S`` skips ``sitecustomize``, and so the wait: such
a script calls ``paddlecloud.runtime.pserver_gate.wait_from_env()`` itself before ``init_worker``.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import importlib.util
import os
import socket
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from functools import wraps
from pathlib import Path
from types import ModuleType
from typing import Any

from paddlecloud.contract import exitcodes, jobenv

STARTUP_DIR = Path(__file__).resolve().parent / "startup"
# Where Paddle defines its Fleet class: 3.x, then 2.x.
FLEET_MODULES = ("paddle.distributed.fleet.fleet", "paddle.distributed.fleet.base.fleet_base")
TIMEOUT_VARIABLE = jobenv.env_name("pserver_wait_timeout")
DEFAULT_TIMEOUT = 300.0
WAITED_MARK = "_paddlecloud_waits_for_pservers"


class PserverUnreachable(Exception):
    """A pserver did not accept TCP within the bound."""


def wait_for_pservers(endpoints: Sequence[tuple[str, int]], timeout: float, say: Callable[[str], None]) -> None:
    """Block until every pserver accepts TCP, at most ``timeout`` seconds in all."""
    t0 = time.monotonic()
    deadline = t0 + timeout
    for i, (ip, port) in enumerate(endpoints):
        while True:
            try:
                socket.create_connection((ip, port), timeout=2).close()
                break
            except OSError:
                if time.monotonic() >= deadline:
                    raise PserverUnreachable(
                        f"pserver {i} ({ip}:{port}) did not accept connections within {timeout:g}s"
                    ) from None
                time.sleep(0.2)
    say(f"all {len(endpoints)} pserver(s) accept connections ({time.monotonic() - t0:.1f}s)")


def pserver_endpoints(env: Mapping[str, str]) -> list[tuple[str, int]]:
    """(ip, port) of every pserver, in index order, from the launcher's PADDLE_PSERVERS_IP_PORT_LIST."""
    out = []
    for endpoint in filter(None, env.get("PADDLE_PSERVERS_IP_PORT_LIST", "").split(",")):
        host, port = endpoint.rsplit(":", 1)
        out.append((host, int(port)))
    return out


def _say(message: str) -> None:
    # The entry's stderr is the job's log (merged with stdout); the launcher's own lines look the same.
    sys.stderr.write(f"[paddlecloud-launch] {message}\n")
    sys.stderr.flush()


def wait_from_env() -> None:
    """The wait as the launcher configured it; past the bound the process ends as the launcher's wait did."""
    try:
        timeout = float(os.environ.get(TIMEOUT_VARIABLE) or DEFAULT_TIMEOUT)
        wait_for_pservers(pserver_endpoints(os.environ), timeout, _say)
    except (PserverUnreachable, ValueError) as e:
        _say(f"error: {e}")
        sys.stdout.flush()
        # Not SystemExit: Paddle's exit handlers would talk to the pservers that are not there.
        os._exit(exitcodes.PSERVER_UNREACHABLE)


def _gate(cls: type) -> None:
    """Wrap cls.init_worker so that every pserver accepts TCP before Paddle's own runs (each call waits)."""
    original = getattr(cls, "init_worker", None)
    if original is None or getattr(original, WAITED_MARK, False):
        return

    @wraps(original)
    def init_worker(*args: Any, **kwargs: Any) -> Any:
        wait_from_env()
        return original(*args, **kwargs)

    setattr(init_worker, WAITED_MARK, True)
    cls.init_worker = init_worker  # type: ignore[attr-defined]


class _GatingLoader(importlib.abc.Loader):
    """Runs Paddle's module as its own loader would, then gates its Fleet class."""

    def __init__(self, loader: importlib.abc.Loader) -> None:
        self._loader = loader

    def __getattr__(self, name: str) -> Any:
        # The module's __loader__ is this one: get_source, get_filename, is_package, ... stay its own loader's.
        return getattr(self._loader, name)

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType | None:
        return self._loader.create_module(spec)

    def exec_module(self, module: ModuleType) -> None:
        self._loader.exec_module(module)
        fleet_class = getattr(module, "Fleet", None)
        if isinstance(fleet_class, type):
            _gate(fleet_class)


class _FleetFinder(importlib.abc.MetaPathFinder):
    """Finds nothing itself: hands Paddle's Fleet module, found by the other finders, to _GatingLoader."""

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname not in FLEET_MODULES:
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(fullname, path, target)
            if spec is not None:
                if spec.loader is not None:
                    spec.loader = _GatingLoader(spec.loader)
                return spec
        return None


def install() -> None:
    """Gate Fleet.init_worker in this process: now if Paddle is already imported, else when it is."""
    if any(isinstance(finder, _FleetFinder) for finder in sys.meta_path):
        return
    sys.meta_path.insert(0, _FleetFinder())
    for name in FLEET_MODULES:
        fleet_class = getattr(sys.modules.get(name), "Fleet", None)
        if isinstance(fleet_class, type):
            _gate(fleet_class)


def run_next_sitecustomize() -> None:
    """Run the sitecustomize that ours hides (a venv's or the system's), as Python would have without ours."""
    paths = [p for p in sys.path if Path(p or ".").resolve() != STARTUP_DIR]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", paths)
    if spec is None or spec.loader is None:
        return
    module = importlib.util.module_from_spec(spec)
    sys.modules["sitecustomize"] = module
    spec.loader.exec_module(module)


def entry_pythonpath(pythonpath: str | None) -> str:
    """A PS trainer entry's PYTHONPATH: the startup folder first, then what it had."""
    return os.pathsep.join(filter(None, [str(STARTUP_DIR), pythonpath]))
