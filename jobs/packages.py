"""Where a job's files live on the datacenter's storage: its package, and its output and logs.

Logical paths are `/pfs/<dc>/home/<user>/...` (the user's) and `/pfs/<dc>/public/...` (read-only).
A job's own folder is `/pfs/<dc>/home/<user>/jobs/<name>/`: `paddlectl submit` uploads the package
there, and each run writes `output/<uid>/<role>_<index>/log.txt` under it, so a reused name never
mixes the logs of two runs.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from core.errors import Forbidden, Invalid
from datacenters.models import Datacenter
from storage import paths


def home_dir(datacenter: Datacenter, username: str) -> Path:
    return Path(datacenter.storage_root) / "home" / username


def job_dir(datacenter: Datacenter, username: str, jobname: str) -> Path:
    return home_dir(datacenter, username) / "jobs" / jobname


def output_dir(datacenter: Datacenter, username: str, jobname: str, uid: str) -> Path:
    return job_dir(datacenter, username, jobname) / "output" / uid


def logical(datacenter: Datacenter, real: Path) -> str:
    return f"/pfs/{datacenter.name}/" + str(real.relative_to(datacenter.storage_root))


def package_place(datacenter: Datacenter, user: Any, text: str, write: bool) -> paths.ResolvedPath:
    """`package` resolved for the user (beneath its root, no link out) on `datacenter`; else a 400 naming it."""
    try:
        resolved = paths.resolve(user, text, write=write, field="package")
    except Forbidden as exc:
        raise Invalid(exc.message, "package") from None
    if resolved.datacenter.pk != datacenter.pk:
        raise Invalid(f"{text!r} is not on datacenter {datacenter.name!r}", "package")
    return resolved


def _package_path(datacenter: Datacenter, user: Any, text: str, write: bool) -> Path:
    return package_place(datacenter, user, text, write).real


def resolve_package(datacenter: Datacenter, user: Any, package: str, jobname: str) -> Path:
    """The package directory on disk; refused (400, field `package`) unless the user may read it there."""
    text = package or f"/pfs/{datacenter.name}/home/{user.get_username()}/jobs/{jobname}"
    real = _package_path(datacenter, user, text, write=False)
    if not real.exists():
        hint = " (upload it with `paddlectl submit ... DIR` or `paddlectl file cp`)" if not package else ""
        raise Invalid(f"{text!r} does not exist{hint}", "package")
    if not real.is_dir():
        raise Invalid(f"{text!r} is not a directory", "package")
    return real


def check_upload_target(datacenter: Datacenter, user: Any, package: str, jobname: str) -> Path:
    """Where a package about to be uploaded goes: a place the user may write; it need not exist yet."""
    text = package or f"/pfs/{datacenter.name}/home/{user.get_username()}/jobs/{jobname}"
    real = _package_path(datacenter, user, text, write=True)
    if real.exists() and not real.is_dir():
        raise Invalid(f"{text!r} is not a directory", "package")
    return real
