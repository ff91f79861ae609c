"""Per-host cache of job virtualenvs keyed by the hash of requirements.txt, safe under concurrency."""

from __future__ import annotations

import fcntl
import hashlib
import os
import platform
import shutil
import subprocess
import sys
import sysconfig
import time
from collections.abc import Callable
from pathlib import Path

# Written last, after pip succeeded: a venv dir without it is a partial install to be wiped.
COMPLETE_MARKER = ".paddlecloud-complete"


class VenvError(RuntimeError):
    """Creating the venv or installing the requirements failed."""


def default_cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "paddlecloud" / "venvs"


def base_python() -> str:
    # Inside a venv sys.executable is the venv's python; a job venv must hang off the real
    # interpreter so it does not depend on (or inherit) the launcher's own environment.
    return getattr(sys, "_base_executable", None) or sys.executable


def env_key(requirements: bytes, python: str | None = None) -> str:
    """sha256 over the requirements bytes, the interpreter (version + path) and the platform tag."""
    py = python or base_python()
    h = hashlib.sha256()
    h.update(requirements)
    # The interpreter path is part of the key because a venv links to its base interpreter:
    # two 3.11.7 installs at different paths must not share (or break) each other's venvs.
    version = f"{platform.python_implementation()}-{platform.python_version()}"
    h.update(f"\0{version}|{sysconfig.get_platform()}|{os.path.realpath(py)}".encode())
    return h.hexdigest()[:32]


def _is_complete(venv: Path) -> bool:
    # The python check catches a venv whose base interpreter was removed or upgraded in place.
    return (venv / COMPLETE_MARKER).is_file() and os.access(venv / "bin" / "python", os.X_OK)


def _run_logged(cmd: list[str], cwd: Path, log: Callable[[str], None]) -> int:
    proc = subprocess.Popen(
        cmd,
        cwd=cwd,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        env={**os.environ, "PIP_DISABLE_PIP_VERSION_CHECK": "1", "PIP_NO_INPUT": "1", "PYTHONUNBUFFERED": "1"},
    )
    assert proc.stdout is not None
    for raw in proc.stdout:
        log(raw.decode("utf-8", "replace").rstrip("\n"))
    return proc.wait()


def ensure_venv(
    requirements_file: Path,
    cache_dir: Path | None = None,
    log: Callable[[str], None] = print,
    python: str | None = None,
) -> Path:
    """Return a ready venv for ``requirements_file``, creating it once per host and key."""
    cache = cache_dir or default_cache_dir()
    cache.mkdir(parents=True, exist_ok=True)
    key = env_key(requirements_file.read_bytes(), python)
    venv = cache / key
    if _is_complete(venv):
        log(f"using cached environment {key}")
        return venv
    with open(cache / f"{key}.lock", "a+b") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            log(f"waiting for another job installing environment {key}")
            fcntl.flock(lock, fcntl.LOCK_EX)
        # Re-check under the lock: the job we waited for may have finished the install.
        if _is_complete(venv):
            log(f"using cached environment {key}")
            return venv
        _build(venv, key, requirements_file, python or base_python(), log)
        return venv


def _build(venv: Path, key: str, requirements_file: Path, python: str, log: Callable[[str], None]) -> None:
    t0 = time.monotonic()
    log(f"installing environment {key} from {requirements_file.name} into {venv}")
    # Anything here without the marker is a crashed or killed install: start clean.
    shutil.rmtree(venv, ignore_errors=True)
    if _run_logged([python, "-m", "venv", str(venv)], requirements_file.parent, log) != 0:
        raise VenvError(f"python -m venv {venv} failed")
    pip = [str(venv / "bin" / "python"), "-m", "pip", "install", "--progress-bar", "off"]
    if _run_logged([*pip, "-r", str(requirements_file)], requirements_file.parent, log) != 0:
        raise VenvError(f"pip install -r {requirements_file.name} failed (see the pip output above)")
    (venv / COMPLETE_MARKER).write_text(f"{time.strftime('%Y-%m-%dT%H:%M:%S%z')}\n")
    log(f"environment {key} ready in {time.monotonic() - t0:.1f}s")


def activate(env: dict[str, str], venv: Path) -> dict[str, str]:
    """Return ``env`` with the venv's bin first on PATH and VIRTUAL_ENV set (what `activate` does)."""
    out = dict(env)
    out["VIRTUAL_ENV"] = str(venv)
    out["PATH"] = os.pathsep.join([str(venv / "bin"), env.get("PATH", os.defpath)])
    out.pop("PYTHONHOME", None)
    return out
