"""Carrying out a Dockerfile without Docker: the subset tools/k8s/images.py supports (FROM debian, ENV, RUN,
COPY, USER, WORKDIR, CMD), parsed, keyed by what goes in, and run in a bubblewrap sandbox rooted in a tree."""

from __future__ import annotations

import hashlib
import json
import shlex
import shutil
import subprocess
from pathlib import Path
from typing import Any

from tools.k8s.shell import run

REPO = Path(__file__).resolve().parents[2]
SUPPORTED = {"FROM", "ENV", "RUN", "COPY", "USER", "WORKDIR", "CMD"}


def parse_dockerfile(text: str) -> list[tuple[str, str]]:
    """(INSTRUCTION, argument) pairs; continuation lines joined, comments dropped."""
    steps: list[tuple[str, str]] = []
    pending = ""
    for raw in text.splitlines():
        line = raw.strip()
        if not pending and (not line or line.startswith("#")):
            continue
        if line.startswith("#"):
            continue
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        line = pending + line
        pending = ""
        op, _, arg = line.partition(" ")
        op = op.upper()
        if op not in SUPPORTED:
            raise SystemExit(f"{op} is not supported by tools/k8s/images.py ({sorted(SUPPORTED)})")
        steps.append((op, arg.strip()))
    if not steps or steps[0][0] != "FROM" or not steps[0][1].startswith("debian:"):
        raise SystemExit("a Dockerfile for tools/k8s/images.py must start with FROM debian:<suite>-slim")
    return steps


def parse_env(arg: str) -> dict[str, str]:
    return dict(item.split("=", 1) for item in shlex.split(arg))


def tree_files(rel: str) -> list[str]:
    """Files of a repo folder that git tracks or would track (no caches, no build output)."""
    out = subprocess.run(
        ["git", "-C", str(REPO), "ls-files", "-co", "--exclude-standard", "--", rel],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    return sorted(p for p in out.splitlines() if (REPO / p).is_file())


def digest_of(steps: list[tuple[str, str]]) -> str:
    h = hashlib.sha256()
    for op, arg in steps:
        h.update(f"{op} {arg}\n".encode())
        if op == "COPY":
            src = arg.split()[0].rstrip("/")
            for rel in tree_files(src):
                h.update(rel.encode() + b"\0" + (REPO / rel).read_bytes() + b"\0")
    return h.hexdigest()


class Chroot:
    """Runs RUN steps in a root filesystem with bubblewrap (host network, for apt and pip)."""

    def __init__(self, root: Path, env: dict[str, str], pip_cache: Path) -> None:
        self.root = root
        self.env = env
        self.pip_cache = pip_cache
        self.workdir = "/"
        self.user = "0"

    def run(self, script: str) -> None:
        # The build may cache wheels (pip's and uv's, in one folder kept between builds).
        env = {k: v for k, v in self.env.items() if k not in ("PIP_NO_CACHE_DIR", "UV_NO_CACHE")}
        # Build-time only: wheel cache, and this machine's CA bundle (its registries may sit behind a TLS proxy).
        env.update(HOME="/root", PIP_CACHE_DIR="/var/cache/pip-build", PIP_CERT="/etc/pip-build-ca.crt")
        env.update(UV_CACHE_DIR="/var/cache/pip-build/uv", SSL_CERT_FILE="/etc/pip-build-ca.crt")
        cmd = [
            "bwrap",
            "--bind",
            str(self.root),
            "/",
            "--dev",
            "/dev",
            "--proc",
            "/proc",
            "--perms",
            "1777",
            "--tmpfs",
            "/tmp",  # noqa: S108  # the chroot's own /tmp
        ]
        cmd += ["--ro-bind", "/etc/resolv.conf", "/etc/resolv.conf", "--cap-add", "ALL", "--clearenv"]
        cmd += ["--bind", str(self.pip_cache), "/var/cache/pip-build"]
        cmd += ["--ro-bind", "/etc/ssl/certs/ca-certificates.crt", "/etc/pip-build-ca.crt"]
        apt_conf = Path("/etc/apt/apt.conf.d/99artifact-registry")
        if apt_conf.exists():  # this machine's apt settings (e.g. a snapshot mirror's validity)
            cmd += ["--ro-bind", str(apt_conf), "/etc/apt/apt.conf.d/99host"]
        for key, value in env.items():
            cmd += ["--setenv", key, value]
        cmd += ["--chdir", self.workdir, "/bin/sh", "-ec", script]
        run(*cmd)
        # bwrap leaves empty mount points behind; keep them out of the layer.
        for leftover in ("var/cache/pip-build", "etc/apt/apt.conf.d/99host", "etc/pip-build-ca.crt"):
            path = self.root / leftover
            if path.is_dir() and not any(path.iterdir()):
                path.rmdir()
            elif path.is_file() and path.stat().st_size == 0:
                path.unlink()


def apply(steps: list[tuple[str, str]], chroot: Chroot, config: dict[str, Any]) -> None:
    """Carry out Dockerfile steps in the chroot, recording ENV/USER/WORKDIR/CMD in the image config."""
    for op, arg in steps:
        if op == "ENV":
            chroot.env.update(parse_env(arg))
            config["Env"] = [f"{k}={v}" for k, v in chroot.env.items()]
        elif op == "RUN":
            if chroot.user != "0":
                raise SystemExit("RUN after USER is not supported by tools/k8s/images.py")
            chroot.run(arg)
        elif op == "COPY":
            src, dest = arg.split()
            for rel in tree_files(src.rstrip("/")):
                target = chroot.root / dest.lstrip("/") / Path(rel).relative_to(src.rstrip("/"))
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(REPO / rel, target)
        elif op == "USER":
            chroot.user = arg
            config["User"] = arg
        elif op == "WORKDIR":
            chroot.workdir = arg
            (chroot.root / arg.lstrip("/")).mkdir(parents=True, exist_ok=True)
            config["WorkingDir"] = arg
        elif op == "CMD":
            config["Cmd"] = json.loads(arg)
