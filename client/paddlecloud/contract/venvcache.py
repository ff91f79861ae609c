"""Per-host runtime environments: a base venv (Paddle + client) built once, and thin requirement layers on it.

A *base* is a venv built from a runtime's requirements plus the client package, once per host and
key; jobs only read it. A *layer* is a venv without packages of its own whose site-packages has a
``.pth`` that adds the base's site-packages, so ``pip install -r requirements.txt`` into it installs
only what the base lacks (one small package: seconds, never Paddle again). Both are built under a
per-key file lock and marked complete last, so concurrent first uses build once and a killed build
is wiped and redone.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import platform
import shutil
import site
import subprocess
import sys
import sysconfig
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

# Written last, after pip succeeded: a venv dir without it is a partial install to be wiped.
COMPLETE_MARKER = ".paddlecloud-complete"
# In a base: the hash of the client sources installed in it (refreshed when the client changes).
CLIENT_MARKER = ".paddlecloud-client"
# In a base: its modules are compiled to bytecode (a base built before that was done gets compiled once).
BYTECODE_MARKER = ".paddlecloud-bytecode"
LAYER_PTH = "paddlecloud-base.pth"

Log = Callable[[str], None]


class VenvError(RuntimeError):
    """Creating the venv or installing the requirements failed; the message is what the user sees."""


def default_cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "paddlecloud" / "venvs"


def base_python() -> str:
    # Inside a venv sys.executable is the venv's python; a base venv must hang off the real
    # interpreter so it does not depend on (or inherit) the portal's own environment.
    return getattr(sys, "_base_executable", None) or sys.executable


def env_key(requirements: bytes, python: str | None = None, base: str = "") -> str:
    """sha256 over the requirements bytes, the interpreter (version + path), platform and the base."""
    py = python or base_python()
    h = hashlib.sha256()
    h.update(requirements)
    # The interpreter path is part of the key because a venv links to its base interpreter:
    # two 3.11.7 installs at different paths must not share (or break) each other's venvs.
    version = f"{platform.python_implementation()}-{platform.python_version()}"
    h.update(f"\0{version}|{sysconfig.get_platform()}|{os.path.realpath(py)}|{base}".encode())
    return h.hexdigest()[:32]


def current_base() -> Path:
    """The environment this interpreter runs in: a layer's base when run from a base venv."""
    return Path(os.path.realpath(sys.prefix))


def layer_key(requirements: bytes, base: Path) -> str:
    """Key of the layer for ``requirements`` on ``base`` (the portal computes the same one)."""
    return env_key(requirements, str(base / "bin" / "python"), base=str(base))


def _is_complete(venv: Path) -> bool:
    # The python check catches a venv whose base interpreter was removed or upgraded in place.
    return (venv / COMPLETE_MARKER).is_file() and os.access(venv / "bin" / "python", os.X_OK)


def uv_binary() -> str | None:
    """uv (the fast installer) beside this interpreter (the portal's venv has it) or on PATH; None without it."""
    beside = Path(sys.executable).parent / "uv"
    if os.access(beside, os.X_OK):
        return str(beside)
    return shutil.which("uv")


def base_installer(venv: Path, cache: Path) -> list[str]:
    """The command that installs into a base: uv where it is (0.1-0.2x pip's time for Paddle), else the venv's pip.

    uv's own cache sits beside the bases (one per host, same filesystem, so installs are links, not copies); a
    base is read-only to jobs, so the cache it shares files with is too. Layers keep pip: it sees the base's
    packages through the layer's .pth and installs only what the base lacks, which uv would not."""
    uv = uv_binary()
    if uv is None:
        return [str(venv / "bin" / "python"), "-m", "pip", "install", "--progress-bar", "off"]
    return [uv, "pip", "install", "--python", str(venv / "bin" / "python"), "--cache-dir", str(cache / ".uv-cache")]


def last_error_line(lines: list[str]) -> str:
    """The installer's last error line (pip's ``ERROR:``, uv's ``error:`` or ``×``), else its last non-empty line."""
    text = [line.strip() for line in lines if line.strip()]
    errors = [line for line in text if line.startswith(("ERROR:", "error:", "×"))]
    return (errors or text or ["no output"])[-1][:500]


_PIP_TO_UV = {"PIP_INDEX_URL": "UV_INDEX_URL", "PIP_EXTRA_INDEX_URL": "UV_EXTRA_INDEX_URL",
              "PIP_FIND_LINKS": "UV_FIND_LINKS"}


def _run_logged(cmd: list[str], cwd: Path, log: Log, what: str) -> None:
    """Run ``cmd`` with its output in the log; raise VenvError naming pip's last error line."""
    env = {**os.environ, "PIP_DISABLE_PIP_VERSION_CHECK": "1", "PIP_NO_INPUT": "1", "PYTHONUNBUFFERED": "1",
           "UV_NO_PROGRESS": "1"}
    env.pop("PYTHONPATH", None)  # the build must not see the launcher's own path tweaks
    for pip_name, uv_name in _PIP_TO_UV.items():  # an operator's pip index settings apply to uv too
        if pip_name in env and uv_name not in env:
            env[uv_name] = env[pip_name]
    proc = subprocess.Popen(
        cmd, cwd=cwd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env
    )
    assert proc.stdout is not None
    tail: list[str] = []
    for raw in proc.stdout:
        line = raw.decode("utf-8", "replace").rstrip("\n")
        log(line)
        tail = [*tail[-199:], line]
    if proc.wait() != 0:
        raise VenvError(f"{what} failed: {last_error_line(tail)}")


@contextmanager
def _locked(cache: Path, key: str, log: Log) -> Iterator[None]:
    with (cache / f"{key}.lock").open("a+b") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            log(f"waiting for another job installing environment {key}")
            fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def _fresh_venv(venv: Path, python: str, cwd: Path, log: Log, with_pip: bool) -> None:
    # Anything here without the marker is a crashed or killed install: start clean.
    shutil.rmtree(venv, ignore_errors=True)
    _run_logged([python, "-m", "venv", *([] if with_pip else ["--without-pip"]), str(venv)], cwd, log, "python -m venv")


def _site_packages(venv: Path) -> Path:
    return Path(sysconfig.get_path("purelib", vars={"base": str(venv), "platbase": str(venv)}))


def ensure_layer(requirements_file: Path, cache: Path, log: Log = print, base: Path | None = None) -> Path:
    """Return a ready layer on ``base`` (default: this interpreter's env) for ``requirements_file``."""
    base = base or current_base()
    cache, requirements_file = cache.absolute(), requirements_file.absolute()  # pip runs in another cwd
    cache.mkdir(parents=True, exist_ok=True)
    key = layer_key(requirements_file.read_bytes(), base)
    venv = cache / key
    if _is_complete(venv):
        log(f"using cached environment {key}")
        return venv
    with _locked(cache, key, log):
        # Re-check under the lock: the job we waited for may have finished the install.
        if _is_complete(venv):
            log(f"using cached environment {key}")
            return venv
        t0 = time.monotonic()
        log(f"installing environment {key} from {requirements_file.name} into {venv} on {base}")
        # The layer's python is the base's interpreter; pip comes from the base through the .pth.
        _fresh_venv(venv, str(base / "bin" / "python"), requirements_file.parent, log, with_pip=False)
        # addsitedir (not a bare path) so the base's own .pth files are processed too.
        dirs = base_site_dirs(base)
        lines = "".join(f"import site; site.addsitedir({str(d)!r})\n" for d in dirs)
        (_site_packages(venv) / LAYER_PTH).write_text(lines)
        pip = [str(venv / "bin" / "python"), "-m", "pip", "install", "--progress-bar", "off"]
        _run_logged([*pip, "-r", str(requirements_file)], requirements_file.parent, log, "installing requirements")
        (venv / COMPLETE_MARKER).write_text(f"{time.strftime('%Y-%m-%dT%H:%M:%S%z')}\n")
        log(f"environment {key} ready in {time.monotonic() - t0:.1f}s")
        return venv


def base_site_dirs(base: Path) -> list[Path]:
    """The site-packages a layer on ``base`` adds: the venv's own, or the interpreter's (no venv)."""
    if (base / "pyvenv.cfg").is_file():
        return [_site_packages(base)]
    return [Path(d) for d in site.getsitepackages() if Path(d).is_dir()]


def _client_sources(client_dir: Path) -> list[Path]:
    return sorted([client_dir / "pyproject.toml", *(client_dir / "paddlecloud").rglob("*.py")])


def client_hash(client_dir: Path) -> str:
    """Hash of the client package's sources, so a base gets the client it was asked for."""
    h = hashlib.sha256()
    for path in _client_sources(client_dir):
        h.update(f"{path.relative_to(client_dir)}\0".encode())
        h.update(path.read_bytes())
    return h.hexdigest()[:16]


def _clean_copy(client_dir: Path, into: Path) -> Path:
    """The client's sources alone (what client_hash covers, and its README), copied into `into`: pip builds a
    local folder in place, and a `build/` left there by an earlier build would add its stale modules to the
    install (seen: an old `paddlecloud/metrics.py` shadowing `paddlecloud.runtime.metrics` after an upgrade)."""
    for path in [*_client_sources(client_dir), client_dir / "README.md"]:
        if path.is_file():
            target = into / path.relative_to(client_dir)
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(path, target)
    return into


def ensure_base(
    name: str, requirements: str, client_dir: Path, cache: Path, log: Log = print, python: str | None = None
) -> Path:
    """Return the base venv of runtime ``name``: its requirements plus the client, built once per host."""
    python = python or base_python()
    cache.mkdir(parents=True, exist_ok=True)
    key = env_key(requirements.encode(), python)
    venv = cache / f"{name}-{key[:16]}"
    wanted = client_hash(client_dir)

    def has_client() -> bool:
        marker = venv / CLIENT_MARKER
        return _is_complete(venv) and marker.is_file() and marker.read_text().strip() == wanted

    def ready() -> bool:
        return has_client() and (venv / BYTECODE_MARKER).is_file()

    if ready():
        return venv
    with _locked(cache, venv.name, log):
        if ready():
            return venv
        t0 = time.monotonic()
        pip = base_installer(venv, cache)
        with tempfile.TemporaryDirectory(prefix="paddlecloud-client-") as tmp:
            client = str(_clean_copy(client_dir, Path(tmp)))
            if not _is_complete(venv):
                log(f"building runtime {name!r} in {venv}")
                _fresh_venv(venv, python, cache, log, with_pip=True)
                reqs = cache / f"{venv.name}.requirements.txt"
                reqs.write_text(requirements)
                _run_logged([*pip, "-r", str(reqs), client], cache, log, "installing requirements")
                (venv / COMPLETE_MARKER).write_text(f"{time.strftime('%Y-%m-%dT%H:%M:%S%z')}\n")
            elif not has_client():
                # The client is small: reinstalled in place when its sources changed (no Paddle download).
                _run_logged([*pip, "--force-reinstall", client], client_dir, log, "installing the client")
        compile_bytecode(venv, cache, log)
        (venv / CLIENT_MARKER).write_text(wanted + "\n")
        (venv / BYTECODE_MARKER).write_text(f"{time.strftime('%Y-%m-%dT%H:%M:%S%z')}\n")
        log(f"runtime {name!r} ready in {time.monotonic() - t0:.1f}s")
        return venv


def compile_bytecode(venv: Path, cwd: Path, log: Log) -> None:
    """Compile the base's modules to bytecode, on all cores; a failure is logged, the base still works.

    Jobs only read a base, so Python cannot write the ``__pycache__`` it would on a first import: without
    this every job compiled what it imports from source, every time (``import paddle`` 4.3 s of CPU, 1.7 s
    compiled; uv, unlike pip, leaves sources uncompiled). Files already compiled are skipped."""
    cmd = [str(venv / "bin" / "python"), "-m", "compileall", "-q", "-j", "0", str(_site_packages(venv))]
    try:
        _run_logged(cmd, cwd, log, "compiling the runtime's modules")
    except VenvError as exc:
        log(f"warning: {exc} (jobs compile what they import at each start)")


def activate(env: dict[str, str], venv: Path) -> dict[str, str]:
    """Return ``env`` with the venv's bin first on PATH and VIRTUAL_ENV set (what `activate` does)."""
    out = dict(env)
    out["VIRTUAL_ENV"] = str(venv)
    out["PATH"] = os.pathsep.join([str(venv / "bin"), env.get("PATH", os.defpath)])
    out.pop("PYTHONHOME", None)
    return out


def job_env(env: dict[str, str], requirements_file: Path | None, cache: Path, log: Log) -> dict[str, str]:
    """The entry's environment: a layer for its requirements, else the base this launcher runs in."""
    if requirements_file is not None:
        return activate(env, ensure_layer(requirements_file, cache, log))
    if sys.prefix != sys.base_prefix:
        return activate(env, current_base())
    return env


def _package_dir() -> Path:
    """The `paddlecloud` package this launcher belongs to (this module is paddlecloud/contract/venvcache.py)."""
    return Path(__file__).resolve().parent.parent


def package_pythonpath(cache: Path) -> Path:
    """A directory holding only a ``paddlecloud`` link to this package, for the entry's PYTHONPATH.

    The job venv has no paddlecloud, and putting our site-packages on its path would leak all of
    the launcher's dependencies into the job; a link to just this package avoids both.
    """
    pkg = _package_dir()
    d = cache / "_pythonpath" / hashlib.sha256(str(pkg).encode()).hexdigest()[:16]
    link = d / "paddlecloud"
    if not (link.is_symlink() and link.resolve() == pkg):
        d.mkdir(parents=True, exist_ok=True)
        tmp = d / f".paddlecloud.{os.getpid()}"
        tmp.unlink(missing_ok=True)
        tmp.symlink_to(pkg, target_is_directory=True)
        tmp.replace(link)  # atomic: concurrent launchers never see a missing link
    return d


def installed_in_site_packages() -> bool:
    """True when paddlecloud is installed in this runtime (a base), so layers and the entry see it."""
    pkg = _package_dir()
    return any(pkg.is_relative_to(Path(d).resolve()) for d in site.getsitepackages())
