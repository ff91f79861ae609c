"""Where a job's files live on the datacenter's storage: its package, and its output and logs.

Logical paths are `/pfs/<dc>/home/<user>/...` (the user's) and `/pfs/<dc>/public/...` (read-only).
A job's own folder is `/pfs/<dc>/home/<user>/jobs/<name>/`: `paddlectl submit` uploads the package
there, and each run writes `output/<uid>/<role>_<index>/log.txt` under it, so a reused name never
mixes the logs of two runs.
"""

from __future__ import annotations

import os
from pathlib import Path, PurePosixPath

from rest_framework import serializers

from portal.datacenters.models import Datacenter


def home_dir(datacenter: Datacenter, username: str) -> Path:
    return Path(datacenter.storage_root) / "home" / username


def job_dir(datacenter: Datacenter, username: str, jobname: str) -> Path:
    return home_dir(datacenter, username) / "jobs" / jobname


def output_dir(datacenter: Datacenter, username: str, jobname: str, uid: str) -> Path:
    return job_dir(datacenter, username, jobname) / "output" / uid


def logical(datacenter: Datacenter, real: Path) -> str:
    return f"/pfs/{datacenter.name}/" + str(real.relative_to(datacenter.storage_root))


def resolve_package(datacenter: Datacenter, username: str, package: str, jobname: str) -> Path:
    """The package directory on disk, refused unless it is in the user's home or the public area."""
    text = package or f"/pfs/{datacenter.name}/home/{username}/jobs/{jobname}"
    path = PurePosixPath(text)
    prefix = PurePosixPath("/pfs", datacenter.name)
    allowed = f"/pfs/{datacenter.name}/home/{username}/ or /pfs/{datacenter.name}/{datacenter.public_path}/"
    if "\x00" in text or ".." in path.parts or not path.is_relative_to(prefix):
        raise serializers.ValidationError({"package": [f"{text!r} must be a path under {allowed}"]})
    root = Path(datacenter.storage_root).resolve()
    areas = [(root / "home" / username).resolve(), (root / datacenter.public_path).resolve()]
    real = Path(os.path.realpath(root / path.relative_to(prefix)))
    if not any(real == area or real.is_relative_to(area) for area in areas):
        raise serializers.ValidationError({"package": [f"{text!r} must be a path under {allowed}"]})
    if not real.exists():
        hint = " (upload it with `paddlectl submit ... DIR` or `paddlectl file cp`)" if not package else ""
        raise serializers.ValidationError({"package": [f"{text!r} does not exist{hint}"]})
    if not real.is_dir():
        raise serializers.ValidationError({"package": [f"{text!r} is not a directory"]})
    return real
