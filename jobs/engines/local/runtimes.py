"""Runtime environments of the local engine (its "image"): which one a job runs in, and what it needs.

A runtime is a base venv (its requirements + the client package) that the worker builds once per host
under `<cache>/runtimes/` and jobs only read. A package's `requirements.txt` becomes a layer on that
base (see paddlecloud.contract.venvcache), built by the job's launcher under `<cache>/layers/<site>/user-<id>/`:
one directory per user of this portal (settings.PADDLECLOUD_SITE), so code run by one user's `pip install`
(setup.py) can never write into an environment another user's job runs. `runtime_for(job)` says what the job's
sandbox must expose.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path

from django.conf import settings
from paddlecloud.contract import venvcache
from paddlecloud.contract.jobenv import env_name

from datacenters.models import Datacenter
from jobs.models import Job, Runtime

DEFAULT_RUNTIME = "default"
DEFAULT_REQUIREMENTS = "paddlepaddle==3.0.0\nprotobuf<7\n"
MAX_REQUIREMENTS_BYTES = 1 << 20


class RuntimeUnavailable(Exception):
    """The job's runtime cannot be made ready (the message says why)."""


@dataclass(frozen=True)
class RuntimePaths:
    """What one job process needs of its runtime; the sandbox binds exactly these."""

    python: str  # run `python -m paddlecloud.runtime.launcher` with this interpreter
    readonly: list[str]  # the base venv, its interpreter's install prefix, a ready layer
    writable_cache: str | None  # the user's layer cache, only while a layer must still be installed
    env: dict[str, str] = field(default_factory=dict)  # for the launcher (JobEnv.venv_cache)


def cache_root() -> Path:
    return Path(settings.PADDLECLOUD_VENV_CACHE) if settings.PADDLECLOUD_VENV_CACHE else venvcache.default_cache_dir()


def client_dir() -> Path:
    return Path(settings.BASE_DIR) / "client"


def names(datacenter: Datacenter) -> list[str]:
    return [DEFAULT_RUNTIME, *Runtime.objects.filter(datacenter=datacenter).values_list("name", flat=True)]


def requirements_of(datacenter: Datacenter, name: str) -> str:
    if name in ("", DEFAULT_RUNTIME):
        return DEFAULT_REQUIREMENTS
    runtime = Runtime.objects.filter(datacenter=datacenter, name=name).first()
    if runtime is None:
        raise RuntimeUnavailable(f"runtime {name!r} is not registered on datacenter {datacenter.name} any more")
    return runtime.requirements


def ensure_base(datacenter: Datacenter, name: str, log: venvcache.Log = lambda line: None) -> Path:
    """The base venv of runtime `name`, built here (by the worker, never by a job) on first use."""
    name = name or DEFAULT_RUNTIME
    try:
        requirements = requirements_of(datacenter, name)
        return venvcache.ensure_base(name, requirements, client_dir(), cache_root() / "runtimes", log)
    except (venvcache.VenvError, OSError) as exc:
        raise RuntimeUnavailable(f"runtime {name!r} could not be built: {exc}") from None


def layer_cache(job: Job) -> Path:
    # Per user of this portal: a layer is built by the user's own code (setup.py), so no one else may run in it,
    # not even the user of the same id on another portal of the host.
    return cache_root() / "layers" / settings.PADDLECLOUD_SITE / f"user-{job.owner_id}"


def runtime_for(job: Job, package: Path) -> RuntimePaths:
    """Build the job's base if needed and say what its processes need: python, read-only paths, a cache."""
    base = ensure_base(job.datacenter, str(job.spec.get("image") or ""))
    python = base / "bin" / "python"
    # A venv's python is a link to the interpreter it was made from: that install must be visible too.
    readonly = [str(base), str(Path(sys.base_prefix).resolve())]
    cache = layer_cache(job)
    writable: str | None = None
    requirements = package / "requirements.txt"
    if requirements.is_file():
        if requirements.stat().st_size > MAX_REQUIREMENTS_BYTES:
            raise RuntimeUnavailable(f"requirements.txt is over {MAX_REQUIREMENTS_BYTES} bytes")
        # The launcher keys its layer by the resolved path of the runtime it runs in: the same here.
        layer = cache / venvcache.layer_key(requirements.read_bytes(), base.resolve())
        if (layer / venvcache.COMPLETE_MARKER).is_file():
            readonly.append(str(layer))
        else:
            cache.mkdir(parents=True, exist_ok=True)
            writable = str(cache)
    return RuntimePaths(str(python), readonly, writable, {env_name("venv_cache"): str(cache)})
