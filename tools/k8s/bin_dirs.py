"""Where each tools/k8s/build*.sh puts its binaries, asked of the script itself, and the pinned versions.

Standard library only: tools/k8s/images.py imports it when it runs before the virtual environment exists.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

HERE = Path(__file__).resolve().parent


def pinned_versions() -> dict[str, str]:
    """Versions from tools/k8s/versions.env, overridable by the same env vars the build scripts honour."""
    versions: dict[str, str] = {}
    for line in (HERE / "versions.env").read_text().splitlines():
        key, sep, value = line.strip().partition("=")
        if sep and not key.startswith("#"):
            versions[key] = os.environ.get(key) or value
    return versions


def script_bin_dir(script: str, override_env: str | None = None) -> Path:
    """$override_env when set, else what `tools/k8s/<script> --print-bin-dir` says: each script owns its cache key."""
    explicit = os.environ.get(override_env) if override_env else None
    if explicit:
        return Path(explicit)
    out = subprocess.run(["bash", str(HERE / script), "--print-bin-dir"], check=True, capture_output=True, text=True)
    return Path(out.stdout.strip())


def default_bin_dir() -> Path:
    """Where build.sh puts the control plane: $PADDLECLOUD_K8S_BIN_DIR, else its version-keyed cache dir."""
    return script_bin_dir("build.sh", "PADDLECLOUD_K8S_BIN_DIR")


def node_bin_dir() -> Path:
    """Where build-node.sh puts kubelet, containerd, CoreDNS and pause: $PADDLECLOUD_K8S_NODE_BIN_DIR or the cache."""
    return script_bin_dir("build-node.sh", "PADDLECLOUD_K8S_NODE_BIN_DIR")


def netpol_bin_dir() -> Path:
    """Where build-netpol.sh puts kube-router-netpol: $PADDLECLOUD_K8S_NETPOL_BIN_DIR or the cache."""
    return script_bin_dir("build-netpol.sh", "PADDLECLOUD_K8S_NETPOL_BIN_DIR")


def registry_bin_dir() -> Path:
    """Where build-registry.sh puts its binaries: $PADDLECLOUD_REGISTRY_BIN_DIR or the cache."""
    return script_bin_dir("build-registry.sh", "PADDLECLOUD_REGISTRY_BIN_DIR")


def builder_bin_dir() -> Path:
    """Where build-builder.sh puts Kaniko's executor (its directory's parent names the version)."""
    return script_bin_dir("build-builder.sh")
