"""Runtime environments of the local engine (its "image"): which one a job runs in, and what it needs.

A runtime is a base venv (its requirements + the client package) that the worker builds once per host
under `<cache>/runtimes/` and jobs only read. A package's `requirements.txt` becomes a layer on that
base (see paddlecloud.contract.venvcache) under `<cache>/layers/<site>/user-<id>/`: one directory per user of
this portal (settings.PADDLECLOUD_SITE), so code run by one user's `pip install` (setup.py) can never write into
an environment another user's job runs. The layer is built by a step of its own before the job's processes
start (paddlecloud.runtime.layer, in a sandbox where only that layer's folder and lock are writable: the
supervisor's `start_layer_build`); the job's processes then see it read-only, never writing what they run in.
`runtime_for(job)` says what a process's sandbox must expose.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import stat
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from django.conf import settings
from paddlecloud.contract import venvcache
from paddlecloud.contract.jobenv import env_name

from datacenters.models import Datacenter
from jobs.models import Job, Runtime
from storage import measure

DEFAULT_RUNTIME = "default"
DEFAULT_REQUIREMENTS = "paddlepaddle==3.0.0\nprotobuf<7\n"
MAX_REQUIREMENTS_BYTES = 1 << 20
KEEP_LAYERS = 5  # complete layers kept per user (the last used); they count against the storage quota
JUST_MADE_SECONDS = 120  # an unfinished layer folder younger than this is one a job is about to install (_just_made)
MAX_LAYER_ENTRIES = 2_000_000  # a user's layer cache walked for the quota stops here (then a lower bound)


class RuntimeUnavailable(Exception):
    """The job's runtime cannot be made ready (the message says why)."""


@dataclass(frozen=True)
class RuntimePaths:
    """What one job process needs of its runtime; the sandbox binds exactly these."""

    python: str  # run `python -m paddlecloud.runtime.launcher` with this interpreter
    readonly: list[str]  # the base venv, its interpreter's install prefix, a ready layer
    # The job's layer while it is not complete yet (its folder, and "<folder>.lock" beside it): the build step
    # writes only these (the rest of the user's layer cache stays out of its reach); no job process runs then.
    building: str | None
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
    return layer_cache_of(job.owner_id)


def layer_cache_of(owner_id: int) -> Path:
    # Per user of this portal: a layer is built by the user's own code (setup.py), so no one else may run in it,
    # not even the user of the same id on another portal of the host.
    return cache_root() / "layers" / settings.PADDLECLOUD_SITE / f"user-{owner_id}"


def layer_bytes(owner_id: int, seconds: float) -> int:
    """What the user's layer cache holds (their build steps write it: outside their home, so the storage quota
    adds it), by a walk that follows no link, stopped after `seconds` (then a lower bound)."""
    try:
        top = os.open(layer_cache_of(owner_id), os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    except OSError:
        return 0  # none yet
    try:
        return measure.measure_tree(top, "\0", MAX_LAYER_ENTRIES, seconds).bytes
    finally:
        os.close(top)


def tidy_layers(owner_id: int) -> int:
    """Remove from the user's layer cache what is no layer in use: a layer left half-built (no COMPLETE_MARKER)
    that no job is building (its lock is free) and the worker did not just make for one, complete layers past the
    KEEP_LAYERS last used (a job that needs one again builds it again), and anything else a job wrote there (only
    `<key>` layers, their empty
    `<key>.lock` files, kept even alone: one may be taken before its layer's folder exists, and the launcher's
    `_pythonpath` of links belong). Called as a job's processes are gone; how many entries went."""
    cache = layer_cache_of(owner_id)
    try:
        entries = list(os.scandir(cache))
    except OSError:
        return 0
    removed = _tidy_pythonpath(cache / "_pythonpath")
    last = {e.name: _last_used(Path(e.path)) for e in entries if e.is_dir(follow_symlinks=False)}
    used = {name: when for name, when in last.items() if when is not None}  # the complete layers, by last use
    kept_layers = set(sorted(used, key=used.__getitem__, reverse=True)[:KEEP_LAYERS])
    for entry in entries:
        keep = entry.name == "_pythonpath" and entry.is_dir(follow_symlinks=False)
        if entry.name.endswith(".lock") and entry.is_file(follow_symlinks=False):
            keep = entry.stat(follow_symlinks=False).st_size == 0
        elif entry.is_dir(follow_symlinks=False) and not keep:
            unfinished = entry.name not in used
            keep = entry.name in kept_layers or (unfinished and (_being_built(cache, entry.name) or _just_made(entry)))
        if keep:
            continue
        if entry.is_dir(follow_symlinks=False):
            shutil.rmtree(entry.path, ignore_errors=True)  # fd-based on Linux: a link inside is removed, not followed
        else:
            Path(entry.path).unlink(missing_ok=True)
        removed += 1
    return removed


def _just_made(entry: os.DirEntry[str]) -> bool:
    """A layer folder the worker made for a job about to install it (runtime_for), before that job's build step
    takes its lock: kept, or that build's sandbox would find no folder to bind."""
    return time.time() - entry.stat(follow_symlinks=False).st_mtime < JUST_MADE_SECONDS


def _last_used(layer: Path) -> float | None:
    """When a job last started on the layer (runtime_for touches its marker); None where it is not complete."""
    try:
        marker = (layer / venvcache.COMPLETE_MARKER).lstat()
    except OSError:
        return None
    return marker.st_mtime if stat.S_ISREG(marker.st_mode) else None


def _tidy_pythonpath(folder: Path) -> int:
    """The launcher's `_pythonpath/<hash>/paddlecloud` links (venvcache.package_pythonpath): a regular file in it
    is a job's, not the launcher's."""
    removed = 0
    for path, _, files in os.walk(folder):  # os.walk follows no link to a folder
        for name in files:
            if (Path(path) / name).is_file() and not (Path(path) / name).is_symlink():
                (Path(path) / name).unlink(missing_ok=True)
                removed += 1
    return removed


def _being_built(cache: Path, key: str) -> bool:
    """A build step holds the layer's lock (venvcache's flock on `<key>.lock`) while it installs it."""
    try:
        fd = os.open(cache / f"{key}.lock", os.O_RDONLY | os.O_NOFOLLOW)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)  # closing drops a lock taken here
    return False


def runtime_for(job: Job, package: Path) -> RuntimePaths:
    """Build the job's base if needed and say what its processes need: python, read-only paths, a cache."""
    base = ensure_base(job.datacenter, str(job.spec.get("image") or ""))
    python = base / "bin" / "python"
    # A venv's python is a link to the interpreter it was made from: that install must be visible too.
    readonly = [str(base), str(Path(sys.base_prefix).resolve())]
    cache = layer_cache(job)
    building: str | None = None
    requirements = package / "requirements.txt"
    if requirements.is_file():
        if requirements.stat().st_size > MAX_REQUIREMENTS_BYTES:
            raise RuntimeUnavailable(f"requirements.txt is over {MAX_REQUIREMENTS_BYTES} bytes")
        # The build step (and the launcher) key the layer by the resolved path of the runtime it runs in: the same here.
        layer = cache / venvcache.layer_key(requirements.read_bytes(), base.resolve())
        if (layer / venvcache.COMPLETE_MARKER).is_file():
            readonly.append(str(layer))
            with contextlib.suppress(OSError):  # its last use: tidy_layers keeps the KEEP_LAYERS last used
                os.utime(layer / venvcache.COMPLETE_MARKER, follow_symlinks=False)
        else:
            building = str(_layer_to_build(cache, layer))
    return RuntimePaths(str(python), readonly, building, {env_name("venv_cache"): str(cache)})


def _layer_to_build(cache: Path, layer: Path) -> Path:
    """The layer's folder and lock file, made here (by the worker) so the sandbox can bind just them: a real folder
    and a regular file, whatever a job of an older portal left at their names (the cache was writable to it)."""
    cache.mkdir(parents=True, exist_ok=True)
    if os.geteuid() == 0 and cache.lstat().st_uid != 0:
        os.lchown(cache, 0, 0)  # an older portal gave the whole cache to the job's uid
    lock = cache / f"{layer.name}.lock"
    for path, wanted in ((layer, stat.S_ISDIR), (lock, stat.S_ISREG)):
        try:
            mode = path.lstat().st_mode
        except FileNotFoundError:
            continue
        if wanted(mode):
            continue
        if stat.S_ISDIR(mode):
            shutil.rmtree(path)
        else:
            path.unlink()
    layer.mkdir(exist_ok=True)
    os.close(os.open(lock, os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644))
    return layer
